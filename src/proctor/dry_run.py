"""`proctor run --dry-run`: read the corpus, build the plan, and count per step and role the model calls a
run would make with a bound of their tokens and cost — without asking any model.

The protocol runs as it would, in the kit's planning mode (`proctor.kit.planning`, `proctor.models.planning`)
against a throw-away store: its steps see the real corpus and the real units, calls are tallied and answered
with placeholders (or by the call cache where it already holds the reply). What follows placeholders is
counted as if every unit were kept, so those steps are upper bounds (or estimates, see `StepPlan.count`)."""

from __future__ import annotations

import asyncio
import logging
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from proctor import __version__
from proctor.config import RunConfig, load_config
from proctor.errors import UserError
from proctor.kit.context import RunContext
from proctor.kit.planning import COLUMNS, plan_rows
from proctor.kit.progress import ProgressReporter
from proctor.kit.registry import get_protocol
from proctor.models.planning import CHARS_PER_TOKEN, Planner, Tally, planning
from proctor.runner import check_inputs
from proctor.store import RunStore

log = logging.getLogger("proctor")


@dataclass
class DryRun:
    """The plan of a run: per step its units and, by role and model, the calls with their bounds."""

    config: RunConfig
    planner: Planner
    limit: int | None = None
    stopped: str | None = None  # an error the protocol raised on placeholder data after the steps planned

    @property
    def totals(self) -> Tally:
        return self.planner.totals()

    def rows(self) -> list[tuple[str, ...]]:
        return plan_rows(self.planner)

    columns = COLUMNS

    def notes(self) -> list[str]:
        """What the figures mean, for under the table."""
        t = self.totals
        out = [
            f"{t.calls} model call(s) planned, {t.cached} more answered by the call cache now; no model was "
            f"asked. Prompt tokens are estimated (one per {CHARS_PER_TOKEN} characters), completion tokens "
            "and cost are bounded by each call's max_tokens at the models' prices.",
            "count: exact = the units and calls a run makes (within the re-asks below); upper bound = the "
            "step works on placeholder replies of earlier steps and counts every unit kept (e.g. no question "
            "filtered out, no answer decided by a rule without a judge call); estimate = as upper bound, and "
            "a placeholder filled a list of unbounded length with one entry. Prompt tokens after "
            "placeholders are rough: a retriever finds little for a placeholder question, so RAG prompts "
            "count short.",
        ]
        if t.reasks:
            out.append(
                f"Not foreseeable: up to {t.reasks} re-ask(s) of replies that do not match their JSON schema "
                "(the model's max re-asks per structured call), and one fallback call per unit whose reply "
                "lacks the logprobs it asked for (multiple-choice letter probabilities)."
            )
        if self.config.budget_usd is not None and t.cost_usd > self.config.budget_usd:
            out.append(
                f"The bound ${t.cost_usd:.4f} exceeds budget_usd (${self.config.budget_usd:g}): the run may "
                "stop sending calls when the budget is spent (the rest resume with a raised budget)."
            )
        if self.limit is not None:
            out.append(f"--limit {self.limit}: every step counted at most its first {self.limit} units.")
        if self.stopped:
            out.append(
                f"Planning stopped after the steps above: the protocol failed on placeholder data "
                f"({self.stopped}); later steps, if any, are not counted."
            )
        return out


def dry_run(config: RunConfig | str | Path, *, limit: int | None = None) -> DryRun:
    """Plan `config`'s run without asking any model (see the module docstring)."""
    cfg = config if isinstance(config, RunConfig) else load_config(config)
    protocol = get_protocol(cfg.protocol)
    if protocol.compose is not None:
        raise UserError(
            f"--dry-run: a {cfg.protocol} runs other runs; plan it with `plan_runs` (what `proctor run "
            "--dry-run` does), which plans each member."
        )
    models = check_inputs(cfg, reach_servers=False)
    planner = Planner()
    stopped: str | None = None
    with tempfile.TemporaryDirectory(prefix="proctor-dry-run-") as tmp:
        store = RunStore(Path(tmp) / "run.sqlite")
        try:
            store.start_run(
                "dry-run", cfg.protocol, cfg.model_dump(mode="json"), cfg.config_hash(), __version__
            )
            ctx: RunContext[Any] = RunContext(
                cfg,
                Path(tmp),
                store,
                models,
                ProgressReporter(store.live, enabled=False),
                np.random.default_rng(cfg.seed),
                roles_help=protocol.role_help(),
                limit=limit,
                planning=True,
            )

            async def main() -> None:
                try:
                    with planning(planner):
                        await protocol.run(ctx)
                finally:
                    for m in models.values():
                        await m.aclose()

            try:
                asyncio.run(main())
            except UserError:
                raise
            except Exception as e:  # e.g. a statistic that cannot be fitted to placeholder answers
                stopped = f"{type(e).__name__}: {e}"
                log.debug("dry run stopped", exc_info=e)
        finally:
            store.close()
    return DryRun(cfg, planner, limit=limit, stopped=stopped)


@dataclass
class PlannedRun:
    """One run of a plan: a config's own run, or a member of a composed one (a suite). `plan` is None for
    a member that reads an earlier member's run folder (`after`), which only exists once that one ran."""

    label: str
    plan: DryRun | None
    after: str | None = None


def plan_runs(config: RunConfig | str | Path, *, limit: int | None = None) -> list[PlannedRun]:
    """The plan of every run `config` makes: itself, or each member of a suite in order (every member's
    inputs checked first, as a real suite run checks them)."""
    cfg = config if isinstance(config, RunConfig) else load_config(config)
    protocol = get_protocol(cfg.protocol)
    if protocol.members is None:
        return [PlannedRun(cfg.run_name, dry_run(cfg, limit=limit))]
    out = []
    for member in protocol.members(cfg):
        plan = None if member.after is not None else dry_run(member.config, limit=limit)
        out.append(PlannedRun(member.label, plan, member.after))
    return out
