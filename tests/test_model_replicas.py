"""Model replicas: `ReplicaPool` behind the one call path — routing, failover, cache identity, config."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from proctor.config import load_config
from proctor.errors import ModelCallError, UserError
from proctor.models import Model, get_model
from proctor.models.cache import CallCache
from proctor.models.recording import CallRecord, call_scope
from proctor.models.replicas import ReplicaPool
from proctor.models.retry import RetryableError, RetryPolicy
from proctor.models.types import GenerationParams, Message, RawReply, Usage
from proctor.testing.mock_server import MockServer


def _q(i: int) -> list[Message]:
    return [{"role": "user", "content": f"Replica question number {i}?"}]


class Recorder:
    def __init__(self) -> None:
        self.records: list[CallRecord] = []

    def record_call(self, record: CallRecord) -> None:
        self.records.append(record)


@pytest.fixture
def servers() -> Iterator[list[MockServer]]:
    """Three mock servers (start latency 0; tests configure them)."""
    started = [MockServer().start() for _ in range(3)]
    yield started
    for s in started:
        s.stop()


def pool_of(model: Model) -> ReplicaPool:
    assert isinstance(model.provider, ReplicaPool)
    return model.provider


def replicas_model(urls: list[str], **kw: Any) -> Model:
    kw.setdefault("retry_base_delay_s", 0.01)
    kw.setdefault("timeout_s", 5.0)
    kw.setdefault("cache", False)
    return get_model("openai/mock", base_url=urls, where="models.m", **kw)


async def _run_all(model: Model, n: int, offset: int = 0) -> list[str]:
    outs = await asyncio.gather(*(model.generate(_q(offset + i)) for i in range(n)))
    return [c.text for c in outs]


# --- routing ----------------------------------------------------------------------------------------


async def test_concurrent_calls_spread_by_least_outstanding(servers: list[MockServer]) -> None:
    # Jittered latency: round-robin would pile a third request on a slow server; least-outstanding never
    # puts more than max_concurrency / 3 on one server, since a freed slot's server is the least busy.
    for s in servers:
        s.configure(latency_ms=40, jitter_ms=30)
    model = replicas_model([s.base_url for s in servers], max_concurrency=6)
    try:
        texts = await _run_all(model, 45)
    finally:
        await model.aclose()
    assert len(set(texts)) == 45
    counts = [s.count for s in servers]
    assert sum(counts) == 45 and min(counts) >= 10, counts
    stats = pool_of(model).stats()
    assert [st.calls for st in stats] == counts and [st.ok for st in stats] == counts
    assert all(st.max_outstanding == 2 and st.outstanding == 0 and st.failures == 0 for st in stats), stats
    assert max(s.max_in_flight for s in servers) == 2


async def test_slow_replica_gets_less_work(servers: list[MockServer]) -> None:
    servers[0].configure(latency_ms=300)
    servers[1].configure(latency_ms=10)
    servers[2].configure(latency_ms=10)
    model = replicas_model([s.base_url for s in servers], max_concurrency=3)
    try:
        await _run_all(model, 60)
    finally:
        await model.aclose()
    slow, fast1, fast2 = (s.count for s in servers)
    assert slow + fast1 + fast2 == 60
    assert slow <= 5 and fast1 >= 20 and fast2 >= 20, (slow, fast1, fast2)


async def test_sequential_calls_rotate_over_replicas(servers: list[MockServer]) -> None:
    model = replicas_model([s.base_url for s in servers])
    try:
        for i in range(12):
            await model.generate(_q(i))
    finally:
        await model.aclose()
    assert [s.count for s in servers] == [4, 4, 4]


# --- results and cache identity ---------------------------------------------------------------------


async def test_results_identical_and_cache_shared_across_replica_counts(
    servers: list[MockServer], tmp_path: Path
) -> None:
    a, b, c = (s.base_url for s in servers)
    cache = CallCache(tmp_path / "calls.sqlite")
    single = get_model("openai/mock", base_url=a, cache=CallCache(tmp_path / "single.sqlite"))
    pooled = replicas_model([a, b, c], cache=cache, max_concurrency=6)
    try:
        ref = await _run_all(single, 12)
        got = await _run_all(pooled, 12)
        assert got == ref  # who answered does not change the reply
        assert all(s.count > 0 for s in servers[1:])
        for s in servers:
            s.reset()
        # The same cache with 1 server (plain base_url = the first replica) and with a different pool
        # whose first URL is the same: every call is a hit, no server is asked.
        for urls in (a, [a], [a, c], [a, c, b]):
            again = get_model("openai/mock", base_url=urls, cache=cache)
            try:
                outs = await asyncio.gather(*(again.generate(_q(i)) for i in range(12)))
            finally:
                await again.aclose()
            assert [o.text for o in outs] == ref and all(o.cached for o in outs), urls
        assert sum(s.count for s in servers) == 0
        # The key still tells models apart: another model name on the same servers is not a hit.
        other = get_model("openai/other", base_url=[a, b, c], cache=cache)
        try:
            assert not (await other.generate(_q(0))).cached
        finally:
            await other.aclose()
    finally:
        await single.aclose()
        await pooled.aclose()


def test_local_replicas_share_identity_and_split_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    one = get_model("local/qwen2.5-coder-0.5b", cache=False)
    four = get_model("local/qwen2.5-coder-0.5b", replicas=4, cache=False)
    other = get_model("local/qwen2.5-coder-1.5b", replicas=4, cache=False)
    pool = pool_of(four)
    assert pool.identity() == one.provider.identity() != other.provider.identity()
    assert "base_url" not in pool.identity() and four.spec == one.spec
    locals_ = pool.replicas
    assert [p.replica for p in locals_] == [0, 1, 2, 3]  # type: ignore[attr-defined]
    assert {p.settings.threads for p in locals_} == {2}  # type: ignore[attr-defined]
    assert four.max_concurrency == 4 * locals_[0].n_parallel  # type: ignore[attr-defined]
    assert pool.supports_tools is True and pool.supports_prompt_logprobs is False
    # An explicit max_concurrency is the total, split into per-server slots.
    capped = get_model("local/qwen2.5-coder-0.5b", replicas=3, max_concurrency=7, threads=1, cache=False)
    assert capped.max_concurrency == 7
    assert [p.settings.n_parallel for p in pool_of(capped).replicas] == [3, 3, 3]  # type: ignore[attr-defined]
    assert [p.settings.threads for p in pool_of(capped).replicas] == [1, 1, 1]  # type: ignore[attr-defined]
    # One server per replica (distinct processes, distinct logs); replica 0 is the plain model's server.
    from proctor.models.local import server as server_module
    from proctor.models.local.server import get_server

    monkeypatch.setattr(server_module, "_SERVERS", {})  # these never start; keep them out of the registry
    w = Path("/nonexistent/qwen.gguf")
    settings = locals_[0].settings  # type: ignore[attr-defined]
    servers = [get_server(w, settings, i) for i in range(4)]
    assert len({id(s) for s in servers}) == 4 and len({s.log_path for s in servers}) == 4
    assert get_server(w, settings) is servers[0]


# --- failover -----------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stats(base_url: str) -> dict[str, Any]:
    with urllib.request.urlopen(base_url.removesuffix("/v1") + "/_mock/stats", timeout=2) as r:
        return dict(json.loads(r.read()))


async def test_replica_killed_mid_run_is_routed_around(servers: list[MockServer]) -> None:
    # The victim is a separate process, killed with SIGKILL while requests are in flight on it.
    victim = subprocess.Popen(
        [sys.executable, "-m", "proctor.testing.mock_server", "--port", "0", "--latency-ms", "200"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert victim.stdout is not None
        victim_url = victim.stdout.readline().strip()
        assert victim_url.startswith("http"), victim_url
        for s in servers[:2]:
            s.configure(latency_ms=200)
        urls = [servers[0].base_url, victim_url, servers[1].base_url]
        model = replicas_model(urls, max_concurrency=6, replica_cooldown_s=60)
        recorder = Recorder()

        async def one(i: int) -> str:
            with call_scope(recorder=recorder, role="candidate", item_key=f"item-{i}"):
                return (await model.generate(_q(i))).text

        run = asyncio.gather(*(one(i) for i in range(36)))
        task = asyncio.ensure_future(run)
        in_flight = 0
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # after a first wave, with requests in flight on the victim
            st = await asyncio.to_thread(_stats, victim_url)
            if st["count"] >= 3 and st["in_flight"] >= 1:
                in_flight = st["in_flight"]
                break
            await asyncio.sleep(0.02)
        assert in_flight >= 1
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait(5)
        texts = await asyncio.wait_for(task, 30)
        await model.aclose()
    finally:
        if victim.poll() is None:
            victim.kill()
            victim.wait(5)

    assert len(texts) == 36 and all(f"number {i}?" in t for i, t in enumerate(texts))  # every item done
    s0, sv, s2 = pool_of(model).stats()
    assert sv.failures >= 1 and sv.downs == 1 and sv.down and sv.outstanding == 0, sv
    assert s0.failures == s2.failures == 0 and s0.ok + sv.ok + s2.ok == 36
    # Its in-flight items were retried, on the other replicas, and say so in their call records.
    retried = {r.item_key for r in recorder.records if r.attempts > 1}
    assert len(retried) == sv.failures >= 1
    assert all(r.error is None for r in recorder.records) and len(recorder.records) == 36
    survivors = {json.dumps(r.body["messages"]) for s in servers[:2] for r in s.chat_requests() if r.body}
    for key in retried:
        assert json.dumps(_q(int(str(key).split("-")[1]))) in survivors


async def test_all_replicas_down_is_a_recorded_error_not_a_hang() -> None:
    urls = [f"http://127.0.0.1:{_free_port()}/v1" for _ in range(2)]  # nothing listens there
    model = replicas_model(urls, max_retries=2, timeout_s=1.0)
    recorder = Recorder()
    t0 = time.monotonic()
    with call_scope(recorder=recorder, role="judge", item_key="k"), pytest.raises(ModelCallError) as e:
        await asyncio.wait_for(model.generate(_q(0)), 15)
    await model.aclose()
    assert time.monotonic() - t0 < 5
    assert e.value.cause == "connection" and "gave up after 3 attempts" in str(e.value)
    assert "replica" in str(e.value)
    (rec,) = recorder.records
    assert rec.error == "connection" and rec.attempts == 3
    stats = pool_of(model).stats()
    assert sum(st.calls for st in stats) == 3 and all(st.down and st.failures >= 1 for st in stats)


# --- the pool on its own (fake providers, no HTTP) ------------------------------------------------------


class FakeServer:
    """A provider that answers after `delay_s`, or fails with `fail` (a RetryableError cause) while set."""

    provider = "openai"
    supports_json_schema = True

    def __init__(self, url: str, model: str = "m") -> None:
        self.model = model
        self.base_url = url
        self.fail: str | None = None
        self.status: int | None = None
        self.calls = 0
        self.closed = False

    def identity(self) -> dict[str, Any]:
        return {"provider": "openai", "model": self.model, "base_url": self.base_url}

    async def complete(self, messages: list[Message], params: GenerationParams) -> RawReply:
        self.calls += 1
        await asyncio.sleep(0)
        if self.fail is not None:
            raise RetryableError(f"{self.fail} failure", cause=self.fail, status=self.status)
        return RawReply(text=f"from {self.base_url}", usage=Usage(1, 1))

    async def aclose(self) -> None:
        self.closed = True


async def test_down_replica_cools_down_then_gets_one_probe() -> None:
    a, b = FakeServer("http://a/v1"), FakeServer("http://b/v1")
    pool = ReplicaPool([a, b], where="models.m", cooldown_s=0.2)
    model = Model(pool, max_concurrency=4, retry=RetryPolicy(max_retries=3, base_delay_s=0.001))
    a.fail = "connection"
    # The first call lands on a, fails, and the retry goes to b; a is now skipped.
    assert (await model.generate(_q(0))).text == "from http://b/v1"
    for i in range(1, 5):
        assert (await model.generate(_q(i))).text == "from http://b/v1"
    assert a.calls == 1 and pool.stats()[0].down
    # After the cool-down a still-dead replica costs one attempt, then cools down again.
    await asyncio.sleep(0.25)
    assert not pool.stats()[0].down  # half open
    await model.generate(_q(10))
    await model.generate(_q(11))
    assert a.calls == 2 and pool.stats()[0].failures == 2 and pool.stats()[0].downs == 2
    # Revived: the next probe after the cool-down succeeds and a is back in rotation.
    a.fail = None
    await asyncio.sleep(0.25)
    texts = [(await model.generate(_q(20 + i))).text for i in range(4)]
    assert texts.count("from http://a/v1") == 2 and not pool.stats()[0].down
    await model.aclose()
    assert a.closed and b.closed


@pytest.mark.parametrize(
    ("cause", "status", "down"),
    [
        ("http_429", 429, False),
        ("bad_response", None, False),
        ("http_503", 503, True),
        ("timeout", None, True),
        ("truncated", None, True),
    ],
)
async def test_which_failures_take_a_replica_down(cause: str, status: int | None, down: bool) -> None:
    a, b = FakeServer("http://a/v1"), FakeServer("http://b/v1")
    a.fail, a.status = cause, status
    pool = ReplicaPool([a, b], where="models.m", cooldown_s=60)
    with pytest.raises(RetryableError) as e:
        await pool.complete(_q(0), GenerationParams())
    assert e.value.cause == cause and e.value.status == status and "replica 0 (http://a/v1)" in str(e.value)
    st = pool.stats()[0]
    assert st.failures == 1 and st.down is down and st.downs == int(down)


async def test_all_down_tries_the_least_recently_failed() -> None:
    a, b, c = FakeServer("http://a/v1"), FakeServer("http://b/v1"), FakeServer("http://c/v1")
    for s in (a, b, c):
        s.fail = "connection"
    pool = ReplicaPool([a, b, c], where="models.m", cooldown_s=60)
    order = []
    for _ in range(6):
        with pytest.raises(RetryableError) as e:
            await pool.complete(_q(0), GenerationParams())
        order.append(str(e.value).split(" (")[0])
    assert order == ["replica 0", "replica 1", "replica 2"] * 2


def test_pool_refuses_replicas_of_different_models() -> None:
    with pytest.raises(UserError, match=r"models\.m: replica 1 serves openai/other"):
        ReplicaPool([FakeServer("http://a/v1"), FakeServer("http://b/v1", "other")], where="models.m")
    with pytest.raises(UserError, match=r"models\.m"):
        ReplicaPool([], where="models.m")


# --- configuration ------------------------------------------------------------------------------------

BASE = """
protocol: qa
corpus: {path: docs}
models:
  m: %s
roles: {examiner: m, judge: m}
candidates: [{name: c, model: m}]
"""


def _config(tmp_path: Path, model: str) -> Path:
    p = tmp_path / "run.yaml"
    p.write_text(BASE % model)
    return p


def test_config_accepts_base_url_lists_and_local_replicas(tmp_path: Path) -> None:
    cfg = load_config(
        _config(tmp_path, "{spec: openai/q, base_url: [http://h1:8000/v1, http://h2:8000/v1], replicas: 2}")
    )
    assert cfg.models["m"].base_url == ["http://h1:8000/v1", "http://h2:8000/v1"]
    cfg2 = load_config(_config(tmp_path, "{spec: local/qwen2.5-coder-0.5b, replicas: 3, threads: 1}"))
    assert cfg2.models["m"].replicas == 3
    # The replica count is where the work runs, not what it measures: same run (for --resume).
    cfg1 = load_config(_config(tmp_path, "{spec: local/qwen2.5-coder-0.5b, threads: 1}"))
    assert cfg1.config_hash() == cfg2.config_hash()
    from proctor.runner import build_models

    models = build_models(cfg)
    assert [r.base_url for r in pool_of(models["m"]).replicas] == cfg.models["m"].base_url  # type: ignore[attr-defined]
    assert models["m"].max_concurrency == 32
    assert len(pool_of(build_models(cfg2)["m"]).replicas) == 3


@pytest.mark.parametrize(
    ("model", "needles"),
    [
        ("{spec: openai/q, base_url: []}", ["models.m.base_url", "empty list"]),
        (
            "{spec: openai/q, base_url: [http://h:1/v1, http://h:1/v1/]}",
            ["models.m.base_url", "twice", "http://h:1/v1/"],
        ),
        ("{spec: openai/q, base_url: http://h:1/v1, replicas: 2}", ["models.m", "replicas", "list"]),
        ("{spec: openai/q, replicas: 2}", ["models.m", "replicas", "base_url"]),
        ("{spec: openai/q, base_url: [http://a:1/v1, http://b:1/v1], replicas: 3}", ["make it 2"]),
        ("{spec: scripted/x, replicas: 2}", ["models.m", "replicas applies to local/ models only"]),
        ("{spec: local/qwen2.5-coder-0.5b, base_url: [http://a:1/v1]}", ["models.m", "replicas: N"]),
        ("{spec: local/qwen2.5-coder-0.5b, replicas: 0}", ["models.m.replicas"]),
        ("{spec: local/qwen2.5-coder-0.5b, replicas: 65}", ["models.m.replicas"]),
    ],
)
def test_bad_replica_configs_name_the_field(tmp_path: Path, model: str, needles: list[str]) -> None:
    p = _config(tmp_path, model)
    with pytest.raises(UserError) as e:
        load_config(p)
    for n in [str(p), *needles]:
        assert n in str(e.value), str(e.value)


@pytest.mark.parametrize(
    ("kw", "needle"),
    [
        ({"base_url": "http://a:1/v1", "replicas": 2}, r"models\.m\.replicas"),
        ({"base_url": ["http://a:1/v1", "http://a:1/v1"]}, "twice"),
        ({"base_url": []}, r"models\.m\.base_url"),
    ],
)
def test_get_model_checks_replicas_too(kw: dict[str, Any], needle: str) -> None:
    with pytest.raises(UserError, match=needle):
        get_model("openai/q", where="models.m", **kw)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "proctor.cli.main", *args], capture_output=True, text=True, timeout=120
    )


def test_cli_exits_2_on_replica_config_errors(tmp_path: Path, mock_server: MockServer) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.txt").write_text("Some text. " * 50)
    r = _cli(
        "models", "check", str(_config(tmp_path, "{spec: openai/q, base_url: http://h:1/v1, replicas: 2}"))
    )
    assert (
        r.returncode == 2
        and "Traceback" not in r.stderr
        and "models.m" in r.stderr
        and "replicas" in r.stderr
    )
    # Every listed replica must be reachable at the start; the unreachable one is named by its index.
    dead = f"http://127.0.0.1:{_free_port()}/v1"
    p = _config(tmp_path, f"{{spec: openai/mock, base_url: [{mock_server.base_url}, {dead}]}}")
    r = _cli("models", "check", str(p))
    assert r.returncode == 2 and "models.m.base_url[1]" in r.stderr and "Traceback" not in r.stderr, r.stderr
