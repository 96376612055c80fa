"""Run an evaluation from Python: `proctor.evaluate(config) -> Run` and `await proctor.aevaluate(config)`.

`config` is a YAML file's path, a dict holding what such a file holds (validated the same way; relative
paths in it resolve against the current folder), or a `RunConfig` built in code. A candidate's `python:`
may be the function itself, or an object with an `answer()` method, instead of an import path.

A run drives its own event loops (the runner's `asyncio.run`), so it never runs on a caller's loop:
`evaluate` called where a loop is running (a Jupyter cell, an async application) runs the evaluation in a
worker thread and waits for it; `aevaluate` runs it in a worker thread while the caller's loop goes on.
Either way the caller gets the finished run folder as a typed `Run` (`proctor.load_run`).
"""

from __future__ import annotations

import asyncio
import contextvars
import os
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from proctor.config import RunConfig, _describe_errors, load_config
from proctor.config_paths import config_dir
from proctor.errors import UserError
from proctor.kit.record import Run, load_run

ConfigLike = RunConfig | Mapping[str, Any] | str | os.PathLike[str]


def as_config(config: ConfigLike) -> RunConfig:
    """A `RunConfig` from a path, a dict or a `RunConfig`; a config mistake is a `UserError` naming the
    field and the fix, as for a YAML file."""
    if isinstance(config, RunConfig):
        return config
    if isinstance(config, str | os.PathLike):
        return load_config(Path(config))
    if isinstance(config, Mapping):
        raw = dict(config)
        protocol = raw.get("protocol")
        try:
            with config_dir(Path.cwd()):
                return RunConfig.model_validate(raw)
        except ValidationError as e:
            described = _describe_errors(e, extra=[protocol] if isinstance(protocol, str) else [])
            raise UserError(f"the config passed to proctor.evaluate is invalid: {described}.") from None
    raise TypeError(
        f"proctor.evaluate takes a YAML file's path, a dict or a RunConfig, not {type(config).__name__}"
    )


def _run(config: RunConfig, out: str | Path, resume: bool, progress: bool) -> Path:
    from proctor.runner import run_config

    # Absolute, so the Run stays valid when the caller changes folder afterwards (a notebook's %cd).
    return run_config(config, out=out, resume=resume, show_progress=progress).run_dir.resolve()


def evaluate(
    config: ConfigLike, *, out: str | Path = "runs", resume: bool = False, progress: bool = True
) -> Run:
    """Run `config` and return the finished run as a typed `Run` (close it, or use it in a `with`, when done).

    The run's folder is written under `out` (`<name>-<config hash>-<timestamp>`); `resume` continues the
    latest earlier run of the same config there; `progress` shows the progress display. A config mistake
    raises `proctor.errors.UserError` before anything runs. Called while an event loop is running in this
    thread (Jupyter), the run goes to a worker thread and this call waits for it, holding the loop; use
    `await aevaluate(...)` there to keep the loop free.
    """
    cfg = as_config(config)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return load_run(_run(cfg, out, resume, progress))
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="proctor-evaluate")
    try:
        context = contextvars.copy_context()
        run_dir = pool.submit(context.run, _run, cfg, out, resume, progress).result()
    finally:
        pool.shutdown(wait=False)
    return load_run(run_dir)


async def aevaluate(
    config: ConfigLike, *, out: str | Path = "runs", resume: bool = False, progress: bool = True
) -> Run:
    """`evaluate` for async code: the run goes to a worker thread while the caller's loop goes on (an
    async candidate function runs on the run's own loop, a sync one in a thread of its own)."""
    cfg = as_config(config)
    run_dir = await asyncio.to_thread(_run, cfg, out, resume, progress)
    return load_run(run_dir)
