"""KIEval's question sets: Q_S, a seeded sample of the seed file, and Q_V, the questions the interactor
and every evaluator answer right with confidence >= θ (from letter probabilities, or the share of
option shuffles answered right)."""

from __future__ import annotations

import math
from collections import Counter
from typing import ClassVar

from proctor.candidates.multiple_choice import letter_probs, parse_letter
from proctor.constants import LETTERS
from proctor.kit.context import RunContext
from proctor.kit.steps import Payload
from proctor.models.types import Completion
from proctor.prompts import render_messages
from proctor.protocols.kieval.config import Config
from proctor.protocols.kieval.result import ConfidentSetStats
from proctor.protocols.kieval.seeds import SeedQuestion


class ConfidenceCheck(Payload):
    """One checker model's answer to one option order of a seed question."""

    KIND: ClassVar[str] = "kieval_confidence"
    model: str
    question_id: str
    order: list[int]
    reply: str
    letter: str | None
    correct_letter: str
    correct: bool
    p_correct: float | None


def sample_questions(ctx: RunContext[Config], questions: list[SeedQuestion]) -> list[SeedQuestion]:
    """KIEval's Q_S: a seeded sample, kept in file order."""
    n = ctx.settings.num_questions
    if n is None or n >= len(questions):
        return list(questions)
    picked = sorted(int(i) for i in ctx.rng.choice(len(questions), size=n, replace=False))
    return [questions[i] for i in picked]


def _letter_probability(completion: Completion, n_choices: int, letter: str) -> float | None:
    """P(letter) among the option letters at the first generated token (top logprobs), if returned."""
    found = letter_probs(completion.logprobs, n_choices)
    return None if found is None else found[0].get(letter, 0.0)


def _distinct_orders(ctx: RunContext[Config], n: int, k: int) -> list[list[int]]:
    """`k` different option orders (all n! if there are fewer), drawn from the run's RNG."""
    want = min(k, math.factorial(n))
    orders: list[list[int]] = []
    while len(orders) < want:
        order = [int(i) for i in ctx.rng.permutation(n)]
        if order not in orders:
            orders.append(order)
    return orders


async def confident_set(
    ctx: RunContext[Config], questions: list[SeedQuestion], evaluators: list[str]
) -> tuple[list[SeedQuestion], dict[str, dict[str, float | None]], ConfidentSetStats]:
    """Q_V with each question's confidence per checker model, and the selection's statistics."""
    cs = ctx.settings.confident_set
    checkers = list(dict.fromkeys([ctx.role_model_name("interactor"), *evaluators]))
    # All shuffles drawn up front, in question order, so the run's RNG sequence never depends on timing.
    perms = {q.question_id: _distinct_orders(ctx, len(q.choices), cs.shuffles) for q in questions}
    checks = [(name, q, perm) for name in checkers for q in questions for perm in perms[q.question_id]]

    async def check(unit: tuple[str, SeedQuestion, list[int]]) -> ConfidenceCheck:
        name, q, perm = unit
        shuffled = [q.choices[j] for j in perm]
        messages = render_messages("kieval/mc_check", question=q.question, choices=shuffled, letters=LETTERS)
        c = await ctx.models[name].generate(
            messages,
            temperature=0.0,
            max_tokens=8,
            seed=ctx.config.seed,
            top_logprobs=0 if cs.method == "shuffles" else 10,
        )
        right = LETTERS[perm.index(q.answer_index)]
        letter = parse_letter(c.text, shuffled)
        return ConfidenceCheck(
            model=name,
            question_id=q.question_id,
            order=perm,
            reply=c.text.strip(),
            letter=letter,
            correct_letter=right,
            correct=letter == right,
            p_correct=None if cs.method == "shuffles" else _letter_probability(c, len(shuffled), right),
        )

    outcomes = await ctx.map(
        "kieval: confident set",
        checks,
        check,
        unit_id=lambda u: (u[0], u[1], u[2]),
        role=lambda u: "evaluator" if u[0] in evaluators else "interactor",
        output=ConfidenceCheck,
        context=lambda u: {"model": u[0], "question_id": u[1].question_id, "order": u[2]},
    )
    errors: Counter[str] = Counter()
    per_model: dict[tuple[str, str], list[float]] = {}
    methods: Counter[str] = Counter()
    for o in outcomes:
        name, q, _ = o.unit
        if o.value is None:
            errors[q.question_id] += 1
            continue
        d = o.value
        if d.p_correct is not None and cs.method != "shuffles":
            per_model.setdefault((q.question_id, name), []).append(float(d.p_correct))
            methods["logprobs"] += 1
        else:
            methods["logprobs unavailable: shuffles" if cs.method == "logprobs" else "shuffles"] += 1
            per_model.setdefault((q.question_id, name), []).append(1.0 if d.correct else 0.0)
    conf: dict[str, dict[str, float | None]] = {q.question_id: {} for q in questions}
    kept, low = [], 0
    for q in questions:
        for name in checkers:
            vals = per_model.get((q.question_id, name), [])
            conf[q.question_id][name] = sum(vals) / len(vals) if vals else None
        if errors[q.question_id]:
            continue
        if all((v is not None and v >= cs.threshold) for v in conf[q.question_id].values()):
            kept.append(q)
        else:
            low += 1
    stats = ConfidentSetStats(
        enabled=True,
        checked=len(questions),
        kept=len(kept),
        dropped_low_confidence=low,
        dropped_errors=sum(1 for q in questions if errors[q.question_id]),
        threshold=cs.threshold,
        shuffles=cs.shuffles,
        method=cs.method,
        confidence_from=dict(sorted(methods.items())),
        models=checkers,
    )
    return kept, conf, stats
