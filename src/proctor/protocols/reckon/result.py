"""The reckon protocol's result: unit statistics, per candidate RECKON's accuracy and coverage with the
rounds it took and the baselines' scores on the same units, the cost comparison and the meta-evaluation
against human labels (results.json); the report's details (round logs, clusters, the unit map, cost rows,
examples, uncovered units) as the `reckon` artifact; and the per-(candidate, unit) item every table reads.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from pydantic import Field

from proctor.estimates import Estimate
from proctor.kit.result import Artifact, Metric, OmitNone, Part, Result
from proctor.kit.steps import Payload
from proctor.protocols.reckon.config import Config


class ReckonItem(Payload):
    """One (candidate, unit): RECKON's outcome joined with the unit and the baseline's scores — the view
    every table and the meta-evaluation read. `scores` maps each method to its score (None: no score)."""

    KIND: ClassVar[str] = "reckon_item"
    item_id: str
    candidate: str
    unit_id: str
    keyword: str
    unit_type: str
    cluster: str | None
    status: str | None
    round: int | None
    times_asked: int
    history: list[str]
    question_id: str | None
    question_type: str | None
    excerpt: str | None
    sentence_ids: list[int] | None = None  # the answer sentences the excerpt is made of (1-based)
    evidence: str | None = None  # the unit's corpus sentence (what sentence labels refer to)
    reason: str | None
    baseline_answer_key: str | None
    scores: dict[str, float | None]
    stage: str | None = None  # the method that decided the verdict: "rule", "judge", "guard" or "extract"
    p_correct: float | None = None  # the judge's P(correct) from its logprobs, where the server gave them


class RoundLog(Payload):
    """One candidate's round: what was asked and what it settled."""

    KIND: ClassVar[str] = "reckon_round"
    candidate: str
    round: int
    asked: int
    questions: int
    off_topic: int = 0  # units asked by a question that does not name them
    cluster_target: int | None = None
    judged_new: int
    correct_new: int
    incorrect_new: int
    uncovered: int
    asked_again: int = 0  # units the answer did not address (a guard's "absent" finding), asked next round
    errors: int
    remaining_after: int
    stop_reason: str | None


# --- results.json -------------------------------------------------------------------------------------
class FormStats(Part):
    """How the examiner's units fared under the one-fact form check (`units.unit_form`)."""

    kept: int = 0
    split: int = 0
    dropped_too_long: int = 0
    dropped_no_fact: int = 0
    split_units: int = 0
    split_sentences_dropped: int = 0


class UnitStats(Part):
    chunks: int
    chunks_failed: int = 0
    extracted: int = 0
    dropped_empty: int = 0
    max_words: int
    form: FormStats = Field(default_factory=FormStats)
    formed: int = 0
    form_text: str = ""
    carried_over: Annotated[int | None, OmitNone()] = None
    # Set once units exist (absent from an empty run's results).
    merged_duplicates: Annotated[int | None, OmitNone()] = None
    units: Annotated[int | None, OmitNone()] = None
    by_type: Annotated[dict[str, int] | None, OmitNone()] = None


class Breakdown(Part):
    """Verdict counts of one group of a candidate's units (a cluster, a unit type, a question type)."""

    group: str
    units: int
    correct: int
    incorrect: int
    uncovered: int
    errors: int
    accuracy: Estimate
    coverage: float | None


class BaselineScores(Part):
    """The per-unit baseline's scores of a candidate, for the methods the config asks for."""

    judge_with_reference: Annotated[
        Estimate | None, OmitNone(), Metric("accuracy.baseline_judge_with_reference")
    ] = None
    judge_without_reference: Annotated[
        Estimate | None, OmitNone(), Metric("accuracy.baseline_judge_without_reference")
    ] = None
    bleu: Annotated[Estimate | None, OmitNone(), Metric("bleu.mean")] = None
    rouge_l: Annotated[Estimate | None, OmitNone(), Metric("rouge_l.mean")] = None
    embedding: Annotated[Estimate | None, OmitNone(), Metric("embedding_similarity.mean")] = None

    def get(self, method: str) -> Estimate | None:
        value = getattr(self, method, None)
        return value if isinstance(value, Estimate) else None


class BaselineGap(Part):
    """RECKON's accuracy and the per-unit judge-with-reference baseline's on the same units (those both
    judged), Wilson intervals; `flagged` when the intervals do not overlap — one method credits the
    candidate with clearly more units than the other, so read the unit browser before trusting either."""

    reckon: Estimate
    baseline: Estimate
    flagged: bool


class ReckonCandidate(Part):
    model: str
    retriever: str
    accuracy: Annotated[Estimate, Metric("accuracy.reckon")]
    coverage: Annotated[Estimate, Metric("coverage.reckon")]
    correct: int
    incorrect: int
    uncovered: int
    errors: int
    rounds: int
    stop_reason: str | None
    remaining_per_round: list[int]
    ask_frequency: dict[str, int]
    by_unit_type: list[Breakdown]
    by_question_type: list[Breakdown]
    baselines: BaselineScores = Field(default_factory=BaselineScores)
    baseline_gap: Annotated[BaselineGap | None, OmitNone()] = None


class CostTotals(Part):
    calls: int = 0
    errors: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    tokens: int = 0
    cost_usd: float = 0.0


class CostRow(CostTotals):
    method: str
    step: str
    roles: list[str]


class CostSummary(Part):
    reckon: CostTotals
    baseline: CostTotals
    has_baseline: bool
    token_ratio: Annotated[float | None, Metric("cost.token_ratio")] = None
    saving: float | None = None
    call_ratio: float | None = None
    cost_ratio: float | None = None
    examiner_judge_token_ratio: float | None = None
    examiner_judge_call_ratio: float | None = None
    shared_units: CostTotals
    judge_without_reference: CostTotals


class Correlations(Part):
    pearson: float | None
    spearman: float | None
    kendall: float | None


class HumanScore(Part):
    candidate: str
    n: int
    score: float | None


class CandidateScore(Part):
    candidate: str
    method: float | None
    human: float | None


class MethodAgreement(Part):
    """One method against the human labels (see `metaeval.meta_evaluate`)."""

    method: str
    threshold: float | None
    n: int
    accuracy: float | None
    kappa: float | None
    kappa_lo: float | None
    kappa_hi: float | None
    confusion: list[list[int]]
    item: Correlations
    per_candidate_scores: list[CandidateScore]
    candidate: Correlations
    n_candidates: int


class LabelStats(Part):
    sentence_labels: int
    sentence_labels_used: int
    sentence_labels_unused: int
    items_from_sentences: int
    item_labels: int


class MetaEvaluation(Part):
    n_labels: int
    matched: int
    unmatched: int
    human: list[HumanScore]
    methods: list[MethodAgreement]
    file: str | None = None
    labels: LabelStats | None = None


class MethodScore(Part):
    """A method's agreement with the human labels as metrics (subject: the method)."""

    accuracy: Annotated[Estimate, Metric("metaeval.accuracy")]
    kappa: Annotated[Estimate, Metric("metaeval.kappa")]


# --- the report's details (the `reckon` artifact) -------------------------------------------------------
class QuestionChecks(Part):
    written: int
    reasked: int
    listed_subjects: int
    missing_subjects: int
    blanked: int


class ClusterRow(Part):
    """A round-1 cluster with the name and question the examiner gave it."""

    question_id: str
    center: str
    question: str | None
    question_type: str | None
    unit_ids: list[str]


class MapPoint(Part):
    unit_id: str
    keyword: str
    x: float
    y: float
    cluster: int | None


class Example(Part):
    candidate: str
    round: int
    question: str | None
    answer: str | None
    excerpt: str
    keyword: str
    description: str
    evidence: str | None
    verdict: str | None
    reason: str | None
    stage: str | None
    p_correct: float | None


class UncoveredUnit(Part):
    """A unit some candidate left uncovered (a line of reckon_uncovered_units.jsonl, for `carry_over`)."""

    unit_id: str
    type: str
    keyword: str
    description: str
    evidence: str | None
    chunk_ids: list[str]
    source: str | None
    uncovered_for: list[str]


class CandidateDetails(Part):
    round_log: list[RoundLog]
    by_cluster: list[Breakdown]


class ReckonDetails(Part):
    """What the report shows beyond results.json."""

    empty: bool = False
    units: UnitStats
    n_units: int = 0
    config: Config | None = None
    question_checks: QuestionChecks | None = None
    candidates: dict[str, CandidateDetails] = Field(default_factory=dict)
    clusters: list[ClusterRow] = Field(default_factory=list)
    map: list[MapPoint] = Field(default_factory=list)
    cost_rows: list[CostRow] = Field(default_factory=list)
    examples: list[Example] = Field(default_factory=list)
    uncovered: list[UncoveredUnit] = Field(default_factory=list)
    stop_reasons: dict[str, str] = Field(default_factory=dict)


class ReckonResult(Result):
    units: UnitStats
    candidates: dict[str, ReckonCandidate] = Field(default_factory=dict)
    cost: CostSummary | None = None
    meta_evaluation: MetaEvaluation | None = None
    uncovered_units: int | None = None
    # Metrics only (subject: the method), not in results.json: meta_evaluation holds the full rows.
    metaeval_scores: dict[str, MethodScore] = Field(default_factory=dict, exclude=True)
    details: Annotated[ReckonDetails | None, Artifact("reckon")] = None

    def _lean(self, data: dict[str, Any]) -> dict[str, Any]:
        data = super()._lean(data)
        if self.cost is None:  # a run without units has no cost, meta-evaluation or uncovered units
            for name in ("cost", "meta_evaluation", "uncovered_units"):
                data.pop(name, None)
        return data
