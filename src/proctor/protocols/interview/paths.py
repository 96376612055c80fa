"""Knowledge for the extension questions: each base question's seed entities (named by the examiner,
linked to the context graph), a knowledge path per batch and round sampled from them, or — without the
graph, or for a batch none of whose entities links — the base questions' own reference text.

The path of (batch, round) does not depend on the candidate or the variant: every candidate at the same
tier gets the same extension question, so their answers compare and the examiner's calls are shared.
Each path's random choices come from a generator seeded by (run seed, batch, round), so a resumed run
draws the same paths in any order.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from pydantic import Field

from proctor.graph import ContextGraph, PathSampler
from proctor.kit.context import RunContext
from proctor.kit.steps import Outcome, Payload
from proctor.prompts import render_messages
from proctor.protocols.interview.base import BaseQuestion
from proctor.protocols.interview.config import Config

SEED_PROMPT = "interview/seed_entities"


class SeedEntities(Payload):
    """The entities the examiner named in one base question, and the graph entity each links to."""

    KIND: ClassVar[str] = "interview_seed_entities"
    question_id: str
    names: list[str]
    linked: list[str | None] = Field(default_factory=list)  # graph entity id per name (None: not linkable)


class PathStepRecord(Payload):
    entity_id: str
    entity: str
    chunk_id: str
    drawn_from: list[str]


class KnowledgeText(Payload):
    """The text an extension round's questions are written from, and how it was obtained."""

    KIND: ClassVar[str] = "interview_knowledge"
    batch: int
    round: int
    source: str  # path | reference (no graph) | unlinkable (no seed entity links: reference text)
    seed_question_id: str | None = None
    seed_name: str | None = None
    steps: list[PathStepRecord] = Field(default_factory=list)
    stopped: str | None = None  # hops | dead_end
    chunk_ids: list[str] = Field(default_factory=list)
    text: str


async def seed_entities(
    ctx: RunContext[Config], questions: list[BaseQuestion]
) -> list[Outcome[BaseQuestion, SeedEntities]]:
    """The entity names the examiner found in each question (a failed question is recorded, has none); the
    links to the graph are added to the stored items later (`link_seeds`)."""
    examiner = ctx.role("examiner")
    schema = {
        "type": "object",
        "properties": {"entities": {"type": "array", "items": {"type": "string"}, "maxItems": 6}},
        "required": ["entities"],
    }

    async def extract(q: BaseQuestion) -> SeedEntities:
        reply = await examiner.generate(
            render_messages(SEED_PROMPT, question=q.question, choices=q.choices),
            json_schema=schema,
            temperature=0.0,
            max_tokens=120,
        )
        names = [" ".join(str(n).split()) for n in reply.parsed.get("entities") or []]
        return SeedEntities(question_id=q.question_id, names=[n for n in names if n])

    return await ctx.map(
        "interview: seed entities",
        questions,
        extract,
        unit_id=lambda q: (q.question, q.choices),
        role="examiner",
        output=SeedEntities,
        context=lambda q: {"question_id": q.question_id, "question": q.question},
    )


def seed_names(outcomes: list[Outcome[BaseQuestion, SeedEntities]]) -> dict[str, list[str]]:
    """question id -> the entity names found in it (questions whose extraction failed are left out)."""
    return {o.unit.question_id: o.value.names for o in outcomes if o.value is not None}


async def link_seeds(
    ctx: RunContext[Config], outcomes: list[Outcome[BaseQuestion, SeedEntities]], knowledge: KnowledgeSource
) -> None:
    """Store each question's seed entities again with the graph entity each name links to."""

    def linked(o: Outcome[BaseQuestion, SeedEntities]) -> SeedEntities:
        assert o.value is not None
        names = o.value.names
        return SeedEntities(
            question_id=o.unit.question_id,
            names=names,
            linked=knowledge.links.get(o.unit.question_id, [None] * len(names)),
        )

    await ctx.revise(outcomes, linked)


class KnowledgeSource:
    """Where a batch's extension questions come from: a knowledge path on the graph (when given and a seed
    entity links), else the batch's own reference text."""

    def __init__(
        self, ctx: RunContext[Config], graph: ContextGraph | None, names: dict[str, list[str]]
    ) -> None:
        self.ctx = ctx
        self.graph = graph
        self.chunks = {c.chunk_id: c for c in ctx.corpus.chunks}
        self.names = names
        self.sampler: PathSampler | None = None
        self.links: dict[str, list[str | None]] = {}
        if graph is not None:
            self.sampler = PathSampler(graph, ctx.embedder, {k: c.text for k, c in self.chunks.items()})
            self.links = {
                qid: [(e.entity_id if (e := self.sampler.link(n)) is not None else None) for n in ns]
                for qid, ns in names.items()
            }
        self._vectors: np.ndarray | None = None

    def reference(self, batch: list[BaseQuestion], round_: int, source: str = "reference") -> KnowledgeText:
        """The batch's own reference text: each question's context, else its source chunks, else the corpus
        chunk most similar to the question and its answer."""
        parts: list[str] = []
        ids: list[str] = []
        for q in batch:
            if q.context:
                parts.append(q.context)
                continue
            known = [c for c in q.chunk_ids if c in self.chunks] or [
                self._nearest(f"{q.question} {q.answer}")
            ]
            for c in known:
                if c not in ids:
                    ids.append(c)
                    parts.append(self.chunks[c].text)
        return KnowledgeText(
            batch=batch[0].batch, round=round_, source=source, chunk_ids=ids, text="\n\n".join(parts)
        )

    def _nearest(self, text: str) -> str:
        if self._vectors is None:
            self._vectors = np.asarray(self.ctx.embedder.embed([c.text for c in self.ctx.corpus.chunks]))
        q = np.asarray(self.ctx.embedder.embed([text]))[0]
        return self.ctx.corpus.chunks[int(np.argmax(self._vectors @ q))].chunk_id

    def path(self, batch: list[BaseQuestion], round_: int) -> KnowledgeText:
        """The path for this batch and round (JudgeAgent: one seed entity drawn from the batch's linked
        entities, then `hops` moves), or the reference text when no entity links (source `unlinkable`)."""
        pool = [
            (q, name, eid)
            for q in batch
            for name, eid in zip(
                self.names.get(q.question_id, []), self.links.get(q.question_id, []), strict=False
            )
            if eid is not None
        ]
        if self.sampler is None or self.graph is None or not pool:
            return self.reference(batch, round_, "unlinkable")
        b = batch[0].batch
        rng = np.random.default_rng([self.ctx.config.seed, b, round_])
        q, name, eid = pool[int(rng.integers(len(pool)))]
        path = self.sampler.sample(self.graph.entities[eid], q.question, self.ctx.settings.hops, rng)
        ids = list(dict.fromkeys(path.chunk_ids))
        return KnowledgeText(
            batch=b,
            round=round_,
            source="path",
            seed_question_id=q.question_id,
            seed_name=name,
            steps=[
                PathStepRecord(
                    entity_id=s.entity_id, entity=s.entity, chunk_id=s.chunk_id, drawn_from=list(s.drawn_from)
                )
                for s in path.steps
            ],
            stopped=path.stopped,
            chunk_ids=ids,
            text="\n\n".join(self.chunks[c].text for c in ids),
        )
