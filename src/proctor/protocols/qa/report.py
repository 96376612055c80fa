"""Report section of the reference-QA protocol (`qa`).

Reads the run record: the typed result (`QaResult`: accuracy per judge, EM, F1 per candidate, generation
stats), the `question` / `answer` items (typed payloads; failed ones with their cause) and the judgments per
answer (`em`, `f1`, `llm_with_reference`, `llm_without_reference`).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel

from proctor.kit.record import Run
from proctor.kit.shared.questions import GenerationStats, Question
from proctor.protocols.qa.result import QaResult
from proctor.protocols.qa.run import QaAnswer
from proctor.report import plots
from proctor.report._env import render_template
from proctor.report.evidence import evidence
from proctor.store.record import ItemRecord, JudgmentRecord

P = TypeVar("P", bound=BaseModel)

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
    answer: QaAnswer | None, judged: dict[str, JudgmentRecord], judges: list[str]
) -> list[dict[str, Any]]:
    """One verdict per LLM judge for an answer: the judgments table first, the item's own copy second."""
    out: list[dict[str, Any]] = []
    for judge in judges:
        row = judged.get(judge)
        copy = getattr(answer, ITEM_VERDICT_FIELDS[judge], None) if judge in ITEM_VERDICT_FIELDS else None
        if row is None and isinstance(copy, dict):
            row = JudgmentRecord(
                item_key="",
                judge=judge,
                verdict=copy.get("verdict"),
                score=copy.get("score"),
                reason=copy.get("reason"),
                data={"method": copy.get("method"), "p_correct": copy.get("p_correct")},
            )
        if row is None:
            out.append({"judge": judge, "present": False})
            continue
        data = row.data if isinstance(row.data, dict) else {}
        out.append(
            {
                "judge": judge,
                "present": True,
                "verdict": row.verdict,
                "score": row.score,
                "reason": row.reason,
                "error": row.error,
                "cls": verdict_class(row.verdict, row.score, row.error),
                "method": data.get("method"),
                "p_correct": data.get("p_correct"),
            }
        )
    return out


def _score(answer: QaAnswer | None, judged: dict[str, JudgmentRecord], name: str) -> float | None:
    value = getattr(answer, name, None) if answer is not None else None
    if value is None and name in judged and not judged[name].error:
        value = judged[name].score
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


def _generation_stats(stats: GenerationStats | None) -> list[dict[str, Any]]:
    """Rows of the generation-stats table; failure reasons by kind become sub-rows."""
    if stats is None:
        return []
    rows: list[dict[str, Any]] = [
        {"name": "planned", "value": stats.planned, "sub": [], "pct": False},
        {"name": "generated", "value": stats.generated, "sub": [], "pct": False},
        {"name": "failed", "value": stats.failed, "sub": [], "pct": False},
        {
            "name": "filtered",
            "value": sum(stats.filtered.values()),
            "sub": sorted(stats.filtered.items()),
            "pct": False,
        },
        {"name": "kept", "value": stats.kept, "sub": [], "pct": False},
    ]
    if stats.generated > 0:
        rows.append(
            {"name": "kept / generated", "value": stats.kept / stats.generated, "sub": [], "pct": True}
        )
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


@dataclass(frozen=True)
class _Answer:
    """An answer item as stored (status, error) with its typed payload when it is done."""

    item: ItemRecord
    value: QaAnswer | None
    context: dict[str, Any]  # what a failed item recorded about its unit (candidate, question)

    @property
    def candidate(self) -> str:
        return self.value.candidate if self.value else str(self.context.get("candidate", "?"))


Judged = dict[str, dict[str, JudgmentRecord]]  # answer key -> judge -> judgment


def _agreement(answers: list[_Answer], judged: Judged) -> dict[str, Any] | None:
    """Share of answers on which both LLM judges (with / without reference) return the same verdict."""
    per: dict[str, Counter[str]] = {}
    for a in answers:
        j = judged.get(a.item.key, {})
        w, wo = j.get(WITH_REF), j.get(WITHOUT_REF)
        if not (w and wo) or w.error or wo.error or w.verdict is None or wo.verdict is None:
            continue
        c = per.setdefault(a.candidate, Counter())
        c["n"] += 1
        if w.verdict.strip().lower() == wo.verdict.strip().lower():
            c["agree"] += 1
        else:
            cw = verdict_class(w.verdict, w.score, None)
            cwo = verdict_class(wo.verdict, wo.score, None)
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


def _per_candidate(
    answers: list[_Answer], judged: Judged, result: QaResult | None, acc_judges: list[str]
) -> list[dict[str, Any]]:
    """One row per candidate (in order of first answer, then any known only from the result)."""
    scores = result.candidates if result is not None else {}
    candidates = list(dict.fromkeys([a.candidate for a in answers] + list(scores)))
    rows = []
    for c in candidates:
        mine = [a for a in answers if a.candidate == c]
        unparsed = Counter(name for a in mine for name, j in judged.get(a.item.key, {}).items() if j.error)
        res = scores.get(c)
        accuracy = {
            WITH_REF: res.accuracy_with_reference if res else None,
            WITHOUT_REF: res.accuracy_without_reference if res else None,
        }
        rows.append(
            {
                "candidate": c,
                "accuracy": [
                    {"judge": j, "m": accuracy.get(j), "unparsed": unparsed.get(j, 0)} for j in acc_judges
                ],
                "em": res.em if res else None,
                "f1": res.f1 if res else None,
                "answered": sum(1 for a in mine if a.item.status == "done"),
                "errors": sum(1 for a in mine if a.item.status == "error"),
                "other": sum(1 for a in mine if a.item.status not in ("done", "error")),
            }
        )
    return rows


def _question_browser(
    questions: list[tuple[ItemRecord, Question | None]],
    answers: list[_Answer],
    judged: Judged,
    judges: list[str],
) -> list[dict[str, Any]]:
    """Questions in generation order, each with its candidates' answers, scores and verdicts."""
    browser: dict[str, dict[str, Any]] = {}

    def entry(qid: str, item: ItemRecord | None, data: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": qid,
            "key": item.key if item else None,
            "status": item.status if item else None,
            "error": item.error if item else None,
            "error_cause": item.error_cause if item else None,
            "data": _question_fields(data),
            "answers": [],
            "orphan": item is None,
        }

    for item, q in questions:
        qid = q.question_id if q else item.key
        browser[qid] = entry(qid, item, q.model_dump() if q else {})
    for a in answers:
        qid = a.value.question_id if a.value else str(a.context.get("question_id") or "?")
        if qid not in browser:
            fields = {
                "question": a.value.question if a.value else a.context.get("question"),
                "reference_answer": a.value.reference_answer
                if a.value
                else a.context.get("reference_answer"),
            }
            browser[qid] = entry(qid, None, fields)
        j = judged.get(a.item.key, {})
        browser[qid]["answers"].append(
            {
                "key": a.item.key,
                "status": a.item.status,
                "error": a.item.error,
                "error_cause": a.item.error_cause,
                "candidate": a.candidate,
                "answer": a.value.answer if a.value else None,
                "retrieved_ids": a.value.retrieved_ids if a.value else None,
                "em": _score(a.value, j, "em"),
                "f1": _score(a.value, j, "f1"),
                "verdicts": _verdicts(a.value, j, judges),
                "evidence": None,  # the prompts and replies, for a surprising answer (`_attach_evidence`)
            }
        )
    primary = judges[0] if judges else None
    for entry_ in browser.values():
        verdicts = [v for a in entry_["answers"] for v in a["verdicts"] if v["present"]]
        graded = [v for v in verdicts if v["judge"] == primary and v["cls"] != "err"]
        entry_["n_good"] = sum(1 for v in graded if v["cls"] == "good")
        entry_["n_graded"] = len(graded)
        entry_["n_failed"] = sum(1 for a in entry_["answers"] if a["status"] == "error")
        entry_["n_unparsed"] = sum(1 for v in verdicts if v["cls"] == "err")
    return list(browser.values())


def _surprising(answer: dict[str, Any]) -> bool:
    """A failed answer, a verdict other than correct (incorrect, partial, unparsed), or judges that
    disagree: what a reader wants the prompt and reply of."""
    if answer["status"] == "error":
        return True
    present = [v for v in answer["verdicts"] if v["present"]]
    return any(v["cls"] != "good" for v in present) or len({v["cls"] for v in present}) > 1


def _attach_evidence(run: Run, questions: list[dict[str, Any]]) -> None:
    """Each surprising answer of the question browser gets its evidence (`proctor.report.evidence`),
    embedded for the first ones in report order."""
    wanted = [a for q in questions for a in q["answers"] if _surprising(a)]
    found = evidence(run, [a["key"] for a in wanted])
    for a in wanted:
        a["evidence"] = found.get(a["key"])


def _decided_by(judged: Judged) -> list[dict[str, Any]]:
    """Per judge and deciding method: verdicts, how many carry a probability, and their mean P(correct)."""
    groups: dict[tuple[str, str], list[float | None]] = defaultdict(list)
    for js in judged.values():
        for name, j in js.items():
            if isinstance(j.data, dict) and j.data.get("method"):
                groups[(name, str(j.data["method"]))].append(j.data.get("p_correct"))
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


def _typed(item: ItemRecord, model: type[P]) -> P | None:
    """The payload of a done item; None for a failed or unfinished one (its error is shown instead)."""
    return item.payload(model) if item.status == "done" else None


def qa_context(run: Run) -> dict[str, Any]:
    """Everything the qa template shows, read from the run record."""
    result = run.result if isinstance(run.result, QaResult) else None
    questions = [(it, _typed(it, Question)) for it in run.items(kind=Question.KIND)]
    answers = [
        _Answer(
            it, _typed(it, QaAnswer), it.data if isinstance(it.data, dict) and it.status != "done" else {}
        )
        for it in run.items(kind=QaAnswer.KIND)
    ]
    answer_keys = {a.item.key for a in answers}
    judged: Judged = {}
    for j in run.judgments():
        if j.item_key in answer_keys:
            judged.setdefault(j.item_key, {})[j.judge] = j
    in_items = {
        judge
        for judge, field in ITEM_VERDICT_FIELDS.items()
        if any(a.value is not None and getattr(a.value, field) is not None for a in answers)
    }
    judges = _ordered_judges({name for js in judged.values() for name in js} | in_items)
    configured = set()
    if result is not None:
        for c in result.candidates.values():
            configured |= {WITH_REF} if c.accuracy_with_reference is not None else set()
            configured |= {WITHOUT_REF} if c.accuracy_without_reference is not None else set()
    acc_judges = _ordered_judges(configured | set(judges))
    browser = _question_browser(questions, answers, judged, judges)
    _attach_evidence(run, browser)
    return {
        "decided_by": _decided_by(judged),
        "generation_stats": _generation_stats(result.questions if result else None),
        "summary": result.model_dump(mode="json") if result else None,
        "acc_judges": acc_judges,
        "judges": judges,
        "primary": judges[0] if judges else None,
        "per_candidate": _per_candidate(answers, judged, result, acc_judges),
        "questions": browser,
        "n_answers": len(answers),
        "agreement": _agreement(answers, judged) if {WITH_REF, WITHOUT_REF} <= set(judges) else None,
        "judge_f1": (
            {
                "rows": [
                    (name, c.judge_f1_disagreement)
                    for name, c in result.candidates.items()
                    if c.judge_f1_disagreement is not None
                ],
                "examples": result.disagreements,
            }
            if result is not None and any(c.judge_f1_disagreement for c in result.candidates.values())
            else None
        ),
        "judge_label": judge_label,
        "traces": [
            {"candidate": a.value.candidate, "question": a.value.question, "trace": a.value.trace}
            for a in answers
            if a.value is not None and isinstance(a.value.trace, dict)
        ],
    }


def render(run: Run) -> str:
    """HTML fragment of the qa protocol section."""
    return render_template("qa/report.html.j2", **qa_context(run))
