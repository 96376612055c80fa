"""Killed runs, with a real `proctor run` process against the mock server: SIGTERM or SIGINT marks the run
failed ("interrupted: SIGTERM") in the store, the viewer and proctor.log before the process exits; a run
killed with -9 stays `running` in its store but reads as `interrupted` (its recorded process is gone),
and `--resume` continues it to the end."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from proctor.store.process import ProcessMark, is_gone, this_process
from proctor.store.record import RunRecord
from proctor.store.run_store import RunStore
from proctor.testing.mock_server import MockServer, minimal_instance
from proctor.viewer.rundir import summarize


def _reply(body: dict[str, Any]) -> str:
    rf = body.get("response_format") or {}
    schema = (rf.get("json_schema") or {}).get("schema")
    last = str(body["messages"][-1]["content"])
    if schema and "question" in schema.get("properties", {}):
        n = abs(hash(last)) % 10_000
        return json.dumps({"question": f"What is recorded as entry {n}?", "answer": f"entry {n}"})
    if schema:
        return json.dumps(minimal_instance(schema))
    return "Perhaps it is an entry."


def _config(tmp_path: Path, base_url: str) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(8):
        (docs / f"d{i}.md").write_text(f"# Place {i}\n\nPlace {i} keeps its records in ledger {i * 7}.\n")
    path = tmp_path / "qa.yaml"
    path.write_text(
        f"""
protocol: qa
corpus: {{path: docs, min_chunk_chars: 10, max_chunk_chars: 2000}}
models:
  m: {{spec: openai/mock, base_url: "{base_url}", api_key_env: T28_KEY, max_concurrency: 1}}
roles: {{examiner: m, judge: m}}
candidates: [{{name: llm, model: m}}]
qa: {{num_questions: 8, judges: [with_reference]}}
"""
    )
    return path


def _start(tmp_path: Path, cfg: Path, *extra: str) -> subprocess.Popen[str]:
    env = {**os.environ, "T28_KEY": "sk-test", "PROCTOR_CACHE_DIR": str(tmp_path / "cache")}
    cmd = [sys.executable, "-m", "proctor.cli.main", "run", str(cfg), "--out", str(tmp_path / "runs"), *extra]
    # SIGINT at its default in the child: a shell starts background jobs with SIGINT ignored, and an
    # ignored signal stays ignored across exec (so a suite run as `... &` would never see Ctrl-C work).
    return subprocess.Popen(
        cmd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def _wait_for_calls(server: MockServer, n: int) -> None:
    deadline = time.time() + 120
    while server.count < n and time.time() < deadline:
        time.sleep(0.02)
    assert server.count >= n, "the run made no calls"


def _stored_status(run_dir: Path) -> str:
    store = RunStore(run_dir / "run.sqlite")
    try:
        info = store.run_info()
    finally:
        store.close()
    assert info is not None
    return str(info["status"])


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_signal_marks_the_run_failed_everywhere(tmp_path: Path, sig: signal.Signals, code: int) -> None:
    with MockServer(latency_ms=150, reply=_reply) as server:
        proc = _start(tmp_path, _config(tmp_path, server.base_url), "--quiet")
        _wait_for_calls(server, 3)
        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == code, stderr
    assert "Traceback" not in stderr
    run_dir = next((tmp_path / "runs").iterdir())
    cause = f"interrupted: {sig.name}"
    assert _stored_status(run_dir) == "failed"
    summary = summarize(run_dir)  # the viewer's runs list
    assert summary.status == "failed" and summary.failure == cause
    log = (run_dir / "proctor.log").read_text()
    assert f"failed: {cause}; continue it with --resume" in log


def test_kill_9_reads_as_interrupted_and_resume_finishes_it(tmp_path: Path) -> None:
    with MockServer(latency_ms=100, reply=_reply) as server:
        cfg = _config(tmp_path, server.base_url)
        proc = _start(tmp_path, cfg, "--quiet")
        _wait_for_calls(server, 3)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        run_dir = next((tmp_path / "runs").iterdir())
        assert _stored_status(run_dir) == "running"  # nobody marked it
        with RunRecord(run_dir) as record:
            info = record.info()
        assert info is not None and info.status == "interrupted"
        summary = summarize(run_dir)
        assert summary.status == "interrupted" and summary.failure and "--resume" in summary.failure

        resumed = _start(tmp_path, cfg, "--quiet", "--resume")
        _, stderr = resumed.communicate(timeout=120)
        assert resumed.returncode == 0, stderr
    assert [p.name for p in (tmp_path / "runs").iterdir()] == [run_dir.name]  # the same folder
    assert _stored_status(run_dir) == "finished"
    assert summarize(run_dir).status == "finished"


def test_a_live_process_or_another_host_is_not_gone() -> None:
    me = this_process()
    assert not is_gone(me)
    assert not is_gone(me.model_copy(update={"host": "elsewhere"}))
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert is_gone(ProcessMark(pid=child.pid, host=me.host))
    # The same pid with another start time is another process: the recorded one is gone.
    if me.start_ticks is not None:
        assert is_gone(me.model_copy(update={"start_ticks": me.start_ticks - 1}))
