"""LLM judging of open answers, with the reference answer or from the judge's own knowledge.

One path for every protocol that judges open answers (qa, the reckon baselines, the interview) and for
bench/judge_agreement.py: deterministic equivalence first (`rules`), then the LLM judge — optionally
several samples (self-consistency) and several judge models (an ensemble) — then the guards after a
"correct" (`guards`). Each judgment records the method that decided it and, where the server gives
logprobs, the verdict's probability.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from proctor.errors import UserError
from proctor.judging import Verdict, judge_with_reference, judge_without_reference
from proctor.judging.equivalence import decide, veto
from proctor.judging.llm import DEFAULT_STYLE, OWN_VERDICT, JudgeStyle
from proctor.kit.context import RunContext
from proctor.kit.shared.answers import AnswerItem
from proctor.kit.steps import Judgment, Outcome
from proctor.models.base import Model

JudgeKind = Literal["with_reference", "without_reference"]
JUDGE_NAMES: dict[JudgeKind, str] = {
    "with_reference": "llm_with_reference",
    "without_reference": "llm_without_reference",
}
Combine = Literal["majority", "unanimous"]

# The verdict threshold of the judge with reference when the guards stand behind it: the embedded 1.5B
# gives right paraphrases and converted units P(correct) 0.3–0.5, and the guesses it credits from 0.3 are
# the ones the guards veto — on four labelled sets κ 0.82–0.95 against 0.73–0.91 at 0.5, and on a closed-book
# candidate the same 1 of 23 credited (bench/README.md).
GUARDED_THRESHOLD = 0.3


class PanelConfig(BaseModel):
    """How many LLM verdicts make one judgment (the `judge_panel:` section of a protocol that judges)."""

    model_config = ConfigDict(extra="forbid")

    samples: int = Field(
        1,
        ge=1,
        le=15,
        description="self-consistency: replies drawn per judge at `temperature` (1 = one greedy reply); "
        "the majority verdict wins (a tie is 'incorrect') and the agreement is recorded",
    )
    temperature: float = Field(0.7, gt=0, le=2, description="sampling temperature when samples > 1")
    ensemble: list[str] = Field(
        [],
        description="further judge models (keys of `models:`) that judge every answer besides the judge "
        "role; their verdicts are combined by `combine`",
    )
    combine: Combine = Field(
        "majority",
        description="majority (a tie is 'incorrect') or unanimous (every judge must say 'correct')",
    )
    verdict_only: bool = Field(
        DEFAULT_STYLE.verdict_only,
        description="ask for the verdict without a reason (a few tokens per judgment instead of ~50; the "
        "judgment's reason then states the verdict probability); false: a reason first, then the verdict "
        "(bench/judge_agreement.py, embedded 1.5B: see bench/README.md)",
    )
    threshold: float | None = Field(
        None,
        gt=0,
        lt=1,
        description="'correct' when the judge's P(correct), read from logprobs, reaches this; default: "
        f"{GUARDED_THRESHOLD} for the judge with reference when the guards are on (the small judge is too "
        f"strict on paraphrases and the guards catch the guesses it would credit), else {OWN_VERDICT} (the "
        "judge's own verdict); servers without logprobs keep their verdict. 0.3 is calibrated for the "
        "embedded 1.5B: with a weaker judge (the 0.5B) set 0.5 (bench/judge_agreement.py, "
        "bench/qa_closed_book.py)",
    )


@dataclass(frozen=True)
class Panel:
    """The judge models (the judge role first) and how their verdicts combine."""

    models: tuple[Model, ...]
    style: JudgeStyle = DEFAULT_STYLE
    combine: Combine = "majority"

    @classmethod
    def single(cls, model: Model) -> Panel:
        return cls((model,))

    @classmethod
    def from_config(cls, ctx: RunContext[Any], judge: Model, cfg: PanelConfig, *, field: str) -> Panel:
        """The judge role plus `cfg.ensemble`; a name that is not a key of `models:` is a user error."""
        extra = []
        for name in cfg.ensemble:
            if name not in ctx.models:
                raise UserError(
                    f"{field}.ensemble: '{name}' is not a key of `models:` "
                    f"(keys: {', '.join(sorted(ctx.models))}). Name judge models defined under `models:`."
                )
            extra.append(ctx.models[name])
        style = JudgeStyle(
            samples=cfg.samples,
            temperature=cfg.temperature,
            verdict_only=cfg.verdict_only,
            threshold=cfg.threshold,
        )
        return cls((judge, *extra), style=style, combine=cfg.combine)


def _combine(verdicts: Sequence[Verdict], combine: Combine) -> bool:
    n_correct = sum(v.correct for v in verdicts)
    if combine == "unanimous":
        return n_correct == len(verdicts)
    return n_correct * 2 > len(verdicts)


def _style(panel: Panel, kind: JudgeKind, guards: bool) -> JudgeStyle:
    """The panel's style with its threshold settled: the configured one, else `GUARDED_THRESHOLD` for a
    guarded judge with reference, else the judge's own verdict."""
    if panel.style.threshold is not None:
        return panel.style
    guarded = kind == "with_reference" and guards
    return replace(panel.style, threshold=GUARDED_THRESHOLD if guarded else OWN_VERDICT)


async def _llm(
    a: AnswerItem, kind: JudgeKind, panel: Panel, guards: bool
) -> tuple[bool, str, dict[str, Any]]:
    """The panel's verdict on one answer, its reason and what to record (probability, samples, votes)."""
    style = _style(panel, kind, guards)
    verdicts: list[Verdict] = []
    for model in panel.models:
        if kind == "with_reference":
            v = await judge_with_reference(
                model,
                question=a.question,
                answer=a.answer,
                reference=a.reference_answer,
                style=style,
            )
        else:
            v = await judge_without_reference(model, question=a.question, answer=a.answer, style=style)
        verdicts.append(v)
    correct = _combine(verdicts, panel.combine)
    probs = [v.p_correct for v in verdicts if v.p_correct is not None]
    data: dict[str, Any] = {
        "method": "llm" if len(verdicts) == 1 else f"llm_{panel.combine}",
        "p_correct": round(sum(probs) / len(probs), 4) if len(probs) == len(verdicts) else None,
    }
    if panel.style.samples > 1:
        data["samples"] = panel.style.samples
        data["agreement"] = round(min(v.agreement for v in verdicts), 4)
    if len(verdicts) > 1:
        data["votes"] = {v.judge: v.verdict for v in verdicts}
    reason = next((v.reason for v in verdicts if v.correct == correct), verdicts[0].reason)
    if len(verdicts) > 1:
        reason = f"{sum(v.correct for v in verdicts)} of {len(verdicts)} judges said correct; {reason}"
    return correct, reason, data


async def judge_answer(
    a: AnswerItem,
    *,
    kind: JudgeKind,
    model: Model | Panel,
    rules: bool = False,
    guards: bool = False,
) -> Judgment:
    """One answer's judgment: score 1/0 and the deciding method in its data — `llm` (or `llm_majority` /
    `llm_unanimous` for an ensemble), or with `rules` the rule of `proctor.judging.equivalence` that was sure
    (no model call; never for an answer that only repeats what the question says of the reference); with
    `guards`, an LLM "correct" that a guard of `proctor.judging.equivalence.veto` is sure of becomes
    "incorrect" (the guard's method recorded, the LLM's reason kept). The data also holds
    the verdict probability `p_correct` (None without logprobs) and, with samples or an ensemble, the
    agreement and the votes."""
    panel = model if isinstance(model, Panel) else Panel.single(model)
    if kind == "with_reference" and rules:
        rule = decide(a.answer, a.reference_answer, a.question)
        if rule is not None:
            return Judgment(
                verdict="correct",
                score=1.0,
                reason=f"{rule.method}: {rule.detail}",
                data={"method": rule.method, "p_correct": None},
            )
    correct, reason, data = await _llm(a, kind, panel, guards)
    guard = (
        veto(a.answer, a.reference_answer, a.question)
        if kind == "with_reference" and guards and correct
        else None
    )
    if guard is not None:
        return Judgment(
            verdict="incorrect",
            score=0.0,
            reason=f"{guard.method}: {guard.detail} (the judge said correct: {reason})",
            data={**data, "method": guard.method},
        )
    return Judgment(
        verdict="correct" if correct else "incorrect", score=1.0 if correct else 0.0, reason=reason, data=data
    )


async def judge_answers(
    ctx: RunContext[Any],
    answers: Sequence[tuple[str, AnswerItem]],
    *,
    kind: JudgeKind,
    model: Model | Panel,
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
        item_key=lambda unit: unit[0],
        judge=JUDGE_NAMES[kind],
        role=role,
    )
