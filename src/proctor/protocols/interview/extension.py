"""Stage 2, the interactive extension: per batch and round, the examiner writes questions at the
candidate's current tier from the round's knowledge text, the candidate answers, the answers are graded and
the tier moves. Rounds run one after another (each needs the last one's grades); within a round every
(candidate, batch) runs concurrently, and every step is a keyed unit, so a killed run resumes mid-round.

A generated question whose answer is not supported by the knowledge text (too few of its content words
occur there), or whose answer the question itself states, is dropped and counted; a round whose
generation failed or kept nothing asks nothing, is counted, and leaves the tier as it was.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated, ClassVar

from proctor.candidates import SystemUnderTest
from proctor.config import CandidateConfig
from proctor.errors import StepError
from proctor.ids import content_id
from proctor.kit.context import RunContext
from proctor.kit.result import OmitNone, Part
from proctor.kit.shared.question_file import Difficulty
from proctor.kit.shared.questions import states_answer, support
from proctor.kit.steps import Outcome, Payload
from proctor.models.base import Model
from proctor.prompts import render_messages
from proctor.protocols.interview.answers import Ask, grade
from proctor.protocols.interview.answers import ask as ask_candidates
from proctor.protocols.interview.base import BaseQuestion
from proctor.protocols.interview.config import Config
from proctor.protocols.interview.difficulty import next_tier
from proctor.protocols.interview.paths import KnowledgeSource, KnowledgeText

GENERATE_PROMPT = "interview/generate"
# Part of the generation unit's id: stored questions are re-filtered when the filters (code, not a prompt
# or a model, so not a recorded dependency) change.
FILTERS_VERSION = 3


class GeneratedQuestion(Payload):
    question: str
    answer: str
    support: float  # share of the answer's content words found in the knowledge text
    kept: bool
    dropped: str | None = None  # unsupported (answer not in the text) | answer_in_question


class GeneratedRound(Payload):
    """What the examiner wrote for one knowledge text at one tier."""

    KIND: ClassVar[str] = "interview_generated"
    batch: int
    round: int
    tier: Difficulty
    knowledge_key: str
    questions: list[GeneratedQuestion]


class RoundInfo(Part):
    """One extension round of a candidate's interview on a batch: the tier, the knowledge text it was
    written from, what the examiner wrote (absent when the generation failed) and how many were asked."""

    round: int
    tier: Difficulty
    knowledge_key: str
    asked: int = 0
    generated: Annotated[list[GeneratedQuestion] | None, OmitNone()] = None


@dataclass
class Tested:
    """One graded (or ungradable) question of a candidate's interview on a batch."""

    stage: str  # base | extension
    round: int
    question_id: str
    question: str
    reference: str
    answer: str | None
    difficulty: Difficulty
    correct: bool | None  # None: the answer or its grading failed (unscored)
    answer_key: str


@dataclass
class Interview:
    """A candidate's interview on one batch under one variant."""

    candidate: str
    batch: int
    tested: list[Tested]
    tiers: list[Difficulty]  # after the base questions, then after each round
    rounds: list[RoundInfo] = field(default_factory=list)

    def graded(self) -> list[tuple[Difficulty, bool]]:
        return [(t.difficulty, t.correct) for t in self.tested if t.correct is not None]


async def generate(
    ctx: RunContext[Config], units: Sequence[tuple[KnowledgeText, str, Difficulty]]
) -> dict[tuple[str, Difficulty], GeneratedRound | None]:
    """(knowledge key, tier) -> the generated questions, for each distinct unit; None where it failed."""
    cfg = ctx.settings
    examiner = ctx.role("examiner")
    n = cfg.questions_per_round
    schema = {
        "type": "object",
        "properties": {
            "questions": {
                "type": "array",
                "minItems": 1,
                "maxItems": n,
                "items": {
                    "type": "object",
                    "properties": {"question": {"type": "string"}, "answer": {"type": "string"}},
                    "required": ["question", "answer"],
                },
            }
        },
        "required": ["questions"],
    }

    async def write(unit: tuple[KnowledgeText, str, Difficulty]) -> GeneratedRound:
        know, kkey, tier = unit
        reply = await examiner.generate(
            render_messages(GENERATE_PROMPT, text=know.text, tier=tier, n=n, entity=know.seed_name),
            json_schema=schema,
            temperature=0.0,
            max_tokens=cfg.examiner_max_tokens,
            seed=ctx.config.seed + know.round,
        )
        out = []
        for q in (reply.parsed.get("questions") or [])[:n]:
            question = " ".join(str(q.get("question", "")).split())
            answer = " ".join(str(q.get("answer", "")).split())
            if not question or not answer:
                continue
            s = support(answer, know.text)
            # A question that states its own answer measures nothing (small examiners write many).
            dropped = (
                "unsupported"
                if s < cfg.support_threshold
                else "answer_in_question"
                if states_answer(question, answer)
                else None
            )
            out.append(
                GeneratedQuestion(
                    question=question,
                    answer=answer,
                    support=round(s, 4),
                    kept=dropped is None,
                    dropped=dropped,
                )
            )
        if not out:
            raise StepError("the examiner wrote no question with an answer", cause="invalid_output")
        return GeneratedRound(
            batch=know.batch, round=know.round, tier=tier, knowledge_key=kkey, questions=out
        )

    distinct = list({(kkey, tier): (k, kkey, tier) for k, kkey, tier in units}.values())
    outcomes = await ctx.map(
        "interview: writing extension questions",
        distinct,
        write,
        unit_id=lambda u: (FILTERS_VERSION, u[0], u[2]),
        role="examiner",
        output=GeneratedRound,
        context=lambda u: {"batch": u[0].batch, "round": u[0].round, "tier": u[2], "knowledge_key": u[1]},
    )
    return {(o.unit[1], o.unit[2]): o.value for o in outcomes}


async def record_knowledge(
    ctx: RunContext[Config], texts: Sequence[KnowledgeText], description: str
) -> list[Outcome[KnowledgeText, KnowledgeText]]:
    """Record each knowledge text as an item (no model call); its key names it in the rounds and in the
    generated questions."""

    async def keep(know: KnowledgeText) -> KnowledgeText:
        return know

    return await ctx.map(description, texts, keep, unit_id=lambda k: k, role=None, output=KnowledgeText)


async def extend(
    ctx: RunContext[Config],
    variant: str,
    candidates: Sequence[tuple[CandidateConfig, SystemUnderTest]],
    batches: Sequence[list[BaseQuestion]],
    interviews: dict[tuple[str, int], Interview],
    knowledge: KnowledgeSource,
    judge: Model,
    stats: Counter[str],
    judge_role: str,
) -> dict[str, KnowledgeText]:
    """Run the extension rounds of `variant`, appending to each (candidate, batch) interview in place;
    returns the knowledge texts used, by key."""
    cfg = ctx.settings
    adaptive = variant != "no_adaptive"
    use_graph = variant in ("full", "no_adaptive")
    used: dict[str, KnowledgeText] = {}
    for r in range(1, cfg.rounds + 1):
        texts: dict[int, tuple[str, KnowledgeText]] = {}
        round_texts = [
            knowledge.path(batch, r) if use_graph else knowledge.reference(batch, r) for batch in batches
        ]
        for k in await record_knowledge(ctx, round_texts, f"interview ({variant}): knowledge round {r}"):
            know = k.unit
            texts[know.batch] = (k.key, know)
            used[k.key] = know
            stats[f"knowledge_{know.source}"] += 1
        tier_of = {key: (next_tier(iv.graded()) if adaptive else "medium") for key, iv in interviews.items()}
        generated = await generate(
            ctx, [(texts[b][1], texts[b][0], tier_of[(c, b)]) for (c, b) in interviews]
        )
        asks: list[Ask] = []
        by_name = {cc.name: cand for cc, cand in candidates}
        for (name, b), iv in interviews.items():
            kkey, know = texts[b]
            tier = tier_of[(name, b)]
            gen = generated.get((kkey, tier))
            info = RoundInfo(round=r, tier=tier, knowledge_key=kkey)
            iv.rounds.append(info)
            if gen is None:
                stats["rounds_generation_failed"] += 1
                continue
            info.generated = list(gen.questions)
            kept = [q for q in gen.questions if q.kept]
            stats["generated"] += len(gen.questions)
            for q in gen.questions:
                if q.dropped:
                    stats[f"dropped_{q.dropped}"] += 1
            if not kept:
                stats["rounds_without_question"] += 1
                continue
            cand = by_name[name]
            for i, q in enumerate(kept):
                qid = f"iq_{content_id(q.question, q.answer)}"  # the question's id, not a store key
                asks.append(
                    Ask(
                        candidate=cand,
                        stage="extension",
                        variant=variant,
                        batch=b,
                        round=r,
                        question_id=qid,
                        question=q.question,
                        reference=q.answer,
                        difficulty=tier,
                        gold_ids=tuple(know.chunk_ids),
                        slot=i,
                    )
                )
                info.asked += 1
        outcomes = await ask_candidates(ctx, asks, f"interview ({variant}): extension round {r}")
        verdicts = await grade(ctx, outcomes, judge, role=judge_role)
        for o in outcomes:
            a = o.unit
            interviews[(a.candidate.name, a.batch)].tested.append(
                Tested(
                    stage="extension",
                    round=r,
                    question_id=a.question_id,
                    question=a.question,
                    reference=a.reference,
                    answer=o.value.answer if o.value is not None else None,
                    difficulty=a.difficulty,
                    correct=verdicts.get(o.key),
                    answer_key=o.key,
                )
            )
        for iv in interviews.values():
            iv.tiers.append(next_tier(iv.graded()) if adaptive else "medium")
    return used
