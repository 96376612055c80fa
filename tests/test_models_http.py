"""The OpenAI-compatible provider and the call path against the local mock server (real HTTP)."""

from __future__ import annotations

import asyncio
import json
import math
import socket
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from proctor.errors import ModelCallError, UserError
from proctor.models import Model, get_model
from proctor.models.cache import CallCache
from proctor.models.openai_compat import check_reachable
from proctor.models.recording import CallRecord, call_scope
from proctor.testing.mock_server import MockServer, minimal_instance

MakeModel = Callable[..., Model]

Q = [{"role": "user", "content": "What is the capital of France?"}]
SCHEMA = {
    "type": "object",
    "properties": {
        "verdict": {"enum": ["correct", "incorrect"]},
        "reason": {"type": "string"},
        "score": {"type": "integer"},
        "confidence": {"type": "number"},
        "final": {"type": "boolean"},
    },
    "required": ["verdict", "score"],
}


@pytest.fixture
async def make_model(mock_server: MockServer) -> AsyncIterator[MakeModel]:
    """Build models against the mock (fast retries, no cache by default); closed after the test."""
    made: list[Model] = []

    def make(**kw: Any) -> Model:
        kw.setdefault("base_url", mock_server.base_url)
        kw.setdefault("retry_base_delay_s", 0.01)
        kw.setdefault("timeout_s", 5.0)
        kw.setdefault("cache", False)
        model = get_model("openai/mock", **kw)
        made.append(model)
        return model

    yield make
    for m in made:
        await m.aclose()


def _q(i: int) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"Question number {i}?"}]


# --- the happy path ---------------------------------------------------------------------------------


async def test_basic_chat(mock_server: MockServer, make_model: MakeModel) -> None:
    model = make_model()
    c = await model.generate(Q, temperature=0.2, max_tokens=64, seed=7)
    assert c.text.startswith("Mock reply ") and "capital of France" in c.text
    assert c.finish_reason == "stop" and not c.cached and c.parsed is None and c.logprobs is None
    assert c.usage.prompt_tokens == 6 and c.usage.completion_tokens == len(c.text.split())
    assert c.latency_s > 0
    (req,) = mock_server.requests
    assert req.path == "/v1/chat/completions"
    assert req.body == {"model": "mock", "messages": Q, "temperature": 0.2, "max_tokens": 64, "seed": 7}
    assert "Authorization" not in req.headers  # no key configured for a custom base_url
    # Distinct requests get distinct replies; the same request the same reply.
    other = await model.generate(_q(1))
    assert other.text != c.text
    assert (await model.generate(Q, temperature=0.2, max_tokens=64, seed=7)).text == c.text


async def test_logprobs_are_parsed(mock_server: MockServer, make_model: MakeModel) -> None:
    c = await make_model().generate(Q, top_logprobs=3)
    body = mock_server.requests[0].body
    assert body is not None and body["logprobs"] is True and body["top_logprobs"] == 3
    assert c.logprobs is not None and len(c.logprobs) == len(c.text.split())
    assert "".join(t.token for t in c.logprobs) == c.text
    for t in c.logprobs:
        assert t.logprob < 0
        assert len(t.top) == 3 and t.top[t.token] == t.logprob
        assert max(t.top.values()) == t.logprob


async def test_json_schema_sent_as_response_format(mock_server: MockServer, make_model: MakeModel) -> None:
    c = await make_model().generate(Q, json_schema=SCHEMA)
    rf = mock_server.requests[0].body["response_format"]  # type: ignore[index]
    assert rf["type"] == "json_schema" and rf["json_schema"]["schema"] == SCHEMA
    assert c.parsed == minimal_instance(SCHEMA)
    assert c.parsed["verdict"] == "correct" and isinstance(c.parsed["score"], int)


async def test_400_on_response_format_falls_back_to_no_schema(
    mock_server: MockServer, make_model: MakeModel
) -> None:
    mock_server.configure(
        reject_response_format=True, reply=lambda body: '```json\n{"verdict": "incorrect", "score": 2,}\n```'
    )
    model = make_model()
    c = await model.generate(Q, json_schema=SCHEMA)
    assert c.parsed == {"verdict": "incorrect", "score": 2}
    first, second = mock_server.requests
    assert "response_format" in (first.body or {}) and "response_format" not in (second.body or {})
    # Remembered: the next call does not try the schema again.
    await model.generate(_q(2), json_schema=SCHEMA)
    assert mock_server.count == 3 and "response_format" not in (mock_server.requests[2].body or {})


async def test_cache_hit_makes_no_request(
    mock_server: MockServer, make_model: MakeModel, tmp_path: Path
) -> None:
    model = make_model(cache=CallCache(tmp_path / "calls.sqlite"))
    first = await model.generate(Q, top_logprobs=2)
    second = await model.generate(Q, top_logprobs=2)
    assert second.cached and second.text == first.text and second.logprobs == first.logprobs
    assert mock_server.count == 1


# --- faults and retries -----------------------------------------------------------------------------


async def test_429_with_retry_after_is_honoured(mock_server: MockServer, make_model: MakeModel) -> None:
    mock_server.configure(fault_rate=1.0, fault_kinds=["429"], fault_first_n=1, retry_after_s=1)
    records: list[CallRecord] = []

    class Rec:
        def record_call(self, r: CallRecord) -> None:
            records.append(r)

    t0 = time.perf_counter()
    with call_scope(recorder=Rec()):
        c = await make_model().generate(Q)
    elapsed = time.perf_counter() - t0
    assert c.text.startswith("Mock reply")
    assert elapsed >= 1.0  # waited as told, not the 10 ms base delay
    assert [r.fault for r in mock_server.requests] == ["429", None]
    assert records[0].attempts == 2 and records[0].error is None


@pytest.mark.parametrize("kind", ["500", "malformed", "truncated"])
async def test_transient_faults_are_retried(
    mock_server: MockServer, make_model: MakeModel, kind: str
) -> None:
    mock_server.configure(fault_rate=1.0, fault_kinds=[kind], fault_first_n=2)
    c = await make_model().generate(Q)
    assert c.text.startswith("Mock reply")
    assert [r.fault for r in mock_server.requests] == [kind, kind, None]


async def test_hang_times_out_then_retry_succeeds(mock_server: MockServer, make_model: MakeModel) -> None:
    mock_server.configure(fault_rate=1.0, fault_kinds=["hang"], fault_first_n=1, hang_s=10)
    t0 = time.perf_counter()
    c = await make_model(timeout_s=0.4).generate(Q)
    elapsed = time.perf_counter() - t0
    assert c.text.startswith("Mock reply")
    assert 0.4 <= elapsed < 3
    assert [r.fault for r in mock_server.requests] == ["hang", None]


async def test_mixed_faults_all_recover(mock_server: MockServer, make_model: MakeModel) -> None:
    mock_server.configure(
        fault_rate=0.5, fault_kinds=["429", "500", "malformed", "truncated"], fault_first_n=2, seed=3
    )
    model = make_model(max_retries=3, max_concurrency=8)
    out = await asyncio.gather(*(model.generate(_q(i)) for i in range(30)))
    assert len({c.text for c in out}) == 30
    faults = [r.fault for r in mock_server.requests if r.fault]
    assert faults and mock_server.count == 30 + len(faults)


@pytest.mark.parametrize(("kind", "cause", "status"), [("500", "http_500", 500), ("hang", "timeout", None)])
async def test_gives_up_after_max_retries(
    mock_server: MockServer, make_model: MakeModel, kind: str, cause: str, status: int | None
) -> None:
    mock_server.configure(fault_rate=1.0, fault_kinds=[kind], hang_s=5)
    with pytest.raises(ModelCallError) as info:
        await make_model(max_retries=2, timeout_s=0.2).generate(Q)
    assert info.value.cause == cause and info.value.status == status
    assert "after 3 attempts" in str(info.value)
    assert mock_server.count == 3


# --- credentials and reachability -------------------------------------------------------------------


async def test_api_key_sent_as_bearer_but_never_cached(
    mock_server: MockServer, make_model: MakeModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-proctor-test-SECRET-4f9a1c"
    monkeypatch.setenv("PROCTOR_TEST_API_KEY", secret)
    cache_dir = tmp_path / "cache"
    model = make_model(api_key_env="PROCTOR_TEST_API_KEY", cache=True, cache_dir=cache_dir)
    c = await model.generate(Q)
    assert mock_server.requests[0].headers["Authorization"] == f"Bearer {secret}"
    assert secret not in json.dumps(mock_server.requests[0].body)
    files = list(cache_dir.iterdir())
    assert any(f.name == "calls.sqlite" for f in files)
    blob = b"".join(f.read_bytes() for f in files if f.is_file())
    assert c.text.encode() in blob  # the reply was written, so the search below means something
    assert secret.encode() not in blob
    assert b"SECRET" not in blob


def test_missing_api_key_env_is_a_user_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PROCTOR_TEST_NO_SUCH_KEY", raising=False)
    with pytest.raises(UserError, match="PROCTOR_TEST_NO_SUCH_KEY") as info:
        get_model(
            "openai/mock",
            base_url="http://127.0.0.1:9/v1",
            api_key_env="PROCTOR_TEST_NO_SUCH_KEY",
            where="roles.judge",
        )
    assert "roles.judge" in str(info.value)


async def test_check_reachable(mock_server: MockServer) -> None:
    await check_reachable(mock_server.base_url, "model")  # any answer counts
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # Nothing listens on `port` now.
    with pytest.raises(
        UserError, match=rf"cannot reach the model server at http://127.0.0.1:{port}/v1"
    ) as info:
        await check_reachable(f"http://127.0.0.1:{port}/v1", "roles.candidate.base_url", timeout_s=2)
    assert "roles.candidate.base_url" in str(info.value)


@pytest.mark.parametrize("url", ["localhost:8000/v1", "127.0.0.1:8000/v1", "ftp://host/v1", "http:///v1"])
async def test_base_url_without_scheme_or_host_is_a_user_error(url: str) -> None:
    with pytest.raises(UserError, match=r"models\.judge: base_url .* is not an http\(s\) URL"):
        get_model("openai/mock", base_url=url, where="models.judge")
    with pytest.raises(UserError, match=r"models\.judge\.base_url: base_url .* is not an http\(s\) URL"):
        await check_reachable(url, "models.judge.base_url")


# --- concurrency ------------------------------------------------------------------------------------


async def test_concurrency_limit_is_respected(mock_server: MockServer, make_model: MakeModel) -> None:
    mock_server.configure(latency_ms=100)
    model = make_model(max_concurrency=4)
    t0 = time.perf_counter()
    out = await asyncio.gather(*(model.generate(_q(i)) for i in range(24)))
    elapsed = time.perf_counter() - t0
    assert len(out) == 24 and mock_server.count == 24
    assert mock_server.max_in_flight == 4
    assert elapsed >= 0.6  # 24 / 4 waves of 100 ms


async def test_concurrency_limit_includes_retries(mock_server: MockServer, make_model: MakeModel) -> None:
    mock_server.configure(latency_ms=30, fault_rate=1.0, fault_kinds=["500"], fault_first_n=1)
    model = make_model(max_concurrency=3)
    await asyncio.gather(*(model.generate(_q(i)) for i in range(12)))
    assert mock_server.count == 24 and mock_server.max_in_flight <= 3


# --- the mock itself --------------------------------------------------------------------------------


async def test_mock_embeddings_and_models(mock_server: MockServer) -> None:
    mock_server.configure(embedding_dim=16)
    async with aiohttp.ClientSession() as s:
        async with s.post(
            f"{mock_server.base_url}/embeddings", json={"input": ["a cat", "a dog", "a cat"]}
        ) as r:
            data = await r.json()
        async with s.post(
            f"{mock_server.base_url}/embeddings", json={"input": "a cat", "dimensions": 8}
        ) as r:
            single = await r.json()
        async with s.get(f"{mock_server.base_url}/models") as r:
            models = await r.json()
    vecs = [d["embedding"] for d in data["data"]]
    assert [len(v) for v in vecs] == [16, 16, 16]
    assert all(math.isclose(sum(x * x for x in v), 1.0) for v in vecs)
    assert vecs[0] == vecs[2] and vecs[0] != vecs[1]
    assert len(single["data"][0]["embedding"]) == 8
    assert [m["id"] for m in models["data"]] == ["mock"]


def test_mock_rules_and_reset() -> None:
    with MockServer(rules=[(r"capital of france", "Paris")]) as server:

        async def go() -> list[str]:
            model = get_model("openai/mock", base_url=server.base_url, cache=False)
            try:
                return [(await model.generate(q)).text for q in (Q, _q(1))]
            finally:
                await model.aclose()

        texts = asyncio.run(go())
        assert texts[0] == "Paris" and texts[1].startswith("Mock reply")
        assert server.count == 2
        server.reset()
        assert server.count == 0 and server.requests == []


# --- prompt logprobs (echo on /v1/completions) ------------------------------------------------------


def _answer_scores(prefix: str, token: str) -> float:
    """Mock scorer: the word right after "Answer:" gets a chosen logprob, every other token -1."""
    if prefix.endswith("Answer:"):
        return {" Paris": -0.25, " Lyon": -3.0}.get(token, -1.0)
    return -1.0


async def test_prompt_logprobs_go_through_the_call_path(
    mock_server: MockServer, make_model: MakeModel, tmp_path: Path
) -> None:
    mock_server.configure(prompt_logprob=_answer_scores)
    records: list[CallRecord] = []

    class Rec:
        def record_call(self, r: CallRecord) -> None:
            records.append(r)

    model = make_model(cache=CallCache(tmp_path / "calls.sqlite"))
    text = "Capital of France?\nAnswer: Paris"
    with call_scope(recorder=Rec(), role="candidate", item_key="q1"):
        tokens = await model.prompt_logprobs(text)
        again = await model.prompt_logprobs(text)
    (req,) = mock_server.requests  # the second call was a cache hit
    assert req.path == "/v1/completions"
    assert req.body == {
        "model": "mock",
        "prompt": text,
        "echo": True,
        "logprobs": 1,
        "max_tokens": 1,
        "temperature": 0.0,
    }
    # The first token (no logprob) and the generated one are left out; offsets index into the text.
    assert [t.token for t in tokens] == [" of", " France?", "\nAnswer:", " Paris"]
    assert [text[t.offset : t.offset + len(t.token)] for t in tokens] == [t.token for t in tokens]
    assert tokens[-1].logprob == -0.25 and again == tokens
    assert [(r.cached, r.role, r.item_key, r.prompt_tokens) for r in records] == [
        (False, "candidate", "q1", 5),
        (True, "candidate", "q1", 5),
    ]
    score = await model.continuation_logprob("Capital of France?\nAnswer:", " Paris")
    assert (score.logprob_sum, score.n_tokens, score.n_chars, score.cached) == (-0.25, 1, 6, True)
    assert mock_server.count == 1  # the same text: served from the cache
    # The echo flag is part of the cache key: a chat call with the same message is a different request.
    await model.generate([{"role": "user", "content": text}], max_tokens=1, top_logprobs=1, seed=None)
    assert mock_server.chat_requests() and mock_server.count == 2


@pytest.mark.parametrize("mode", ["reject", "ignore"])
async def test_servers_without_prompt_logprobs_are_unsupported_not_retried(
    mock_server: MockServer, make_model: MakeModel, tmp_path: Path, mode: str
) -> None:
    """A 400 to echo (chat servers) and an ignored echo (the embedded llama.cpp server) are both a typed
    "unsupported", sent once, and the probe's answer is kept on the model and in the cache."""
    mock_server.configure(echo_mode=mode)
    cache = CallCache(tmp_path / "calls.sqlite")
    model = make_model(cache=cache, max_retries=3)
    with pytest.raises(ModelCallError) as err:
        await model.prompt_logprobs("Question: 2+2?\nAnswer: 4")
    assert err.value.cause == "unsupported" and mock_server.count == 1
    assert await model.supports_prompt_logprobs() is False
    assert await model.supports_prompt_logprobs() is False
    assert mock_server.count == 2  # one probe, then remembered
    assert await make_model(cache=cache).supports_prompt_logprobs() is False
    assert mock_server.count == 2  # a new model on the same cache does not ask again


async def test_probe_finds_echo_support_once(mock_server: MockServer, make_model: MakeModel) -> None:
    model = make_model()
    results = await asyncio.gather(*(model.supports_prompt_logprobs() for _ in range(5)))
    assert results == [True] * 5
    assert len(mock_server.completion_requests()) == 1  # concurrent askers share one probe


async def test_prompt_logprobs_are_retried_on_transient_faults(
    mock_server: MockServer, make_model: MakeModel
) -> None:
    mock_server.configure(
        prompt_logprob=_answer_scores, fault_rate=1.0, fault_kinds=["500", "429"], fault_first_n=1
    )
    score = await make_model().continuation_logprob("Capital of France?\nAnswer:", " Lyon")
    assert score.logprob_sum == -3.0
    assert [r.fault is not None for r in mock_server.requests] == [True, False]


async def test_501_on_echo_is_unsupported_not_retried(make_model: MakeModel) -> None:
    async def handler(request: web.Request) -> web.Response:
        calls.append(request.path)
        return web.json_response({"error": "not implemented"}, status=501)

    calls: list[str] = []
    app = web.Application()
    app.router.add_post("/v1/completions", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        model = make_model(base_url=f"http://127.0.0.1:{port}/v1", max_retries=3)
        assert await model.supports_prompt_logprobs() is False
        assert calls == ["/v1/completions"]
    finally:
        await runner.cleanup()


def test_echo_reply_parsing_vllm_and_llamacpp_shapes() -> None:
    from proctor.models.openai_compat import _parse_echo_logprobs

    text = "Hi there"
    vllm = {  # legacy format: first logprob null, a generated token after the prompt
        "tokens": ["Hi", " there", "!"],
        "token_logprobs": [None, -0.5, -0.1],
        "top_logprobs": [None, {" there": -0.5}, {"!": -0.1}],
        "text_offset": [0, 2, 8],
    }
    (tok,) = _parse_echo_logprobs(vllm, text, n_prompt=2) or []
    assert (tok.token, tok.logprob, tok.offset, tok.top) == (" there", -0.5, 2, {" there": -0.5})
    assert [t.token for t in _parse_echo_logprobs(vllm, text, n_prompt=0) or []] == [" there"]
    # What the embedded llama.cpp server sends for echo: the generated token only (seen in a probe).
    llamacpp = {"content": [{"id": 198, "token": "\n", "logprob": -0.27, "top_logprobs": []}]}
    assert _parse_echo_logprobs(llamacpp, text, n_prompt=12) is None
    assert _parse_echo_logprobs(llamacpp, text, n_prompt=0) is None
    assert _parse_echo_logprobs(None, text, n_prompt=2) is None


def test_async_with_closes_the_http_session() -> None:
    """`async with get_model(...) as model:` leaves no open session ("Unclosed client session" at exit)."""
    with MockServer(rules=[(r"capital of france", "Paris")]) as server:

        async def go() -> tuple[str, list[aiohttp.ClientSession]]:
            async with get_model("openai/mock", base_url=server.base_url, cache=False) as model:
                text = (await model.generate(Q)).text
                sessions = list(model.provider._sessions.values())
            return text, sessions

        text, sessions = asyncio.run(go())
        assert text == "Paris" and sessions and all(s.closed for s in sessions)
