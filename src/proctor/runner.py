"""Run a config end to end: models, run directory, store, protocol, results.json, exports, report."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ValidationError

from proctor import __version__
from proctor.config import RunConfig, _describe_errors, load_config
from proctor.errors import Terminated, UserError
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
    ec = config.embedder_config()
    if ec is not None and ec.spec.startswith("openai/") and not isinstance(config.embedder, str):
        await check_reachable(ec.base_url or DEFAULT_BASE_URL, "embedder.base_url")


def check_inputs(config: RunConfig, *, reach_servers: bool = True) -> dict[str, Model]:
    """Everything a run reads besides its protocol's options, checked before the first model call: the
    roles, the corpus path, the models (built, their servers reached), every candidate (a python import
    path imported, an http candidate's header variables set) and the embedder (spec, key variable, server).
    A mistake is the usual one-paragraph UserError; returns the built models. A dry run leaves the servers
    alone (`reach_servers=False`)."""
    from proctor.candidates.kinds import HttpCandidate, load_callable
    from proctor.corpus.loaders import check_corpus_path

    protocol = get_protocol(config.protocol)
    missing = protocol.missing_role(config.roles, config.settings)
    if missing:
        raise UserError(f"{missing}.")
    if config.corpus.path is not None:
        check_corpus_path(config.corpus.path)
    for i, c in enumerate(config.candidates):
        if isinstance(c.python, str):
            load_callable(c.python, f"candidates[{i}].python")
        if c.http is not None:
            HttpCandidate(c.name, c.http, f"candidates[{i}].http")
    ec = config.embedder_config()
    if ec is not None:
        ec.build(cache=False).close()
    models = build_models(config)
    if reach_servers:
        asyncio.run(check_servers(config))
    return models


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
    limit: int | None = None,
) -> RunResult:
    """Run `config` into a new folder under `out` (or with `resume` the latest of this config). `limit`:
    every step runs at most its first `limit` distinct units (a smoke test; see `proctor run --limit`)."""
    cfg = config if isinstance(config, RunConfig) else load_config(config)
    protocol = get_protocol(cfg.protocol)
    if limit is not None and protocol.compose is not None:
        raise UserError(f"--limit applies to one protocol's run, not a {cfg.protocol}; limit its members.")
    if protocol.compose is not None:
        composed: RunResult = protocol.compose(cfg, out=Path(out), resume=resume, show_progress=show_progress)
        return composed
    models = check_inputs(cfg)
    if cfg.executor == "ray":
        # Fail before the run folder exists when Ray is missing or cannot start; the local instance started
        # here lives until this process exits and is shared by later runs in it.
        from proctor.scale.ray_session import ensure_ray

        ensure_ray(cfg.ray)
    run_dir = run_dir_for(cfg, Path(out), resume)
    if resume:
        check_resumable(run_dir, cfg)
    run_dir.mkdir(parents=True, exist_ok=True)
    stack = contextlib.ExitStack()
    handler = logging.FileHandler(run_dir / "proctor.log", encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    handler.addFilter(SecretFilter(secrets_of(cfg)))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    store: RunStore | None = None
    try:
        stack.enter_context(terminate_as_interrupt())
        store = RunStore(run_dir / "run.sqlite", store_text=cfg.store_text)
        store.start_run(
            run_dir.name, cfg.protocol, cfg.model_dump(mode="json"), cfg.config_hash(), __version__
        )
        log.info("run %s (%s) started%s", run_dir.name, cfg.protocol, " (resumed)" if resume else "")
        log.info("run folder: %s", run_dir.resolve())
        with ProgressReporter(store.live, enabled=show_progress) as progress:
            progress.note(f"Run folder: {run_dir} (continue an interrupted run with --resume)")
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
                limit=limit,
            )
            if limit is not None:
                log.info("--limit %d: every step runs at most its first %d units", limit, limit)

            async def main() -> Result:
                # A SIGTERM landing in a loop callback (not a task) is only logged by asyncio: stop the run.
                loop, me, stopped = asyncio.get_running_loop(), asyncio.current_task(), []

                def on_error(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
                    if isinstance(exc := context.get("exception"), Terminated) and me is not None:
                        stopped.append(exc)
                        me.cancel()
                    else:
                        loop.default_exception_handler(context)

                loop.set_exception_handler(on_error)
                try:
                    return await protocol.run(ctx)
                except asyncio.CancelledError:
                    if stopped:
                        raise stopped[0] from None
                    raise
                finally:
                    for m in models.values():
                        await m.aclose()

            result = asyncio.run(main())
        if limit is not None:
            result.warnings = [
                *result.warnings,
                f"--limit {limit}: every step ran at most its first {limit} units; the figures describe that "
                "subset. Run again with --resume and without --limit to complete the run.",
            ]
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
    except BaseException as e:
        mark_failed(store, run_dir, e)
        raise
    finally:
        # Checkpoint the WAL into run.sqlite and close: the run folder is complete the moment the run
        # ends, even while this process goes on (e.g. `proctor demo` running the next protocol).
        if store is not None:
            store.close()
        log.removeHandler(handler)
        handler.close()
        stack.close()


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """While a run runs, SIGTERM (a CI job cancelled, `kill`, a container stopped) raises `Terminated`
    like Ctrl-C raises KeyboardInterrupt, so the run is marked failed and its store closed before the
    process exits. Only in the main thread (where Python delivers signals); elsewhere nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        raise Terminated(signal.Signals(signum).name)

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def mark_failed(store: RunStore | None, run_dir: Path, e: BaseException) -> None:
    """A run that stopped on an error or a signal: `failed` in its store, with the reason (a signal as
    "interrupted: SIGTERM" / "interrupted: SIGINT") in the store and proctor.log — a user error as its one
    paragraph, an unexpected error with its traceback."""
    status = "failed"
    message = str(e)
    if isinstance(e, Terminated | KeyboardInterrupt | asyncio.CancelledError):
        how = {Terminated: getattr(e, "signal_name", "SIGTERM"), KeyboardInterrupt: "SIGINT"}
        message = "interrupted: " + next((v for k, v in how.items() if isinstance(e, k)), "cancelled")
        log.error("run %s failed: %s; continue it with --resume", run_dir.name, message)
    elif isinstance(e, UserError):
        log.error("run %s failed: %s", run_dir.name, e)
    else:
        log.error("run %s failed: %s: %s", run_dir.name, type(e).__name__, e, exc_info=e)
    if store is None:
        return
    try:
        store.finish_run(run_dir.name, status=status)
        store.put_artifact("failure", {"status": status, "error": type(e).__name__, "message": message})
    except Exception as again:  # the store itself may be what failed; the log keeps the reason
        log.error("run %s: could not mark the run %s in run.sqlite: %s", run_dir.name, status, again)


def check_resumable(run_dir: Path, cfg: RunConfig) -> None:
    """`--resume` continues `run_dir` only when the config stored in it still validates (proctor or a
    protocol's options may have changed since) and is the config given now."""
    import sqlite3

    try:
        store = RunStore(run_dir / "run.sqlite")
        try:
            info = store.run_info()
        finally:
            store.close()
    except sqlite3.Error as e:
        raise UserError(
            f"--resume: {run_dir}/run.sqlite cannot be read ({e}). Run without --resume to start a new run."
        ) from None
    stored = json.loads(info["config_json"]) if info and info.get("config_json") else None
    problem = None
    if not isinstance(stored, dict):
        problem = "it holds no config"
    else:
        # Stored with the protocol's section as `settings`; validated as a config file holds it.
        section = stored.pop("settings", None)
        if section is not None:
            stored[str(stored.get("protocol"))] = section
        try:
            if RunConfig.model_validate(stored).config_hash() != cfg.config_hash():
                problem = "its config differs from the one given now"
        except (ValidationError, UserError, ValueError) as e:
            problem = "its config no longer validates: " + (
                _describe_errors(e) if isinstance(e, ValidationError) else str(e)
            )
    if problem is not None:
        raise UserError(
            f"--resume: cannot continue {run_dir}: {problem}. Run without --resume to start a new run of "
            f"this config (the call cache makes the calls already made free)."
        )


class SecretFilter(logging.Filter):
    """Blank out secret values (API keys, header values read from the environment) from log lines."""

    def __init__(self, secrets: list[str]) -> None:
        super().__init__()
        self.secrets = sorted({s for s in secrets if len(s) >= 4}, key=len, reverse=True)

    def filter(self, record: logging.LogRecord) -> bool:
        if self.secrets:
            text = record.getMessage()
            if record.exc_info and not record.exc_text:
                record.exc_text = logging.Formatter().formatException(record.exc_info)
            exc = record.exc_text or ""
            for secret in self.secrets:
                text, exc = text.replace(secret, "***"), exc.replace(secret, "***")
            record.msg, record.args, record.exc_text = text, None, exc or None
        return True


def secrets_of(cfg: RunConfig) -> list[str]:
    """The values of the environment variables the config names for keys and header values."""
    names = [m.api_key_env for m in cfg.models.values() if m.api_key_env]
    ec = cfg.embedder_config()
    if ec is not None and ec.api_key_env:
        names.append(ec.api_key_env)
    names += ["OPENAI_API_KEY"]  # what an openai/ model without api_key_env reads
    for c in cfg.candidates:
        if c.http is not None:
            names += list(c.http.headers_env.values())
    return [v for n in names if (v := os.environ.get(n))]


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
