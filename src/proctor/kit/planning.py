"""The kit's planning mode (`proctor run --dry-run`): the protocol runs as usual, but no model is asked.

Model calls are tallied and answered with placeholders by `proctor.models.planning`; here are the stand-ins
for what calls no `Model`: a user's Python or HTTP candidate (not called; a placeholder answer, counted as
one call of the candidate role) and the embedder (placeholder vectors; its batches counted), and the plan
as a table."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from proctor.candidates import Answer
from proctor.corpus.types import Chunk
from proctor.embeddings.base import Embedder
from proctor.models.planning import LETTERS, Planner, active_planner, estimate_tokens
from proctor.models.types import Message


@dataclass
class PlannedCandidate:
    """A Python or HTTP candidate in a dry run: counted, not called; answers with a placeholder."""

    name: str
    label: str  # e.g. python:mypkg.rag:answer
    retriever: Any = None
    _n: int = field(default=0, repr=False)

    def _count(self, text: str) -> None:
        planner = active_planner()
        if planner is not None:
            tally = planner.tally("candidate", self.label)
            tally.calls += 1
            tally.prompt_tokens += estimate_tokens(text)
            planner.placeholders += 1

    async def answer(
        self, question: str, choices: list[str] | None = None, *, gold_ids: list[str] | None = None
    ) -> Answer:
        self._count(question)
        self._n += 1
        return Answer(text=f"dry-run answer {self._n} of {self.name}", choice=LETTERS[0] if choices else None)

    async def reply(self, history: list[Message]) -> Message:
        self._count(" ".join(str(m.get("content") or "") for m in history))
        self._n += 1
        return {"role": "assistant", "content": f"dry-run reply {self._n} of {self.name}"}

    def context_for(self, question: str, gold_ids: list[str] | None = None) -> list[Chunk]:
        return []


class PlannedEmbedder(Embedder):
    """The run's embedder in a dry run: no model loaded, no server asked, no cache read or written;
    placeholder vectors (derived from each text, so retrieval still returns k passages of the corpus), each
    batch counted as a call of the `embedder` role."""

    DIM = 64

    def __init__(self, spec: str, *, batch_size: int = 64) -> None:
        super().__init__(spec, batch_size=batch_size, cache=None, where="embedder")

    def identity(self) -> dict[str, Any]:
        return {"provider": "dry-run", "spec": self.spec}

    def _compute(self, texts: list[str]) -> np.ndarray:
        planner = active_planner()
        if planner is not None:
            tally = planner.tally("embedder", self.spec)
            tally.calls += 1
            tally.prompt_tokens += sum(estimate_tokens(t) for t in texts)
        rows = []
        for t in texts:
            seed = int.from_bytes(hashlib.sha256(t.encode("utf-8", "surrogatepass")).digest()[:8], "little")
            rows.append(np.random.default_rng(seed).standard_normal(self.DIM))
        return np.asarray(rows, dtype=np.float32)


COLUMNS = (
    "step",
    "count",
    "units",
    "role",
    "model",
    "calls",
    "cached",
    "prompt tok",
    "max compl tok",
    "cost ≤",
)


def plan_rows(planner: Planner) -> list[tuple[str, ...]]:
    """The plan as table rows: one per step, role and model (a step without calls: one row of its own)."""
    rows: list[tuple[str, ...]] = []
    for step in planner.steps.values():
        if not step.tallies:
            rows.append((step.name, step.count, str(step.units), "-", "-", "0", "0", "0", "0", "$0.0000"))
        for i, ((role, model), t) in enumerate(sorted(step.tallies.items())):
            head = (step.name, step.count, str(step.units)) if i == 0 else ("", "", "")
            rows.append(
                (
                    *head,
                    role,
                    model,
                    str(t.calls),
                    str(t.cached),
                    f"{t.prompt_tokens:,}",
                    f"{t.completion_tokens:,}",
                    f"${t.cost_usd:.4f}",
                )
            )
    return rows
