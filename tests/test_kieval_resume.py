"""KIEval resumes each conversation from its last completed round without repeating paid calls:
(1) in process, a crash injected after N evaluator calls, resumed with an EMPTY call cache so only the run
store can prevent repeats; (2) through the CLI, `kill -9` mid-conversation against the mock server, then
`--resume`, again with an empty cache."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from proctor.models.scripted import register_script
from proctor.runner import run_config
from proctor.testing.mock_server import MockServer

TOPICS = ["photosynthesis", "gravity", "evaporation", "conduction", "digestion", "magnetism"]


def write_questions(path: Path) -> Path:
    rows = [
        {
            "id": f"q{i}",
            "question": f"Which statement about {t} is true?",
            "choices": [f"{t} fact one", f"{t} fact two", f"{t} fact three", f"{t} fact four"],
            "answer": "ABCD"[i % 4],
            "answer_index": i % 4,
        }
        for i, t in enumerate(TOPICS)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _digest(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)


def role_of(messages: list[dict[str, str]]) -> str:
    system = messages[0]["content"] if messages and messages[0]["role"] == "system" else ""
    if "impartial evaluator" in system:
        return "evaluator"
    if "expert examiner" in system:
        return "interactor"
    return "candidate"


def reply_for(messages: list[dict[str, str]], max_tokens: int) -> str:
    """Deterministic replies for every role (the same in the test process and the mock server).

    Candidates a and b differ only in max_tokens, which therefore shapes the reply: otherwise their
    interviews would be identical and share calls (single flight), which blurs the call counts."""
    role = role_of(messages)
    text = "\n".join(m["content"] for m in messages) + f"|{max_tokens}"
    h = _digest(text)
    if role == "interactor":
        return f"Follow-up {h % 1000}: what would change if the conditions were different?"
    if role == "candidate":
        if len(messages) == 2:
            return f"{'ABCD'[h % 4]}. Because of the definition."
        return f"It depends on detail {h % 997}."
    score = 1 + h % 4
    aspect = {"comment": "ok", "score": score}
    stop = h % 5 == 0
    return json.dumps(
        {
            "accuracy": aspect,
            "logic": aspect,
            "relevance": aspect,
            "coherence": aspect,
            "conciseness": aspect,
            "overall_comment": "ok",
            "overall_score": score,
            "stop_conversation": stop,
            "stop_reason": "repetition" if stop else "none",
        }
    )


# --- in process: crash injected after N evaluator calls ------------------------------------------

CALLS: Counter[str] = Counter()
CRASH_AFTER: dict[str, int | None] = {"evaluator": None}


class InjectedCrash(RuntimeError):
    """Not a model error: it escapes the protocol like a crash of the process would."""


def scripted(messages: list[dict[str, str]], params: Any) -> str:
    """Counts the calls that return a reply. Once the crash has fired, every later call of that run fails
    too and is not counted: a crashed process makes no more calls."""
    role = role_of(messages)
    limit = CRASH_AFTER["evaluator"]
    if limit is not None and (CALLS["crashed"] or (role == "evaluator" and CALLS["evaluator"] >= limit)):
        CALLS["crashed"] = 1
        raise InjectedCrash("crash injected mid-conversation")
    CALLS[role] += 1
    return reply_for(messages, params.max_tokens)


register_script("kv-resume", scripted)


def write_config(tmp_path: Path, spec: str, extra_model: str = "") -> Path:
    seed = write_questions(tmp_path / "seed.jsonl")
    cfg = tmp_path / "kieval.yaml"
    cfg.write_text(
        f"""
protocol: kieval
corpus: {{}}
models:
  m:
    spec: {spec}
{extra_model}
roles: {{interactor: m, evaluator: m}}
candidates:
  - {{name: a, model: m}}
  - {{name: b, model: m, max_tokens: 64}}
kieval:
  questions: {{path: {seed}}}
  max_rounds: 4
"""
    )
    return cfg


def _round_status(run_dir: Path) -> dict[str, str]:
    con = sqlite3.connect(run_dir / "run.sqlite")
    return dict(con.execute("SELECT key, status FROM items WHERE kind='kieval_round'").fetchall())


def _scored_rounds(run_dir: Path) -> set[str]:
    """Rounds completed with their evaluation (a round is stored once played, then scored by the panel)."""
    con = sqlite3.connect(run_dir / "run.sqlite")
    rows = con.execute("SELECT key, data FROM items WHERE kind='kieval_round' AND status='done'").fetchall()
    return {k for k, d in rows if json.loads(d).get("overall_score") is not None}


def test_crash_then_resume_repeats_no_stored_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = write_config(tmp_path, "scripted/kv-resume")
    monkeypatch.setenv("PROCTOR_CACHE_DIR", str(tmp_path / "cache-ref"))
    CALLS.clear()
    CRASH_AFTER["evaluator"] = None
    reference = run_config(cfg, out=tmp_path / "ref", show_progress=False)
    ref_calls = sum(CALLS.values())
    ref_evaluator = CALLS["evaluator"]
    assert ref_evaluator > 12, "the conversations have several rounds"

    monkeypatch.setenv("PROCTOR_CACHE_DIR", str(tmp_path / "cache-1"))
    CALLS.clear()
    CRASH_AFTER["evaluator"] = ref_evaluator // 2
    with pytest.raises(InjectedCrash):
        run_config(cfg, out=tmp_path / "runs", show_progress=False)
    crashed_calls = sum(v for k, v in CALLS.items() if k != "crashed")
    run_dir = next((tmp_path / "runs").iterdir())
    done_at_crash = _scored_rounds(run_dir)
    assert done_at_crash and len(done_at_crash) < len(_round_status(reference.run_dir))
    con = sqlite3.connect(run_dir / "run.sqlite")
    last_call_id = con.execute("SELECT MAX(id) FROM model_calls").fetchone()[0]
    # Some conversation stopped between rounds: done rounds and not-yet-started rounds coexist.
    convs_mid = {
        json.loads(d)["conversation"]
        for (d,) in con.execute("SELECT data FROM items WHERE kind='kieval_round' AND status='done'")
    }
    assert convs_mid

    # Resume with an EMPTY cache: only the run store can spare the calls made before the crash.
    monkeypatch.setenv("PROCTOR_CACHE_DIR", str(tmp_path / "cache-2"))
    CALLS.clear()
    CRASH_AFTER["evaluator"] = None
    resumed = run_config(cfg, out=tmp_path / "runs", resume=True, show_progress=False)
    assert resumed.run_dir == run_dir
    resumed_calls = sum(CALLS.values())
    # Every call is made exactly once across the crashed and the resumed run.
    assert crashed_calls + resumed_calls == ref_calls
    # No round completed before the crash was asked again.
    marks = ",".join("?" * len(done_at_crash))
    repeated = con.execute(
        f"SELECT COUNT(*) FROM model_calls WHERE id > ? AND item_key IN ({marks})",
        (last_call_id, *done_at_crash),
    ).fetchone()[0]
    assert repeated == 0
    # Same conversations, same scores as the run that was never interrupted.
    assert resumed.summary["candidates"] == reference.summary["candidates"]
    ref_json = json.loads((reference.run_dir / "results.json").read_text())
    got_json = json.loads((resumed.run_dir / "results.json").read_text())
    assert got_json["candidates"] == ref_json["candidates"]
    statuses = set(_round_status(run_dir).values())
    assert statuses <= {"done"}


# --- through the CLI: kill -9 mid-conversation, then --resume ------------------------------------


def mock_reply(body: dict[str, Any]) -> str:
    return reply_for(body["messages"], body["max_tokens"])


def proctor(*args: str, env: dict[str, str], wait: bool = True) -> Any:
    cmd = [sys.executable, "-m", "proctor.cli.main", *args]
    if not wait:
        return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)


def chat_calls(server: MockServer) -> int:
    return sum(1 for r in server.requests if r.path.endswith("/chat/completions"))


def test_kill_9_mid_conversation_then_resume_repeats_only_in_flight(tmp_path: Path) -> None:
    with MockServer(latency_ms=40, reply=mock_reply) as server:
        cfg = write_config(
            tmp_path,
            "openai/mock",
            f"    base_url: {server.base_url}\n    api_key_env: PROCTOR_TEST_KEY\n    max_concurrency: 4",
        )
        env = {**os.environ, "PROCTOR_TEST_KEY": "sk-test"}
        ref = proctor(
            "run",
            str(cfg),
            "--quiet",
            "--out",
            str(tmp_path / "ref"),
            env={**env, "PROCTOR_CACHE_DIR": str(tmp_path / "c0")},
        )
        assert ref.returncode == 0, ref.stderr
        reference_calls = chat_calls(server)
        server.reset()

        proc = proctor(
            "run",
            str(cfg),
            "--quiet",
            "--out",
            str(tmp_path / "runs"),
            env={**env, "PROCTOR_CACHE_DIR": str(tmp_path / "c1")},
            wait=False,
        )
        deadline = time.time() + 120
        while chat_calls(server) < reference_calls // 2 and time.time() < deadline:
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        before = chat_calls(server)
        assert 0 < before < reference_calls
        run_dir = next((tmp_path / "runs").iterdir())
        at_kill = _round_status(run_dir)
        assert "done" in at_kill.values(), "killed mid-conversation, after some rounds were stored"

        # A fresh cache: what the killed process stored in the run is all the resumed run has.
        resumed = proctor(
            "run",
            str(cfg),
            "--quiet",
            "--resume",
            "--out",
            str(tmp_path / "runs"),
            env={**env, "PROCTOR_CACHE_DIR": str(tmp_path / "c2")},
        )
        assert resumed.returncode == 0, resumed.stderr
        total = chat_calls(server)
        assert reference_calls <= total <= reference_calls + 4  # at most the calls in flight (concurrency 4)

    ref_dir = next((tmp_path / "ref").iterdir())
    ref_results = json.loads((ref_dir / "results.json").read_text())
    got = json.loads((run_dir / "results.json").read_text())
    assert got["candidates"] == ref_results["candidates"]
    assert set(_round_status(run_dir).values()) == {"done"}
