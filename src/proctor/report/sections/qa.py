"""Report section of the reference-QA protocol (`qa`).

Reads: items `question` / `answer`, judgments per answer (`em`, `f1`, `llm_with_reference`,
`llm_without_reference`), metrics `accuracy.<judge>`, `em.mean`, `f1.mean` per candidate, and the
artifacts `generation_stats` and `summary`.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from proctor.report import plots
from proctor.report._env import render_template
from proctor.store import RunStore

WITH_REF = "llm_with_reference"
WITHOUT_REF = "llm_without_reference"
SCORE_JUDGES = ("em", "f1")
JUDGE_LABELS = {WITH_REF: "judge with reference", WITHOUT_REF: "judge without reference", "em": "EM", "f1": "F1"}
# Where the answer item itself carries an LLM verdict (used when the judgments table has none).
ITEM_VERDICT_FIELDS = {WITH_REF: "judge_with_reference", WITHOUT_REF: "judge_without_reference"}
GOOD = {"correct", "right", "yes", "true", "pass", "passed", "accept", "accepted", "equivalent", "supported"}
BAD = {"incorrect", "wrong", "no", "false", "fail", "failed", "reject", "rejected", "unsupported", "hallucinated"}
GEN_STATS_ORDER = ("chunks_sampled", "generated", "parsed", "kept", "failed")


def judge_label(judge: str) -> str:
    """Human name of a judge id."""
    return JUDGE_LABELS.get(judge, judge)


def verdict_class(verdict: Any, score: Any, error: Any) -> str:
    """CSS class of a verdict: `good`, `bad`, `partial`, `err` (unparsed judge reply) or `neutral`."""
    if error:
        return "err"
    word = str(verdict).strip().lower() if verdict is not None else ""
    if word in GOOD:
        return "good"
    if word in BAD:
        return "bad"
    if isinstance(score, int | float):
        return "good" if score >= 0.999 else "bad" if score <= 0.001 else "partial"
    return "neutral"


def _ordered_judges(names: set[str]) -> list[str]:
    known = [j for j in (WITH_REF, WITHOUT_REF) if j in names]
    return known + sorted(names - set(known) - set(SCORE_JUDGES))


def _verdicts(answer: dict[str, Any], judged: dict[str, dict[str, Any]], judges: list[str]) -> list[dict[str, Any]]:
    """One verdict per LLM judge for an answer: the judgments table first, the item's own copy second."""
    data = answer["data"] if isinstance(answer["data"], dict) else {}
    out = []
    for judge in judges:
        row = judged.get(judge)
        if row is None and isinstance(data.get(ITEM_VERDICT_FIELDS.get(judge, "")), dict):
            v = data[ITEM_VERDICT_FIELDS[judge]]
            row = {"verdict": v.get("verdict"), "score": v.get("score"), "reason": v.get("reason"), "error": None}
        if row is None:
            out.append({"judge": judge, "present": False})
            continue
        out.append({
            "judge": judge, "present": True, "verdict": row.get("verdict"), "score": row.get("score"),
            "reason": row.get("reason"), "error": row.get("error"),
            "cls": verdict_class(row.get("verdict"), row.get("score"), row.get("error")),
        })
    return out


def _score(data: dict[str, Any], judged: dict[str, dict[str, Any]], name: str) -> Any:
    value = data.get(name)
    if value is None and name in judged and not judged[name].get("error"):
        value = judged[name].get("score")
    return value


def _generation_stats(stats: Any) -> list[dict[str, Any]]:
    """Rows of the generation-stats table; nested dicts (e.g. failure reasons) become sub-rows."""
    if not isinstance(stats, dict):
        return []
    keys = [k for k in GEN_STATS_ORDER if k in stats] + sorted(k for k in stats if k not in GEN_STATS_ORDER)
    rows = []
    for k in keys:
        v = stats[k]
        if isinstance(v, dict):
            total = sum(x for x in v.values() if isinstance(x, int | float) and not isinstance(x, bool))
            rows.append({"name": k, "value": total if v else 0, "sub": sorted(v.items(), key=lambda kv: str(kv[0]))})
        elif isinstance(v, list):
            rows.append({"name": k, "value": len(v), "sub": [(str(x), None) for x in v]})
        else:
            rows.append({"name": k, "value": v, "sub": []})
    kept, generated = stats.get("kept"), stats.get("generated")
    if isinstance(kept, int) and isinstance(generated, int) and generated > 0:
        rows.append({"name": "kept / generated", "value": kept / generated, "sub": [], "pct": True})
    return rows


def _agreement(answers: list[dict[str, Any]], judged: dict[str, dict[str, dict[str, Any]]]) -> dict[str, Any] | None:
    """Share of answers on which both LLM judges (with / without reference) return the same verdict."""
    per: dict[str, Counter[str]] = {}
    for a in answers:
        j = judged.get(a["key"], {})
        w, wo = j.get(WITH_REF), j.get(WITHOUT_REF)
        if not (w and wo) or w.get("error") or wo.get("error") or w.get("verdict") is None or wo.get("verdict") is None:
            continue
        cand = str((a["data"] or {}).get("candidate", "?"))
        c = per.setdefault(cand, Counter())
        c["n"] += 1
        if str(w["verdict"]).strip().lower() == str(wo["verdict"]).strip().lower():
            c["agree"] += 1
        else:
            cw = verdict_class(w["verdict"], w.get("score"), None)
            cwo = verdict_class(wo["verdict"], wo.get("score"), None)
            if cw == "good" and cwo != "good":
                c["only_with"] += 1
            elif cwo == "good" and cw != "good":
                c["only_without"] += 1
    if not per:
        return None
    total: Counter[str] = Counter()
    for c in per.values():
        total.update(c)
    rows = [{"candidate": k, **c, "share": c["agree"] / c["n"]} for k, c in per.items()]
    overall = {"candidate": "all candidates", **total, "share": total["agree"] / total["n"]}
    plot = None
    try:
        shown = [overall, *rows] if len(rows) > 1 else rows
        plot = plots.share_bars(
            "Judge agreement (with vs. without reference)", [r["candidate"] for r in shown],
            [r["share"] for r in shown], [r["n"] for r in shown], xlabel="answers with the same verdict",
        )
    except Exception:  # a plot failure leaves the table in place
        plot = None
    return {"rows": rows, "overall": overall, "plot": plot}


def qa_context(store: RunStore) -> dict[str, Any]:
    """Everything the qa template shows, computed from the store."""
    questions = store.items(kind="question")
    answers = store.items(kind="answer")
    answer_keys = {a["key"] for a in answers}
    judged: dict[str, dict[str, dict[str, Any]]] = {}
    for j in store.judgments():
        if j["item_key"] in answer_keys:
            judged.setdefault(j["item_key"], {})[j["judge"]] = j
    judges = _ordered_judges({name for js in judged.values() for name in js} | {
        judge for judge, field in ITEM_VERDICT_FIELDS.items()
        if any(isinstance((a["data"] or {}).get(field), dict) for a in answers)
    })

    metrics: dict[str, dict[str, dict[str, Any]]] = {}
    for m in store.metrics():
        metrics.setdefault(m["name"], {})[m["subject"]] = m
    acc_names = sorted(n for n in metrics if n.startswith("accuracy."))
    acc_judges = _ordered_judges({n.removeprefix("accuracy.") for n in acc_names} | set(judges))

    # Candidates in order of first answer, then any that only appear in metrics.
    candidates: list[str] = []
    for a in answers:
        c = str((a["data"] or {}).get("candidate", "?"))
        if c not in candidates:
            candidates.append(c)
    for name in (*acc_names, "em.mean", "f1.mean"):
        for subject in metrics.get(name, {}):
            if subject not in candidates:
                candidates.append(subject)

    per_candidate = []
    for c in candidates:
        mine = [a for a in answers if str((a["data"] or {}).get("candidate", "?")) == c]
        unparsed = Counter(
            jname for a in mine for jname, j in judged.get(a["key"], {}).items() if j.get("error")
        )
        per_candidate.append({
            "candidate": c,
            "accuracy": [{"judge": j, "m": metrics.get(f"accuracy.{j}", {}).get(c), "unparsed": unparsed.get(j, 0)}
                         for j in acc_judges],
            "em": metrics.get("em.mean", {}).get(c),
            "f1": metrics.get("f1.mean", {}).get(c),
            "answered": sum(1 for a in mine if a["status"] == "done"),
            "errors": sum(1 for a in mine if a["status"] == "error"),
            "other": sum(1 for a in mine if a["status"] not in ("done", "error")),
        })

    # Question browser: questions in generation order, answers grouped under them.
    browser: dict[str, dict[str, Any]] = {}
    for q in questions:
        d = q["data"] if isinstance(q["data"], dict) else {}
        qid = str(d.get("question_id") or q["key"])
        browser[qid] = {"id": qid, "key": q["key"], "status": q["status"], "error": q["error"],
                        "error_cause": q["error_cause"], "data": d, "answers": [], "orphan": False}
    for a in answers:
        d = a["data"] if isinstance(a["data"], dict) else {}
        qid = str(d.get("question_id") or "?")
        if qid not in browser:
            browser[qid] = {"id": qid, "key": None, "status": None, "error": None, "error_cause": None,
                            "data": {"question": d.get("question"), "reference_answer": d.get("reference_answer")},
                            "answers": [], "orphan": True}
        j = judged.get(a["key"], {})
        browser[qid]["answers"].append({
            "key": a["key"], "status": a["status"], "error": a["error"], "error_cause": a["error_cause"],
            "candidate": d.get("candidate", "?"), "answer": d.get("answer"), "retrieved_ids": d.get("retrieved_ids"),
            "em": _score(d, j, "em"), "f1": _score(d, j, "f1"), "verdicts": _verdicts(a, j, judges),
        })
    primary = judges[0] if judges else None
    for q in browser.values():
        graded = [v for a in q["answers"] for v in a["verdicts"] if v["judge"] == primary and v["present"]]
        q["n_good"] = sum(1 for v in graded if v["cls"] == "good")
        q["n_graded"] = sum(1 for v in graded if v["cls"] != "err")
        q["n_errors"] = sum(1 for a in q["answers"] if a["status"] == "error") + sum(
            1 for a in q["answers"] for v in a["verdicts"] if v["present"] and v["cls"] == "err")

    return {
        "generation_stats": _generation_stats(store.get_artifact("generation_stats")),
        "summary": store.get_artifact("summary"),
        "acc_judges": acc_judges,
        "judges": judges,
        "primary": primary,
        "per_candidate": per_candidate,
        "questions": list(browser.values()),
        "n_answers": len(answers),
        "agreement": _agreement(answers, judged) if {WITH_REF, WITHOUT_REF} <= set(judges) else None,
        "judge_label": judge_label,
    }


def render_qa_section(store: RunStore) -> str:
    """HTML fragment of the qa protocol section."""
    return render_template("section_qa.html.j2", **qa_context(store))
