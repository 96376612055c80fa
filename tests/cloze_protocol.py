"""A complete protocol written only against the kit: a cloze test. Each chunk loses its longest word;
every candidate fills the blank; exact match decides. Resume, error records, progress, cost accounting
and the report come from the kit — this file has no code for them."""

from __future__ import annotations

import re
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from proctor.config import CandidateConfig
from proctor.estimates import Estimate
from proctor.protocols.context import RunContext, work_key
from proctor.protocols.registry import Protocol
from proctor.protocols.steps import Payload


class ClozeConfig(BaseModel):
    """Cloze test: blank one word per chunk and ask for it."""

    model_config = ConfigDict(extra="forbid")
    num_items: int = Field(5, ge=1, description="chunks to blank (the first ones of the corpus)")


class Blank(Payload):
    KIND: ClassVar[str] = "cloze_answer"
    candidate: str
    text: str
    gold: str
    answer: str
    correct: bool


async def run(ctx: RunContext[ClozeConfig]) -> dict[str, Any]:
    blanks = []
    for chunk in ctx.corpus.chunks[: ctx.settings.num_items]:
        gold = max(re.findall(r"[A-Za-z]+", chunk.text), key=len)
        blanks.append((chunk.chunk_id, gold, chunk.text.replace(gold, "____", 1)))
    units = [(c, b) for c in ctx.config.candidates for b in blanks]

    async def fill(unit: tuple[CandidateConfig, tuple[str, str, str]]) -> Blank:
        c, (_, gold, text) = unit
        prompt = f"Fill the blank with one word; reply with the word only.\n\n{text}"
        reply = await ctx.models[c.model].generate([{"role": "user", "content": prompt}], max_tokens=8)
        word = reply.text.strip().strip(".").lower()
        return Blank(candidate=c.name, text=text, gold=gold, answer=word, correct=word == gold.lower())

    outcomes = await ctx.map(
        "filling blanks",
        units,
        fill,
        key=lambda u: work_key("cloze", ctx.candidate_identity(u[0]), u[1][0]),
        role="candidate",
        output=Blank,
        context=lambda u: {"candidate": u[0].name, "gold": u[1][1]},
    )
    summary: dict[str, Any] = {"candidates": {}}
    for c in ctx.config.candidates:
        done = [o.value for o in outcomes if o.unit[0] is c and o.value is not None]
        acc = Estimate.proportion(sum(b.correct for b in done), len(done))
        ctx.store.put_metric("accuracy.cloze", c.name, acc.value, lo=acc.lo, hi=acc.hi, n=acc.n)
        summary["candidates"][c.name] = {"accuracy": acc.model_dump(), "failed": len(blanks) - len(done)}
    return summary


PROTOCOL = Protocol(name="cloze", settings=ClozeConfig, roles=(), run=run)
