"""Report section of the exam protocol (`exam`).

Reads: items `exam_question` and `exam_response`; artifacts `exam_stats`, `exam_baselines`,
`exam_pipelines`, `exam_breakdowns`, `exam_irt`; metric `accuracy` per pipeline. Everything is
rendered through the autoescaping template `exam/report.html.j2`; plots are drawn from stored numbers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from proctor.constants import LETTERS
from proctor.protocols.exam import plots as plots_exam
from proctor.protocols.exam.grading import ExamResponse
from proctor.report import plots
from proctor.report._env import render_template
from proctor.report.plots import safe_plot
from proctor.kit.record import Run
from proctor.store import RunStore

BASELINES = (
    ("best_fixed_letter", "best fixed letter"),
    ("always_longest", "always the longest option"),
    ("always_shortest", "always the shortest option"),
    ("closed_book_examiner", "the examiner, closed-book (question and options only)"),
)
STAT_ORDER = (
    "source",
    "planned",
    "rounds",
    "calls",
    "calls_failed",
    "generated",
    "filtered",
    "distractors_removed",
    "kept",
)
STAT_LABELS = {
    "planned": "questions asked of the examiner",
    "rounds": "generation rounds (to reach target_questions)",
    "calls": "examiner calls",
    "calls_failed": "questions lost to failed calls (by cause; unparseable = schema/parse failure)",
    "generated": "questions parsed",
    "filtered": "questions filtered (by reason)",
    "distractors_removed": "spare distractors removed (by reason)",
    "kept": "questions kept (the exam)",
    "source": "exam read from",
}
MAX_BROWSER = 300


def _stat_rows(stats: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for k in STAT_ORDER:
        if k not in stats:
            continue
        v = stats[k]
        if k == "rounds":
            sub = [
                (
                    f"round {i}",
                    f"{r['asked']} asked in all, {r['kept']} kept"
                    + (f" ({r['guessable']} more dropped as guessable)" if r.get("guessable") else ""),
                )
                for i, r in enumerate(v, 1)
            ]
            rows.append({"name": STAT_LABELS[k], "value": len(v), "sub": sub})
        elif isinstance(v, dict):
            rows.append({"name": STAT_LABELS.get(k, k), "value": sum(v.values()), "sub": sorted(v.items())})
        else:
            rows.append({"name": STAT_LABELS.get(k, k), "value": v, "sub": []})
    return rows


def _baselines(b: dict[str, Any] | None) -> dict[str, Any] | None:
    if not b or not b.get("n"):
        return None
    chance = b["chance"]
    rows = []
    for key, label in BASELINES:
        r = b.get(key)
        if r:
            extra = f" ({r['letter']})" if key == "best_fixed_letter" else ""
            rows.append({"label": label + extra, **r, "gap": r["value"] - chance})
    plot = safe_plot(
        plots_exam.baselines_plot,
        [r["label"] for r in rows],
        [r["value"] for r in rows],
        [r["lo"] for r in rows],
        [r["hi"] for r in rows],
        b["letter_counts"],
        chance,
    )
    return {
        "rows": rows,
        "chance": chance,
        "n": b["n"],
        "letters": b["letter_counts"],
        "max_gap": max(abs(r["gap"]) for r in rows) if rows else None,
        "facts": {
            k: b.get(k) for k in ("mean_correct_chars", "mean_distractor_chars", "mean_question_chars")
        },
        "plot": plot,
    }


def _pipelines(store: RunStore, irt: dict[str, Any]) -> dict[str, Any]:
    pipes = store.get_artifact("exam_pipelines") or []
    acc = {m["subject"]: m for m in store.metrics() if m["name"] == "accuracy"}
    responses = [r for r in store.items(kind=ExamResponse.KIND) if r["status"] != "superseded"]
    abil = {a["pipeline"]: a for a in irt.get("abilities", [])}
    rows = []
    for p in pipes:
        mine = [r for r in responses if (r["data"] or {}).get("pipeline") == p["name"]]
        methods: dict[str, int] = {}
        errors: dict[str, int] = {}
        for r in mine:
            if r["status"] == "done":
                m = str(r["data"].get("method"))
                methods[m] = methods.get(m, 0) + 1
            else:
                c = r["error_cause"] or "error"
                errors[c] = errors.get(c, 0) + 1
        rows.append(
            {
                **p,
                "acc": acc.get(p["name"]),
                "methods": sorted(methods.items()),
                "errors": sorted(errors.items()),
                "ability": abil.get(p["name"]),
            }
        )
    plot = None
    shown = [r for r in rows if r["acc"] and r["acc"]["value"] is not None]
    if shown:
        plot = safe_plot(
            plots.metric_bars,
            "Accuracy per pipeline",
            [r["name"] for r in shown],
            [r["acc"]["value"] for r in shown],
            [r["acc"]["lo"] for r in shown],
            [r["acc"]["hi"] for r in shown],
            xlabel="accuracy — whiskers: 95% Wilson interval",
        )
    return {"rows": rows, "plot": plot}


def _breakdowns(b: dict[str, Any] | None) -> dict[str, Any] | None:
    """One compact table: pipelines x (Bloom levels | question words | topics), each cell a rate."""
    groups: list[dict[str, Any]] = []
    for key, title in (("bloom", "Bloom level"), ("question_word", "question word"), ("topic", "topic")):
        table = (b or {}).get(key) or {}
        levels = sorted({lv for cells in table.values() for lv in cells})
        if levels:
            groups.append({"key": key, "title": title, "levels": levels, "table": table})
    if not groups:
        return None
    pipelines = list(dict.fromkeys(p for g in groups for p in g["table"]))
    rows = [
        {"pipeline": p, "cells": [(g["table"].get(p) or {}).get(lv) for g in groups for lv in g["levels"]]}
        for p in pipelines
    ]
    return {"groups": groups, "rows": rows}


def _irt(irt: dict[str, Any]) -> dict[str, Any] | None:
    if not irt or not irt.get("model"):
        return None
    theta = irt["theta"]
    figs: dict[str, str | None] = {}
    if irt.get("icc"):
        figs["icc"] = safe_plot(
            plots_exam.curves_plot,
            "Item characteristic curves (sample of items)",
            theta,
            {c.get("label") or c["id"][-8:]: c["p"] for c in irt["icc"]},
            ylabel="P(correct)",
            ylim01=True,
        )
    for key, title in (("bloom", "Bloom level"), ("question_word", "question word")):
        groups = irt.get(f"information_by_{key}") or {}
        if groups:
            figs[key] = safe_plot(
                plots_exam.curves_plot,
                f"Mean item information by {title}",
                theta,
                {f"{g} (n={v['n']})": v["mean_item_information"] for g, v in groups.items()},
                ylabel="information per item",
            )
    prune = irt.get("prune")
    if prune and prune.get("steps"):
        curves = {f"initial exam ({prune['steps'][0]['n_items']} items)": prune["information_initial"]}
        for s in prune["steps"]:
            curves[f"after step {s['step']} ({s['n_after']} items)"] = s["information_after"]
        figs["prune"] = safe_plot(
            plots_exam.curves_plot, "Test information while pruning", theta, curves, ylabel="test information"
        )
    elif irt.get("test_information"):
        figs["prune"] = safe_plot(
            plots_exam.curves_plot,
            "Test information",
            theta,
            {"exam": irt["test_information"]},
            ylabel="test information",
        )
    h = irt.get("hierarchical")
    if h:
        figs["components"] = safe_plot(
            plots_exam.components_plot, h["components"], h.get("component_se") or {}
        )
    ad = irt.get("adaptive")
    if ad and ad.get("rows"):
        rows = [r for r in ad["rows"] if r["theta_full"] is not None and r["theta_adaptive"] is not None]
        if rows:
            figs["adaptive"] = safe_plot(
                plots_exam.adaptive_plot,
                [r["pipeline"] for r in rows],
                [r["theta_full"] for r in rows],
                [r["se_full"] or 0.0 for r in rows],
                [r["theta_adaptive"] for r in rows],
                [r["se_adaptive"] or 0.0 for r in rows],
                [r["items_used"] for r in rows],
            )
    items = sorted(
        irt.get("items") or [], key=lambda it: (it["discrimination"] is None, -(it["discrimination"] or 0))
    )
    # Sections the fit may not have produced (a small exam is not pruned) read as absent, not undefined.
    optional: dict[str, Any] = {"prune": None, "adaptive": None, "hierarchical": None, "warnings": []}
    return {**optional, **irt, "figs": figs, "items_sorted": items, "dropped": pruned_items(irt)}


@dataclass(frozen=True)
class OptionStat:
    """One option of a question: how many graded answers chose it, and their share."""

    letter: str
    text: str
    n: int
    share: float | None  # of the graded answers that picked an option; None when none did
    correct: bool


QUESTION_FIELDS = (
    "question",
    "choices",
    "answer",
    "answer_index",
    "rationale",
    "bloom",
    "question_word",
    "bloom_source",
    "question_word_source",
    "topic",
    "source_chunk_ids",
    "generator",
    "prompt_version",
    "guessability",
)


def response_view(r: dict[str, Any]) -> dict[str, Any]:
    """One `exam_response` item (a store row: status, error, error_cause, data) as the browsers show it."""
    d = r["data"] or {}
    return {
        "pipeline": d.get("pipeline"),
        "status": r["status"],
        "error": r["error"],
        "error_cause": r["error_cause"],
        "selected": d.get("selected"),
        "correct": d.get("correct"),
        "method": d.get("method"),
        "fallback": d.get("fallback"),
        "p": (d.get("probs") or {}).get(d.get("selected")) if d.get("selected") else None,
        "reply": d.get("reply"),
    }


def option_stats(choices: list[Any], answer_index: Any, answers: list[dict[str, Any]]) -> list[OptionStat]:
    """Per option, the graded answers (`response_view` rows with status done) that selected it."""
    picked = [a["selected"] for a in answers if a["status"] == "done" and a["selected"]]
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


def question_view(
    q: dict[str, Any], answers: list[dict[str, Any]], irt_item: dict[str, Any] | None, dropped: int | None
) -> dict[str, Any]:
    """One `exam_question` item (a store row: key, data) with its answers (`response_view` rows), its IRT
    parameters and the pruning step that dropped it."""
    d = q["data"] or {}
    graded = [a for a in answers if a["status"] == "done"]
    return {
        "id": str(d.get("id") or q["key"]),
        "d": {k: d.get(k) for k in QUESTION_FIELDS},
        "answers": answers,
        "options": option_stats(d.get("choices") or [], d.get("answer_index"), answers),
        "n_good": sum(1 for a in graded if a["correct"]),
        "n_graded": len(graded),
        "n_failed": len(answers) - len(graded),
        "irt": irt_item,
        "dropped": dropped,
    }


def pruned_items(irt: dict[str, Any]) -> dict[str, int]:
    """Question id -> the pruning step that dropped it."""
    dropped = {}
    for s in (irt.get("prune") or {}).get("steps", []):
        for i in s["dropped_ids"]:
            dropped[i] = s["step"]
    return dropped


def _browser(store: RunStore, irt_items: dict[str, Any], dropped: dict[str, int]) -> dict[str, Any]:
    questions = store.items(kind="exam_question", status="done")
    by_q: dict[str, list[dict[str, Any]]] = {}
    for r in store.items(kind=ExamResponse.KIND):
        if r["status"] == "superseded":
            continue
        by_q.setdefault(str((r["data"] or {}).get("question_id")), []).append(response_view(r))
    out = []
    for q in questions[:MAX_BROWSER]:
        qid = str((q["data"] or {}).get("id") or q["key"])
        out.append(question_view(q, by_q.get(qid, []), irt_items.get(qid), dropped.get(qid)))
    return {"questions": out, "total": len(questions), "limit": MAX_BROWSER}


def _guessability(
    g: dict[str, Any] | None, irt_items: dict[str, Any], dropped: int | None
) -> dict[str, Any] | None:
    """Closed-book answerability: distribution (plot), guessable share per topic, the items at or above
    the threshold, and the relation to the IRT difficulty and guessing of the items kept (Spearman)."""
    if not g:
        return None
    if g.get("skipped"):
        return {"skipped": g["skipped"]}
    from scipy.stats import spearmanr

    per = {k: v.get("guessability") for k, v in (g.get("per_item") or {}).items()}
    pairs = {
        name: [
            (per[i], it[field])
            for i, it in irt_items.items()
            if per.get(i) is not None and it.get(field) is not None
        ]
        for name, field in (("difficulty", "difficulty"), ("guessing", "guessing"))
    }
    corr = {}
    for name, xy in pairs.items():
        if len(xy) >= 5 and len({x for x, _ in xy}) > 1 and len({y for _, y in xy}) > 1:
            rho = spearmanr([x for x, _ in xy], [y for _, y in xy]).statistic
            corr[name] = {"rho": round(float(rho), 3), "n": len(xy)}
    values = [v for v in per.values() if v is not None]
    plot = None
    if values:
        plot = safe_plot(
            plots_exam.guessability_plot,
            values,
            float(g.get("threshold") or 0.75),
            float(g.get("chance") or 0.25),
            pairs["difficulty"],
        )
    return {
        **{k: v for k, v in g.items() if k != "per_item"},
        "filter": g.get("filter", dropped is not None),
        "dropped": dropped,
        "irt": corr,
        "plot": plot,
    }


def item_guessability(stats: dict[str, Any]) -> dict[str, float | None]:
    g = stats.get("guessability")
    per = (g or {}).get("per_item") if isinstance(g, dict) else None
    return {k: v.get("guessability") for k, v in (per or {}).items()}


def exam_context(store: RunStore) -> dict[str, Any]:
    """Everything the exam template shows, from the store only."""
    stats = store.get_artifact("exam_stats") or {}
    irt_raw = store.get_artifact("exam_irt") or {}
    irt = _irt(irt_raw)
    irt_items = {it["id"]: it for it in irt_raw.get("items") or []}
    guess = stats.get("guessability") if isinstance(stats.get("guessability"), dict) else None
    return {
        "guessability": _guessability(guess, irt_items, (stats.get("filtered") or {}).get("guessable")),
        "stats": _stat_rows({k: v for k, v in stats.items() if k != "guessability"}),
        "labels": stats.get("labels"),
        "distributions": [(k, stats[k]) for k in ("bloom", "question_word", "topic") if stats.get(k)],
        "baselines": _baselines(store.get_artifact("exam_baselines")),
        "pipelines": _pipelines(store, irt_raw),
        "breakdowns": _breakdowns(store.get_artifact("exam_breakdowns")),
        "irt": irt,
        "browser": _browser(store, irt_items, (irt or {}).get("dropped", {})),
        "item_guessability": item_guessability(stats),
    }


def render(run: Run) -> str:
    # Kit 2 transition: this section still reads the store directly; it is to read `run` (typed).
    return _render_store(RunStore(run.folder / "run.sqlite"))


def _render_store(store: RunStore) -> str:
    """HTML fragment of the exam protocol section."""
    return render_template("exam/report.html.j2", **exam_context(store))
