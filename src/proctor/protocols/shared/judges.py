"""LLM judging of open answers, with the reference answer or from the judge's own knowledge."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from proctor.judging import judge_with_reference, judge_without_reference
from proctor.judging.equivalence import decide, veto
from proctor.models.base import Model
from proctor.protocols.context import RunContext
from proctor.protocols.shared.answers import AnswerItem
from proctor.protocols.steps import Judgment, Outcome

JudgeKind = Literal["with_reference", "without_reference"]
JUDGE_NAMES: dict[JudgeKind, str] = {
    "with_reference": "llm_with_reference",
    "without_reference": "llm_without_reference",
}


async def judge_answer(
    a: AnswerItem,
    *,
    kind: JudgeKind,
    model: Model,
    rules: bool = False,
    guards: bool = False,
) -> Judgment:
    """One answer's judgment: score 1/0 and the deciding method in its data — `llm`, or with `rules` the
    rule of `proctor.judging.equivalence` that was sure (no model call); with `guards`, an LLM "correct"
    that a guard of `proctor.judging.equivalence.veto` is sure of becomes "incorrect" (the guard's method
    recorded, the LLM's reason kept). The one judging path of qa, the baselines and
    bench/judge_agreement.py."""
    if kind == "without_reference":
        v = await judge_without_reference(model, question=a.question, answer=a.answer)
        return Judgment(
            verdict=v.verdict, score=1.0 if v.correct else 0.0, reason=v.reason, data={"method": "llm"}
        )
    rule = decide(a.answer, a.reference_answer) if rules else None
    if rule is not None:
        return Judgment(
            verdict="correct", score=1.0, reason=f"{rule.method}: {rule.detail}", data={"method": rule.method}
        )
    v = await judge_with_reference(model, question=a.question, answer=a.answer, reference=a.reference_answer)
    guard = veto(a.answer, a.reference_answer) if guards and v.correct else None
    if guard is not None:
        return Judgment(
            verdict="incorrect",
            score=0.0,
            reason=f"{guard.method}: {guard.detail} (the judge said correct: {v.reason})",
            data={"method": guard.method},
        )
    return Judgment(
        verdict=v.verdict, score=1.0 if v.correct else 0.0, reason=v.reason, data={"method": "llm"}
    )


async def judge_answers(
    ctx: RunContext[Any],
    answers: Sequence[tuple[str, AnswerItem]],
    *,
    kind: JudgeKind,
    model: Model,
    role: str = "judge",
    description: str | None = None,
    rules: bool = False,
    guards: bool = False,
) -> list[Outcome[tuple[str, AnswerItem], Judgment]]:
    """Judge each (answer key, answer) with `judge_answer`; stored as judgments named `JUDGE_NAMES[kind]`."""

    async def judge(unit: tuple[str, AnswerItem]) -> Judgment:
        return await judge_answer(unit[1], kind=kind, model=model, rules=rules, guards=guards)

    return await ctx.judge(
        description or f"judging ({kind.replace('_', ' ')})",
        answers,
        judge,
        key=lambda unit: unit[0],
        judge=JUDGE_NAMES[kind],
        role=role,
    )
