"""A complete protocol on the kit: blank each chunk's longest word, candidates fill it, exact match decides.
Keys, resume, error records, metrics, cost and the report are the kit's; this file has no code for them."""
import re
from typing import ClassVar

from pydantic import BaseModel, Field

from proctor.config import CandidateConfig
from proctor.estimates import Estimate
from proctor.kit import Payload, Protocol, Result, RunContext


class ClozeConfig(BaseModel):
    """Cloze test: blank one word per chunk and ask for it."""
    num_items: int = Field(5, ge=1, description="chunks to blank (the first ones of the corpus)")

class Blank(Payload):
    KIND: ClassVar[str] = "cloze_answer"
    candidate: str
    gold: str
    answer: str

class ClozeResult(Result):
    accuracy: dict[str, Estimate]  # Estimates are metrics: the kit stores them, by candidate
    failed: dict[str, int]

async def run(ctx: RunContext[ClozeConfig]) -> ClozeResult:
    texts = [c.text for c in ctx.corpus.chunks[: ctx.settings.num_items]]
    units = [(c, max(re.findall(r"[A-Za-z]+", t), key=len), t) for c in ctx.config.candidates for t in texts]
    async def fill(u: tuple[CandidateConfig, str, str]) -> Blank:
        ask = f"Fill the blank with one word:\n\n{u[2].replace(u[1], '____', 1)}"
        reply = await ctx.models[u[0].model or ""].generate([{"role": "user", "content": ask}])
        return Blank(candidate=u[0].name, gold=u[1], answer=reply.text.strip(" .").lower())
    done = await ctx.map("filling blanks", units, fill, unit_id=lambda u: (u[0].name, u[2]), role="candidate",
                         output=Blank, context=lambda u: {"candidate": u[0].name, "gold": u[1]})
    by = {c.name: [o.value for o in done if o.unit[0] is c and o.value] for c in ctx.config.candidates}
    acc = {n: Estimate.proportion(sum(b.answer == b.gold.lower() for b in v), len(v)) for n, v in by.items()}
    return ClozeResult(accuracy=acc, failed={n: len(texts) - len(bs) for n, bs in by.items()})

PROTOCOL = Protocol(name="cloze", settings=ClozeConfig, roles=(), run=run, result=ClozeResult)
