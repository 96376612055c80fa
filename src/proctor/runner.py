"""Run a config end to end: models, run directory, store, protocol, results.json, exports, report."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel

from proctor import __version__
from proctor.config import RunConfig, load_config
from proctor.errors import UserError
from proctor.kit.context import RunContext
from proctor.kit.progress import ProgressReporter
from proctor.kit.registry import get_protocol
from proctor.kit.result import BudgetNote, Result, Usage, artifacts, metric_rows
from proctor.models import get_model
from proctor.models.base import Model
from proctor.models.recording import Budget
from proctor.store import RunStore

log = logging.getLogger("proctor")


@dataclass
class RunResult:
    """A finished run: its folder, the protocol's typed result, and results.json as written."""

    run_dir: Path
    summary: dict[str, Any]
    result: Result | None = None


def build_models(config: RunConfig) -> dict[str, Model]:
    models = {}
    for name, m in config.models.items():
        local_only = {"n_parallel", "n_ctx", "threads"}  # `replicas` is checked by ModelConfig
        opts = m.model_dump(exclude={"spec", *local_only}, exclude_none=True)
        for option in local_only:
            value = getattr(m, option)
            if value is not None:
                if not m.spec.startswith("local/"):
                    raise UserError(f"models.{name}.{option} applies to local/ models only; remove it.")
                opts[option] = value
        model = get_model(m.spec, cache_dir=config.cache_dir, where=f"models.{name}", **opts)
        if config.executor == "ray" and m.spec.startswith("local/") and m.replicas is not None:
            # The replicas' servers become Ray actors across the cluster; the call path stays here.
            from proctor.scale.replica_actors import ray_local_model

            model = ray_local_model(model, m, config.ray, where=f"models.{name}")
        models[name] = model
    return models


async def check_servers(config: RunConfig) -> None:
    """Fail fast, with the config field named, when an HTTP model server cannot be reached."""
    from proctor.models.openai_compat import DEFAULT_BASE_URL, check_reachable

    for name, m in config.models.items():
        if m.spec.startswith("openai/"):
            if isinstance(m.base_url, list):  # replicas: every listed server must answer at the start
                for i, url in enumerate(m.base_url):
                    await check_reachable(url, f"models.{name}.base_url[{i}]")
            else:
                await check_reachable(m.base_url or DEFAULT_BASE_URL, f"models.{name}.base_url")


def _prefix(config: RunConfig) -> str:
    return f"{config.run_name}-{config.config_hash()[:8]}-"


def latest_run_dir(config: RunConfig, out: Path) -> Path | None:
    """The latest run folder of this config under `out` (what `--resume` continues), or None."""
    previous = sorted(p for p in out.glob(_prefix(config) + "*") if (p / "run.sqlite").exists())
    return previous[-1] if previous else None


def run_dir_for(config: RunConfig, out: Path, resume: bool) -> Path:
    """The folder of a run: a new one named `<name>-<config hash>-<timestamp>`, or with `resume` the
    latest earlier one (a UserError when there is none)."""
    prefix = _prefix(config)
    if resume:
        previous = latest_run_dir(config, out)
        if previous is None:
            raise UserError(
                f"--resume: no earlier run of this config under {out} (looked for {prefix}*). "
                f"Run without --resume to start one, or pass the --out folder the earlier run used."
            )
        return previous
    stamp = time.strftime("%Y%m%d-%H%M%S")
    run_dir = out / (prefix + stamp)
    n = 1
    while run_dir.exists():
        n += 1
        run_dir = out / f"{prefix}{stamp}-{n}"
    return run_dir


def run_config(
    config: RunConfig | str | Path,
    *,
    out: str | Path = "runs",
    resume: bool = False,
    show_progress: bool = True,
) -> RunResult:
    cfg = config if isinstance(config, RunConfig) else load_config(config)
    protocol = get_protocol(cfg.protocol)
    if protocol.compose is not None:
        composed: RunResult = protocol.compose(cfg, out=Path(out), resume=resume, show_progress=show_progress)
        return composed
    missing = protocol.missing_role(cfg.roles)
    if missing:
        raise UserError(f"{missing}.")
    models = build_models(cfg)
    asyncio.run(check_servers(cfg))
    if cfg.executor == "ray":
        # Fail before the run folder exists when Ray is missing or cannot start; the local instance started
        # here lives until this process exits and is shared by later runs in it.
        from proctor.scale.ray_session import ensure_ray

        ensure_ray(cfg.ray)
    run_dir = run_dir_for(cfg, Path(out), resume)
    run_dir.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(run_dir / "proctor.log", encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    store: RunStore | None = None
    try:
        store = RunStore(run_dir / "run.sqlite")
        store.start_run(
            run_dir.name, cfg.protocol, cfg.model_dump(mode="json"), cfg.config_hash(), __version__
        )
        log.info("run %s (%s) started%s", run_dir.name, cfg.protocol, " (resumed)" if resume else "")
        with ProgressReporter(store.live, enabled=show_progress) as progress:
            budget = Budget(cfg.budget_usd, store.spent_usd()) if cfg.budget_usd is not None else None
            ctx: RunContext[Any] = RunContext(
                cfg,
                run_dir,
                store,
                models,
                progress,
                np.random.default_rng(cfg.seed),
                budget=budget,
                roles_help=protocol.role_help(),
            )

            async def main() -> Result:
                try:
                    return await protocol.run(ctx)
                finally:
                    for m in models.values():
                        await m.aclose()

            result = asyncio.run(main())
        summary = write_result(cfg, store, run_dir, result, budget)
        store.export_jsonl(run_dir / "items.jsonl")
        store.export_parquet(run_dir / "items.parquet")
        store.finish_run(run_dir.name)
        from proctor.kit.record import load_run
        from proctor.report import write_report

        with load_run(run_dir) as run:
            write_report(run, run_dir / "report.html")
        log.info("run %s finished", run_dir.name)
        return RunResult(run_dir, summary, result)
    finally:
        # Checkpoint the WAL into run.sqlite and close: the run folder is complete the moment the run
        # ends, even while this process goes on (e.g. `proctor demo` running the next protocol).
        if store is not None:
            store.close()
        log.removeHandler(handler)
        handler.close()


def record_composed_run(cfg: RunConfig, run_dir: Path, result: Result) -> RunResult:
    """The folder of a run made of other runs (a protocol's `compose`, e.g. the suite): its run record,
    what the kit derives from its result (`write_result`: metrics, artifacts, results.json) and its
    report. It made no model calls of its own. An existing folder (`--resume`) is written over."""
    from proctor.kit.record import load_run
    from proctor.report import write_report

    run_dir.mkdir(parents=True, exist_ok=True)
    store = RunStore(run_dir / "run.sqlite")
    try:
        store.start_run(
            run_dir.name, cfg.protocol, cfg.model_dump(mode="json"), cfg.config_hash(), __version__
        )
        summary = write_result(cfg, store, run_dir, result, None)
        store.finish_run(run_dir.name)
    finally:
        store.close()
    with load_run(run_dir) as run:
        write_report(run, run_dir / "report.html")
    return RunResult(run_dir, summary, result)


def write_result(
    cfg: RunConfig, store: RunStore, run_dir: Path, result: Result, budget: Budget | None
) -> dict[str, Any]:
    """What the kit derives from a protocol's result: its identity, usage and the budget note filled in,
    every declared metric and artifact stored, results.json (and the store's `summary`) written.
    Returns results.json."""
    if not isinstance(result, Result):
        raise TypeError(f"a protocol's run must return a proctor.kit.Result, not {type(result).__name__}")
    result.protocol = cfg.protocol
    result.config_hash = cfg.config_hash()
    result.usage = _usage(store)
    if budget is not None and budget.exhausted:
        _warn_budget(result, store, budget)
    for row in metric_rows(result):
        store.put_metric(row.name, row.subject, row.value, lo=row.lo, hi=row.hi, n=row.n)
    for name, value in artifacts(result).items():
        store.put_artifact(name, value.model_dump(mode="json") if isinstance(value, BaseModel) else value)
    summary: dict[str, Any] = result.model_dump(mode="json")
    store.put_artifact("summary", summary)
    (run_dir / "results.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    return summary


def _warn_budget(result: Result, store: RunStore, budget: Budget) -> None:
    """Say that the cap stopped work, how much, and how to finish it (the held-back items resume)."""
    held = sum(1 for it in store.items(status="error") if it["error_cause"] == "budget")
    message = (
        f"budget_usd reached: ${budget.spent_usd:.4f} spent of ${budget.limit_usd:g}; {held} item(s) were "
        f"not run (recorded with cause 'budget', not scored). Raise budget_usd and run again with --resume "
        f"to finish them."
    )
    log.warning(message)
    result.budget = BudgetNote(limit_usd=budget.limit_usd, spent_usd=round(budget.spent_usd, 6), held=held)
    result.warnings = [*result.warnings, message]


def _usage(store: RunStore) -> dict[str, Usage]:
    """Nominal usage (what the evaluation costs at the configured prices, cache hits included), so
    results.json is identical whether replies came from the server or the cache."""
    out: dict[str, Usage] = {}
    for row in store.call_totals():
        if row["errors"] == row["calls"]:
            continue
        role = row["role"] or "other"
        out[f"{role}:{row['model']}"] = Usage(
            prompt_tokens=row["prompt_tokens"] or 0,
            completion_tokens=row["completion_tokens"] or 0,
            cost_usd=round(row["cost_usd"] or 0.0, 6),
        )
    return out
