"""Runs through the CLI against the mock server: kill -9 then --resume, injected faults of every kind,
and the API key never written anywhere."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from proctor.testing.mock_server import MockServer

SECRET = "sk-proctor-test-SECRET-7f3a9c1e"


def reply(body: dict[str, Any]) -> str:
    """Examiner, candidate and judge replies, distinct per request."""
    text = next(m["content"] for m in body["messages"] if m["role"] == "user")
    tag = abs(hash(text)) % 10_000
    if "Reference text" in text:
        return json.dumps(
            {
                "question": f"What is listed under key {tag} about the topic?",
                "answer": f"value {tag * 7919 % 10007}",
            }
        )
    if "<candidate_answer>" in text:
        return json.dumps({"reason": "compared", "verdict": "correct" if tag % 2 else "incorrect"})
    return f"The answer is fact {tag}."


def write_config(tmp_path: Path, base_url: str, *, num_questions: int, timeout_s: float = 30.0) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir(exist_ok=True)
    for i in range(num_questions):
        (docs / f"doc{i:03d}.md").write_text(f"# Topic {i}\n\n" + f"Statement {i} about the topic. " * 20)
    cfg = tmp_path / "run.yaml"
    cfg.write_text(f"""
protocol: qa
corpus: {{path: docs, min_chunk_chars: 50, max_chunk_chars: 4000}}
models:
  m:
    spec: openai/mock
    base_url: {base_url}
    api_key_env: PROCTOR_TEST_KEY
    max_concurrency: 4
    timeout_s: {timeout_s}
    max_retries: 6
roles: {{examiner: m, judge: m}}
candidates:
  - {{name: a, model: m}}
  - {{name: b, model: m, retriever: bm25, k: 1}}
qa: {{num_questions: {num_questions}}}
""")
    return cfg


def proctor(
    *args: str, env: dict[str, str], wait: bool = True
) -> subprocess.Popen[str] | subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "proctor.cli.main", *args]
    if not wait:
        return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)


def env_for(tmp_path: Path, cache: str) -> dict[str, str]:
    return {**os.environ, "PROCTOR_CACHE_DIR": str(tmp_path / cache), "PROCTOR_TEST_KEY": SECRET}


def chat_bodies(server: MockServer) -> list[str]:
    return [
        json.dumps(r.body, sort_keys=True) for r in server.requests if r.path.endswith("/chat/completions")
    ]


def test_kill_and_resume_loses_nothing_and_repeats_only_in_flight(tmp_path: Path) -> None:
    n = 12
    with MockServer(latency_ms=60, reply=reply) as server:
        cfg = write_config(tmp_path, server.base_url, num_questions=n)
        # Reference: an uninterrupted run in its own cache.
        done = proctor(
            "run", str(cfg), "--quiet", "--out", str(tmp_path / "ref"), env=env_for(tmp_path, "c1")
        )
        assert done.returncode == 0, done.stderr
        reference_calls = len(chat_bodies(server))
        server.reset()

        proc = proctor(
            "run",
            str(cfg),
            "--quiet",
            "--out",
            str(tmp_path / "runs"),
            env=env_for(tmp_path, "c2"),
            wait=False,
        )
        deadline = time.time() + 120
        while len(chat_bodies(server)) < reference_calls // 2 and time.time() < deadline:
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        before_kill = len(chat_bodies(server))
        assert 0 < before_kill < reference_calls

        resumed = proctor(
            "run",
            str(cfg),
            "--quiet",
            "--resume",
            "--out",
            str(tmp_path / "runs"),
            env=env_for(tmp_path, "c2"),
        )
        assert resumed.returncode == 0, resumed.stderr
        total = len(chat_bodies(server))
        in_flight_max = 4  # max_concurrency
        assert reference_calls <= total <= reference_calls + in_flight_max

    run_dirs = list((tmp_path / "runs").iterdir())
    assert len(run_dirs) == 1
    con = sqlite3.connect(run_dirs[0] / "run.sqlite")
    kinds = dict(con.execute("SELECT kind, COUNT(*) FROM items GROUP BY kind").fetchall())
    assert kinds == {"question": n, "answer": 2 * n}
    assert con.execute("SELECT COUNT(*) FROM items WHERE status != 'done'").fetchone()[0] == 0
    ref_dir = next((tmp_path / "ref").iterdir())
    ref = json.loads((ref_dir / "results.json").read_text())
    got = json.loads((run_dirs[0] / "results.json").read_text())
    assert got["candidates"] == ref["candidates"]


def test_faults_of_every_kind_run_completes_with_every_item_accounted(tmp_path: Path) -> None:
    n = 10
    with MockServer(
        reply=reply,
        fault_rate=0.2,
        fault_kinds=("429", "500", "hang", "malformed", "truncated"),
        retry_after_s=0.1,
        hang_s=3.0,
        seed=7,
    ) as server:
        cfg = write_config(tmp_path, server.base_url, num_questions=n, timeout_s=1.0)
        done = proctor(
            "run", str(cfg), "--quiet", "--out", str(tmp_path / "runs"), env=env_for(tmp_path, "c")
        )
        assert done.returncode == 0, done.stderr
        faults = {r.fault for r in server.requests if r.fault}
        assert faults == {"429", "500", "hang", "malformed", "truncated"}
    run_dir = next((tmp_path / "runs").iterdir())
    con = sqlite3.connect(run_dir / "run.sqlite")
    rows = con.execute("SELECT kind, status, error_cause FROM items").fetchall()
    assert sum(1 for k, _, _ in rows if k == "question") == n
    assert sum(1 for k, _, _ in rows if k == "answer") == 2 * n
    for _kind, status, cause in rows:
        assert status == "done" or cause, "every item is answered or carries its error"
    results = json.loads((run_dir / "results.json").read_text())
    for c in results["candidates"].values():
        assert c["answered"] + c["answer_errors"] == c["questions"]


def test_api_key_never_stored(tmp_path: Path) -> None:
    with MockServer(reply=reply) as server:
        cfg = write_config(tmp_path, server.base_url, num_questions=3)
        env = env_for(tmp_path, "cache")
        done = proctor("run", str(cfg), "--out", str(tmp_path / "runs"), env=env)
        assert done.returncode == 0, done.stderr
        assert any(r.headers.get("Authorization") == f"Bearer {SECRET}" for r in server.requests)
    assert SECRET not in done.stdout + done.stderr
    files = [p for p in tmp_path.rglob("*") if p.is_file() and p.name != "run.yaml"]
    assert any(p.name == "calls.sqlite" for p in files)
    assert any(p.name == "report.html" for p in files)
    for p in files:
        assert SECRET.encode() not in p.read_bytes(), p


@pytest.mark.parametrize("unused", [None])
def test_missing_key_variable_is_a_user_error(tmp_path: Path, unused: None) -> None:
    cfg = write_config(tmp_path, "http://127.0.0.1:9/v1", num_questions=1)
    env = {k: v for k, v in os.environ.items() if k != "PROCTOR_TEST_KEY"}
    r = proctor("run", str(cfg), env=env)
    assert r.returncode == 2
    assert "PROCTOR_TEST_KEY" in r.stderr and "models.m" in r.stderr
    assert "Traceback" not in r.stderr


def test_store_close_leaves_a_complete_file_without_the_wal(tmp_path) -> None:
    """A user who copies a finished run's run.sqlite alone keeps everything (the WAL is checkpointed)."""
    import shutil
    import threading

    from proctor.store import RunStore

    store = RunStore(tmp_path / "run" / "run.sqlite")
    store.put_item("a", "answer", {"text": "x" * 5000})
    worker = threading.Thread(target=lambda: store.put_item("b", "answer", {"text": "y"}))
    worker.start()
    worker.join()  # a second thread's connection holds WAL pages too
    store.close()
    assert (
        not (tmp_path / "run" / "run.sqlite-wal").exists()
        or (tmp_path / "run" / "run.sqlite-wal").stat().st_size == 0
    )
    (tmp_path / "copy").mkdir()
    shutil.copy(tmp_path / "run" / "run.sqlite", tmp_path / "copy" / "run.sqlite")
    copied = RunStore(tmp_path / "copy" / "run.sqlite")
    assert {it["key"] for it in copied.items()} == {"a", "b"}
