"""Report section of the RECKON protocol (`reckon`), read through the typed run.

Reads: the result (`ReckonResult`: unit stats, per-candidate scores, cost, meta-evaluation), its `reckon`
artifact (`ReckonDetails`: round logs, round-1 clusters, 2-D map, cost rows, examples, uncovered units),
the items `KnowledgeUnit`, `ReckonItem`, `BaselineQuestion` and `BaselineAnswer` for the unit browser with
the baseline's judgments, the `UnitVerdict` items (every round's per-unit verdicts) for the verdicts by
method and the `Extraction` items for the selection counts.
Every string from the store is escaped by the template.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from proctor.kit.record import Run
from proctor.protocols.reckon import plots as plots_reckon
from proctor.protocols.reckon.baselines import JW_OR, JW_R, BaselineAnswer, BaselineQuestion
from proctor.protocols.reckon.judging import VERDICTS, Extraction, UnitVerdict
from proctor.protocols.reckon.result import ReckonDetails, ReckonItem, ReckonResult
from proctor.protocols.reckon.units import KnowledgeUnit
from proctor.report import plots
from proctor.report._env import render_template
from proctor.report.plots import safe_plot
from proctor.store.record import JudgmentRecord

METHOD_LABELS = {
    "reckon": "RECKON",
    "judge_with_reference": "LLM judge with reference (J w/R)",
    "judge_without_reference": "LLM judge without reference (J w/oR)",
    "bleu": "BLEU",
    "rouge_l": "ROUGE-L",
    "embedding": "embedding similarity",
}
STEP_LABELS = {"questions": "question generation", "answers": "candidate answers", "judging": "judging"}


BROWSER_LIMIT = 500
STAGES = (
    "rule",
    "judge",
    "guard",
    "extract",
)  # the methods that decide a unit's verdict, in the table's order


@dataclass(frozen=True)
class MethodRow:
    """The verdicts one method (`UnitVerdict.stage`) gave, and the judge's P(correct) on them."""

    method: str
    n: int
    correct: int
    incorrect: int
    uncovered: int
    n_p: int
    mean_p: float | None


@dataclass(frozen=True)
class SelectionCounts:
    calls: int
    units: int
    realigned: int


@dataclass(frozen=True)
class BaselineView:
    """The per-unit baseline's question on a unit and the candidate's answer (None: the answer failed)."""

    question: str
    reference_answer: str
    answer: str | None


@dataclass(frozen=True)
class BrowserEntry:
    item: ReckonItem
    baseline: BaselineView | None
    jwr: JudgmentRecord | None
    jwor: JudgmentRecord | None


@dataclass(frozen=True)
class BrowserRow:
    unit: KnowledgeUnit
    entries: list[BrowserEntry]


def verdicts_by_method(run: Run) -> list[MethodRow]:
    """Per method (`UnitVerdict.stage`), over every recorded unit verdict of every round and candidate: the
    verdicts it gave, how many carry the judge's P(correct), and their mean (a guard's row: the judge's
    P(correct) on the "correct" verdicts the guard overruled)."""
    groups: dict[str, list[UnitVerdict]] = {}
    for _, v in run.payloads(UnitVerdict):
        groups.setdefault(v.stage, []).append(v)
    rows = []
    for stage in sorted(groups, key=lambda s: STAGES.index(s) if s in STAGES else len(STAGES)):
        vs = groups[stage]
        ps = [v.p_correct for v in vs if v.p_correct is not None]
        count = {verdict: sum(1 for v in vs if v.verdict == verdict) for verdict in VERDICTS}
        rows.append(
            MethodRow(
                method=stage,
                n=len(vs),
                correct=count["correct"],
                incorrect=count["incorrect"],
                uncovered=count["uncovered"],
                n_p=len(ps),
                mean_p=sum(ps) / len(ps) if ps else None,
            )
        )
    return rows


def selection_counts(run: Run) -> SelectionCounts:
    """Stage-1 extractions recorded, unit selections they made, and how many the embedding check replaced."""
    extractions = [x for _, x in run.payloads(Extraction)]
    return SelectionCounts(
        calls=len(extractions),
        units=sum(len(x.sentence_ids) for x in extractions),
        realigned=sum(len(x.realigned) for x in extractions),
    )


def _unit_browser(run: Run, candidates: list[str]) -> list[BrowserRow]:
    """Units with every candidate's RECKON and baseline outcome (the first BROWSER_LIMIT units)."""
    units = [u for _, u in run.payloads(KnowledgeUnit)][:BROWSER_LIMIT]
    items = {(it.unit_id, it.candidate): it for _, it in run.payloads(ReckonItem)}
    answers = dict(run.payloads(BaselineAnswer))
    questions = {q.unit_id: q for _, q in run.payloads(BaselineQuestion)}
    judged: dict[str, dict[str, JudgmentRecord]] = {}
    for j in run.judgments():
        if j.item_key in answers:
            judged.setdefault(j.item_key, {})[j.judge] = j
    rows = []
    for u in units:
        entries = []
        for c in candidates:
            it = items.get((u.unit_id, c))
            if it is None:
                continue
            key = it.baseline_answer_key or ""
            baseline = None
            if (a := answers.get(key)) is not None:
                baseline = BaselineView(a.question, a.reference_answer, a.answer)
            elif key and (q := questions.get(u.unit_id)) is not None:  # asked, the answer failed
                baseline = BaselineView(q.question, q.reference_answer, None)
            bj = judged.get(key, {})
            entries.append(BrowserEntry(it, baseline, bj.get(JW_R), bj.get(JW_OR)))
        rows.append(BrowserRow(u, entries))
    return rows


def reckon_context(run: Run) -> dict[str, Any]:
    result = run.result if isinstance(run.result, ReckonResult) else None
    details = run.artifact("reckon", ReckonDetails)
    if result is None or details is None or details.empty:
        units = details.units if details is not None else result.units if result is not None else None
        return {"empty": True, "units": units}
    cands = result.candidates
    names = list(cands)
    clusters = details.clusters
    points = details.map
    cost = result.cost
    cost_rows = details.cost_rows
    acc_plot = None
    if names:
        acc_plot = safe_plot(
            plots.metric_bars,
            "RECKON accuracy over judged units",
            names,
            [cands[n].accuracy.value for n in names],
            [cands[n].accuracy.lo for n in names],
            [cands[n].accuracy.hi for n in names],
        )
    steps = ["questions", "answers", "judging"]

    def tok(method: str, step: str) -> int:
        return next((r.tokens for r in cost_rows if r.method == method and r.step == step), 0)

    baseline_methods = [
        m for m in METHOD_LABELS if any(c.baselines.get(m) is not None for c in cands.values())
    ]
    return {
        "art": details,
        "empty": False,
        "units": details.units,
        "n_units": details.n_units,
        "candidates": cands,
        "details": details.candidates,
        "names": names,
        "clusters": clusters,
        "stop_reasons": details.stop_reasons,
        "acc_plot": acc_plot,
        "convergence_plot": safe_plot(
            plots_reckon.convergence,
            {n: cands[n].remaining_per_round for n in names},
            details.n_units,
        )
        if names
        else None,
        "map_plot": safe_plot(
            plots_reckon.unit_map,
            [p.x for p in points],
            [p.y for p in points],
            [p.cluster for p in points],
            [c.center for c in clusters],
            [p.keyword for p in points],
        )
        if points
        else None,
        "freq_plot": safe_plot(plots_reckon.ask_frequency, {n: cands[n].ask_frequency for n in names})
        if names
        else None,
        "cost": cost,
        "cost_rows": cost_rows,
        "cost_plot": safe_plot(
            plots_reckon.cost_bars,
            [STEP_LABELS[s] for s in steps],
            [tok("reckon", s) for s in steps],
            [tok("baseline", s) for s in steps],
        )
        if cost is not None and cost.has_baseline
        else None,
        "step_labels": STEP_LABELS,
        "baseline_methods": baseline_methods,
        "method_labels": METHOD_LABELS,
        "meta": result.meta_evaluation,
        "examples": details.examples,
        "uncovered": details.uncovered,
        "browser": _unit_browser(run, names),
        "by_method": verdicts_by_method(run),
        "selections": selection_counts(run),
        "browser_limit": BROWSER_LIMIT,
        "config": details.config,
    }


def render(run: Run) -> str:
    """HTML fragment of the reckon protocol section."""
    return render_template("reckon/report.html.j2", **reckon_context(run))
