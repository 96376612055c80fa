"""Report section of the exam protocol (`exam`).

Reads the run through `Run`: its `ExamResult` (pipelines with accuracy and answer counts, baselines),
the artifacts `exam_stats`, `exam_breakdowns` and `exam_irt` (typed), and the items `exam_question` and
`exam_response` (typed payloads). Everything is rendered through the autoescaping template
`exam/report.html.j2`; plots are drawn from stored numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from pydantic import BaseModel

from proctor.constants import LETTERS
from proctor.estimates import Estimate
from proctor.kit.record import Run
from proctor.protocols.exam import plots as plots_exam
from proctor.protocols.exam.exam_file import ExamQuestion
from proctor.protocols.exam.grading import ExamResponse
from proctor.protocols.exam.result import (
    Baselines,
    BeyondGuessing,
    Breakdowns,
    ExamIrt,
    ExamResult,
    ExamStats,
    GuessSkipped,
    GuessStats,
    IrtAbility,
    IrtItem,
    PipelineResult,
)
from proctor.report import plots
from proctor.report._env import render_template
from proctor.report.plots import safe_plot
from proctor.store.record import ItemRecord

BASELINES = {
    "best_fixed_letter": "best fixed letter",
    "always_longest": "always the longest option",
    "always_shortest": "always the shortest option",
    "closed_book_examiner": "the examiner, closed-book (question and options only)",
}
STAT_ORDER = (
    "source",
    "planned",
    "rounds",
    "later_passes",
    "calls",
    "calls_failed",
    "generated",
    "repairs",
    "filtered",
    "distractors_removed",
    "kept",
)
STAT_LABELS = {
    "planned": "questions asked of the examiner",
    "rounds": "generation rounds (to reach num_questions or target_questions kept)",
    "later_passes": "questions kept from passages asked again, each about a sentence not yet asked about",
    "calls": "examiner calls",
    "calls_failed": "questions lost to failed calls (by cause; unparseable = schema/parse failure)",
    "generated": "questions parsed",
    "repairs": "questions sent back to the examiner: a rewritten question or replacement distractors "
    "(by failure: repaired / asked)",
    "filtered": "questions filtered (by reason)",
    "distractors_removed": "spare distractors removed (by reason)",
    "kept": "questions kept (the exam)",
    "source": "exam read from",
}
MAX_BROWSER = 300


@dataclass(frozen=True)
class StatRow:
    name: str
    value: int | str
    sub: list[tuple[str, int | str]]


def _stat_rows(stats: ExamStats | None) -> list[StatRow]:
    rows: list[StatRow] = []
    if stats is None:
        return rows
    for k in STAT_ORDER:
        v = getattr(stats, k)
        if v is None:
            continue
        if k == "rounds":
            sub: list[tuple[str, int | str]] = [
                (
                    f"round {i}",
                    f"{r.asked} asked in all, {r.kept} kept"
                    + (f" ({r.guessable} more dropped as guessable)" if r.guessable else ""),
                )
                for i, r in enumerate(v, 1)
            ]
            rows.append(StatRow(STAT_LABELS[k], len(v), sub))
        elif k == "later_passes":
            passes: list[tuple[str, int | str]] = [
                ("examiner calls", v.asked),
                ("not asked: passage exhausted", v.exhausted),
            ]
            rows.append(StatRow(STAT_LABELS[k], v.kept, passes))
        elif k == "repairs":
            fixes: list[tuple[str, int | str]] = [
                (f, f"{v.repaired.get(f, 0)} repaired / {n} asked") for f, n in v.asked.items()
            ]
            fixes.append(("repair calls", v.calls))
            fixes += [(f"repair calls failed: {c}", n) for c, n in sorted(v.calls_failed.items())]
            rows.append(StatRow(STAT_LABELS[k], sum(v.repaired.values()), fixes))
        elif isinstance(v, dict):
            rows.append(StatRow(STAT_LABELS[k], sum(v.values()), sorted(v.items())))
        else:
            rows.append(StatRow(STAT_LABELS[k], v, []))
    return rows


@dataclass(frozen=True)
class BaselineRow:
    label: str
    value: float | None
    lo: float | None
    hi: float | None
    gap: float


@dataclass(frozen=True)
class BaselinesView:
    rows: list[BaselineRow]
    chance: float
    n: int
    letters: dict[str, int]
    max_gap: float | None
    facts: Baselines
    plot: str | None


def _baselines(b: Baselines | None) -> BaselinesView | None:
    if b is None or not b.n:
        return None
    rows = []
    for key, r in b.strategies():
        extra = (
            f" ({b.best_fixed_letter.letter})" if key == "best_fixed_letter" and b.best_fixed_letter else ""
        )
        rows.append(BaselineRow(BASELINES[key] + extra, r.value, r.lo, r.hi, (r.value or 0.0) - b.chance))
    plot = safe_plot(
        plots_exam.baselines_plot,
        [r.label for r in rows],
        [r.value for r in rows],
        [r.lo for r in rows],
        [r.hi for r in rows],
        b.letter_counts,
        b.chance,
    )
    return BaselinesView(
        rows=rows,
        chance=b.chance,
        n=b.n,
        letters=b.letter_counts,
        max_gap=max(abs(r.gap) for r in rows) if rows else None,
        facts=b,
        plot=plot,
    )


@dataclass(frozen=True)
class PipelineRow:
    name: str
    model: str
    retriever: str
    k: int
    icl: int
    acc: Estimate
    methods: list[tuple[str, int]]
    errors: list[tuple[str, int]]
    ability: IrtAbility | None
    gain: BeyondGuessing | None


@dataclass(frozen=True)
class PipelinesView:
    rows: list[PipelineRow]
    plot: str | None
    gains: bool = False


def _pipelines(pipelines: dict[str, PipelineResult], irt: ExamIrt | None) -> PipelinesView:
    rows = [
        PipelineRow(
            name=p.name,
            model=p.model,
            retriever=p.retriever,
            k=p.k,
            icl=p.icl,
            acc=p.accuracy,
            methods=sorted(p.methods.items()),
            errors=sorted(p.errors.items()),
            ability=irt.ability_of(p.name) if irt is not None else None,
            gain=p.beyond_guessing,
        )
        for p in pipelines.values()
    ]
    plot = None
    shown = [r for r in rows if r.acc.value is not None]
    if shown:
        plot = safe_plot(
            plots.metric_bars,
            "Accuracy per pipeline",
            [r.name for r in shown],
            [r.acc.value for r in shown],
            [r.acc.lo for r in shown],
            [r.acc.hi for r in shown],
            xlabel="accuracy — whiskers: 95% Wilson interval",
        )
    return PipelinesView(rows, plot, any(r.gain is not None for r in rows))


@dataclass(frozen=True)
class BreakdownGroup:
    key: str
    title: str
    levels: list[str]
    table: dict[str, dict[str, Estimate]]


@dataclass(frozen=True)
class BreakdownRow:
    pipeline: str
    cells: list[Estimate | None]


@dataclass(frozen=True)
class BreakdownsView:
    groups: list[BreakdownGroup]
    rows: list[BreakdownRow]


def _breakdowns(b: Breakdowns | None) -> BreakdownsView | None:
    """One compact table: pipelines x (Bloom levels | question words | topics), each cell a rate."""
    groups: list[BreakdownGroup] = []
    for key, title in (("bloom", "Bloom level"), ("question_word", "question word"), ("topic", "topic")):
        table = b.table(key) if b is not None else {}
        levels = sorted({lv for cells in table.values() for lv in cells})
        if levels:
            groups.append(BreakdownGroup(key, title, levels, table))
    if not groups:
        return None
    pipelines = list(dict.fromkeys(p for g in groups for p in g.table))
    rows = [
        BreakdownRow(p, [(g.table.get(p) or {}).get(lv) for g in groups for lv in g.levels])
        for p in pipelines
    ]
    return BreakdownsView(groups, rows)


@dataclass(frozen=True)
class IrtView:
    """The IRT fit (`fit`) with its figures, its items most discriminating first, and the pruning step
    that dropped each pruned question."""

    fit: ExamIrt
    figs: dict[str, str | None]
    items_sorted: list[IrtItem]
    dropped: dict[str, int]


def _irt(irt: ExamIrt | None) -> IrtView | None:
    if irt is None or irt.skipped is not None or irt.model is None:
        return None
    theta = irt.theta
    figs: dict[str, str | None] = {}
    if irt.icc:
        figs["icc"] = safe_plot(
            plots_exam.curves_plot,
            "Item characteristic curves (sample of items)",
            theta,
            {c.label or c.id[-8:]: c.p for c in irt.icc},
            ylabel="P(correct)",
            ylim01=True,
        )
    for key, title, groups in (
        ("bloom", "Bloom level", irt.information_by_bloom),
        ("question_word", "question word", irt.information_by_question_word),
    ):
        if groups:
            figs[key] = safe_plot(
                plots_exam.curves_plot,
                f"Mean item information by {title}",
                theta,
                {f"{g} (n={v.n})": v.mean_item_information for g, v in groups.items()},
                ylabel="information per item",
            )
    prune = irt.prune
    if prune and prune.steps:
        curves = {f"initial exam ({prune.steps[0].n_items} items)": prune.information_initial}
        for s in prune.steps:
            curves[f"after step {s.step} ({s.n_after} items)"] = s.information_after
        figs["prune"] = safe_plot(
            plots_exam.curves_plot, "Test information while pruning", theta, curves, ylabel="test information"
        )
    elif irt.test_information:
        figs["prune"] = safe_plot(
            plots_exam.curves_plot,
            "Test information",
            theta,
            {"exam": irt.test_information},
            ylabel="test information",
        )
    h = irt.hierarchical
    if h:
        figs["components"] = safe_plot(plots_exam.components_plot, h.components, h.component_se)
    ad = irt.adaptive
    if ad and ad.rows:
        rows = [r for r in ad.rows if r.theta_full is not None and r.theta_adaptive is not None]
        if rows:
            figs["adaptive"] = safe_plot(
                plots_exam.adaptive_plot,
                [r.pipeline for r in rows],
                [r.theta_full for r in rows],
                [r.se_full or 0.0 for r in rows],
                [r.theta_adaptive for r in rows],
                [r.se_adaptive or 0.0 for r in rows],
                [r.items_used for r in rows],
            )
    items = sorted(irt.items, key=lambda it: (it.discrimination is None, -(it.discrimination or 0)))
    return IrtView(fit=irt, figs=figs, items_sorted=items, dropped=pruned_items(irt))


@dataclass(frozen=True)
class OptionStat:
    """One option of a question: how many graded answers chose it, and their share."""

    letter: str
    text: str
    n: int
    share: float | None  # of the graded answers that picked an option; None when none did
    correct: bool


class ResponseContext(BaseModel):
    """What a failed `exam_response` item records of its unit (the pipeline and the question)."""

    pipeline: str | None = None
    question_id: str | None = None


@dataclass(frozen=True)
class ResponseView:
    """One `exam_response` item as the browsers show it."""

    pipeline: str | None
    question_id: str | None
    status: str
    error: str | None = None
    error_cause: str | None = None
    selected: str | None = None
    correct: bool | None = None
    method: str | None = None
    fallback: str | None = None
    p: float | None = None  # the probability of the option picked
    reply: str | None = None


def response_view(item: ItemRecord) -> ResponseView:
    """One `exam_response` item (done: its answer; failed: its error and the unit it was for)."""
    if item.status == "done":
        r = item.payload(ExamResponse)
        return ResponseView(
            pipeline=r.pipeline,
            question_id=r.question_id,
            status=item.status,
            selected=r.selected,
            correct=r.correct,
            method=r.method,
            fallback=r.fallback,
            p=(r.probs or {}).get(r.selected) if r.selected else None,
            reply=r.reply,
        )
    unit = ResponseContext.model_validate(item.data if isinstance(item.data, dict) else {})
    return ResponseView(
        pipeline=unit.pipeline,
        question_id=unit.question_id,
        status=item.status,
        error=item.error,
        error_cause=item.error_cause,
    )


def option_stats(choices: Sequence[str], answer_index: int, answers: list[ResponseView]) -> list[OptionStat]:
    """Per option, the graded answers (status done) that selected it."""
    picked = [a.selected for a in answers if a.status == "done" and a.selected]
    counts = {letter: picked.count(letter) for letter in LETTERS[: len(choices)]}
    return [
        OptionStat(
            letter=letter,
            text=str(text),
            n=counts[letter],
            share=counts[letter] / len(picked) if picked else None,
            correct=i == answer_index,
        )
        for i, (letter, text) in enumerate(zip(LETTERS, choices, strict=False))
    ]


@dataclass(frozen=True)
class QuestionView:
    """An exam question with its answers, option counts, IRT parameters and the pruning step that
    dropped it."""

    id: str
    d: ExamQuestion
    answers: list[ResponseView]
    options: list[OptionStat]
    n_good: int
    n_graded: int
    n_failed: int
    irt: IrtItem | None
    dropped: int | None


def question_view(
    q: ExamQuestion, answers: list[ResponseView], irt_item: IrtItem | None, dropped: int | None
) -> QuestionView:
    graded = [a for a in answers if a.status == "done"]
    return QuestionView(
        id=q.id,
        d=q,
        answers=answers,
        options=option_stats(q.choices, q.answer_index, answers),
        n_good=sum(1 for a in graded if a.correct),
        n_graded=len(graded),
        n_failed=len(answers) - len(graded),
        irt=irt_item,
        dropped=dropped,
    )


def pruned_items(irt: ExamIrt | None) -> dict[str, int]:
    """Question id -> the pruning step that dropped it."""
    dropped: dict[str, int] = {}
    for s in irt.prune.steps if irt is not None and irt.prune is not None else []:
        for i in s.dropped_ids:
            dropped[i] = s.step
    return dropped


@dataclass(frozen=True)
class BrowserView:
    questions: list[QuestionView]
    total: int
    limit: int


def _browser(run: Run, irt_items: dict[str, IrtItem], dropped: dict[str, int]) -> BrowserView:
    questions = run.items(ExamQuestion.KIND, status="done")
    by_q: dict[str, list[ResponseView]] = {}
    for r in run.iter_items(ExamResponse.KIND):
        if r.status == "superseded":
            continue
        view = response_view(r)
        by_q.setdefault(str(view.question_id), []).append(view)
    out = []
    for item in questions[:MAX_BROWSER]:
        q = item.payload(ExamQuestion)
        out.append(question_view(q, by_q.get(q.id, []), irt_items.get(q.id), dropped.get(q.id)))
    return BrowserView(out, len(questions), MAX_BROWSER)


@dataclass(frozen=True)
class Correlation:
    rho: float
    n: int


@dataclass(frozen=True)
class GuessView:
    """Closed-book answerability: the statistics (`s`), the number dropped, Spearman correlations with
    the IRT parameters, the plot; or why it was not measured (`skipped`)."""

    skipped: str | None = None
    s: GuessStats | None = None
    dropped: int | None = None
    irt: dict[str, Correlation] = field(default_factory=dict)
    plot: str | None = None


def _guessability(
    g: GuessStats | GuessSkipped | None, irt_items: dict[str, IrtItem], dropped: int | None
) -> GuessView | None:
    """Closed-book answerability: distribution (plot), guessable share per topic, the items at or above
    the threshold, and the relation to the IRT difficulty and guessing of the items kept (Spearman)."""
    if g is None:
        return None
    if isinstance(g, GuessSkipped):
        return GuessView(skipped=g.skipped)
    from scipy.stats import spearmanr

    per = {k: v.guessability for k, v in g.per_item.items()}
    pairs: dict[str, list[tuple[float, float]]] = {
        "difficulty": [
            (x, it.difficulty)
            for i, it in irt_items.items()
            if (x := per.get(i)) is not None and it.difficulty is not None
        ],
        "guessing": [
            (x, it.guessing)
            for i, it in irt_items.items()
            if (x := per.get(i)) is not None and it.guessing is not None
        ],
    }
    corr = {}
    for name, xy in pairs.items():
        if len(xy) >= 5 and len({x for x, _ in xy}) > 1 and len({y for _, y in xy}) > 1:
            rho = spearmanr([x for x, _ in xy], [y for _, y in xy]).statistic
            corr[name] = Correlation(round(float(rho), 3), len(xy))
    values = [v for v in per.values() if v is not None]
    plot = None
    if values:
        plot = safe_plot(
            plots_exam.guessability_plot,
            values,
            float(g.threshold or 0.75),
            float(g.chance or 0.25),
            pairs["difficulty"],
        )
    return GuessView(s=g, dropped=dropped, irt=corr, plot=plot)


def item_guessability(stats: ExamStats | None) -> dict[str, float | None]:
    """Question id -> its closed-book guessability (measured before the filter)."""
    g = stats.guessability if stats is not None else None
    if not isinstance(g, GuessStats):
        return {}
    return {k: v.guessability for k, v in g.per_item.items()}


@dataclass(frozen=True)
class ExamSection:
    """Everything the exam template shows."""

    guessability: GuessView | None
    stats: list[StatRow]
    labels: dict[str, int] | None
    distributions: list[tuple[str, dict[str, int]]]
    baselines: BaselinesView | None
    pipelines: PipelinesView
    breakdowns: BreakdownsView | None
    irt: IrtView | None
    browser: BrowserView
    item_guessability: dict[str, float | None]


def exam_context(run: Run) -> ExamSection:
    """The exam section's view of a run: its result, its typed artifacts and items."""
    result = run.result if isinstance(run.result, ExamResult) else None
    stats = run.artifact("exam_stats", ExamStats) or (result.exam if result else None)
    irt_fit = run.artifact("exam_irt", ExamIrt)
    baselines = result.baselines if result else run.artifact("exam_baselines", Baselines)
    irt = _irt(irt_fit)
    irt_items = {it.id: it for it in (irt_fit.items if irt_fit is not None else [])}
    dropped = (stats.filtered or {}).get("guessable") if stats is not None else None
    return ExamSection(
        guessability=_guessability(stats.guessability if stats else None, irt_items, dropped),
        stats=_stat_rows(stats),
        labels=stats.labels if stats else None,
        distributions=[
            (k, dist) for k in ("bloom", "question_word", "topic") if stats and (dist := getattr(stats, k))
        ],
        baselines=_baselines(baselines),
        pipelines=_pipelines(result.pipelines if result else {}, irt_fit),
        breakdowns=_breakdowns(run.artifact("exam_breakdowns", Breakdowns)),
        irt=irt,
        browser=_browser(run, irt_items, irt.dropped if irt else {}),
        item_guessability=item_guessability(stats),
    )


def render(run: Run) -> str:
    """HTML fragment of the exam protocol section."""
    section = exam_context(run)
    return render_template(
        "exam/report.html.j2", **{f: getattr(section, f) for f in section.__dataclass_fields__}
    )
