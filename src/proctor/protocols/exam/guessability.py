"""Closed-book answerability: can an item be answered from the question and options alone?

The examiner (and any `exam.guessability_models`) answers each item with no context, through the same
prompt and answer selection as grading (`select_option`). An item's guessability is the probability the
model gives the correct option — the option letters' probabilities from a one-token answer when the
server returns logprobs (the embedded llama.cpp does; a server with prompt logprobs gives the options'
log-likelihood softmax instead), else the share of `guessability_samples` answers sampled at temperature
0.7 (seeds `seed`, `seed + 1`, ...) that name it (a sample naming no option counts as not naming it) —
averaged over the models that answered. Items at or above `exam.max_guessability` are dropped (they
measure reading of the question, not of the corpus) and counted with the other filters; the closed-book
examiner's accuracy is a bias baseline next to the fixed letter / longest / shortest ones.

An item none of the models could answer (every sample named no option, or the calls failed) has no
guessability: it is kept, and the failure is recorded on its `exam_guess` item with its cause.
"""

from __future__ import annotations

import statistics
from collections import Counter
from typing import ClassVar

from proctor.candidates.multiple_choice import parse_letter, select_option
from proctor.constants import LETTERS
from proctor.errors import StepError
from proctor.estimates import Estimate
from proctor.kit.context import RunContext
from proctor.kit.steps import Payload
from proctor.models.base import Model
from proctor.models.types import Message
from proctor.protocols.exam.config import Config
from proctor.protocols.exam.exam_file import ExamQuestion
from proctor.protocols.exam.grading import answer_loglik_prompt, answer_messages
from proctor.protocols.exam.result import (
    ExamStats,
    GuessableItem,
    GuessSkipped,
    GuessStats,
    ItemGuessability,
    Rate,
    TopicGuess,
)

SAMPLE_TEMPERATURE = 0.7
TOP_LOGPROBS = 10
# Used for the per-topic guessable share when the filter is off (`max_guessability: null`).
REPORT_THRESHOLD = 0.75


class Guess(Payload):
    """One model's closed-book answer to one item."""

    KIND: ClassVar[str] = "exam_guess"
    question_id: str
    model: str
    method: str  # letter_logprobs | option_loglik | sampling
    p_correct: float
    picked: str | None  # most probable option (sampling: most frequent; ties to the earlier letter)
    probs: dict[str, float] | None = None  # letter -> probability (letter_logprobs, option_loglik)
    samples: dict[str, int] | None = None  # sampling: letter -> count ("none": named no option)


def p_from_probs(probs: dict[str, float], answer: str) -> float:
    """Guessability from option probabilities: the correct option's probability."""
    return round(float(probs.get(answer, 0.0)), 6)


def p_from_samples(picks: list[str | None], answer: str) -> float:
    """Guessability from sampled answers: the share that named the correct option (a sample naming
    no option counts as not naming it)."""
    if not picks:
        raise ValueError("no samples")
    return round(sum(1 for p in picks if p == answer) / len(picks), 6)


def guess_models(ctx: RunContext[Config]) -> list[str]:
    """The examiner first, then the reference models (keys of `models`)."""
    examiner = ctx.config.roles["examiner"]
    return [examiner, *dict.fromkeys(m for m in ctx.settings.guessability_models if m != examiner)]


async def _sample(
    model: Model, messages: list[Message], q: ExamQuestion, n: int, seed: int, max_tokens: int
) -> Guess:
    picks: list[str | None] = []
    for i in range(n):
        c = await model.generate(
            messages, temperature=SAMPLE_TEMPERATURE, max_tokens=max_tokens, seed=seed + i
        )
        picks.append(parse_letter(c.text, q.choices))
    counts = Counter(p for p in picks if p)
    if not counts:
        raise StepError(f"none of {n} sampled closed-book answers named an option", cause="unparseable")
    letters = LETTERS[: len(q.choices)]
    top = max(letters, key=lambda x: (counts.get(x, 0), -LETTERS.index(x)))
    return Guess(
        question_id=q.id,
        model="",
        method="sampling",
        p_correct=p_from_samples(picks, q.answer),
        picked=top,
        samples={**{x: counts.get(x, 0) for x in letters}, "none": sum(1 for p in picks if p is None)},
    )


async def answer_closed_book(
    model: Model, q: ExamQuestion, *, samples: int, seed: int, max_tokens: int
) -> Guess:
    """`model` answers item `q` with no context: option probabilities where the server gives them,
    else `samples` sampled answers. Raises StepError (cause `unparseable`) when no answer names an
    option; model-call failures propagate with their causes."""
    messages = answer_messages(q, [], [])
    try:
        sel = await select_option(
            model,
            messages,
            q.choices,
            method="auto",
            seed=seed,
            top_logprobs=TOP_LOGPROBS,
            generate_max_tokens=max_tokens,
            loglik_prompt=answer_loglik_prompt(q, [], []),
        )
    except StepError as e:  # the greedy reply named no option: the samples may
        if e.cause not in ("unparseable", "unsupported"):
            raise
        sel = None
    if sel is not None and sel.probs:
        return Guess(
            question_id=q.id,
            model="",
            method=sel.method,
            p_correct=p_from_probs(sel.probs, q.answer),
            picked=sel.letter,
            probs=sel.probs,
        )
    return await _sample(model, messages, q, samples, seed, max_tokens)


async def guess(ctx: RunContext[Config], exam: list[ExamQuestion]) -> dict[str, ItemGuessability]:
    """Question id -> its closed-book answerability (every model answers every item, through `ctx.map`:
    cached, resumable, failures recorded with their causes)."""
    cfg = ctx.settings
    models = guess_models(ctx)

    async def one(unit: tuple[str, ExamQuestion]) -> Guess:
        name, q = unit
        g = await answer_closed_book(
            ctx.models[name],
            q,
            samples=cfg.guessability_samples,
            seed=ctx.config.seed,
            max_tokens=cfg.generate_max_tokens,
        )
        return g.model_copy(update={"model": name})

    units = [(m, q) for q in exam for m in models]
    outcomes = await ctx.map(
        "exam: closed-book answerability",
        units,
        one,
        unit_id=lambda u: (u[0], u[1].question, u[1].choices, u[1].answer),
        role="examiner",
        output=Guess,
        context=lambda u: {"question_id": u[1].id, "model": u[0]},
    )
    out = {q.id: ItemGuessability() for q in exam}
    for o in outcomes:
        name, q = o.unit
        rec = out[q.id]
        if o.value is None:
            rec.failed[name] = o.failure.cause if o.failure else "error"
            continue
        rec.per_model[name] = o.value.p_correct
        rec.methods[name] = o.value.method
        rec.picked_key[name] = o.value.picked == q.answer
        if name == models[0]:
            rec.picked = o.value.picked
    for rec in out.values():
        ps = list(rec.per_model.values())
        rec.guessability = round(sum(ps) / len(ps), 6) if ps else None
    return out


def closed_book_accuracy(exam: list[ExamQuestion], guesses: dict[str, ItemGuessability]) -> Estimate:
    """The closed-book examiner's accuracy on `exam` (its most probable option per item), Wilson interval;
    items it could not answer are left out (n counts the answered ones)."""
    answered = [(q, g.picked) for q in exam if (g := guesses.get(q.id)) is not None and g.picked]
    return Estimate.proportion(sum(1 for q, p in answered if p == q.answer), len(answered))


def is_guessable(g: ItemGuessability, threshold: float, rule: str = "probability") -> bool:
    """Whether an item can be answered without the corpus. `readers_agree`: every closed-book reader
    picked the correct option (needs two readers that answered; with fewer, the probability rule);
    `probability`: the readers' mean probability of the correct option is at least `threshold`."""
    if rule == "readers_agree" and len(g.picked_key) >= 2:
        return all(g.picked_key.values())
    return g.guessability is not None and g.guessability >= threshold


def rule_used(guesses: dict[str, ItemGuessability], rule: str) -> str:
    """The rule that actually decided: readers_agree only where two or more readers answered."""
    if rule == "readers_agree" and any(len(g.picked_key) >= 2 for g in guesses.values()):
        return "readers_agree"
    return "probability"


def guess_stats(
    exam: list[ExamQuestion],
    guesses: dict[str, ItemGuessability],
    threshold: float | None,
    models: list[str],
    rule: str = "probability",
) -> GuessStats:
    """Guessability over the items before the filter: distribution, methods, failures, guessable share
    per topic (the source document), the closed-book examiner's accuracy, the items the filter drops."""
    values = [g for q in exam if (g := guesses[q.id].guessability) is not None]
    cut = threshold if threshold is not None else REPORT_THRESHOLD
    topics: dict[str, list[float]] = {}
    flagged: dict[str, list[bool]] = {}
    for q in exam:
        g = guesses[q.id].guessability
        if g is not None:
            topics.setdefault(str(q.topic or "unknown"), []).append(g)
            flagged.setdefault(str(q.topic or "unknown"), []).append(is_guessable(guesses[q.id], cut, rule))
    n_options = max((len(q.choices) for q in exam), default=4)
    return GuessStats(
        models=models,
        items=len(exam),
        measured=len(values),
        failed=dict(Counter(c for g in guesses.values() for c in g.failed.values())),
        methods=dict(Counter(m for g in guesses.values() for m in g.methods.values())),
        mean=round(statistics.fmean(values), 4) if values else None,
        median=round(statistics.median(values), 4) if values else None,
        chance=1.0 / n_options,
        histogram={f"{b / 10:.1f}": sum(1 for v in values if min(int(v * 10), 9) == b) for b in range(10)},
        threshold=cut,
        filter=threshold is not None,
        rule=rule_used(guesses, rule),
        guessable=sum(1 for q in exam if is_guessable(guesses[q.id], cut, rule)),
        guessable_by_topic={t: round(sum(fs) / len(fs), 4) for t, fs in sorted(flagged.items())},
        topics={
            t: TopicGuess(n=len(vs), guessable=sum(flagged[t]), mean=round(statistics.fmean(vs), 4))
            for t, vs in sorted(topics.items())
        },
        closed_book_examiner=Rate.model_validate(closed_book_accuracy(exam, guesses).model_dump()),
        guessable_items=[
            GuessableItem(
                id=q.id,
                question=q.question,
                answer=q.correct_option,
                topic=q.topic,
                guessability=guesses[q.id].guessability,
            )
            for q in exam
            if is_guessable(guesses[q.id], cut, rule)
        ],
        per_item={q.id: guesses[q.id].model_copy(deep=True) for q in exam},
    )


def filters_guessable(ctx: RunContext[Config]) -> bool:
    """True when the run measures guessability and drops the guessable items."""
    cfg = ctx.settings
    return cfg.guessability and cfg.max_guessability is not None and "examiner" in ctx.config.roles


async def guessability_step(
    ctx: RunContext[Config], exam: list[ExamQuestion], stats: ExamStats
) -> tuple[list[ExamQuestion], dict[str, ItemGuessability]]:
    """Measure every item's closed-book answerability, record it on the item (`guessability`, also in
    exam.jsonl) and in `stats.guessability`, and drop the guessable items when `max_guessability` is
    set (counted as filter `guessable`). Returns the exam kept and the measurements."""
    cfg = ctx.settings
    if not cfg.guessability or not exam:
        return exam, {}
    if "examiner" not in ctx.config.roles:
        stats.guessability = GuessSkipped(skipped="no examiner role to answer the items closed-book")
        return exam, {}
    guesses = await guess(ctx, exam)
    for q in exam:
        q.guessability = guesses[q.id].guessability
    stats.guessability = guess_stats(
        exam, guesses, cfg.max_guessability, guess_models(ctx), cfg.guessability_rule
    )
    if cfg.max_guessability is None:
        return exam, guesses
    kept = [q for q in exam if not is_guessable(guesses[q.id], cfg.max_guessability, cfg.guessability_rule)]
    stats.filtered = {**(stats.filtered or {}), "guessable": len(exam) - len(kept)}
    stats.kept = len(kept)
    target = cfg.question_target()
    if cfg.exam_file is None and target is not None and len(kept) < target:
        why = (
            f"{len(exam) - len(kept)} of the {len(exam)} that passed the other filters were answerable "
            f"closed-book ({_rule_text(rule_used(guesses, cfg.guessability_rule), cfg.max_guessability)})"
        )
        before = stats.target_missed
        stats.target_missed = (
            f"{before}; then {why}"
            if before
            else f"{len(kept)} questions kept, short of {_wanted(cfg)}: {why}"
        )
    return kept, guesses


def _wanted(cfg: Config) -> str:
    if cfg.target_questions is not None:
        return f"target_questions {cfg.target_questions}"
    return f"num_questions {cfg.num_questions}"


def _rule_text(rule: str, threshold: float) -> str:
    if rule == "readers_agree":
        return "every closed-book reader picked the correct option"
    return f"guessability >= max_guessability {threshold}"
