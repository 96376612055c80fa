"""The system under test, behind one interface (`SystemUnderTest`): a plain LLM or a RAG pipeline
(retriever + LLM) here; an agent, a user's Python callable or a user's HTTP service in `kinds`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from proctor.corpus.types import Chunk
from proctor.models.base import Model
from proctor.models.types import Message, TokenLogprob
from proctor.prompts import render_messages


@dataclass(frozen=True)
class Answer:
    text: str
    choice: str | None = None
    logprobs: list[TokenLogprob] | None = None
    context_ids: list[str] = field(default_factory=list)
    trace: dict[str, Any] = field(default_factory=dict)


class SystemUnderTest(Protocol):
    """What protocols ask: a one-shot answer (with options for multiple choice) and a conversational reply;
    `context_for` gives the passages a RAG candidate would retrieve (none for other kinds)."""

    name: str
    retriever: Any

    async def answer(
        self, question: str, choices: list[str] | None = None, *, gold_ids: list[str] | None = None
    ) -> Answer: ...

    async def reply(self, history: list[Message]) -> Message: ...

    def context_for(self, question: str, gold_ids: list[str] | None = None) -> list[Chunk]: ...


class Candidate:
    """An LLM answering with or without retrieved context. `retriever=None` is closed-book."""

    def __init__(
        self,
        name: str,
        model: Model,
        *,
        retriever: Any = None,
        k: int = 3,
        temperature: float = 0.0,
        max_tokens: int = 256,
        seed: int = 0,
    ) -> None:
        self.name = name
        self.model = model
        self.retriever = retriever
        self.k = k
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.seed = seed

    def context_for(self, question: str, gold_ids: list[str] | None = None) -> list[Chunk]:
        if self.retriever is None:
            return []
        return [sc.chunk for sc in self.retriever.retrieve(question, self.k, gold_ids=gold_ids)]

    async def answer(
        self, question: str, choices: list[str] | None = None, *, gold_ids: list[str] | None = None
    ) -> Answer:
        context = self.context_for(question, gold_ids)
        messages = render_messages(
            "candidates/answer", question=question, choices=choices or [], context=[c.text for c in context]
        )
        completion = await self.model.generate(
            messages, temperature=self.temperature, max_tokens=self.max_tokens, seed=self.seed
        )
        return Answer(
            text=completion.text.strip(),
            logprobs=completion.logprobs,
            context_ids=[c.chunk_id for c in context],
            # The retrieved passages are what a RAG system observed (R-Eval's scratchpad); none: closed book.
            trace={"model": self.model.spec, "cached": completion.cached}
            | ({"contexts": [c.text for c in context]} if context else {}),
        )

    async def reply(self, history: list[Message]) -> Message:
        completion = await self.model.generate(
            history, temperature=self.temperature, max_tokens=self.max_tokens, seed=self.seed
        )
        return {"role": "assistant", "content": completion.text.strip()}
