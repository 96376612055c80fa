"""Report section of the reference-QA protocol (`qa`).

Reads: items `question` / `answer`, judgments per answer (`em`, `f1`, `llm_with_reference`,
`llm_without_reference`), metrics `accuracy.<judge>`, `em.mean`, `f1.mean` per candidate, and the
artifacts `generation_stats` and `summary`.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from proctor.kit.record import Run
from proctor.kit.shared.questions import Question
from proctor.protocols.qa.run import QaAnswer
from proctor.report import plots
from proctor.report._env import render_template
from proctor.store import RunStore

WITH_REF = "llm_with_reference"
WITHOUT_REF = "llm_without_reference"
SCORE_JUDGES = ("em", "f1")
JUDGE_LABELS = {
    WITH_REF: "judge with reference",
    WITHOUT_REF: "judge without reference",
    "em": "EM",
    "f1": "F1",
}
# Where the answer item itself carries an LLM verdict (used when the judgments table has none).
ITEM_VERDICT_FIELDS = {WITH_REF: "judge_with_reference", WITHOUT_REF: "judge_without_reference"}
GOOD = {"correct", "right", "yes", "true", "pass", "passed", "accept", "accepted", "equivalent", "supported"}
BAD = {
    "incorrect",
    "wrong",
    "no",
    "false",
    "fail",
    "failed",
    "reject",
    "rejected",
    "unsupported",
    "hallucinated",
}
GEN_STATS_ORDER = ("planned", "chunks_sampled", "generated", "parsed", "failed", "filtered", "kept")


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


def _verdicts(
    answer: dict[str, Any], judged: dict[str, dict[str, Any]], judges: list[str]
) -> list[dict[str, Any]]:
    """One verdict per LLM judge for an answer: the judgments table first, the item's own copy second."""
    data = answer["data"] if isinstance(answer["data"], dict) else {}
    out = []
    for judge in judges:
        row = judged.get(judge)
        if row is None and isinstance(data.get(ITEM_VERDICT_FIELDS.get(judge, "")), dict):
            v = data[ITEM_VERDICT_FIELDS[judge]]
            row = {
                "verdict": v.get("verdict"),
                "score": v.get("score"),
                "reason": v.get("reason"),
                "error": None,
                "data": {"method": v.get("method"), "p_correct": v.get("p_correct")},
            }
        if row is None:
            out.append({"judge": judge, "present": False})
            continue
        out.append(
            {
                "judge": judge,
                "present": True,
                "verdict": row.get("verdict"),
                "score": row.get("score"),
                "reason": row.get("reason"),
                "error": row.get("error"),
                "cls": verdict_class(row.get("verdict"), row.get("score"), row.get("error")),
                "method": (row.get("data") or {}).get("method"),
                "p_correct": (row.get("data") or {}).get("p_correct"),
            }
        )
    return out


def _score(data: dict[str, Any], judged: dict[str, dict[str, Any]], name: str) -> Any:
    value = data.get(name)
    if value is None and name in judged and not judged[name].get("error"):
        value = judged[name].get("score")
    return value


def _question_fields(d: dict[str, Any]) -> dict[str, Any]:
    """A question's data with every field the template reads (absent ones as None)."""
    fields = (
        "question_id",
        "question",
        "reference_answer",
        "source",
        "source_chunk_ids",
        "generator",
        "prompt_version",
    )
    return {**{f: None for f in fields}, **d}


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
            sub = sorted(v.items(), key=lambda kv: str(kv[0]))
            rows.append({"name": k, "value": total, "sub": sub, "pct": False})
        elif isinstance(v, list):
            rows.append({"name": k, "value": len(v), "sub": [(str(x), None) for x in v], "pct": False})
        else:
            rows.append({"name": k, "value": v, "sub": [], "pct": False})
    kept, generated = stats.get("kept"), stats.get("generated")
    if isinstance(kept, int) and isinstance(generated, int) and generated > 0:
        rows.append({"name": "kept / generated", "value": kept / generated, "sub": [], "pct": True})
    return rows


def _agreement_row(candidate: str, c: Counter[str]) -> dict[str, Any]:
    return {
        "candidate": candidate,
        "n": c["n"],
        "agree": c["agree"],
        "share": c["agree"] / c["n"],
        "only_with": c["only_with"],
        "only_without": c["only_without"],
    }


def _agreement(
    answers: list[dict[str, Any]], judged: dict[str, dict[str, dict[str, Any]]]
) -> dict[str, Any] | None:
    """Share of answers on which both LLM judges (with / without reference) return the same verdict."""
    per: dict[str, Counter[str]] = {}
    for a in answers:
        j = judged.get(a["key"], {})
        w, wo = j.get(WITH_REF), j.get(WITHOUT_REF)
        if (
            not (w and wo)
            or w.get("error")
            or wo.get("error")
            or w.get("verdict") is None
            or wo.get("verdict") is None
        ):
            continue
        c = per.setdefault(_candidate_of(a), Counter())
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
    rows = [_agreement_row(k, c) for k, c in per.items()]
    overall = _agreement_row("all candidates", total)
    plot = None
    try:
        shown = [overall, *rows] if len(rows) > 1 else rows
        plot = plots.share_bars(
            "Judge agreement (with vs. without reference)",
            [r["candidate"] for r in shown],
            [r["share"] for r in shown],
            [r["n"] for r in shown],
            xlabel="answers with the same verdict",
        )
    except Exception:  # a plot failure leaves the table in place
        plot = None
    return {"rows": rows, "overall": overall, "plot": plot}


def _candidate_of(item: dict[str, Any]) -> str:
    return str((item["data"] or {}).get("candidate", "?"))


def _per_candidate(
    answers: list[dict[str, Any]],
    judged: dict[str, dict[str, dict[str, Any]]],
    metrics: dict[str, dict[str, dict[str, Any]]],
    acc_judges: list[str],
) -> list[dict[str, Any]]:
    """One row per candidate (in order of first answer, then any known only from metrics)."""
    candidates = list(dict.fromkeys(_candidate_of(a) for a in answers))
    for name in sorted(metrics):
        if name.startswith("accuracy.") or name in ("em.mean", "f1.mean"):
            candidates += [c for c in metrics[name] if c not in candidates]
    by_candidate: dict[str, list[dict[str, Any]]] = {c: [] for c in candidates}
    for a in answers:
        by_candidate[_candidate_of(a)].append(a)
    rows = []
    for c, mine in by_candidate.items():
        unparsed = Counter(
            name for a in mine for name, j in judged.get(a["key"], {}).items() if j.get("error")
        )
        rows.append(
            {
                "candidate": c,
                "accuracy": [
                    {"judge": j, "m": metrics.get(f"accuracy.{j}", {}).get(c), "unparsed": unparsed.get(j, 0)}
                    for j in acc_judges
                ],
                "em": metrics.get("em.mean", {}).get(c),
                "f1": metrics.get("f1.mean", {}).get(c),
                "answered": sum(1 for a in mine if a["status"] == "done"),
                "errors": sum(1 for a in mine if a["status"] == "error"),
                "other": sum(1 for a in mine if a["status"] not in ("done", "error")),
            }
        )
    return rows


def _question_browser(
    questions: list[dict[str, Any]],
    answers: list[dict[str, Any]],
    judged: dict[str, dict[str, dict[str, Any]]],
    judges: list[str],
) -> list[dict[str, Any]]:
    """Questions in generation order, each with its candidates' answers, scores and verdicts."""
    browser: dict[str, dict[str, Any]] = {}

    def entry(qid: str, item: dict[str, Any] | None, data: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": qid,
            "key": item["key"] if item else None,
            "status": item["status"] if item else None,
            "error": item["error"] if item else None,
            "error_cause": item["error_cause"] if item else None,
            "data": _question_fields(data),
            "answers": [],
            "orphan": item is None,
        }

    for q in questions:
        d = q["data"] if isinstance(q["data"], dict) else {}
        qid = str(d.get("question_id") or q["key"])
        browser[qid] = entry(qid, q, d)
    for a in answers:
        d = a["data"] if isinstance(a["data"], dict) else {}
        qid = str(d.get("question_id") or "?")
        if qid not in browser:
            fields = {"question": d.get("question"), "reference_answer": d.get("reference_answer")}
            browser[qid] = entry(qid, None, fields)
        j = judged.get(a["key"], {})
        browser[qid]["answers"].append(
            {
                "key": a["key"],
                "status": a["status"],
                "error": a["error"],
                "error_cause": a["error_cause"],
                "candidate": d.get("candidate", "?"),
                "answer": d.get("answer"),
                "retrieved_ids": d.get("retrieved_ids"),
                "em": _score(d, j, "em"),
                "f1": _score(d, j, "f1"),
                "verdicts": _verdicts(a, j, judges),
            }
        )
    primary = judges[0] if judges else None
    for q in browser.values():
        verdicts = [v for a in q["answers"] for v in a["verdicts"] if v["present"]]
        graded = [v for v in verdicts if v["judge"] == primary and v["cls"] != "err"]
        q["n_good"] = sum(1 for v in graded if v["cls"] == "good")
        q["n_graded"] = len(graded)
        q["n_failed"] = sum(1 for a in q["answers"] if a["status"] == "error")
        q["n_unparsed"] = sum(1 for v in verdicts if v["cls"] == "err")
    return list(browser.values())


def _decided_by(judged: dict[str, dict[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Per judge and deciding method: verdicts, how many carry a probability, and their mean P(correct)."""
    groups: dict[tuple[str, str], list[float | None]] = defaultdict(list)
    for js in judged.values():
        for name, j in js.items():
            data = j.get("data")
            if isinstance(data, dict) and data.get("method"):
                groups[(name, str(data["method"]))].append(data.get("p_correct"))
    rows = []
    for (judge, method), ps in sorted(groups.items()):
        known = [p for p in ps if p is not None]
        rows.append(
            {
                "judge": judge,
                "method": method,
                "n": len(ps),
                "n_p": len(known),
                "mean_p": sum(known) / len(known) if known else None,
            }
        )
    return rows


def qa_context(store: RunStore) -> dict[str, Any]:
    """Everything the qa template shows, computed from the store."""
    questions = store.items(kind=Question.KIND)
    answers = store.items(kind=QaAnswer.KIND)
    answer_keys = {a["key"] for a in answers}
    judged: dict[str, dict[str, dict[str, Any]]] = {}
    for j in store.judgments():
        if j["item_key"] in answer_keys:
            judged.setdefault(j["item_key"], {})[j["judge"]] = j
    in_items = {
        judge
        for judge, field in ITEM_VERDICT_FIELDS.items()
        if any(isinstance((a["data"] or {}).get(field), dict) for a in answers)
    }
    judges = _ordered_judges({name for js in judged.values() for name in js} | in_items)
    metrics: dict[str, dict[str, dict[str, Any]]] = {}
    for m in store.metrics():
        metrics.setdefault(m["name"], {})[m["subject"]] = m
    acc_judges = _ordered_judges(
        {n.removeprefix("accuracy.") for n in metrics if n.startswith("accuracy.")} | set(judges)
    )
    return {
        "decided_by": _decided_by(judged),
        "generation_stats": _generation_stats(store.get_artifact("generation_stats")),
        "summary": store.get_artifact("summary"),
        "acc_judges": acc_judges,
        "judges": judges,
        "primary": judges[0] if judges else None,
        "per_candidate": _per_candidate(answers, judged, metrics, acc_judges),
        "questions": _question_browser(questions, answers, judged, judges),
        "n_answers": len(answers),
        "agreement": _agreement(answers, judged) if {WITH_REF, WITHOUT_REF} <= set(judges) else None,
        "judge_label": judge_label,
        "traces": [
            {"candidate": d.get("candidate"), "question": d.get("question"), "trace": d["trace"]}
            for a in answers
            if isinstance((d := a["data"] or {}).get("trace"), dict)
        ],
    }


def render(run: Run) -> str:
    # Kit 2 transition: this section still reads the store directly; it is to read `run` (typed).
    return _render_store(RunStore(run.folder / "run.sqlite"))


def _render_store(store: RunStore) -> str:
    """HTML fragment of the qa protocol section."""
    return render_template("qa/report.html.j2", **qa_context(store))
