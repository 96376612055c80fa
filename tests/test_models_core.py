"""The model-call path without HTTP: structured output, re-asks, cache, call scopes, retry policy."""

from __future__ import annotations

import asyncio
import itertools
import json
import random
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path

import pytest

from proctor.errors import ModelCallError, StructuredOutputError
from proctor.models import GenerationParams, Message, get_model
from proctor.models.cache import CallCache, cache_key
from proctor.models.openai_compat import OpenAICompatProvider
from proctor.models.recording import CallRecord, call_scope
from proctor.models.retry import RetryableError, RetryPolicy, parse_retry_after
from proctor.models.scripted import register_script
from proctor.models.structured import ParseError, parse_json

_names = itertools.count()

SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}, "score": {"type": "integer"}},
    "required": ["answer", "score"],
}


class ListRecorder:
    """A recorder that keeps call records in memory."""

    def __init__(self) -> None:
        self.records: list[CallRecord] = []

    def record_call(self, record: CallRecord) -> None:
        self.records.append(record)


class Script:
    """A registered scripted model whose replies come from a list (last one repeats); counts calls."""

    def __init__(self, *replies: str | Exception) -> None:
        self.replies = list(replies)
        self.calls: list[list[Message]] = []
        self.name = f"core-test-{next(_names)}"
        register_script(self.name, self)

    def __call__(self, messages: list[Message], params: GenerationParams) -> str:
        self.calls.append(list(messages))
        out = self.replies[min(len(self.calls), len(self.replies)) - 1]
        if isinstance(out, Exception):
            raise out
        return out

    def model(self, tmp_path: Path, **kw: object):  # type: ignore[no-untyped-def]
        kw.setdefault("cache", CallCache(tmp_path / "calls.sqlite"))
        kw.setdefault("retry_base_delay_s", 0.001)
        return get_model(f"scripted/{self.name}", **kw)  # type: ignore[arg-type]


USER: list[Message] = [{"role": "user", "content": "What is the capital of France? Return JSON."}]


# --- tolerant parsing -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        '{"answer": "Paris", "score": 3}',
        'Sure! Here it is:\n```json\n{"answer": "Paris", "score": 3}\n```\nAnything else?',
        '```\n{"answer": "Paris", "score": 3}\n```',
        '{"answer": "Paris", "score": 3,}',
        '{\n  "answer": "Paris",\n  "score": 3,\n}\n',
        "{'answer': 'Paris', 'score': 3}",
        "The verdict: {'answer': 'Paris', 'score': 3} -- done",
        'I think {maybe} but finally {"answer": "Paris", "score": 3}',
    ],
)
def test_parse_json_tolerates_common_model_quirks(text: str) -> None:
    assert parse_json(text, SCHEMA) == {"answer": "Paris", "score": 3}


def test_parse_json_python_literals() -> None:
    assert parse_json("{'ok': True, 'none': None, 'xs': [1, 2,]}") == {"ok": True, "none": None, "xs": [1, 2]}


def test_parse_json_never_raises_on_python_literals_that_are_not_json() -> None:
    """A small model's doubled braces once crashed an agent run (TypeError from a set of dicts): the inner
    object is read, and a Python set is never taken for an object."""
    doubled = '{{"name": "search", "arguments": {"q": "x"}}}'
    assert parse_json(doubled) == {"name": "search", "arguments": {"q": "x"}}
    assert parse_json("{{}}") == {}
    with pytest.raises(ParseError):
        parse_json("{'a', 'b'}")


def test_parse_json_schema_errors_name_the_field() -> None:
    with pytest.raises(ParseError, match=r"at score: 'three' is not of type 'integer'"):
        parse_json('{"answer": "Paris", "score": "three"}', SCHEMA)
    with pytest.raises(ParseError, match=r"at \(root\): 'score' is a required property"):
        parse_json('{"answer": "Paris"}', SCHEMA)


def test_parse_json_no_json() -> None:
    with pytest.raises(ParseError, match="no JSON object found"):
        parse_json("The capital of France is Paris.", SCHEMA)


def test_parse_json_prefers_a_valid_fenced_block() -> None:
    text = 'Example: {"answer": 1}\n```json\n{"answer": "Paris", "score": 1}\n```'
    assert parse_json(text, SCHEMA) == {"answer": "Paris", "score": 1}


# --- re-asks ----------------------------------------------------------------------------------------


async def test_reask_after_unparsable_reply_then_success(tmp_path: Path) -> None:
    script = Script("The answer is Paris.", '```json\n{"answer": "Paris", "score": 4}\n```')
    model = script.model(tmp_path)
    rec = ListRecorder()
    with call_scope(recorder=rec, role="judge", item_key="q1"):
        c = await model.generate(USER, json_schema=SCHEMA)
    assert c.parsed == {"answer": "Paris", "score": 4}
    assert len(script.calls) == 2
    reask = script.calls[1]
    assert reask[:1] == USER
    assert reask[1] == {"role": "assistant", "content": "The answer is Paris."}
    assert reask[2]["role"] == "user"
    assert "no JSON object found" in reask[2]["content"]
    assert '"score"' in reask[2]["content"]  # the schema is shown again
    # Usage adds up over both calls; both calls are recorded for the item.
    assert c.usage.completion_tokens == 4 + 6
    assert [(r.role, r.item_key, r.error) for r in rec.records] == [("judge", "q1", None)] * 2


async def test_reask_on_schema_violation_shows_the_validation_message(tmp_path: Path) -> None:
    script = Script('{"answer": "Paris", "score": "high"}', '{"answer": "Paris", "score": 5}')
    c = await script.model(tmp_path).generate(USER, json_schema=SCHEMA)
    assert c.parsed["score"] == 5
    assert "'high' is not of type 'integer'" in script.calls[1][-1]["content"]


async def test_still_unparsable_after_reasks_raises_typed_error(tmp_path: Path) -> None:
    script = Script("Paris.", "Paris, I said.", "PARIS!")
    model = script.model(tmp_path, max_reasks=2)
    rec = ListRecorder()
    with call_scope(recorder=rec, item_key="q2"), pytest.raises(StructuredOutputError) as info:
        await model.generate(USER, json_schema=SCHEMA)
    err = info.value
    assert isinstance(err, ModelCallError)
    assert err.cause == "unparseable"
    assert err.raw == "PARIS!"
    assert "after 3 tries" in str(err)
    assert len(script.calls) == 3
    assert len(rec.records) == 3 and all(r.item_key == "q2" for r in rec.records)


async def test_no_reasks_when_max_reasks_is_zero(tmp_path: Path) -> None:
    script = Script("no json here")
    with pytest.raises(StructuredOutputError):
        await script.model(tmp_path, max_reasks=0).generate(USER, json_schema=SCHEMA)
    assert len(script.calls) == 1


# --- cache ------------------------------------------------------------------------------------------


async def test_second_identical_call_is_a_cache_hit(tmp_path: Path) -> None:
    script = Script('{"answer": "Paris", "score": 1}')
    model = script.model(tmp_path)
    rec = ListRecorder()
    with call_scope(recorder=rec):
        first = await model.generate(USER, json_schema=SCHEMA, temperature=0.0)
        second = await model.generate(USER, json_schema=SCHEMA, temperature=0.0)
    assert not first.cached and second.cached
    assert second.parsed == first.parsed and second.usage == first.usage
    assert len(script.calls) == 1
    assert [(r.cached, r.attempts) for r in rec.records] == [(False, 1), (True, 0)]


async def test_cache_survives_a_new_model_instance(tmp_path: Path) -> None:
    script = Script("hello")
    await script.model(tmp_path).generate(USER)
    again = await script.model(tmp_path).generate(USER)
    assert again.cached and again.text == "hello" and len(script.calls) == 1


async def test_cache_misses_when_params_or_messages_change(tmp_path: Path) -> None:
    script = Script("hello")
    model = script.model(tmp_path)
    await model.generate(USER)
    assert (await model.generate(USER, temperature=0.7)).cached is False
    assert (await model.generate(USER, max_tokens=10)).cached is False
    assert (await model.generate(USER, seed=1)).cached is False
    assert (await model.generate([{"role": "user", "content": "Another question"}])).cached is False
    assert (await model.generate(USER)).cached is True
    assert len(script.calls) == 5


def test_cache_key_depends_on_identity_messages_and_params() -> None:
    ident = {"provider": "openai", "model": "m", "base_url": "http://x/v1"}
    base = {"messages": USER, "params": GenerationParams().as_key()}
    k = cache_key(ident, base)
    assert k == cache_key(dict(reversed(ident.items())), base)  # order-insensitive
    assert k != cache_key({**ident, "model": "m2"}, base)
    assert k != cache_key({**ident, "base_url": "http://y/v1"}, base)
    assert k != cache_key(ident, {**base, "params": GenerationParams(temperature=0.5).as_key()})
    assert k != cache_key(ident, {**base, "params": GenerationParams(json_schema=SCHEMA).as_key()})
    assert k != cache_key(ident, {**base, "params": GenerationParams(logprobs=True).as_key()})
    assert k != cache_key(ident, {**base, "messages": [{"role": "user", "content": "other"}]})


def test_cache_key_never_contains_the_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    base = {"messages": USER, "params": GenerationParams().as_key()}
    keys = []
    for secret in ("sk-first-SECRET-111", "sk-second-SECRET-222"):
        monkeypatch.setenv("PROCTOR_CORE_TEST_KEY", secret)
        provider = OpenAICompatProvider(
            "m", base_url="http://127.0.0.1:9/v1", api_key_env="PROCTOR_CORE_TEST_KEY"
        )
        assert secret not in json.dumps(provider.identity())
        keys.append(cache_key(provider.identity(), base))
    assert keys[0] == keys[1]  # the key plays no part in the cache key


# --- call scopes ------------------------------------------------------------------------------------


async def test_call_scope_records_item_and_role(tmp_path: Path) -> None:
    script = Script("ok")
    model = script.model(tmp_path, cache=False)
    rec = ListRecorder()
    with call_scope(recorder=rec, role="candidate"):
        with call_scope(item_key="item-1"):
            await model.generate([{"role": "user", "content": "a"}])
        with call_scope(item_key="item-2", role="judge"):
            await model.generate([{"role": "user", "content": "b"}])
        await model.generate([{"role": "user", "content": "c"}])
    await model.generate([{"role": "user", "content": "outside"}])  # no recorder: not recorded
    got = [(r.provider, r.model, r.role, r.item_key) for r in rec.records]
    assert got == [
        ("scripted", script.name, "candidate", "item-1"),
        ("scripted", script.name, "judge", "item-2"),
        ("scripted", script.name, "candidate", None),
    ]


async def test_call_scope_is_per_task(tmp_path: Path) -> None:
    script = Script("ok")
    model = script.model(tmp_path, cache=False)
    rec = ListRecorder()

    async def one(i: int) -> None:
        with call_scope(item_key=f"item-{i}", role="candidate"):
            await asyncio.sleep(random.random() / 100)
            await model.generate([{"role": "user", "content": f"q{i}"}])

    with call_scope(recorder=rec):
        await asyncio.gather(*(one(i) for i in range(20)))
    assert sorted(r.item_key or "" for r in rec.records) == sorted(f"item-{i}" for i in range(20))


# --- retries ----------------------------------------------------------------------------------------


async def test_retryable_errors_are_retried(tmp_path: Path) -> None:
    script = Script(RetryableError("HTTP 429", cause="http_429", status=429, retry_after=0), "fine")
    rec = ListRecorder()
    with call_scope(recorder=rec):
        c = await script.model(tmp_path).generate(USER)
    assert c.text == "fine"
    assert [(r.attempts, r.error) for r in rec.records] == [(2, None)]


async def test_gives_up_after_max_retries_with_the_cause(tmp_path: Path) -> None:
    script = Script(RetryableError("HTTP 503", cause="http_503", status=503))
    rec = ListRecorder()
    with call_scope(recorder=rec, item_key="x"), pytest.raises(ModelCallError) as info:
        await script.model(tmp_path, max_retries=2).generate(USER)
    assert info.value.cause == "http_503" and info.value.status == 503
    assert len(script.calls) == 3
    assert [(r.attempts, r.error, r.item_key) for r in rec.records] == [(3, "http_503", "x")]


async def test_permanent_errors_are_not_retried(tmp_path: Path) -> None:
    script = Script(ModelCallError("HTTP 404", cause="http_404", status=404))
    with pytest.raises(ModelCallError) as info:
        await script.model(tmp_path).generate(USER)
    assert info.value.cause == "http_404"
    assert len(script.calls) == 1


def test_retry_delay_honours_retry_after() -> None:
    policy = RetryPolicy(base_delay_s=0.5, max_retry_after_s=10.0)
    for attempt in range(4):
        d = policy.delay(attempt, retry_after=2.0)
        assert 2.0 <= d <= 2.1
    assert 0.0 <= policy.delay(0, retry_after=0.0) <= 0.1
    assert 10.0 <= policy.delay(0, retry_after=500.0) <= 10.1  # capped


def test_retry_delay_backs_off_exponentially_with_jitter() -> None:
    policy = RetryPolicy(base_delay_s=0.5, max_delay_s=4.0)
    for attempt in range(6):
        nominal = min(4.0, 0.5 * 2**attempt)
        samples = [policy.delay(attempt) for _ in range(200)]
        assert all(0.5 * nominal <= d <= nominal + 0.05 for d in samples), attempt
        assert len(set(samples)) > 100  # jittered, not constant
    means = [sum(policy.delay(a) for _ in range(300)) / 300 for a in range(4)]
    assert means[0] < means[1] < means[2] < means[3]


def test_parse_retry_after() -> None:
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after("0.5") == 0.5
    assert parse_retry_after("-4") == 0.0
    assert parse_retry_after(None) is None
    assert parse_retry_after("soon") is None
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    got = parse_retry_after(when)
    assert got is not None and 25 <= got <= 31


async def test_identical_concurrent_requests_share_one_call() -> None:
    """Single flight: two identical requests in flight at once reach the provider once and get the same
    reply, so a re-run from the cache reproduces exactly what the first run scored."""
    import asyncio as _asyncio

    from proctor.models import get_model
    from proctor.models.scripted import register_script
    from proctor.store import RunStore

    calls: list[int] = []

    def slow_counter(messages, params):
        calls.append(1)
        return f"reply {len(calls)}"

    register_script("single-flight", slow_counter)
    model = get_model("scripted/single-flight")
    original = model.provider.complete

    async def delayed(messages, params):
        await _asyncio.sleep(0.05)
        return await original(messages, params)

    model.provider.complete = delayed  # type: ignore[method-assign]
    msgs = [{"role": "user", "content": "same question"}]
    import tempfile

    from proctor.models.recording import call_scope

    store = RunStore(Path(tempfile.mkdtemp()) / "run.sqlite")
    with call_scope(recorder=store):
        a, b = await _asyncio.gather(model.generate(msgs), model.generate(msgs))
    assert len(calls) == 1
    assert a.text == b.text == "reply 1"
    assert sorted([a.cached, b.cached]) == [False, True]
    totals = store.call_totals()
    assert totals[0]["calls"] == 2 and totals[0]["cache_hits"] == 1
