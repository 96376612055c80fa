"""The KIEval protocol, top to bottom: seed questions -> Q_S sample -> (Q_V confident set) -> each
candidate's multiple-choice answer -> multi-round conversations (interactor asks, candidate replies,
evaluators score and may stop) -> scores and the contamination analysis.

Every unit of work goes through the kit's step runner and every conversation round is its own item, so
a killed run resumes each conversation at its first unfinished step and never repeats a call whose
result was stored.
"""

from __future__ import annotations

from proctor.kit.context import RunContext
from proctor.protocols.kieval.candidates import build_candidates, evaluator_names
from proctor.protocols.kieval.confident_set import confident_set, sample_questions
from proctor.protocols.kieval.config import Config
from proctor.protocols.kieval.conversations import KConversation, run_conversations
from proctor.protocols.kieval.result import ConfidentSetStats, KievalResult, QuestionStats
from proctor.protocols.kieval.seeds import QuestionItem, SeedQuestion, load_seed_questions
from proctor.protocols.kieval.static_mc import answer_multiple_choice
from proctor.protocols.kieval.summary import summarise


async def run(ctx: RunContext[Config]) -> KievalResult:
    cfg = ctx.settings
    ctx.role("interactor")
    evaluators = evaluator_names(ctx)
    cands = build_candidates(ctx)
    loaded, read = load_seed_questions(cfg.questions)
    sampled = sample_questions(ctx, loaded)
    confidence: dict[str, dict[str, float | None]] = {}
    if cfg.confident_set.enabled:
        questions, confidence, cs_stats = await confident_set(ctx, sampled, evaluators)
    else:
        questions, cs_stats = sampled, ConfidentSetStats(enabled=False)
    stats = QuestionStats(
        **read.model_dump(), sampled=len(sampled), confident_set=cs_stats, used=len(questions)
    )
    used = {q.question_id for q in questions}

    async def record(q: SeedQuestion) -> QuestionItem:
        return QuestionItem(
            **q.to_dict(), used=q.question_id in used, confidence=confidence.get(q.question_id)
        )

    await ctx.map(
        "kieval: questions",
        sampled,
        record,
        # Whether it is used (and how confidently) is derived from the checks: part of what the item is.
        unit_id=lambda q: (q, q.question_id in used, confidence.get(q.question_id)),
        role=None,
        output=QuestionItem,
    )

    mc = await answer_multiple_choice(ctx, cands, questions)
    convs = [KConversation(*o.unit, o.key, o.value, o.failure) for o in mc]
    conversations = await run_conversations(ctx, convs, evaluators)
    return summarise(ctx, cands, mc, conversations, stats, evaluators)
