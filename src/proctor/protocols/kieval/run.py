"""The KIEval protocol, top to bottom: seed questions -> Q_S sample -> (Q_V confident set) -> each
candidate's multiple-choice answer -> multi-round conversations (interactor asks, candidate replies,
evaluators score and may stop) -> scores and the contamination analysis.

Every unit of work is keyed by content and every conversation round is its own item, so a killed run
resumes each conversation at its first unfinished step and never repeats a call whose result was stored.
"""

from __future__ import annotations

from typing import Any

from proctor.kit.context import RunContext, work_key
from proctor.protocols.kieval.candidates import build_candidates, evaluator_names
from proctor.protocols.kieval.confident_set import confident_set, sample_questions
from proctor.protocols.kieval.config import Config
from proctor.protocols.kieval.conversations import KConversation, conversation_key, run_conversations
from proctor.protocols.kieval.seeds import load_seed_questions
from proctor.protocols.kieval.static_mc import answer_multiple_choice
from proctor.protocols.kieval.summary import summarise

Q_KIND = "kieval_question"


async def run(ctx: RunContext[Config]) -> dict[str, Any]:
    cfg = ctx.settings
    ctx.role("interactor")
    evaluators = evaluator_names(ctx)
    cands = build_candidates(ctx)
    loaded, stats = load_seed_questions(cfg.questions)
    sampled = sample_questions(ctx, loaded)
    stats["sampled"] = len(sampled)
    confidence: dict[str, dict[str, float | None]] = {}
    if cfg.confident_set.enabled:
        questions, confidence, stats["confident_set"] = await confident_set(ctx, sampled, evaluators)
    else:
        questions = sampled
        stats["confident_set"] = {"enabled": False}
    stats["used"] = len(questions)
    used = {q.question_id for q in questions}
    for q in sampled:
        ctx.store.put_item(
            work_key("kvq", q.to_dict()),
            Q_KIND,
            {**q.to_dict(), "used": q.question_id in used, "confidence": confidence.get(q.question_id)},
        )
    ctx.store.put_artifact("kieval_questions", stats)

    mc = await answer_multiple_choice(ctx, cands, questions)
    convs = [
        KConversation(
            conversation_key(ctx, o.unit[0], o.unit[1], evaluators), *o.unit, o.key, o.value, o.failure
        )
        for o in mc
    ]
    conversations = await run_conversations(ctx, convs, evaluators)
    return summarise(ctx, cands, mc, conversations, stats, evaluators)
