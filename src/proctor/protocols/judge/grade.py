"""One graded answer as a typed object, from the one judging path (`proctor.kit.shared.judges`).

Used by the `judge` protocol (every row of an answers file) and by `proctor.judge` (no run folder)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from proctor.kit.shared.answers import AnswerItem
from proctor.kit.shared.judges import Panel, judge_answer
from proctor.kit.steps import Judgment

DecidedBy = Literal["rule", "guard", "llm"]


class JudgedAnswer(BaseModel):
    """The verdict on one answer: `method` names what decided it (an equivalence rule, a guard, or `llm`
    / `llm_majority` / `llm_unanimous`); `decided_by` is its kind; `p_correct` is the LLM judge's
    probability of "correct" (None when a rule decided or the server gives no logprobs)."""

    model_config = ConfigDict(frozen=True)

    verdict: Literal["correct", "incorrect"]
    p_correct: float | None
    method: str
    decided_by: DecidedBy
    reason: str

    @property
    def correct(self) -> bool:
        return self.verdict == "correct"

    @property
    def model_call(self) -> bool:
        """Whether a model was asked (everything but a rule)."""
        return self.decided_by != "rule"


def decided_by(method: str, verdict: str) -> DecidedBy:
    """The kind of what decided a judgment of `judge_answer`: its LLM methods start with `llm`; a rule only
    ever says "correct" (without a call), a guard only turns an LLM "correct" into "incorrect"."""
    if method.startswith("llm"):
        return "llm"
    return "rule" if verdict == "correct" else "guard"


def from_judgment(j: Judgment) -> JudgedAnswer:
    data = j.data or {}
    method = str(data.get("method", "llm"))
    verdict: Literal["correct", "incorrect"] = "correct" if j.verdict == "correct" else "incorrect"
    p = data.get("p_correct")
    return JudgedAnswer(
        verdict=verdict,
        p_correct=None if p is None else float(p),
        method=method,
        decided_by=decided_by(method, verdict),
        reason=j.reason or "",
    )


def as_answer_item(row_id: str, question: str, reference: str, answer: str) -> AnswerItem:
    """What the judging path reads: an answer with its question and reference."""
    return AnswerItem(
        candidate="answers",
        question_id=row_id,
        question=question,
        reference_answer=reference,
        answer=answer,
        em=0.0,
        f1=0.0,
    )


async def grade(item: AnswerItem, panel: Panel, *, rules: bool = True, guards: bool = True) -> JudgedAnswer:
    """One answer through rules, the LLM panel (only when no rule is sure) and the guards."""
    j = await judge_answer(item, kind="with_reference", model=panel, rules=rules, guards=guards)
    return from_judgment(j)
