"""Closed-book answerability: can an item be answered from the question and options alone?

The examiner (and any `exam.guessability_models`) answers each item with no context. An item's
guessability is the probability the model gives the correct option — from the option letters'
probabilities when the server returns logprobs (the embedded llama.cpp does), else the share of
`guessability_samples` answers at temperature 0.7 that pick it — averaged over the models. Items at or
above `exam.max_guessability` are dropped (they measure reading of the question, not of the corpus) and
counted with the other filters; the closed-book examiner's accuracy is a bias baseline next to the fixed
letter / longest / shortest ones.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, ClassVar

from proctor.candidates.multiple_choice import parse_letter, select_option
from proctor.constants import LETTERS
from proctor.errors import StepError
from proctor.estimates import Estimate
from proctor.prompts import prompt_version
from proctor.protocols.context import RunContext, work_key
from proctor.protocols.exam.config import Config
from proctor.protocols.exam.grading import PROMPT, answer_messages
from proctor.protocols.steps import Payload

SAMPLE_TEMPERATURE = 0.7


class Guess(Payload):
    """One model's closed-book answer to one item."""

    KIND: ClassVar[str] = "exam_guess"
    question_id: str
    model: str
    method: str  # letter_logprobs | sampling
    p_correct: float
    picked: str | None
    probs: dict[str, float] | None = None


async def guess(ctx: RunContext[Config], exam: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """question id -> {"guessability": mean p_correct over the models (None if every guess failed),
    "per_model": {model: p}, "picked": examiner's closed-book pick}."""
    cfg = ctx.settings
    models = [
        ctx.config.roles["examiner"],
        *[m for m in cfg.guessability_models if m != ctx.config.roles["examiner"]],
    ]
    version = prompt_version(PROMPT)

    async def one(unit: tuple[str, dict[str, Any]]) -> Guess:
        name, q = unit
        model = ctx.models[name]
        messages = answer_messages(q, [], [])
        n = len(q["choices"])
        sel = None
        try:
            sel = await select_option(model, messages, q["choices"], method="auto", top_logprobs=10)
        except StepError as e:  # the reply named no option: sample below
            if e.cause not in ("unparseable", "unsupported"):
                raise
        if sel is not None and sel.probs:
            p = round(sel.probs.get(q["answer"], 0.0), 6)
            return Guess(
                question_id=q["id"],
                model=name,
                method="letter_logprobs",
                p_correct=p,
                picked=sel.letter,
                probs=sel.probs,
            )
        picks = []
        for i in range(cfg.guessability_samples):
            c = await model.generate(
                messages, temperature=SAMPLE_TEMPERATURE, max_tokens=8, seed=ctx.config.seed + i
            )
            picks.append(parse_letter(c.text, q["choices"]))
        counts = Counter(p for p in picks if p)
        if not counts:
            raise StepError("no sampled answer named an option", cause="unparseable")
        top = max(LETTERS[:n], key=lambda x: (counts.get(x, 0), -LETTERS.index(x)))
        return Guess(question_id=q["id"], model=name, method="sampling",
                     p_correct=round(counts.get(q["answer"], 0) / len(picks), 6), picked=top)  # fmt: skip

    units = [(m, q) for q in exam for m in models]
    outcomes = await ctx.map(
        "exam: closed-book answerability",
        units,
        one,
        key=lambda u: work_key(
            "exg",
            ctx.models[u[0]].provider.identity(),
            u[1]["question"],
            u[1]["choices"],
            u[1]["answer"],
            version,
            cfg.guessability_samples,
            ctx.config.seed,
        ),
        role="examiner",
        output=Guess,
        context=lambda u: {"question_id": u[1]["id"], "model": u[0]},
    )
    out: dict[str, dict[str, Any]] = {
        q["id"]: {"guessability": None, "per_model": {}, "picked": None} for q in exam
    }
    for o in outcomes:
        if o.value is None:
            continue
        rec = out[o.value.question_id]
        rec["per_model"][o.value.model] = o.value.p_correct
        if o.value.model == models[0]:
            rec["picked"] = o.value.picked
    for rec in out.values():
        ps = list(rec["per_model"].values())
        rec["guessability"] = round(sum(ps) / len(ps), 6) if ps else None
    return out


def closed_book_baseline(exam: list[dict[str, Any]], guesses: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The closed-book examiner's accuracy on the exam (its argmax pick per item), Wilson interval."""
    picked = [(q, guesses.get(q["id"], {}).get("picked")) for q in exam]
    answered = [(q, p) for q, p in picked if p is not None]
    return Estimate.proportion(sum(1 for q, p in answered if p == q["answer"]), len(answered)).model_dump()
