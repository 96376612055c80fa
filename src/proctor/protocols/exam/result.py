"""The exam protocol's result and its typed artifacts.

results.json (`ExamResult`): the exam's statistics (`exam`), the bias baselines, per pipeline its accuracy
and answer counts, and the IRT summary. The kit stores the metrics it declares: `accuracy` and
`irt.ability` per pipeline, `exam.baseline.*` for the run. Artifacts: `exam_stats`, `exam_baselines`,
`exam_pipelines`, `exam_breakdowns`, `exam_irt`.

`ExamIrt` is the item response theory fit, stored as the artifact `exam_irt` (other runs read it back:
`proctor.load_run(folder).artifact("exam_irt", ExamIrt)`, e.g. the interview's IRT difficulty tiers).
Its JSON shape is the one the exam always stored: when the fit was skipped (too little data) only
`theta`, `warnings` and `skipped`; else every fitted field, `hierarchical`, `prune` and `adaptive` when
they ran. A run without IRT (`exam.irt.enabled: false`, no pipeline, empty exam) stores no `exam_irt`.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, RootModel

from proctor.estimates import Estimate
from proctor.kit.result import Artifact, Metric, OmitNone, Part, Result

IrtModel = Literal["1pl", "2pl", "3pl"]


# --- IRT (artifact `exam_irt`) ---------------------------------------------------------------------------


class IrtAbility(Part):
    """A pipeline's ability on the main fit (its standard error), and its raw accuracy on the fitted items."""

    pipeline: str
    ability: float | None
    se: float | None
    accuracy: float | None


class IrtItem(Part):
    """A fitted question: its parameters, the share of pipelines that got it right, its labels."""

    id: str
    difficulty: float | None
    discrimination: float | None
    guessing: float | None
    p_correct: float | None
    bloom: str | None = None
    question_word: str | None = None
    topic: str | None = None


class IrtCurve(Part):
    """The characteristic curve of one item on the theta grid."""

    id: str
    label: str
    p: list[float]


class InformationGroup(Part):
    """Mean item information on the theta grid over the `n` items of one label."""

    n: int
    mean_item_information: list[float]


class IrtHierarchical(Part):
    """Component abilities of the factors (llm, retriever, icl) that vary across the pipelines."""

    model: IrtModel
    factors: list[str]
    components: dict[str, dict[str, float | None]]
    component_se: dict[str, dict[str, float | None]]
    ability: dict[str, float | None]
    converged: bool
    constraint: str


class PruneStepSummary(Part):
    """One pruning step as results.json shows it (without the information curves)."""

    step: int
    n_items: int
    n_after: int
    dropped_ids: list[str]
    dropped_discrimination: list[float | None]
    mean_information_before: float | None
    mean_information_after: float | None
    mean_item_information_before: float | None
    mean_item_information_after: float | None


class PruneStep(PruneStepSummary):
    """One pruning step with the test information curves before and after it."""

    information_before: list[float]
    information_after: list[float]


class PruneSummary(Part):
    """Pruning as results.json shows it (without the information curves)."""

    model: Literal["2pl", "3pl"]
    drop_fraction: float
    stop_reason: str
    kept_ids: list[str]
    steps: list[PruneStepSummary]


class IrtPrune(Part):
    """Pruning of the least discriminating items: the steps and the test information before and after."""

    model: Literal["2pl", "3pl"]
    drop_fraction: float
    stop_reason: str
    information_initial: list[float]
    information_final: list[float]
    kept_ids: list[str]
    steps: list[PruneStep]

    def summary(self) -> PruneSummary:
        return PruneSummary(
            model=self.model,
            drop_fraction=self.drop_fraction,
            stop_reason=self.stop_reason,
            kept_ids=list(self.kept_ids),
            steps=[PruneStepSummary.model_validate(s.model_dump(exclude=_CURVES)) for s in self.steps],
        )


_CURVES = {"information_before", "information_after"}


class AdaptiveRow(Part):
    """The adaptive test replayed on one pipeline's answers, against its full-exam estimate."""

    pipeline: str
    items_used: int
    items_available: int
    fraction: float | None
    theta_adaptive: float | None
    se_adaptive: float | None
    theta_full: float | None
    se_full: float | None
    abs_diff: float | None
    within_se: bool
    stop_reason: str


class IrtAdaptive(Part):
    target_se: float
    max_items: int | None
    rows: list[AdaptiveRow]
    mean_fraction: float | None
    share_within_se: float


class ExamIrt(Part):
    """The IRT analysis of a graded exam (artifact `exam_irt`): everything the report draws."""

    # Present only when the fit ran (dropped from the dump while `skipped`).
    FITTED: ClassVar[tuple[str, ...]] = (
        "items_all_correct",
        "items_all_wrong",
        "model",
        "model_reason",
        "n_subjects",
        "n_items",
        "loglik",
        "converged",
        "abilities",
        "items",
        "test_information",
        "icc",
        "information_by_bloom",
        "information_by_question_word",
    )
    OPTIONAL: ClassVar[tuple[str, ...]] = ("skipped", "hierarchical", "prune", "adaptive")

    theta: list[float]
    warnings: list[str] = Field(default_factory=list)
    skipped: str | None = None
    items_all_correct: int = 0
    items_all_wrong: int = 0
    model: IrtModel | None = None
    model_reason: str = ""
    n_subjects: int = 0
    n_items: int = 0
    loglik: float | None = None
    converged: bool = False
    abilities: list[IrtAbility] = Field(default_factory=list)
    items: list[IrtItem] = Field(default_factory=list)
    test_information: list[float] = Field(default_factory=list)
    icc: list[IrtCurve] = Field(default_factory=list)
    information_by_bloom: dict[str, InformationGroup] = Field(default_factory=dict)
    information_by_question_word: dict[str, InformationGroup] = Field(default_factory=dict)
    hierarchical: IrtHierarchical | None = None
    prune: IrtPrune | None = None
    adaptive: IrtAdaptive | None = None

    def _lean(self, data: dict[str, Any]) -> dict[str, Any]:
        data = super()._lean(data)
        for f in self.OPTIONAL:
            if data.get(f, 0) is None:
                data.pop(f)
        if self.skipped is not None:
            for f in self.FITTED:
                data.pop(f, None)
        return data

    def ability_of(self, pipeline: str) -> IrtAbility | None:
        return next((a for a in self.abilities if a.pipeline == pipeline), None)


class IrtSummary(Part):
    """The IRT fit as results.json shows it (`exam_irt` without curves and item parameters); empty when
    IRT did not run or was skipped."""

    model: Annotated[IrtModel | None, OmitNone()] = None
    model_reason: Annotated[str | None, OmitNone()] = None
    n_subjects: Annotated[int | None, OmitNone()] = None
    n_items: Annotated[int | None, OmitNone()] = None
    abilities: Annotated[list[IrtAbility] | None, OmitNone()] = None
    hierarchical: Annotated[IrtHierarchical | None, OmitNone()] = None
    adaptive: Annotated[IrtAdaptive | None, OmitNone()] = None
    prune: Annotated[PruneSummary | None, OmitNone()] = None

    @classmethod
    def of(cls, irt: ExamIrt | None) -> IrtSummary:
        if irt is None or irt.skipped is not None:
            return cls()
        return cls(
            model=irt.model,
            model_reason=irt.model_reason,
            n_subjects=irt.n_subjects,
            n_items=irt.n_items,
            abilities=irt.abilities,
            hierarchical=irt.hierarchical,
            adaptive=irt.adaptive,
            prune=irt.prune.summary() if irt.prune else None,
        )


# --- the exam: statistics, guessability, baselines --------------------------------------------------------


class Rate(Part):
    """A proportion as stored (an `Estimate.proportion` dump) where it is a figure, not a metric."""

    value: float | None
    lo: float | None = None
    hi: float | None = None
    n: int = 0
    method: str = "wilson"
    k: int | None = None


class ItemGuessability(Part):
    """An item's closed-book answerability over the models that answered it."""

    guessability: float | None = None  # mean p_correct over the models; None when none answered
    per_model: dict[str, float] = Field(default_factory=dict)
    picked: str | None = None  # the examiner's closed-book pick
    # model -> whether its most probable option is the correct one (the agreement rule reads these)
    picked_key: dict[str, bool] = Field(default_factory=dict)
    methods: dict[str, str] = Field(default_factory=dict)  # model -> method
    failed: dict[str, str] = Field(default_factory=dict)  # model -> cause


class TopicGuess(Part):
    n: int
    guessable: int
    mean: float


class GuessableItem(Part):
    id: str
    question: str
    answer: str
    topic: str | None
    guessability: float | None


class GuessStats(Part):
    """Guessability over the items before the filter (see `guessability.guess_stats`)."""

    models: list[str]
    items: int
    measured: int
    failed: dict[str, int]
    methods: dict[str, int]
    mean: float | None
    median: float | None
    chance: float
    histogram: dict[str, int]
    threshold: float
    filter: bool
    rule: str = "probability"  # the rule that decided (readers_agree falls back to it with one reader)
    guessable: int
    guessable_by_topic: dict[str, float]
    topics: dict[str, TopicGuess]
    closed_book_examiner: Rate
    guessable_items: list[GuessableItem]
    per_item: dict[str, ItemGuessability]


class GuessSkipped(Part):
    skipped: str


class Round(Part):
    """One generation round (while fewer than `target_questions`, or `num_questions` with `top_up`, are
    kept): questions asked in all, kept."""

    asked: int
    generated: int
    kept: int
    guessable: Annotated[int | None, OmitNone()] = None


class LaterPasses(Part):
    """A passage asked again (a chunk's later variant, e.g. in a top-up round) asks about a sentence its
    earlier questions do not cover: examiner calls made so, calls not made because no such sentence was
    left (passage exhausted), and their questions kept by the filters."""

    asked: int
    exhausted: int
    kept: int


class RepairStats(Part):
    """Questions sent back to the examiner for fresh distractors, by the failure that sent them (the first
    one), how many of those then passed, and the repair calls made and failed (by cause)."""

    asked: dict[str, int] = Field(default_factory=dict)
    repaired: dict[str, int] = Field(default_factory=dict)
    calls: int = 0
    calls_failed: dict[str, int] = Field(default_factory=dict)


class ExamStats(Part):
    """How the exam came to be (artifact `exam_stats`): generation counts, filters, labels, guessability,
    distributions. Keys that do not apply (e.g. generation counts of an exam read from a file) are absent."""

    source: Annotated[str | None, OmitNone()] = None  # the exam file read
    planned: Annotated[int | None, OmitNone()] = None
    calls: Annotated[int | None, OmitNone()] = None
    calls_failed: Annotated[dict[str, int] | None, OmitNone()] = None
    generated: Annotated[int | None, OmitNone()] = None
    filtered: Annotated[dict[str, int] | None, OmitNone()] = None
    distractors_removed: Annotated[dict[str, int] | None, OmitNone()] = None
    kept: int
    embedding_filters: Annotated[bool | None, OmitNone()] = None
    repairs: Annotated[RepairStats | None, OmitNone()] = None
    labels: Annotated[dict[str, int] | None, OmitNone()] = None
    rounds: Annotated[list[Round] | None, OmitNone()] = None
    later_passes: Annotated[LaterPasses | None, OmitNone()] = None
    target_missed: Annotated[str | None, OmitNone()] = None
    guessability: Annotated[GuessStats | GuessSkipped | None, OmitNone()] = None
    bloom: dict[str, int] = Field(default_factory=dict)
    question_word: dict[str, int] = Field(default_factory=dict)
    topic: dict[str, int] = Field(default_factory=dict)


class ExamSummary(ExamStats):
    """results.json's `exam`: the statistics with the number of questions and the exam file."""

    questions: int
    file: str


class LetterBaseline(Estimate):
    letter: str


class Baselines(Part):
    """How a test-taker that reads no question scores (artifact `exam_baselines`); the strategies are
    absent on an empty exam."""

    n: int
    chance: float
    letter_counts: dict[str, int]
    best_fixed_letter: Annotated[
        LetterBaseline | None, OmitNone(), Metric("exam.baseline.best_fixed_letter")
    ] = None
    always_longest: Annotated[Estimate | None, OmitNone(), Metric("exam.baseline.always_longest")] = None
    always_shortest: Annotated[Estimate | None, OmitNone(), Metric("exam.baseline.always_shortest")] = None
    closed_book_examiner: Annotated[
        Estimate | None, OmitNone(), Metric("exam.baseline.closed_book_examiner")
    ] = None
    mean_correct_chars: Annotated[float | None, OmitNone()] = None
    mean_distractor_chars: Annotated[float | None, OmitNone()] = None
    mean_question_chars: Annotated[float | None, OmitNone()] = None
    mean_question_words: Annotated[float | None, OmitNone()] = None

    def strategies(self) -> list[tuple[str, Estimate]]:
        """The no-knowledge strategies measured, by name."""
        named = (
            ("best_fixed_letter", self.best_fixed_letter),
            ("always_longest", self.always_longest),
            ("always_shortest", self.always_shortest),
            ("closed_book_examiner", self.closed_book_examiner),
        )
        return [(k, v) for k, v in named if v is not None]


# --- pipelines ---------------------------------------------------------------------------------------------


class PipelineSpec(Part):
    """One subject of the IRT matrix (an `exam_pipelines` row): LLM, retriever with its k, ICL shots."""

    name: str
    model: str
    retriever: str
    k: int
    icl: int
    factors: dict[str, str]


class ExamPipelines(RootModel[list[PipelineSpec]]):
    """The artifact `exam_pipelines`: the pipelines of the grid, in order."""


class BeyondGuessing(Part):
    """A pipeline's score beyond guessing: its accuracy and a closed-book baseline's (`baseline`: the
    grid's closed-book pipeline of the same LLM, or the examiner closed-book) on the items both answered,
    and the chance-corrected gain (acc − closed) / (1 − closed) with a paired bootstrap interval."""

    baseline: str
    accuracy: Estimate
    closed_book: Estimate
    corrected: Estimate


class PipelineResult(PipelineSpec):
    accuracy: Estimate  # metric `accuracy`, subject: the pipeline
    answered: int
    errors: dict[str, int]  # failed answers by cause
    methods: dict[str, int]  # answers by selection method
    beyond_guessing: Annotated[BeyondGuessing | None, OmitNone()] = None
    # Metric `irt.ability` (the ability ± 1.96 SE); not in results.json (it is in `irt.abilities`).
    irt_ability: Annotated[Estimate | None, OmitNone(), Metric("irt.ability"), Field(exclude=True)] = None


class Breakdowns(Part):
    """Accuracy per pipeline by Bloom level, question word and topic (artifact `exam_breakdowns`):
    breakdown -> pipeline -> level -> rate."""

    bloom: dict[str, dict[str, Estimate]] = Field(default_factory=dict)
    question_word: dict[str, dict[str, Estimate]] = Field(default_factory=dict)
    topic: dict[str, dict[str, Estimate]] = Field(default_factory=dict)

    def table(self, name: str) -> dict[str, dict[str, Estimate]]:
        table: dict[str, dict[str, Estimate]] = getattr(self, name)
        return table


class ExamResult(Result):
    exam: ExamSummary
    baselines: Baselines
    pipelines: dict[str, PipelineResult]
    irt: IrtSummary
    # Artifacts (not in results.json).
    exam_stats: Annotated[ExamStats | None, Artifact()] = None
    exam_baselines: Annotated[Baselines | None, Artifact()] = None
    exam_pipelines: Annotated[ExamPipelines | None, Artifact()] = None
    exam_breakdowns: Annotated[Breakdowns | None, Artifact()] = None
    exam_irt: Annotated[ExamIrt | None, Artifact()] = None
