"""Run an evaluation from Python: `proctor.evaluate(config) -> Run` and `await proctor.aevaluate(config)`.

`config` is a YAML file's path, a dict holding what such a file holds (validated the same way; relative
paths in it resolve against the current folder), or a `RunConfig` built in code. A candidate's `python:`
may be the function itself, or an object with an `answer()` method, instead of an import path.

A run drives its own event loops (the runner's `asyncio.run`), so it never runs on a caller's loop:
`evaluate` called where a loop is running (a Jupyter cell, an async application) runs the evaluation in a
worker thread and waits for it; `aevaluate` runs it in a worker thread while the caller's loop goes on.
Either way the caller gets the finished run folder as a typed `Run` (`proctor.load_run`).

`proctor.judge(question=, reference=, answer=)` and `proctor.judge_many(rows)` grade answers with the judge
stack without a run folder.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from proctor.config import RunConfig, _describe_errors, load_config
from proctor.config_paths import config_dir
from proctor.errors import UserError
from proctor.kit.record import Run, load_run
from proctor.kit.shared.judges import Panel
from proctor.models import get_model
from proctor.models.base import Model
from proctor.protocols.judge.command import DEFAULT_JUDGE
from proctor.protocols.judge.grade import JudgedAnswer, as_answer_item, grade

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


# --- grading answers without a run -----------------------------------------------------------------
JudgeModel = str | Model


def judge(
    *,
    question: str,
    reference: str,
    answer: str,
    model: JudgeModel = DEFAULT_JUDGE,
    rules: bool = True,
    guards: bool = True,
) -> JudgedAnswer:
    """Grade one answer against its reference with proctor's judge stack: the equivalence rules (no model
    call when one is sure), else the LLM judge `model` (a spec such as the default embedded
    `local/qwen2.5-coder-1.5b`, or a `Model`), then the guards. No run folder is written; model calls go
    through the call cache. Returns the verdict, P(correct), the deciding method and the reason."""
    return judge_many(
        [{"question": question, "reference": reference, "answer": answer}],
        model=model,
        rules=rules,
        guards=guards,
    )[0]


def judge_many(
    rows: Iterable[Mapping[str, Any]],
    *,
    model: JudgeModel = DEFAULT_JUDGE,
    rules: bool = True,
    guards: bool = True,
    question_field: str = "question",
    reference_field: str = "reference",
    answer_field: str = "answer",
) -> list[JudgedAnswer]:
    """`judge` on every row (a mapping with the three fields, named by `*_field`), concurrently under the
    model's limits; verdicts in row order. For a file, resumable runs and the judge card use
    `proctor judge FILE` (or `evaluate` with a `protocol: judge` config)."""
    items = []
    for i, row in enumerate(rows):
        missing = [f for f in (question_field, reference_field, answer_field) if f not in row]
        if missing:
            raise UserError(
                f"proctor.judge_many: row {i} has no field '{missing[0]}' (its fields: "
                f"{', '.join(map(str, row)) or 'none'}). Pass {missing[0].split('_')[0]}_field= naming it."
            )
        items.append(
            as_answer_item(
                str(i), str(row[question_field]), str(row[reference_field]), str(row[answer_field])
            )
        )

    async def grade_all() -> list[JudgedAnswer]:
        judge_model = get_model(model, where="proctor.judge model") if isinstance(model, str) else model
        try:
            return list(
                await asyncio.gather(
                    *(grade(it, Panel.single(judge_model), rules=rules, guards=guards) for it in items)
                )
            )
        finally:
            if isinstance(model, str):  # only the model made here is closed (its server stopped)
                await judge_model.aclose()

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(grade_all())
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="proctor-judge")
    try:
        return pool.submit(contextvars.copy_context().run, asyncio.run, grade_all()).result()
    finally:
        pool.shutdown(wait=False)
