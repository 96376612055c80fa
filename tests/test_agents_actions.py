"""Action formats: ReAct and DFSDT steps decoded as JSON under the step's schema (one alternative per tool,
its arguments schema), the paper's text format on request, the fallback to text for a provider without
JSON schemas, PAL's repairs (cut-off blocks, stand-in tool definitions), and tool calls the embedded
models write as text read back as tool calls (`models.local.tool_text`) — driving function calling against
the mock server."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import jsonschema
import pytest

from proctor.agents.config import AgentConfig
from proctor.agents.environments.documents import DocumentEnvironment
from proctor.agents.tools import Toolbox, tool
from proctor.agents.workflows.actions import step_schema
from proctor.agents.workflows.dfsdt import dfsdt
from proctor.agents.workflows.pal import drop_tool_definitions, extract_code
from proctor.agents.workflows.react import react
from proctor.corpus.types import Chunk
from proctor.models import Model, get_model
from proctor.models.local.provider import LocalProvider
from proctor.models.local.server import ServerSettings
from proctor.models.local.tool_text import calls_in_text
from proctor.models.local.weights import resolve_model
from proctor.models.scripted import register_script
from proctor.models.types import GenerationParams, Message
from proctor.testing.mock_server import MockServer

CHUNKS = [
    Chunk(
        "c1",
        "d1",
        "glass.md",
        "Tidal glass is dark green.\n\nIt was first made in 1862.",
        0,
        {"title": "Tidal glass"},
    ),
    Chunk(
        "c2", "d2", "ferry.md", "The Sellin Line runs ferries to Port Selwick.", 0, {"title": "Sellin Line"}
    ),
]
SEEN: dict[str, list[GenerationParams]] = {}
PROMPTS: list[list[Message]] = []


def _schema_model(name: str) -> Model:
    """A scripted model whose provider says it takes JSON schemas (as a schema-enforcing server does)."""
    model = get_model(f"scripted/{name}", cache=False)
    model.provider.supports_json_schema = True  # type: ignore[misc]
    return model


def json_steps(messages: list[Message], params: GenerationParams) -> str:
    SEEN.setdefault("json", []).append(params)
    PROMPTS.append(messages)
    user = messages[-1]["content"]
    if "Observation" not in user:
        # Prose around the object: the structured-output path finds it; the text grammar would find no action.
        return (
            'Sure. {"thought": "find the ferry", "action": "Search", "arguments": {"entity": "Sellin Line"}}'
        )
    return json.dumps({"thought": "it says so", "action": "Finish", "arguments": {"answer": "Port Selwick"}})


register_script("json-steps", json_steps)


def test_a_json_step_is_read_from_its_schema_not_by_the_text_grammar() -> None:
    SEEN.clear()
    PROMPTS.clear()
    box = DocumentEnvironment(CHUNKS).session()
    t = asyncio.run(react(_schema_model("json-steps"), box, "Where does the Sellin Line go?", AgentConfig()))
    assert t.stop == "finished" and t.answer == "Port Selwick"
    assert t.settings["action_format"] == "json" and "action_format_note" not in t.settings
    assert [s.action for s in t.steps] == ["Search", "Finish"] and t.steps[0].thought == "find the ferry"
    assert t.steps[0].observation and "Port Selwick" in t.steps[0].observation
    first = SEEN["json"][0]
    assert first.json_schema == step_schema(box) and first.stop == ()
    names = [o["properties"]["action"]["const"] for o in first.json_schema["anyOf"]]
    assert names == ["Search", "Lookup", "Finish"]
    search = first.json_schema["anyOf"][0]["properties"]["arguments"]
    assert search["required"] == ["entity"] and search["additionalProperties"] is False
    with pytest.raises(jsonschema.ValidationError):  # arguments of another tool do not fit Search's
        jsonschema.validate(
            {"thought": "", "action": "Search", "arguments": {"keyword": "x"}}, first.json_schema
        )
    system, second = PROMPTS[0][0]["content"], PROMPTS[1][-1]["content"]
    assert (
        '"action": "Search", "arguments": {"entity": "<entity>"}' in system and "Action: <one" not in system
    )
    # The history shows earlier actions as JSON too.
    assert 'Action: {"action": "Search", "arguments": {"entity": "Sellin Line"}}' in second


def never_json(messages: list[Message], params: GenerationParams) -> str:
    SEEN.setdefault("never", []).append(params)
    return "Thought: I will look.\nAction: Search[Sellin Line]"


register_script("never-json", never_json)


def test_a_reply_that_never_matches_the_schema_is_a_parse_error_step_after_the_reasks() -> None:
    SEEN.clear()
    cfg = AgentConfig(limits={"max_parse_errors": 2})
    t = asyncio.run(react(_schema_model("never-json"), DocumentEnvironment(CHUNKS).session(), "Where?", cfg))
    assert t.stop == "parse_error" and len(t.steps) == 2
    assert all(s.error and s.error.startswith("parse_error") and s.action is None for s in t.steps)
    assert t.steps[0].raw.startswith("Thought: I will look.")  # what the model wrote, kept
    assert len(SEEN["never"]) == 2 * 3  # each step: the call and the model's two re-asks
    assert t.interruption is not None and t.interruption.reason == "unparseable_action"


def text_steps(messages: list[Message], params: GenerationParams) -> str:
    SEEN.setdefault("text", []).append(params)
    if "Observation" not in messages[-1]["content"]:
        return "Thought: look it up\nAction: Search[Sellin Line]"
    return "Thought: found\nAction: Finish[Port Selwick]"


register_script("text-steps", text_steps)


@pytest.mark.parametrize("schemas", [True, False])
def test_the_text_format_on_request_and_as_the_fallback(schemas: bool) -> None:
    """Asked for (on a provider that takes schemas), or chosen because the provider takes none."""
    SEEN.clear()
    model = _schema_model("text-steps") if schemas else get_model("scripted/text-steps", cache=False)
    cfg = AgentConfig(action_format="text" if schemas else "json")
    t = asyncio.run(react(model, DocumentEnvironment(CHUNKS).session(), "Where?", cfg))
    assert t.stop == "finished" and t.answer == "Port Selwick"
    assert t.settings["action_format"] == "text"
    assert ("action_format_note" in t.settings) is not schemas
    assert all(p.json_schema is None and p.stop == ("\nObservation",) for p in SEEN["text"])
    assert t.steps[0].thought == "look it up"


def dfsdt_json(messages: list[Message], params: GenerationParams) -> str:
    assert params.json_schema is not None
    names = [o["properties"]["action"]["const"] for o in params.json_schema["anyOf"]]
    assert names[-2:] == ["Finish", "GiveUp"]
    user = messages[-1]["content"]
    if "already tried" in user:  # back at the root after the give-up: a different action
        return json.dumps({"thought": "t", "action": "Finish", "arguments": {"answer": "1862"}})
    if user.count("Observation") < 2:
        entity = ["Tidal glass", "Sellin Line"][user.count("Observation")]  # found: expanded
        return json.dumps({"thought": "t", "action": "Search", "arguments": {"entity": entity}})
    return json.dumps({"thought": "hopeless", "action": "GiveUp", "arguments": {}})


register_script("dfsdt-json", dfsdt_json)


def test_dfsdt_steps_as_json_give_up_and_finish() -> None:
    box = DocumentEnvironment(CHUNKS).session()
    t = asyncio.run(dfsdt(_schema_model("dfsdt-json"), box, "When?", AgentConfig(workflow="dfsdt")))
    assert [s.action for s in t.steps] == ["Search", "Search", "GiveUp", "Finish"]
    assert [s.node for s in t.steps] == ["0.0", "0.0.0", "0.0.0.0", "0.1"]
    assert t.stop == "finished" and t.answer == "1862" and t.settings["action_format"] == "json"


def test_react_over_http_sends_the_step_schema_as_response_format(tmp_path: Path) -> None:
    def reply(body: dict[str, Any]) -> str:
        schema = body["response_format"]["json_schema"]["schema"]
        assert {o["properties"]["action"]["const"] for o in schema["anyOf"]} == {"Search", "Lookup", "Finish"}
        if "Observation" not in body["messages"][-1]["content"]:
            return json.dumps({"thought": "t", "action": "Search", "arguments": {"entity": "Tidal glass"}})
        return json.dumps({"thought": "t", "action": "Finish", "arguments": {"answer": "dark green"}})

    with MockServer(reply=reply) as server:

        async def go() -> Any:
            model = get_model("openai/mock", base_url=server.base_url, cache=False)
            try:
                return await react(model, DocumentEnvironment(CHUNKS).session(), "Colour?", AgentConfig())
            finally:
                await model.aclose()

        t = asyncio.run(go())
    assert t.answer == "dark green" and t.settings["action_format"] == "json"
    assert not any(s.error for s in t.steps)


# --- PAL ---------------------------------------------------------------------------------------------------


def lookup_year(name: str) -> str:
    """The year a thing was first made."""
    return "1862"


def test_pal_repairs_a_cut_off_block_and_drops_stand_in_tool_definitions() -> None:
    cut = "```python\nx = 1\nanswer = str(x)\nif x:\n    y = ("
    assert extract_code(cut) == "x = 1\nanswer = str(x)"
    assert extract_code("```Python\nanswer = 3\n```") == "answer = 3"
    assert extract_code("no code here at all.") is None
    box = Toolbox([tool(lookup_year)])
    program = (
        "import sqlite3\n\ndef lookup_year(name):\n    return sqlite3.connect('db').execute('x')\n\n"
        "lookup_year = lambda n: '1900'\nanswer = lookup_year('tidal glass')"
    )
    code, dropped = drop_tool_definitions(program, box)
    assert dropped == ["lookup_year", "lookup_year"]
    assert "def lookup_year" not in code and "lambda" not in code and "answer = lookup_year(" in code
    assert drop_tool_definitions("answer = lookup_year('x')", box) == ("answer = lookup_year('x')", [])


def pal_stand_in(messages: list[Message], params: GenerationParams) -> str:
    return "```python\ndef lookup_year(name):\n    return '1900'\n\nanswer = lookup_year('tidal glass')\n```"


register_script("pal-stand-in", pal_stand_in)


def test_pal_runs_the_real_tool_when_the_program_defines_a_stand_in() -> None:
    from proctor.agents.sandbox import probe_tier
    from proctor.agents.workflows.pal import pal

    if probe_tier().tier == "none":
        pytest.skip("no sandbox on this machine")
    box = Toolbox([tool(lookup_year)])
    t = asyncio.run(pal(get_model("scripted/pal-stand-in"), box, "When?", AgentConfig(workflow="pal")))
    assert t.stop == "finished" and t.answer == "1862"  # the tool's answer, not the stand-in's '1900'
    assert t.steps[0].note and "lookup_year" in t.steps[0].note
    assert [c.name for c in t.steps[0].tool_calls] == ["lookup_year"]
    assert t.settings["action_format"] == "code"


def pal_only_stand_ins(messages: list[Message], params: GenerationParams) -> str:
    """Programs of nothing but a stand-in (the 1.5B on the demo, cut off before any call), until the prompt
    says the functions exist; then a program that calls the tool."""
    if "already exist" in messages[-1]["content"]:
        return "```python\nanswer = lookup_year(name='tidal glass')\n```"
    return "```python\nimport sqlite3\n\ndef lookup_year(name):\n    return '1900'\n```"


register_script("pal-only-stand-ins", pal_only_stand_ins)


def test_pal_a_program_of_only_stand_ins_is_told_the_functions_exist() -> None:
    from proctor.agents.sandbox import probe_tier
    from proctor.agents.workflows.pal import pal

    if probe_tier().tier == "none":
        pytest.skip("no sandbox on this machine")
    box = Toolbox([tool(lookup_year)])
    t = asyncio.run(pal(get_model("scripted/pal-only-stand-ins"), box, "When?", AgentConfig(workflow="pal")))
    assert t.steps[0].error and "only defined lookup_year itself" in t.steps[0].error
    assert "lookup_year(name='...')" in t.steps[0].error  # how to call it
    assert t.stop == "finished" and t.answer == "1862" and len(t.steps) == 2


# --- tool calls written as text (the embedded models) -----------------------------------------------------


def test_calls_written_as_text_are_read_back() -> None:
    offered = {"Search", "Lookup"}
    tagged = (
        'Let me look.\n<tool_call>\n{"name": "Search", "arguments": {"entity": "Sellin Line"}}\n</tool_call>'
    )
    calls, rest = calls_in_text(tagged, offered)
    assert [(c.name, c.parsed_arguments) for c in calls] == [("Search", {"entity": "Sellin Line"})]
    assert rest == "Let me look."
    # The bare object the 0.5B writes, its last brace missing (measured), and two objects in a row.
    calls, rest = calls_in_text('{"name": "Search", "arguments": {"entity": "Marie Curie"}', offered)
    assert calls[0].parsed_arguments == {"entity": "Marie Curie"} and rest == ""
    two = (
        '{"name": "Search", "arguments": {"entity": "a"}}\n'
        '{"name": "Lookup", "arguments": "{\\"keyword\\": \\"b\\"}"}'
    )
    assert [c.name for c in calls_in_text(two, offered)[0]] == ["Search", "Lookup"]
    # The call followed by a guess at its result (measured on the 0.5B): the call, the guess dropped.
    guess = '{"name": "Search", "arguments": {"entity": "Marie Curie"}}. The first paragraph is: born in 1867'
    calls, rest = calls_in_text(guess, offered)
    assert [c.parsed_arguments for c in calls] == [{"entity": "Marie Curie"}] and rest == ""
    # Answers stay answers: prose, JSON naming no offered tool, a tool named inside prose.
    for text in ("Port Selwick", '{"name": "Paris"}', 'I would call {"name": "Search"} but no.', "[1, 2]"):
        assert calls_in_text(text, offered) == ((), text)
    # A call to a tool that does not exist (measured on the 1.5B: the search term as the tool's name, the
    # template's doubled braces copied) is a call — the toolbox answers "unknown tool" — not the answer.
    wrong = '{{"name": "Air Water Collection", "arguments": {"entity": "Tomas Ilveth"}}}'
    calls, rest = calls_in_text(wrong, offered)
    assert [(c.name, c.parsed_arguments) for c in calls] == [
        ("Air Water Collection", {"entity": "Tomas Ilveth"})
    ]
    assert rest == ""
    doubled = '{{"name": "Search", "arguments": {"entity": "Sellin Line"}}}'
    assert [c.name for c in calls_in_text(doubled, offered)[0]] == ["Search"]


def _local_against(server: MockServer) -> Model:
    """The embedded provider talking to the mock server in place of its llama.cpp child process."""
    provider = LocalProvider(
        resolve_model("qwen2.5-coder-0.5b"), ServerSettings(n_parallel=1), timeout_s=10.0, where="test"
    )
    provider.server = SimpleNamespace(running=True, base_url=server.base_url)  # type: ignore[assignment]
    provider.base_url = server.base_url
    return Model(provider)


def test_function_calling_on_the_embedded_provider_reads_calls_written_as_text() -> None:
    """The mock answers like the embedded server: tools accepted, the call written into the content."""
    from proctor.agents.workflows.function_calling import function_calling

    def reply(body: dict[str, Any]) -> Any:
        results = [m for m in body["messages"] if m["role"] == "tool"]
        if not results:
            return {"tool_calls": [{"name": "Search", "arguments": '{"entity": "Sellin Line"}'}]}
        return "Port Selwick"

    with MockServer(reply=reply, tools_mode="ignore") as server:

        async def go() -> Any:
            model = _local_against(server)
            try:
                assert await model.supports_tools()
                return await function_calling(
                    model,
                    DocumentEnvironment(CHUNKS).session(),
                    "Where?",
                    AgentConfig(workflow="function_calling"),
                )
            finally:
                await model.aclose()

        t = asyncio.run(go())
        bodies = [r.body for r in server.requests if r.body]
    assert t.stop == "finished" and t.answer == "Port Selwick"
    assert t.steps[0].action == "Search" and t.steps[0].raw == ""  # the call, not left as text
    assert t.steps[0].observation == "The Sellin Line runs ferries to Port Selwick."
    assert t.settings["action_format"] == "tool_calls"
    # The call went back to the server as an assistant tool call with its tool result.
    assistant = next(m for m in bodies[-1]["messages"] if m["role"] == "assistant")
    assert assistant["tool_calls"][0]["function"]["name"] == "Search"
    assert [m["role"] for m in bodies[-1]["messages"]][-1] == "tool"
