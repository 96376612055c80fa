"""What every protocol gets: the run context (models by role, store, seeded RNG, progress) and helpers
for keyed, resumable units of work."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from proctor.candidates import Candidate
from proctor.config import CandidateConfig, RunConfig
from proctor.errors import ModelCallError, UserError
from proctor.models.base import Model
from proctor.models.recording import Budget, call_scope
from proctor.protocols.progress import ProgressReporter
from proctor.store import RunStore

T = TypeVar("T")


def work_key(prefix: str, *parts: Any) -> str:
    """Content-derived key of a unit of work: same inputs, same key, across runs and resumes."""
    blob = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str)
    return f"{prefix}_{hashlib.sha256(blob.encode()).hexdigest()[:20]}"


@dataclass
class RunContext:
    config: RunConfig
    run_dir: Path
    store: RunStore
    models: dict[str, Model]
    progress: ProgressReporter
    rng: np.random.Generator
    budget: Budget | None = None
    _embedder: Any = field(default=None, repr=False)
    _corpus: Any = field(default=None, repr=False)
    _retrievers: dict[str, Any] = field(default_factory=dict, repr=False)

    def role(self, role: str) -> Model:
        name = getattr(self.config.roles, role, None)
        if name is None:
            raise UserError(
                f"roles.{role}: the {self.config.protocol} protocol needs a model for the {role} role. "
                f"Add `roles: {{{role}: <a key of models>}}` to the config."
            )
        return self.models[name]

    def role_model_name(self, role: str) -> str:
        self.role(role)
        return str(getattr(self.config.roles, role))

    @property
    def corpus(self) -> Any:
        if self._corpus is None:
            from proctor.corpus import load_corpus

            self._corpus = load_corpus(self.config.corpus)
        return self._corpus

    @property
    def embedder(self) -> Any:
        if self._embedder is None:
            if not self.config.embedder:
                raise UserError(
                    "embedder: this run needs an embedder; set `embedder: local/all-minilm-l6-v2`."
                )
            from proctor.embeddings import get_embedder

            self._embedder = get_embedder(self.config.embedder, cache_dir=self.config.cache_dir)
        return self._embedder

    def retriever(self, kind: str) -> Any:
        """The run's retriever of this kind over its corpus, or None for closed-book. Built once and
        shared, so every candidate (and baseline) with the same retriever searches the same index."""
        if kind == "closed_book":
            return None
        if kind not in self._retrievers:
            from proctor.retrieval import make_retriever

            embedder = self.embedder if kind in ("dense", "hybrid") else None
            self._retrievers[kind] = make_retriever(kind, self.corpus.chunks, embedder=embedder)
        return self._retrievers[kind]

    def candidate(self, c: CandidateConfig, *, max_tokens: int | None = None) -> Candidate:
        """The system under test a `candidates:` entry describes; `max_tokens` overrides its reply budget
        where a protocol asks for longer or shorter replies than the candidate's own setting."""
        return Candidate(
            c.name,
            self.models[c.model],
            retriever=self.retriever(c.retriever),
            k=c.k,
            temperature=c.temperature,
            max_tokens=max_tokens or c.max_tokens,
            seed=self.config.seed,
        )

    async def run_items(
        self,
        description: str,
        items: Iterable[tuple[str, str, Callable[[], Awaitable[T]]]],
        *,
        is_done: Callable[[str], bool],
        on_error: Callable[[str, ModelCallError], None],
    ) -> list[tuple[str, T | None]]:
        """Run keyed units of work concurrently (the models' limiters bound real concurrency).

        `items` yields (key, role, coroutine factory); keys already done are skipped. A model failure is
        handed to `on_error` for recording on its item — never dropped.
        """
        todo = [(k, role, fn) for k, role, fn in items if not is_done(k)]
        stage = self.progress.stage(description, len(todo))

        async def one(key: str, role: str, fn: Callable[[], Awaitable[T]]) -> tuple[str, T | None]:
            with call_scope(recorder=self.store, role=role, item_key=key, budget=self.budget):
                try:
                    result: T | None = await fn()
                except ModelCallError as e:
                    on_error(key, e)
                    result = None
            stage.advance()
            return key, result

        return list(await asyncio.gather(*(one(k, r, fn) for k, r, fn in todo)))
