"""Report section of the KIEval protocol (`kieval`).

Reads only the store: items `kieval_question`, `kieval_confidence`, `kieval_mc_answer`, `kieval_round`,
`kieval_conversation`; metrics `kieval.*` and `accuracy.static_mc` per candidate; artifacts
`kieval_questions`, `kieval_contamination` and `summary`. Everything a model wrote is rendered through
the autoescaping template.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from proctor.constants import LETTERS
from proctor.protocols.kieval import plots as plots_kieval
from proctor.protocols.kieval.conversations import EVALUATOR_JUDGE, ROUND_KIND, ConversationItem
from proctor.protocols.kieval.run import Q_KIND
from proctor.protocols.kieval.static_mc import MCAnswer
from proctor.report._env import render_template
from proctor.report.plots import safe_plot
from proctor.kit.record import Run
from proctor.store import RunStore

ASPECTS = ("accuracy", "logic", "relevance", "coherence", "conciseness")
MAX_CONVERSATIONS = 400
END_ORDER = (
    "completed",
    "off_topic",
    "empty_response",
    "rule_violation",
    "repetition",
    "unpermitted_role_shift",
    "unspecified",
    "evaluator_error",
    "error",
)


def _data(it: dict[str, Any]) -> dict[str, Any]:
    return it["data"] if isinstance(it.get("data"), dict) else {}


def score_class(s: Any) -> str:
    """Chip colour of a 1-4 score."""
    if not isinstance(s, int | float):
        return "neutral"
    return "good" if s >= 3.5 else "partial" if s >= 2.5 else "bad"


def kieval_class(v: Any) -> str:
    """Chip colour of a 0-100 KIEval score."""
    if not isinstance(v, int | float):
        return "neutral"
    return "good" if v >= 70 else "partial" if v >= 40 else "bad"


def _question_stats(stats: Any) -> list[tuple[str, Any]]:
    if not isinstance(stats, dict):
        return []
    rows: list[tuple[str, Any]] = []
    for k in ("file", "read", "usable", "sampled"):
        if k in stats:
            rows.append((k, stats[k]))
    for reason, n in (stats.get("skipped") or {}).items():
        rows.append((f"skipped: {reason}", n))
    cs = stats.get("confident_set") or {}
    if cs.get("enabled"):
        for k in (
            "checked",
            "kept",
            "dropped_low_confidence",
            "dropped_errors",
            "threshold",
            "shuffles",
            "method",
        ):
            if k in cs:
                rows.append((f"confident set: {k.replace('_', ' ')}", cs[k]))
    else:
        rows.append(("confident set", "off"))
    if "used" in stats:
        rows.append(("used in conversations", stats["used"]))
    return rows


def _tidy(s: Any) -> Any:
    """3.0 -> 3 (majority votes are stored as floats); fractional mean votes stay as they are."""
    return int(s) if isinstance(s, float) and s.is_integer() else s


def _round_view(it: dict[str, Any], failures: list[dict[str, Any]]) -> dict[str, Any]:
    """One round for display; `failures` are its evaluators' failed judgments."""
    d = _data(it)
    evaluations = d.get("evaluations") or {}
    names = list(evaluations)
    aspects = []
    for a in ASPECTS:
        voted = _tidy((d.get(a) or {}).get("score"))
        per = []
        for n in names:
            e = evaluations[n]
            if "error" in e:
                continue
            per.append({"evaluator": n, "score": e[a]["score"], "comment": e[a]["comment"]})
        aspects.append({"aspect": a, "score": voted, "cls": score_class(voted), "per": per})
    overall = [
        {"evaluator": n, "score": e.get("overall_score"), "comment": e.get("overall_comment")}
        for n, e in evaluations.items()
        if "error" not in e
    ]
    failed = [
        {
            "evaluator": j["judge"].split(":", 1)[-1],
            "error": f"{j['error_cause']}: {j['error']}",
            "raw": (j["data"] or {}).get("raw"),
        }
        for j in failures
    ]
    return {
        "n": int(d.get("round", 0)) + 1,
        "status": it["status"],
        "error": it.get("error"),
        "cause": it.get("error_cause"),
        "question": d.get("interactor_question"),
        "reply": d.get("candidate_reply"),
        "context_ids": d.get("context_ids") or [],
        "aspects": aspects if d.get("overall_score") is not None else [],
        "overall_score": _tidy(d.get("overall_score")),
        "overall_cls": score_class(d.get("overall_score")),
        "overall": overall,
        "failed": failed,
        "multi": len(names) > 1,
        "stop": d.get("stop_conversation"),
        "stop_reason": d.get("stop_reason"),
    }


def _conversations(store: RunStore) -> tuple[list[dict[str, Any]], int]:
    questions = {_data(q).get("question_id"): _data(q) for q in store.items(kind=Q_KIND)}
    mc = {it["key"]: it for it in store.items(kind=MCAnswer.KIND)}
    rounds: dict[str, list[dict[str, Any]]] = {}
    for r in store.items(kind=ROUND_KIND):
        rounds.setdefault(str(_data(r).get("conversation")), []).append(r)
    convs = {it["key"]: it for it in store.items(kind=ConversationItem.KIND)}
    evaluator_failures: dict[str, list[dict[str, Any]]] = {}
    for j in store.judgments():
        if j["error"] and j["judge"].startswith(f"{EVALUATOR_JUDGE}:"):
            evaluator_failures.setdefault(j["item_key"], []).append(j)
    keys = list(convs) + [k for k in rounds if k not in convs]
    out = []
    for key in keys[:MAX_CONVERSATIONS]:
        it = convs.get(key)
        d = _data(it) if it else {}
        rs = sorted(rounds.get(key, []), key=lambda r: _data(r).get("round", 0))
        first = _data(rs[0]) if rs else {}
        qid = d.get("question_id") or first.get("question_id")
        q = questions.get(qid) or {}
        m = mc.get(d.get("mc_key") or first.get("mc_key") or "")
        md = _data(m) if m else {}
        end = d.get("end") if it else "unfinished"
        out.append(
            {
                "key": key,
                "status": it["status"] if it else "unfinished",
                "error": it.get("error") if it else None,
                "cause": it.get("error_cause") if it else None,
                "candidate": d.get("candidate") or first.get("candidate") or "?",
                "question_id": qid,
                "question": q.get("question"),
                "choices": [(LETTERS[i], c) for i, c in enumerate(q.get("choices") or [])],
                "correct_letter": q.get("answer_letter") or md.get("correct_letter"),
                "mc_answer": md.get("answer"),
                "mc_choice": md.get("choice"),
                "mc_correct": md.get("correct"),
                "mc_error": m.get("error") if m else None,
                "kieval": d.get("kieval"),
                "kieval_cls": kieval_class(d.get("kieval")),
                "kieval_paper": d.get("kieval_paper"),
                "aspect_scores": d.get("aspects") or {},
                "n_rounds": d.get("rounds"),
                "end": end,
                "rounds": [_round_view(r, evaluator_failures.get(r["key"], [])) for r in rs],
            }
        )
    return out, len(keys)


def kieval_context(store: RunStore) -> dict[str, Any]:
    """Everything the KIEval template shows, computed from the store."""
    metrics: dict[str, dict[str, dict[str, Any]]] = {}
    for m in store.metrics():
        metrics.setdefault(m["name"], {})[m["subject"]] = m
    summary = store.get_artifact("summary")
    conversations, n_total = _conversations(store)
    cand_names = list((summary or {}).get("candidates") or {})
    for c in conversations:
        if c["candidate"] not in cand_names:
            cand_names.append(c["candidate"])
    for name in ("kieval.overall", "accuracy.static_mc"):
        cand_names += [s for s in metrics.get(name, {}) if s not in cand_names]
    ends: dict[str, Counter[str]] = {c: Counter() for c in cand_names}
    for c in conversations:
        ends[c["candidate"]][c["end"] or "unfinished"] += 1
    reasons = [r for r in END_ORDER if any(e[r] for e in ends.values())]
    reasons += sorted({r for e in ends.values() for r in e} - set(reasons))
    rows = []
    for name in cand_names:
        s = ((summary or {}).get("candidates") or {}).get(name) or {}
        rows.append(
            {
                "candidate": name,
                "model": s.get("model"),
                "retriever": s.get("retriever"),
                "overall": metrics.get("kieval.overall", {}).get(name),
                "paper": metrics.get("kieval.overall_paper", {}).get(name),
                "aspects": [metrics.get(f"kieval.{a}", {}).get(name) for a in ASPECTS],
                "static": metrics.get("accuracy.static_mc", {}).get(name),
                "rounds": metrics.get("kieval.rounds", {}).get(name),
                "ends": [(r, ends[name][r]) for r in reasons if ends[name][r]],
                "errors": s.get("conversation_errors", 0),
            }
        )
    aspect_plot = None
    plotted = [r for r in rows if r["overall"] and r["overall"]["value"] is not None]
    if plotted:
        values = {
            r["candidate"]: [
                (m["value"], m["lo"], m["hi"]) if m else (None, None, None)
                for m in [*r["aspects"], r["overall"]]
            ]
            for r in plotted
        }
        aspect_plot = safe_plot(
            plots_kieval.aspect_bars, [r["candidate"] for r in plotted], [*ASPECTS, "overall"], values
        )
    stop_plot = None
    if any(ends.values()):
        stop_plot = safe_plot(
            plots_kieval.stop_reason_bars, cand_names, reasons, {c: dict(e) for c, e in ends.items()}
        )
    contam = {
        "applicable": False,
        "reason": "not computed (the run has not finished)",
        "note": None,
        "flagged": [],
        "points": [],
        "slope": None,
        "intercept": None,
        "r2": None,
        **(store.get_artifact("kieval_contamination") or {}),
    }
    pts = [
        r
        for r in rows
        if r["static"]
        and r["static"]["value"] is not None
        and r["overall"]
        and r["overall"]["value"] is not None
    ]
    scatter = None
    if pts:
        scatter = safe_plot(
            plots_kieval.contamination_scatter,
            [r["candidate"] for r in pts],
            [r["static"]["value"] for r in pts],
            [r["overall"]["value"] for r in pts],
            slope=contam.get("slope"),
            intercept=contam.get("intercept"),
            flagged=contam.get("flagged") or [],
        )
    return {
        "question_stats": _question_stats(store.get_artifact("kieval_questions")),
        "summary": summary,
        "rows": rows,
        "aspects": ASPECTS,
        "aspect_plot": aspect_plot,
        "stop_plot": stop_plot,
        "contamination": contam,
        "scatter": scatter,
        "conversations": conversations,
        "n_conversations": n_total,
        "max_conversations": MAX_CONVERSATIONS,
    }


def render(run: Run) -> str:
    # Kit 2 transition: this section still reads the store directly; it is to read `run` (typed).
    return _render_store(RunStore(run.folder / "run.sqlite"))


def _render_store(store: RunStore) -> str:
    """HTML fragment of the KIEval section."""
    return render_template("kieval/report.html.j2", **kieval_context(store))
