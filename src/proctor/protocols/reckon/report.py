"""Report section of the RECKON protocol (`reckon`).

Reads: the artifact `reckon` (unit stats, per-candidate scores and breakdowns, round logs, round-1
clusters, 2-D map, cost, meta-evaluation, examples, uncovered units), the metrics `accuracy.reckon`
per candidate, the items `KnowledgeUnit`, `ReckonItem`, `BaselineQuestion` and `BaselineAnswer` (read
typed) for the unit browser, and the `UnitVerdict` items (every round's per-unit verdicts) for the verdicts
by method.
Every string from the store is escaped by the template.
"""

from __future__ import annotations

from typing import Any

from proctor.protocols.reckon import plots as plots_reckon
from proctor.protocols.reckon.baselines import JW_OR, JW_R, BaselineAnswer, BaselineQuestion
from proctor.protocols.reckon.judging import VERDICTS, Extraction, UnitVerdict
from proctor.protocols.reckon.run import ReckonItem
from proctor.protocols.reckon.units import KnowledgeUnit
from proctor.kit.steps import read_items
from proctor.report import plots
from proctor.report._env import render_template
from proctor.report.plots import safe_plot
from proctor.kit.record import Run
from proctor.store import RunStore

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
STAGES = ("judge", "guard", "extract")  # the methods that decide a unit's verdict, in the table's order


def verdicts_by_method(store: RunStore) -> list[dict[str, Any]]:
    """Per method (`UnitVerdict.stage`), over every recorded unit verdict of every round and candidate: the
    verdicts it gave, how many carry the judge's P(correct), and their mean (a guard's row: the judge's
    P(correct) on the "correct" verdicts the guard overruled)."""
    groups: dict[str, list[UnitVerdict]] = {}
    for _, v in read_items(store, UnitVerdict):
        groups.setdefault(v.stage, []).append(v)
    rows = []
    for stage in sorted(groups, key=lambda s: STAGES.index(s) if s in STAGES else len(STAGES)):
        vs = groups[stage]
        ps = [v.p_correct for v in vs if v.p_correct is not None]
        rows.append(
            {
                "method": stage,
                "n": len(vs),
                **{verdict: sum(1 for v in vs if v.verdict == verdict) for verdict in VERDICTS},
                "n_p": len(ps),
                "mean_p": sum(ps) / len(ps) if ps else None,
            }
        )
    return rows


def selection_counts(store: RunStore) -> dict[str, int]:
    """Stage-1 extractions recorded, unit selections they made, and how many the embedding check replaced."""
    extractions = [x for _, x in read_items(store, Extraction)]
    return {
        "calls": len(extractions),
        "units": sum(len(x.sentence_ids) for x in extractions),
        "realigned": sum(len(x.realigned) for x in extractions),
    }


def _unit_browser(store: RunStore, candidates: list[str]) -> list[dict[str, Any]]:
    """Units with every candidate's RECKON and baseline outcome (the first BROWSER_LIMIT units)."""
    units = [u for _, u in read_items(store, KnowledgeUnit)][:BROWSER_LIMIT]
    items = {(it.unit_id, it.candidate): it for _, it in read_items(store, ReckonItem)}
    answers = dict(read_items(store, BaselineAnswer))
    questions = {q.unit_id: q for _, q in read_items(store, BaselineQuestion)}
    judged: dict[str, dict[str, Any]] = {}
    for j in store.judgments():
        if j["item_key"] in answers:
            judged.setdefault(j["item_key"], {})[j["judge"]] = j
    rows = []
    for u in units:
        per = []
        for c in candidates:
            it = items.get((u.unit_id, c))
            if it is None:
                continue
            key = it.baseline_answer_key or ""
            baseline: dict[str, Any] | None = None
            if key in answers:
                baseline = answers[key].model_dump()
            elif key and (q := questions.get(u.unit_id)) is not None:  # asked, the answer failed
                baseline = {"question": q.question, "reference_answer": q.reference_answer, "answer": None}
            bj = judged.get(key, {})
            per.append(
                {
                    **it.model_dump(),
                    "baseline": baseline,
                    "jwr": bj.get(JW_R),
                    "jwor": bj.get(JW_OR),
                }
            )
        rows.append({"unit": u, "items": per})
    return rows


def reckon_context(store: RunStore) -> dict[str, Any]:
    art = store.get_artifact("reckon") or {}
    cands: dict[str, Any] = art.get("candidates") or {}
    names = list(cands)
    clusters = art.get("clusters") or []
    points = art.get("map") or []
    cost = art.get("cost") or {}
    acc_plot = None
    if names:
        acc_plot = safe_plot(
            plots.metric_bars,
            "RECKON accuracy over judged units",
            names,
            [cands[n]["accuracy"]["value"] for n in names],
            [cands[n]["accuracy"]["lo"] for n in names],
            [cands[n]["accuracy"]["hi"] for n in names],
        )
    cost_rows = cost.get("rows") or []
    steps = ["questions", "answers", "judging"]

    def tok(method: str, step: str) -> int:
        return next((r["tokens"] for r in cost_rows if r["method"] == method and r["step"] == step), 0)

    baseline_methods = sorted(
        {m for c in cands.values() for m in (c.get("baselines") or {})},
        key=lambda m: list(METHOD_LABELS).index(m) if m in METHOD_LABELS else 99,
    )
    return {
        "art": art,
        "empty": bool(art.get("empty")) or not art,
        "units": art.get("units") or {},
        "n_units": art.get("n_units") or 0,
        "candidates": cands,
        "names": names,
        "clusters": clusters,
        "stop_reasons": art.get("stop_reasons") or {},
        "acc_plot": acc_plot,
        "convergence_plot": safe_plot(
            plots_reckon.convergence,
            {n: cands[n]["remaining_per_round"] for n in names},
            art.get("n_units") or 0,
        )
        if names
        else None,
        "map_plot": safe_plot(
            plots_reckon.unit_map,
            [p["x"] for p in points],
            [p["y"] for p in points],
            [p["cluster"] for p in points],
            [c["center"] for c in clusters],
            [p["keyword"] for p in points],
        )
        if points
        else None,
        "freq_plot": safe_plot(plots_reckon.ask_frequency, {n: cands[n]["ask_frequency"] for n in names})
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
        if cost.get("has_baseline")
        else None,
        "step_labels": STEP_LABELS,
        "baseline_methods": baseline_methods,
        "method_labels": METHOD_LABELS,
        "meta": art.get("meta_evaluation"),
        "examples": art.get("examples") or [],
        "uncovered": art.get("uncovered") or [],
        "browser": _unit_browser(store, names),
        "by_method": verdicts_by_method(store),
        "selections": selection_counts(store),
        "browser_limit": BROWSER_LIMIT,
        "config": art.get("config") or {},
    }


def render(run: Run) -> str:
    # Kit 2 transition: this section still reads the store directly; it is to read `run` (typed).
    return _render_store(RunStore(run.folder / "run.sqlite"))


def _render_store(store: RunStore) -> str:
    """HTML fragment of the reckon protocol section."""
    return render_template("reckon/report.html.j2", **reckon_context(store))
