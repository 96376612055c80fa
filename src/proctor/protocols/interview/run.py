"""The interview protocol (JudgeAgent), top to bottom: base questions -> batches -> stage 1, each candidate
answers the base questions (graded: letter, rules, judge) -> the corpus's context graph and each base
question's seed entities -> per variant: stage 2, extension rounds at the adaptive tier -> stage 3, feedback
per batch -> validation, the candidate re-answers its batch's base questions with the suggestions ->
ACC1 / ACC2 / CR / CtE, scores, tiers, the ablation table.

Base answers, the graph, seed entities, knowledge paths and generated questions are shared by every
variant and candidate where the method allows; every model call is a keyed unit, so a killed run resumes
where it stopped and a re-run of a finished config costs no call.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from proctor.candidates import SystemUnderTest
from proctor.config import CandidateConfig
from proctor.kit.context import RunContext
from proctor.kit.shared.graph import build_context_graph
from proctor.kit.steps import Outcome
from proctor.prompts import render_text
from proctor.protocols.interview.answers import Ask, InterviewAnswer, ask, grade
from proctor.protocols.interview.base import (
    BaseQuestion,
    batches,
    label_difficulty,
    load_base,
    sample,
    store_questions,
)
from proctor.protocols.interview.config import Config
from proctor.protocols.interview.difficulty import next_tier
from proctor.protocols.interview.extension import Interview, Tested, extend
from proctor.protocols.interview.feedback import Feedback, write_feedback
from proctor.protocols.interview.paths import (
    KnowledgeSource,
    KnowledgeText,
    link_seeds,
    seed_entities,
    seed_names,
)
from proctor.protocols.interview.result import BaseStats, InterviewResult
from proctor.protocols.interview.summary import VariantRun, summarise

SUGGESTIONS_PROMPT = "interview/with_suggestions"


async def run(ctx: RunContext[Config]) -> InterviewResult:
    cfg = ctx.settings
    ctx.role("examiner")
    judge_role = "judge" if "judge" in ctx.config.roles else "examiner"
    judge = ctx.role(judge_role)
    loaded, source = load_base(cfg)
    questions = await label_difficulty(ctx, sample(ctx, loaded))
    groups = batches(questions, cfg.batch_size)
    flat = [q for g in groups for q in g]
    await store_questions(ctx, flat)
    base_stats = BaseStats(
        **source.model_dump(),
        sampled=min(len(loaded), cfg.num_questions or len(loaded)),
        difficulty_sources=dict(Counter(q.difficulty_source for q in flat)),
        used=len(flat),
        batches=len(groups),
    )
    candidates = [
        (cc, ctx.candidate(cc, max_tokens=cfg.candidate_max_tokens)) for cc in ctx.config.candidates
    ]

    # Stage 1: benchmark grading (shared by every variant).
    base_asks = [
        Ask(
            candidate=cand,
            stage="base",
            variant=None,
            batch=q.batch,
            round=0,
            question_id=q.question_id,
            question=q.question,
            reference=q.answer,
            difficulty=q.difficulty or "medium",
            choices=tuple(q.choices),
            answer_index=q.answer_index,
            gold_ids=tuple(q.chunk_ids),
        )
        for _, cand in candidates
        for q in flat
    ]
    base_out = await ask(ctx, base_asks, "interview: base questions")
    base_verdicts = await grade(ctx, base_out, judge, role=judge_role)
    base_tested = {
        o.key: Tested(
            stage="base",
            round=0,
            question_id=o.unit.question_id,
            question=o.unit.question,
            reference=o.unit.reference,
            answer=o.value.answer if o.value is not None else None,
            difficulty=o.unit.difficulty,
            correct=base_verdicts.get(o.key),
            answer_key=o.key,
        )
        for o in base_out
    }
    base_key = {(o.unit.candidate.name, o.unit.question_id): o.key for o in base_out}

    # The context graph and the base questions' seed entities (only when a variant walks the graph).
    graph, graph_info = None, None
    if cfg.uses_graph:
        graph, graph_info = await build_context_graph(
            ctx, batch_size=cfg.graph_batch_size, max_entities=cfg.max_entities
        )
        seeds = await seed_entities(ctx, flat)
        knowledge = KnowledgeSource(ctx, graph, seed_names(seeds))
        await link_seeds(ctx, seeds, knowledge)
    else:
        knowledge = KnowledgeSource(ctx, None, {})

    results: dict[str, VariantRun] = {}
    for variant in cfg.variants:
        interviews: dict[tuple[str, int], Interview] = {}
        for cc, _ in candidates:
            for g in groups:
                tested = [base_tested[base_key[(cc.name, q.question_id)]] for q in g]
                iv = Interview(cc.name, g[0].batch, list(tested), [])
                iv.tiers.append(next_tier(iv.graded()) if variant != "no_adaptive" else "medium")
                interviews[(cc.name, g[0].batch)] = iv
        stats: Counter[str] = Counter()
        used: dict[str, KnowledgeText] = {}
        if variant in ("full", "no_graph", "no_adaptive") and cfg.rounds:
            used = await extend(
                ctx, variant, candidates, groups, interviews, knowledge, judge, stats, judge_role
            )
        feedback = await write_feedback(ctx, variant, list(interviews.values()))
        written = {(o.unit.candidate, o.unit.batch): o.value for o in feedback if o.value is not None}
        stats["feedback_failed"] = sum(1 for o in feedback if o.value is None)
        validation = await _validate(ctx, variant, candidates, groups, written)
        val_verdicts = await grade(ctx, validation, judge, role=judge_role)
        after = {(o.unit.candidate.name, o.unit.question_id): val_verdicts.get(o.key) for o in validation}
        stats["validation_unscored"] = sum(1 for o in validation if o.key not in val_verdicts)
        results[variant] = VariantRun(variant, interviews, written, after, stats, used)
    return summarise(ctx, flat, base_stats, results, graph, graph_info)


async def _validate(
    ctx: RunContext[Config],
    variant: str,
    candidates: Sequence[tuple[CandidateConfig, SystemUnderTest]],
    groups: list[list[BaseQuestion]],
    written: dict[tuple[str, int], Feedback],
) -> list[Outcome[Ask, InterviewAnswer]]:
    """Each candidate re-answers its batches' base questions with that batch's suggestions."""
    asks = []
    for cc, cand in candidates:
        for g in groups:
            fb = written.get((cc.name, g[0].batch))
            if fb is None:
                continue  # no feedback (its failure is recorded): nothing to validate
            for q in g:
                asks.append(
                    Ask(
                        candidate=cand,
                        stage="validation",
                        variant=variant,
                        batch=q.batch,
                        round=0,
                        question_id=q.question_id,
                        question=render_text(
                            f"{SUGGESTIONS_PROMPT}.user.j2", question=q.question, suggestions=fb.suggestions
                        ),
                        reference=q.answer,
                        difficulty=q.difficulty or "medium",
                        choices=tuple(q.choices),
                        answer_index=q.answer_index,
                        gold_ids=tuple(q.chunk_ids),
                    )
                )
    return await ask(ctx, asks, f"interview ({variant}): validation")
