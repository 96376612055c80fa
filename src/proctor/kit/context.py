"""What every protocol gets: the run context — its typed settings, models by role, store, seeded RNG,
progress, budget, the corpus and shared retrievers — and the step runner (`ctx.map`, `ctx.judge`).

The context is generic in the protocol's settings model, so `ctx.settings` is typed without casts.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

import numpy as np
from pydantic import BaseModel

from proctor.agents.tools import Toolbox
from proctor.candidates import Candidate, SystemUnderTest
from proctor.config import CandidateConfig, RunConfig
from proctor.errors import UserError
from proctor.kit.keys import unit_key
from proctor.kit.progress import ProgressReporter
from proctor.kit.steps import Judgment, Outcome, Payload, StepHost, run_steps
from proctor.models.base import Model
from proctor.models.recording import Budget
from proctor.python_ref import python_label
from proctor.store import RunStore

if TYPE_CHECKING:
    from proctor.corpus import Corpus
    from proctor.corpus.types import Chunk
    from proctor.embeddings.base import Embedder
    from proctor.retrieval.base import Retriever

S = TypeVar("S", bound=BaseModel)
U = TypeVar("U")
P = TypeVar("P", bound=Payload)


@dataclass
class RunContext(Generic[S]):
    config: RunConfig
    run_dir: Path
    store: RunStore
    models: dict[str, Model]
    progress: ProgressReporter
    rng: np.random.Generator
    budget: Budget | None = None
    roles_help: str = ""  # the protocol's roles, for the error naming a role the config does not fill
    limit: int | None = None  # `--limit N`: each step runs at most its first N distinct units
    planning: bool = False  # a dry run: no model asked, see `proctor.kit.planning`
    _embedder: Embedder | None = field(default=None, repr=False)
    _corpus: Corpus | None = field(default=None, repr=False)
    _retrievers: dict[str, Retriever] = field(default_factory=dict, repr=False)
    _environments: dict[str, Callable[[], Toolbox]] = field(default_factory=dict, repr=False)

    @property
    def settings(self) -> S:
        """The protocol's own config section, validated by its settings model."""
        return cast(S, self.config.settings)

    # --- models by role -----------------------------------------------------------------------------
    def role(self, role: str) -> Model:
        """The model playing `role`; a role the config does not fill gives the usual one-paragraph error
        naming the protocol's roles."""
        name = self.config.roles.get(role)
        if name is None:
            declared = self.roles_help or role
            raise UserError(
                f"roles.{role}: the {self.config.protocol} protocol needs a model for the {role} role "
                f"here. Add `roles: {{{role}: <a key of models>}}` to the config. Its roles: {declared}."
            )
        return self.models[name]

    def role_model_name(self, role: str) -> str:
        self.role(role)
        return self.config.roles[role]

    # --- corpus, embedder, retrievers ---------------------------------------------------------------
    @property
    def corpus(self) -> Corpus:
        if self._corpus is None:
            from proctor.scale import load_run_corpus

            self._corpus = load_run_corpus(self.config)  # the local loader, or Ray with `executor: ray`
        return self._corpus

    def use_corpus(self, chunks: list[Chunk]) -> None:
        """Answer over these chunks instead of `corpus.path`: for a protocol whose documents come with its
        questions (a HotpotQA file's paragraphs). Only before any retriever is built, so every retriever of
        the run searches the same chunks."""
        from proctor.corpus import Corpus

        if self._retrievers:
            raise RuntimeError("use_corpus after a retriever was built")
        self._corpus = Corpus(chunks)

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            ec = self.config.embedder_config()
            if ec is None:
                raise UserError(
                    "embedder: this run needs an embedder; set `embedder: local/all-minilm-l6-v2`."
                )
            if self.planning:
                from proctor.kit.planning import PlannedEmbedder

                self._embedder = PlannedEmbedder(ec.spec)
            else:
                self._embedder = ec.build(cache_dir=self.config.cache_dir)
        return self._embedder

    def retriever(self, kind: str) -> Retriever | None:
        """The run's retriever of this kind over its corpus, or None for closed-book. Built once and
        shared, so every candidate (and baseline) with the same retriever searches the same index."""
        if kind == "closed_book":
            return None
        if kind not in self._retrievers:
            from proctor.retrieval import make_retriever

            embedder = self.embedder if kind in ("dense", "hybrid") else None
            self._retrievers[kind] = make_retriever(kind, self.corpus.chunks, embedder=embedder)
        return self._retrievers[kind]

    # --- candidates ---------------------------------------------------------------------------------
    def candidate(self, c: CandidateConfig, *, max_tokens: int | None = None) -> SystemUnderTest:
        """The system under test a `candidates:` entry describes; `max_tokens` overrides its reply budget
        where a protocol asks for longer or shorter replies than the candidate's own setting."""
        from proctor.candidates.kinds import AgentCandidate, HttpCandidate, PythonCandidate

        where = f"candidates[{self.config.candidates.index(c)}]" if c in self.config.candidates else c.name
        if self.planning and c.kind in ("python", "http"):
            from proctor.kit.planning import PlannedCandidate

            if c.python is not None:
                PythonCandidate(c.name, c.python, f"{where}.python")  # a bad import path fails the plan too
            return PlannedCandidate(c.name, self.candidate_label(c))
        if c.python is not None:
            return PythonCandidate(c.name, c.python, f"{where}.python")
        if c.http is not None:
            return HttpCandidate(c.name, c.http, f"{where}.http")
        assert c.model is not None  # the config validator requires a model for the other kinds
        model = self.models[c.model]
        if c.agent is not None:
            return AgentCandidate(c.name, model, c.agent, self.environment(c.agent.environment, where))
        return Candidate(
            c.name,
            model,
            retriever=self.retriever(c.retriever),
            k=c.k,
            temperature=c.temperature,
            max_tokens=max_tokens or c.max_tokens,
            seed=self.config.seed,
        )

    def environment(self, spec: str, where: str) -> Callable[[], Toolbox]:
        """A factory of fresh tool sessions for an agent's environment (built once per run and spec)."""
        if spec not in self._environments:
            from proctor.agents.environments import make_environment

            self._environments[spec] = make_environment(
                spec, lambda: self.corpus.chunks, f"{where}.agent.environment"
            )
        return self._environments[spec]

    def candidate_label(self, c: CandidateConfig) -> str:
        """What the candidate is, for tables: the model spec (with the workflow for agents), or the kind."""
        if c.python is not None and c.kind == "python":
            return f"python:{python_label(c.python)}"
        if c.http:
            return f"http:{c.http.url}"
        spec = self.config.models[c.model].spec if c.model else "?"
        return f"{spec} ({c.agent.workflow} agent)" if c.agent else spec

    # --- the step runner ----------------------------------------------------------------------------
    async def map(
        self,
        description: str,
        units: Iterable[U],
        step: Callable[[U], Awaitable[P]],
        *,
        unit_id: Callable[[U], Any],
        role: str | Callable[[U], str] | None,
        output: type[P],
        context: Callable[[U], dict[str, Any]] | None = None,
    ) -> list[Outcome[U, P]]:
        """Run `step` on every unit and store each result as an item of kind `output.KIND`.

        The kit derives each unit's key from `output.KIND` and `unit_id(unit)` — what identifies the
        unit's inputs; put upstream payloads in it, not only their ids (`proctor.kit.keys`). Units
        already done (or failed for good, see `proctor.errors.is_final`) are not run again while the
        prompt files and models they used are unchanged: their stored result is handed back. The rest
        run concurrently under the models' limiters; a success is stored as its typed payload, a failure
        with its cause (and `context(unit)`, so the report can name the unit) — never dropped. Every
        model call is recorded under `role` (a name, a function of the unit, or None for a step that
        calls no model). Progress advances per unit. Returns one `Outcome` per unit, in order.
        """
        label = output.KIND

        def key(u: U) -> str:
            return unit_key(label, unit_id(u))

        return await run_steps(
            self._host(), description, list(units), step, key, role, output, context, judge=None
        )

    async def judge(
        self,
        description: str,
        units: Iterable[U],
        step: Callable[[U], Awaitable[Judgment]],
        *,
        item_key: Callable[[U], str],
        judge: str,
        role: str | None,
    ) -> list[Outcome[U, Judgment]]:
        """`map` for judgments: each unit's `item_key` is the key of the judged item (an `Outcome.key`),
        the verdict is stored in the judgments table under the judge's name, with the same cause column
        as items and the same validity check on resume."""
        return await run_steps(
            self._host(), description, list(units), step, item_key, role, Judgment, None, judge=judge
        )

    async def revise(self, outcomes: Sequence[Outcome[U, P]], update: Callable[[Outcome[U, P]], P]) -> None:
        """Store a new version of finished items under their keys (e.g. the verdicts copied onto an answer
        so exports carry them). What they depended on is kept: a revision is derived data, not a new run."""
        for o in outcomes:
            if o.value is None:
                continue
            stored = self.store.get_item(o.key)
            new = update(o)
            self.store.put_item(
                o.key, new.KIND, new.model_dump(mode="json"), deps=stored["deps"] if stored else None
            )

    def supersede(self, kind: str, current: Iterable[str]) -> None:
        """Mark the items of `kind` whose keys are not among `current` (`Outcome.key`s) `superseded`: items
        of an earlier state of this run (e.g. the questions of an exam a resume completed differently)
        stay in the store for the record, with their status kept as `superseded_status`, but reports and
        exports show the current ones."""
        keep = set(current)
        for it in self.store.items(kind):
            if it["key"] not in keep and it["status"] != "superseded":
                data = it["data"] if isinstance(it["data"], dict) else {}
                self.store.put_item(
                    it["key"], kind, {**data, "superseded_status": it["status"]}, status="superseded"
                )

    def _host(self) -> StepHost:
        models = frozenset(m.identity_hash() for m in self.models.values())
        return StepHost(self.store, self.progress, self.budget, models, self.limit)


def successes(outcomes: Sequence[Outcome[U, P]]) -> list[P]:
    """The values of the successful outcomes, in order."""
    return [o.value for o in outcomes if o.value is not None]
