"""Native function calling through the one model-call path: `tools` / `tool_choice` in the request and the
cache key, `tool_calls` parsed (malformed arguments become an error on the call, never an exception),
role=tool turns, cache round trips, the scripted provider's tool calls, and the `supports_tools` probe
against the mock server (supported, rejecting, ignoring) and the embedded llama.cpp server."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from proctor.errors import ModelCallError
from proctor.models import Model, ToolCallRequest, get_model
from proctor.models.base import PROBE_TOOL
from proctor.models.cache import CallCache
from proctor.models.local.provider import LocalProvider
from proctor.models.openai_compat import _parse_tool_calls
from proctor.models.scripted import register_script
from proctor.models.types import GenerationParams, Message, RawReply, Usage
from proctor.testing.mock_server import MockServer, _parse_args

MakeModel = Callable[..., Model]

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
            "required": ["city"],
        },
    },
}
CLOCK = {
    "type": "function",
    "function": {"name": "get_time", "description": "The time.", "parameters": {"type": "object"}},
}
ASK: list[Message] = [{"role": "user", "content": "What is the weather in Paris?"}]


@pytest.fixture
async def make_model(mock_server: MockServer, tmp_path: Path) -> AsyncIterator[MakeModel]:
    """Models against the mock (fast retries; no cache unless asked); closed after the test."""
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


def weather_reply(body: dict[str, Any]) -> str | dict[str, Any]:
    """Call the weather tool first; once its result is back, answer with it."""
    results = [m for m in body["messages"] if m["role"] == "tool"]
    if not body.get("tools"):
        return "no tools offered"
    if not results:
        return {
            "content": "Let me check.",
            "tool_calls": [
                {"id": "call_w1", "name": "get_weather", "arguments": '{"city": "Paris", "days": 2}'},
                {"id": "call_t1", "name": "get_time", "arguments": {}},
            ],
        }
    return "In Paris: " + "; ".join(m["content"] for m in results)


# --- the HTTP provider against the mock server ------------------------------------------------------


async def test_tool_call_round_trip_over_http(mock_server: MockServer, make_model: MakeModel) -> None:
    mock_server.configure(reply=weather_reply)
    model = make_model()
    c = await model.generate(ASK, tools=[WEATHER, CLOCK], tool_choice="auto")
    # The request carried the tools and the choice as sent.
    first = mock_server.chat_requests()[0].body
    assert first is not None
    assert first["tools"] == [WEATHER, CLOCK] and first["tool_choice"] == "auto"
    # The reply's tool calls are parsed, arguments kept as the raw text the server sent.
    assert c.finish_reason == "tool_calls" and c.text == "Let me check."
    assert c.tool_calls == [
        ToolCallRequest(
            "call_w1", "get_weather", '{"city": "Paris", "days": 2}', {"city": "Paris", "days": 2}
        ),
        ToolCallRequest("call_t1", "get_time", "{}", {}),
    ]
    assert all(call.error is None for call in c.tool_calls)
    assert c.usage.completion_tokens > len(c.text.split())  # the calls' arguments count as output

    # Second turn: the assistant's tool calls and one role=tool message per call. The mock checks, as
    # OpenAI does, that every tool message answers a pending call and no call is left unanswered.
    convo: list[Message] = [
        *ASK,
        {"role": "assistant", "content": c.text, "tool_calls": [t.as_message_entry() for t in c.tool_calls]},
        {"role": "tool", "tool_call_id": "call_w1", "content": "sunny, 21 C"},
        {"role": "tool", "tool_call_id": "call_t1", "content": "14:05"},
    ]
    c2 = await model.generate(convo, tools=[WEATHER, CLOCK], tool_choice="auto")
    assert c2.text == "In Paris: sunny, 21 C; 14:05" and c2.tool_calls == [] and c2.finish_reason == "stop"
    second = mock_server.chat_requests()[1].body
    assert second is not None
    assert second["messages"][1]["tool_calls"][0] == {
        "id": "call_w1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Paris", "days": 2}'},
    }
    assert [m.get("tool_call_id") for m in second["messages"][2:]] == ["call_w1", "call_t1"]
    assert mock_server.count == 2


async def test_mock_rejects_tool_messages_that_answer_no_call(
    mock_server: MockServer, make_model: MakeModel
) -> None:
    mock_server.configure(reply=weather_reply)
    model = make_model()
    call = {"id": "call_1", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}
    stray: list[Message] = [*ASK, {"role": "tool", "tool_call_id": "call_9", "content": "x"}]
    unanswered: list[Message] = [
        *ASK,
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "user", "content": "and?"},
    ]
    wrong_id: list[Message] = [
        *ASK,
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_2", "content": "14:05"},
    ]
    for convo, says in (
        (stray, "not pending"),
        (unanswered, "unanswered: call_1"),
        (wrong_id, "not pending"),
    ):
        with pytest.raises(ModelCallError) as exc:
            await model.generate(convo, tools=[CLOCK])
        assert exc.value.cause == "http_400" and says in str(exc.value)
    assert mock_server.count == 3  # a 400 is not retried


async def test_malformed_tool_call_arguments_give_an_error_not_an_exception(
    mock_server: MockServer, make_model: MakeModel
) -> None:
    bad = [
        {"name": "get_weather", "arguments": '{"city": "Paris"'},  # truncated JSON
        {"name": "get_weather", "arguments": "{'city': 'Paris'}"},  # Python, not JSON
        {"name": "get_weather", "arguments": '["Paris"]'},  # JSON, but not an object
        {"name": "get_time", "arguments": ""},  # no arguments at all: an empty object
    ]
    mock_server.configure(reply=lambda body: {"content": None, "tool_calls": bad})
    model = make_model()
    c = await model.generate(ASK, tools=[WEATHER, CLOCK])
    assert [t.arguments for t in c.tool_calls] == ['{"city": "Paris"', "{'city': 'Paris'}", '["Paris"]', ""]
    assert [t.parsed_arguments for t in c.tool_calls] == [None, None, None, {}]
    errors = [t.error for t in c.tool_calls]
    assert errors[0] and errors[0].startswith("arguments are not valid JSON")
    assert errors[1] and errors[1].startswith("arguments are not valid JSON")
    assert errors[2] == "arguments are not a JSON object" and errors[3] is None
    assert c.text == "" and mock_server.count == 1  # nothing retried: the body itself was well formed


def test_structurally_broken_tool_calls_never_raise() -> None:
    calls = _parse_tool_calls(
        [
            {"id": "a", "type": "function", "function": {"arguments": "{}"}},  # no name
            "not a call",
            {"id": "c", "function": {"name": "f", "arguments": {"x": 1}}},  # an object, not text
            {"id": "d", "function": {"name": "g", "arguments": None}},
        ]
    )
    assert [(c.id, c.name, c.error) for c in calls] == [
        ("a", "", "the tool call names no function"),
        ("call_1", "", "the tool call names no function"),
        ("c", "f", None),
        ("d", "g", None),
    ]
    assert calls[2].arguments == '{"x": 1}' and calls[2].parsed_arguments == {"x": 1}
    assert calls[3].parsed_arguments == {}
    assert _parse_tool_calls(None) == () and _parse_tool_calls("junk") == ()


async def test_a_forced_tool_choice_makes_the_mock_call_that_tool(
    mock_server: MockServer, make_model: MakeModel
) -> None:
    model = make_model()
    c = await model.generate(ASK, tools=[CLOCK, WEATHER], tool_choice="required")
    assert [(t.name, t.parsed_arguments) for t in c.tool_calls] == [("get_time", {})]
    named = {"type": "function", "function": {"name": "get_weather"}}
    c = await model.generate(ASK, tools=[CLOCK, WEATHER], tool_choice=named)
    assert [(t.name, t.parsed_arguments) for t in c.tool_calls] == [("get_weather", {"city": "x", "days": 1})]
    body = mock_server.chat_requests()[-1].body
    assert body is not None and body["tool_choice"] == named
    c = await model.generate(ASK, tools=[CLOCK, WEATHER])  # auto: the mock answers in text
    assert c.tool_calls == [] and c.text.startswith("Mock reply")
    with pytest.raises(ValueError, match="needs tools"):  # a caller's mistake, never sent
        await model.generate(ASK, tool_choice="required")


async def test_a_reply_with_tool_calls_is_not_parsed_against_the_json_schema(
    mock_server: MockServer, make_model: MakeModel
) -> None:
    mock_server.configure(reply=weather_reply)
    model = make_model()
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
    c = await model.generate(ASK, tools=[WEATHER, CLOCK], json_schema=schema)
    assert c.parsed is None and len(c.tool_calls) == 2 and mock_server.count == 1  # no re-ask


# --- the cache ---------------------------------------------------------------------------------------


async def test_cache_hit_returns_identical_tool_calls(
    mock_server: MockServer, make_model: MakeModel, tmp_path: Path
) -> None:
    mock_server.configure(
        reply=lambda body: {
            "content": "x",
            "tool_calls": [
                {"id": "k1", "name": "get_weather", "arguments": '{"city": "Oslo"}'},
                {"id": "k2", "name": "get_weather", "arguments": '{"city": '},  # malformed, cached as such
            ],
        }
    )
    cache = CallCache(tmp_path / "calls.sqlite")
    model = make_model(cache=cache)
    first = await model.generate(ASK, tools=[WEATHER])
    again = await model.generate(ASK, tools=[WEATHER])
    assert mock_server.count == 1 and not first.cached and again.cached
    assert again.tool_calls == first.tool_calls and again.text == first.text
    assert again.finish_reason == "tool_calls" and again.tool_calls[1].error == first.tool_calls[1].error
    # A new model instance on the same cache file: still no request, still the same calls.
    fresh = make_model(cache=CallCache(tmp_path / "calls.sqlite"))
    third = await fresh.generate(ASK, tools=[WEATHER])
    assert third.cached and third.tool_calls == first.tool_calls and mock_server.count == 1
    # The tools and the tool choice are part of the key; a plain call's key is unchanged by the feature.
    await model.generate(ASK, tools=[WEATHER, CLOCK])
    await model.generate(ASK, tools=[WEATHER], tool_choice="required")
    assert mock_server.count == 3
    assert "tools" not in GenerationParams().as_key()
    assert GenerationParams(tools=[WEATHER]).as_key()["tools"] == [WEATHER]


# --- the scripted provider ---------------------------------------------------------------------------


def _tool_script(messages: list[Message], params: GenerationParams) -> str | dict[str, Any] | RawReply:
    last = messages[-1]
    if params.tools is None:
        return "plain text, as scripts have always answered"
    if last["role"] == "tool":
        return {"content": f"The tool said {last['content']}."}
    if "raw" in last["content"]:
        return RawReply("r", Usage(1, 1), tool_calls=(ToolCallRequest.parse("z", "get_time", "{}"),))
    return {
        "content": "calling",
        "tool_calls": [
            {"name": "get_weather", "arguments": {"city": "Lyon"}},  # an object: serialised
            {"name": "get_weather", "arguments": '{"city": "Lyon",}'},  # malformed text: kept as is
        ],
    }


register_script("tools-script", _tool_script)


async def test_scripted_provider_tool_calls(tmp_path: Path) -> None:
    model = get_model("scripted/tools-script", cache_dir=tmp_path)
    assert (await model.generate(ASK)).text == "plain text, as scripts have always answered"
    c = await model.generate(ASK, tools=[WEATHER])
    assert [(t.id, t.name, t.arguments, t.parsed_arguments) for t in c.tool_calls] == [
        ("call_0", "get_weather", '{"city": "Lyon"}', {"city": "Lyon"}),
        ("call_1", "get_weather", '{"city": "Lyon",}', None),
    ]
    assert c.tool_calls[1].error and c.text == "calling"
    again = await model.generate(ASK, tools=[WEATHER])
    assert again.cached and again.tool_calls == c.tool_calls
    convo: list[Message] = [
        *ASK,
        {"role": "assistant", "content": c.text, "tool_calls": [c.tool_calls[0].as_message_entry()]},
        {"role": "tool", "tool_call_id": "call_0", "content": "rain"},
    ]
    done = await model.generate(convo, tools=[WEATHER])
    assert done.text == "The tool said rain." and done.tool_calls == []
    raw = await model.generate([{"role": "user", "content": "raw please"}], tools=[CLOCK])
    assert [t.name for t in raw.tool_calls] == ["get_time"]
    assert await model.supports_tools() is True and model.tools_note == "declared by the scripted provider"


# --- the capability probe ----------------------------------------------------------------------------


async def test_probe_says_yes_for_the_mock_server_once(
    mock_server: MockServer, make_model: MakeModel, tmp_path: Path
) -> None:
    cache = CallCache(tmp_path / "calls.sqlite")
    model = make_model(cache=cache)
    assert await model.supports_tools() is True
    assert model.tools_note and "with a tool call" in model.tools_note
    (probe,) = mock_server.chat_requests()
    assert probe.body is not None
    assert probe.body["tools"] == [PROBE_TOOL] and probe.body["tool_choice"] == "required"
    assert await model.supports_tools() is True and mock_server.count == 1  # kept on the model
    fresh = make_model(cache=CallCache(tmp_path / "calls.sqlite"))
    assert await fresh.supports_tools() is True and mock_server.count == 1  # and in the cache
    assert fresh.tools_note == model.tools_note


async def test_probe_says_no_for_a_server_that_rejects_tools(
    mock_server: MockServer, make_model: MakeModel
) -> None:
    mock_server.configure(tools_mode="reject")
    model = make_model()
    assert await model.supports_tools() is False
    assert model.tools_note and "refused a request with `tools` (http_400" in model.tools_note
    # Asked with tool_choice="required", then once more without it; 400s are not retried.
    assert [(r.body or {}).get("tool_choice") for r in mock_server.chat_requests()] == ["required", None]
    # A plain chat still works on such a server.
    assert (await model.generate(ASK)).text.startswith("Mock reply")


async def test_probe_says_no_for_a_server_that_accepts_tools_but_answers_in_text(
    mock_server: MockServer, make_model: MakeModel
) -> None:
    # What the embedded llama.cpp server does with the packaged models: HTTP 200, the call as JSON text.
    mock_server.configure(tools_mode="ignore")
    model = make_model()
    assert await model.supports_tools() is False
    assert (
        model.tools_note and "accepted `tools`" in model.tools_note and "answered in text" in model.tools_note
    )
    assert mock_server.count == 1
    mock_server.configure(reply=weather_reply)
    c = await model.generate(ASK, tools=[WEATHER, CLOCK])
    assert c.tool_calls == [] and '"name": "get_weather"' in c.text and c.finish_reason == "stop"


async def test_probe_on_a_server_that_refuses_only_tool_choice_required(
    mock_server: MockServer, make_model: MakeModel
) -> None:
    # A reply callback cannot choose the status, so the refusal is injected in front of the provider.
    mock_server.configure(reply=lambda body: {"tool_calls": [{"name": "ping", "arguments": "{}"}]})
    model = make_model()
    original = model.provider.complete
    seen: list[Any] = []

    async def refuse_required(messages: list[Message], params: GenerationParams) -> RawReply:
        seen.append(params.tool_choice)
        if params.tool_choice == "required":
            raise ModelCallError("HTTP 400: tool_choice 'required' is not supported", cause="http_400")
        return await original(messages, params)

    model.provider.complete = refuse_required  # type: ignore[method-assign]
    assert await model.supports_tools() is True
    assert seen == ["required", None] and model.tools_note and "without tool_choice" in model.tools_note


async def test_probe_transient_failures_raise_and_are_not_cached(
    mock_server: MockServer, make_model: MakeModel, tmp_path: Path
) -> None:
    mock_server.configure(fault_rate=1.0, fault_kinds=("500",))
    cache = CallCache(tmp_path / "calls.sqlite")
    model = make_model(cache=cache, max_retries=1)
    with pytest.raises(ModelCallError) as exc:
        await model.supports_tools()
    assert exc.value.cause == "http_500"
    mock_server.configure(fault_rate=0.0)
    assert await model.supports_tools() is True  # asked again: the failure was not taken for a "no"


def test_mock_server_command_line_takes_a_tools_mode() -> None:
    assert _parse_args(["--tools", "ignore"]).tools == "ignore"
    assert _parse_args([]).tools == "supported"
    with pytest.raises(ValueError):
        MockServer(tools_mode="sometimes")


# --- the embedded llama.cpp server -------------------------------------------------------------------


def test_embedded_model_declares_tools_without_starting_the_server() -> None:
    model = get_model("local/qwen2.5-coder-0.5b", cache=False)
    assert asyncio.run(model.supports_tools()) is True
    assert model.tools_note and "chat template" in model.tools_note
    assert isinstance(model.provider, LocalProvider)
    assert model.provider.server is None  # declared: nothing was asked


@pytest.mark.embedded
def test_the_embedded_model_calls_a_tool_through_its_chat_template() -> None:
    """One short call to the live 0.5B with one tool: the reply comes back as a tool call with parsed
    arguments (llama.cpp's own parse, or the call the model wrote without the template's tags)."""
    pytest.importorskip("xllamacpp")
    model = get_model("local/qwen2.5-coder-0.5b", cache=False)
    assert isinstance(model.provider, LocalProvider)

    async def go() -> Any:
        try:
            return await model.generate(ASK, tools=[WEATHER], max_tokens=48)
        finally:
            await model.aclose()

    c = asyncio.run(go())
    assert [t.name for t in c.tool_calls] == ["get_weather"], c.text
    assert c.tool_calls[0].parsed_arguments is not None
    assert "paris" in json.dumps(c.tool_calls[0].parsed_arguments).lower()
