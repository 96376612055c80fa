"""Agents: typed tools (validation and failures become observations), the document environment, the ReAct
workflow with scripted models (invalid action, loop, finish, guards), and candidate kinds — an agent, a
Python callable and an HTTP service — as qa candidates, with traces stored and shown."""

from __future__ import annotations

import asyncio
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest

from proctor.agents.config import AgentConfig, Limits
from proctor.agents.environments.documents import DocumentEnvironment
from proctor.agents.tools import Toolbox, tool
from proctor.agents.workflows.react import parse_action, react
from proctor.corpus.types import Chunk
from proctor.models import get_model
from proctor.models.scripted import register_script
from proctor.runner import run_config

# --- tools -----------------------------------------------------------------------------------------------


def add(a: int, b: int = 2) -> int:
    """Add two integers.

    Args:
        a: the first number
        b: the second number
    """
    return a + b


def boom(text: str) -> str:
    """Always fails."""
    raise RuntimeError(f"cannot handle {text}")


def long_text(n: int) -> str:
    """A long result."""
    return "x" * n


def test_tool_schema_and_calls() -> None:
    t = tool(add)
    schema = t.schema()["function"]
    assert schema["name"] == "add" and schema["description"] == "Add two integers."
    assert schema["parameters"]["required"] == ["a"]
    assert schema["parameters"]["properties"]["a"]["description"] == "the first number"
    assert t.signature() == "add(a: int, b: int = 2)"
    box = Toolbox([t, tool(boom), tool(long_text)], max_result_chars=50)

    async def calls() -> list[Any]:
        return [
            await box.call("add", {"a": 1}),
            await box.call("add", '{"a": 1, "b": 5}'),
            await box.call("add", {"a": "one"}),
            await box.call("add", "{not json"),
            await box.call("add", {"a": 1, "c": 3}),
            await box.call("boom", {"text": "this"}),
            await box.call("nope", {}),
            await box.call("long_text", {"n": 500}),
        ]

    ok, ok2, bad_type, bad_json, extra, exc, unknown, long = asyncio.run(calls())
    assert ok.observation == "3" and ok2.observation == "6" and ok.error is None
    assert (
        bad_type.error
        and "invalid_arguments" in bad_type.error
        and "Expected add(a: int, b: int = 2)" in bad_type.error
    )
    assert bad_json.error and "not JSON" in bad_json.error
    assert extra.error and "c: Extra inputs are not permitted" in extra.error
    assert exc.error == "tool_exception: RuntimeError: cannot handle this" and exc.observation.startswith(
        "Error:"
    )
    assert unknown.error and "the tools are add, boom, long_text" in unknown.error
    assert (
        long.truncated and long.observation.startswith("x" * 50) and "truncated 450 chars" in long.observation
    )


# --- the document environment ------------------------------------------------------------------------------

CHUNKS = [
    Chunk(
        "c1",
        "d1",
        "glass.md",
        "# Tidal glass\n\nTidal glass is dark green.\n\nIt was first made in 1862.",
        0,
        {"title": "Tidal glass"},
    ),
    Chunk(
        "c2",
        "d1",
        "glass.md",
        "In 1902 a fire destroyed the furnace hall.\n\nThe hall reopened in 1904.",
        1,
        {"title": "Tidal glass"},
    ),
    Chunk(
        "c3", "d2", "ferry.md", "The Sellin Line runs ferries to Port Selwick.", 0, {"title": "Sellin Line"}
    ),
]


def test_document_environment_search_and_lookup() -> None:
    env = DocumentEnvironment(CHUNKS)
    box = env.session()

    async def go() -> list[Any]:
        out = []
        for name, args in [
            ("Lookup", {"keyword": "fire"}),
            ("Search", {"entity": "tidal GLASS"}),
            ("Lookup", {"keyword": "19"}),
            ("Lookup", {"keyword": "19"}),
            ("Lookup", {"keyword": "19"}),
            ("Search", {"entity": "ferries"}),
            ("Search", {"entity": "Sellin"}),
            ("Search", {"entity": "the Sellin Line company"}),  # the entity holds a title, with qualifiers
            ("Lookup", {"keyword": "helicopter"}),
            # a title held by a much longer entity (under half its words) is not taken for it
            ("Search", {"entity": "old glass boats of the Sellin Line company"}),
        ]:
            out.append(await box.call(name, args))
        return out

    first, found, r1, r2, r3, similar, partial, held, absent, loose = asyncio.run(go())
    # Calls that give no information are refused: the model reads the hint, but it is an error, not a
    # result (a PAL program gets an exception; the scratchpad never holds it).
    assert first.observation == (
        "No current document: Search for an entity first; Lookup reads in the document found."
    )
    assert first.error == "refused: " + first.observation and first.result is None
    assert (
        found.observation == "Tidal glass is dark green." and found.error is None
    )  # the heading is no passage
    assert r1.observation == "(Result 1 / 2) In 1902 a fire destroyed the furnace hall."
    assert r2.observation == "(Result 2 / 2) The hall reopened in 1904."
    assert r3.observation == "No more results." and r3.error == "refused: No more results."
    assert (
        similar.observation
        == "Could not find [ferries]. Similar: ['Sellin Line']. Search one of these titles."
    )
    assert similar.error and similar.error.startswith("refused: ") and similar.result is None
    assert partial.observation == "The Sellin Line runs ferries to Port Selwick."
    assert held.observation == "The Sellin Line runs ferries to Port Selwick."
    assert absent.observation == "No passage of [Sellin Line] contains [helicopter]." and absent.error
    assert loose.error and loose.observation.startswith("Could not find [old glass boats")
    assert asyncio.run(box.call("Search", {"entity": "a line of glass boats"})).error is not None
    # A new session starts without a current document.
    assert asyncio.run(env.session().call("Lookup", {"keyword": "fire"})).observation.startswith("No current")


# --- ReAct -------------------------------------------------------------------------------------------------


def test_parse_action_grammar() -> None:
    box = DocumentEnvironment(CHUNKS).session()
    assert parse_action("Thought: x\nAction: Search[Tidal glass]", box) == (
        "Search",
        {"entity": "Tidal glass"},
    )
    assert parse_action("Action 2: lookup[fire]", box) == ("Lookup", {"keyword": "fire"})
    assert parse_action('Action: Search{"entity": "Sellin Line"}', box) == (
        "Search",
        {"entity": "Sellin Line"},
    )
    assert parse_action("Action: Finish[1862]", box) == ("Finish", {"answer": "1862"})
    assert parse_action("I will search for it.", box) == "no 'Action: Name[argument]' line"
    # The call form small models write reads the same way.
    assert parse_action("Action: Search(Tidal glass)", box) == ("Search", {"entity": "Tidal glass"})
    assert parse_action('Action: Search("Tidal glass")', box) == ("Search", {"entity": "Tidal glass"})
    assert parse_action("Action: Search(entity: Tidal glass)", box) == ("Search", {"entity": "Tidal glass"})
    assert parse_action("Action: Lookup(keyword='fire')", box) == ("Lookup", {"keyword": "fire"})
    assert parse_action("Thought: done.\nFinish[1862]", box) == ("Finish", {"answer": "1862"})
    assert (
        parse_action("Search[Tidal glass]", box) == "no 'Action: Name[argument]' line"
    )  # tools need the label
    assert parse_action("Action: Browse[x]", box) == "unknown action 'Browse'"


SCRIPTS: dict[str, list[str]] = {}
SEEN: list[str] = []


def _scripted(name: str) -> Any:
    def fn(messages: list[dict[str, Any]], params: Any) -> str:
        SEEN.append(messages[-1]["content"])
        replies = SCRIPTS[name]
        n = sum(1 for _ in re.finditer(r"^Observation:", messages[-1]["content"], re.M))
        return replies[min(n, len(replies) - 1)]

    register_script(name, fn)
    return get_model(f"scripted/{name}")


def _run(model: Any, limits: Limits | None = None) -> Any:
    box = DocumentEnvironment(CHUNKS).session()
    return asyncio.run(
        react(model, box, "When was tidal glass first made?", AgentConfig(limits=limits or Limits()))
    )


def test_react_invalid_action_then_finish() -> None:
    SCRIPTS["react-ok"] = [
        "Thought: I should look it up.\nAction: Open the glass page",
        "Thought: Use a valid action.\nAction: Search[Tidal glass]",
        "Thought: Find the year.\nAction: Lookup[made]",
        "Thought: It says 1862.\nAction: Finish[1862]",
    ]
    SEEN.clear()
    t = _run(_scripted("react-ok"))
    assert t.stop == "finished" and t.answer == "1862" and t.finished
    assert [s.action for s in t.steps] == [None, "Search", "Lookup", "Finish"]
    assert t.steps[0].error and t.steps[0].error.startswith("parse_error")
    assert "Valid actions: Search[<entity>], Lookup[<keyword>], Finish[<answer>]" in (
        t.steps[0].observation or ""
    )
    assert t.steps[2].observation == "(Result 1 / 1) It was first made in 1862."
    assert t.had_error and t.interruption is None  # an error on the way, recovered: not an interruption
    # The model saw the invalid-action observation; no verdict about the answer is ever in its prompt.
    assert "Invalid action" in SEEN[1] and "correct" not in SEEN[-1].lower()


def test_react_loop_and_guards() -> None:
    SCRIPTS["react-loop"] = ["Thought: again\nAction: Search[Tidal glass]"]
    t = _run(_scripted("react-loop"))
    assert t.stop == "loop" and len(t.steps) == 3 and t.answer is None and not t.finished
    assert t.interruption is not None and t.interruption.reason == "loop" and t.interruption.side == "model"
    SCRIPTS["react-babble"] = ["I am not sure what to do."]
    t = _run(_scripted("react-babble"))
    assert t.stop == "parse_error" and len(t.steps) == 3
    SCRIPTS["react-wander"] = [f"Thought: t\nAction: Lookup[word{i}]" for i in range(30)]
    t = _run(_scripted("react-wander"), Limits(max_steps=4))
    assert t.stop == "max_steps" and len(t.steps) == 4
    t = _run(_scripted("react-wander"), Limits(max_context_tokens=256))
    assert t.stop == "context_limit"


def test_react_a_repeated_call_is_answered_with_a_note_before_the_loop_stop() -> None:
    from proctor.agents.workflows.base import REPEAT_NOTE

    # Search, Lookup, then the same Search again (its result is above): the model is told so instead of
    # being shown the page again, and can move on.
    SCRIPTS["react-repeat"] = [
        "Action: Search[Tidal glass]",
        "Action: Lookup[made]",
        "Action: Search[Tidal glass]",
        "Action: Finish[1862]",
    ]
    SEEN.clear()
    t = _run(_scripted("react-repeat"))
    assert [s.action for s in t.steps] == ["Search", "Lookup", "Search", "Finish"] and t.answer == "1862"
    assert t.steps[2].observation == REPEAT_NOTE and t.steps[2].note and t.steps[2].error is None
    assert t.steps[2].tool_calls[0].result == "Tidal glass is dark green."  # the call ran (tool state)
    assert SEEN[3].count("Tidal glass is dark green.") == 1 and REPEAT_NOTE in SEEN[3]
    # Still the same call with the same result three times in a row: the loop stop, as before.
    SCRIPTS["react-loop2"] = ["Action: Search[Sellin]"]
    t = _run(_scripted("react-loop2"))
    assert t.stop == "loop" and [s.observation == REPEAT_NOTE for s in t.steps] == [False, True, True]
    # Lookup repeated for its next result is no repeat: each call gives a new passage.
    SCRIPTS["react-pages"] = ["Action: Search[Tidal glass]"] + ["Action: Lookup[19]"] * 3
    t = _run(_scripted("react-pages"), Limits(max_steps=4))
    assert t.stop == "max_steps" and [s.observation for s in t.steps[1:3]] == [
        "(Result 1 / 2) In 1902 a fire destroyed the furnace hall.",
        "(Result 2 / 2) The hall reopened in 1904.",
    ]
    assert t.steps[3].observation == "No more results." and t.steps[3].error == "refused: No more results."


# --- candidate kinds in the qa protocol ---------------------------------------------------------------------


def examiner(messages: list[dict[str, Any]], params: Any) -> str:
    text = messages[-1]["content"]
    if "1862" in text:
        return json.dumps({"question": "When was tidal glass first made?", "answer": "1862"})
    return json.dumps({"question": "Where does the Sellin Line run ferries to?", "answer": "Port Selwick"})


def agent_llm(messages: list[dict[str, Any]], params: Any) -> str:
    text = messages[-1]["content"]
    if "Observation:" not in text:
        return (
            "Thought: search\nAction: Search[Tidal glass]"
            if "tidal" in text.lower()
            else "Action: Search[Sellin Line]"
        )
    last = text.rsplit("Observation:", 1)[1]
    if "1862" in last or "Port Selwick" in last:
        return "Thought: found\nAction: Finish[" + ("1862" if "1862" in last else "Port Selwick") + "]"
    return "Thought: look\nAction: Lookup[made]"


def pipeline(question: str, choices: list[str] | None = None) -> dict[str, Any]:
    """A user's RAG pipeline, as a Python callable."""
    return {
        "text": "1862" if "tidal" in question.lower() else "<b>Port</b> Selwick",
        "contexts": ["ctx <i>1</i>"],
    }


register_script("kinds-examiner", examiner)
register_script("kinds-agent", agent_llm)


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        assert self.headers.get("Authorization") == "Bearer secret-token"
        reply = {
            "text": "1862" if "tidal" in body["question"].lower() else "Ambry",
            "contexts": ["from http"],
        }
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


def test_agent_python_and_http_candidates_in_qa(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROCTOR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("SERVICE_TOKEN", "Bearer secret-token")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "glass.md").write_text("# Tidal glass\n\nTidal glass is dark green. It was first made in 1862.\n")
    (docs / "ferry.md").write_text("# Sellin Line\n\nThe Sellin Line runs ferries to Port Selwick.\n")
    (tmp_path / "mypipe.py").write_text(
        "def answer(question, choices=None):\n"
        "    return {'text': '1862' if 'tidal' in question.lower() else '<b>Port</b> Selwick', "
        "'contexts': ['ctx <i>1</i>']}\n"
    )
    server = HTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        cfg = tmp_path / "qa.yaml"
        url = f"http://127.0.0.1:{server.server_port}/answer"
        cfg.write_text(
            f"""
protocol: qa
corpus: {{path: docs, min_chunk_chars: 10}}
models:
  exam: scripted/kinds-examiner
  agent-llm: scripted/kinds-agent
roles: {{examiner: exam}}
candidates:
  - {{name: react-agent, model: agent-llm, agent: {{workflow: react, environment: documents}}}}
  - {{name: my-pipeline, python: "{tmp_path / "mypipe.py"}:answer"}}
  - name: my-service
    http: {{url: "{url}", headers_env: {{Authorization: SERVICE_TOKEN}}}}
qa:
  num_questions: 2
  judges: []
"""
        )
        result = run_config(cfg, out=tmp_path / "runs", show_progress=False)
    finally:
        server.shutdown()
    c = result.summary["candidates"]
    assert c["react-agent"]["em"]["value"] == 1.0 and c["react-agent"]["model"].endswith("(react agent)")
    assert c["my-pipeline"]["em"]["value"] == 0.5 and c["my-pipeline"]["model"].startswith("python:")
    assert c["my-service"]["em"]["value"] == 0.5 and c["my-service"]["answer_errors"] == 0
    items = [json.loads(line) for line in (result.run_dir / "items.jsonl").read_text().splitlines()]
    agent = [i for i in items if i.get("kind") == "answer" and i["candidate"] == "react-agent"]
    traj = agent[0]["trace"]["trajectory"]
    assert traj["stop"] == "finished" and traj["steps"][0]["action"] == "Search"
    html = (result.run_dir / "report.html").read_text()
    assert "Agent traces and pipeline contexts" in html
    assert "ctx &lt;i&gt;1&lt;/i&gt;" in html and "<i>1</i>" not in html
    # The secret header value never reaches the store or the report.
    assert "secret-token" not in html and b"secret-token" not in (result.run_dir / "run.sqlite").read_bytes()


# --- DFSDT -------------------------------------------------------------------------------------------------


def dfsdt_script(messages: list[dict[str, Any]], params: Any) -> str:
    text = messages[-1]["content"]
    depth = len(re.findall(r"^Observation:", text, re.M))
    tried = (
        re.findall(r"^- (.*)$", text.split("you already tried these actions", 1)[1], re.M)
        if "already tried" in text
        else []
    )
    if depth == 0:
        return (
            "Thought: glass first\nAction: Search[Tidal glass]"
            if not tried
            else "Action: Search[Sellin Line]"
        )
    if "Search[Tidal glass]" in text.split("Observation:")[0] or "Action: Search[Tidal glass]" in text:
        if depth == 1:
            return "Action: Lookup[fire]"
        return "Thought: hopeless\nAction: GiveUp[]"
    return "I have no idea" if not tried else "Thought: got it\nAction: Finish[Port Selwick]"


register_script("dfsdt-tree", dfsdt_script)


def test_dfsdt_visit_order_backtracking_and_give_up() -> None:
    from proctor.agents.workflows.dfsdt import dfsdt

    box = DocumentEnvironment(CHUNKS).session()
    cfg = AgentConfig(workflow="dfsdt", dfsdt_width=2, dfsdt_depth=5, dfsdt_queries=20)
    t = asyncio.run(dfsdt(get_model("scripted/dfsdt-tree"), box, "Where do ferries go?", cfg))
    assert [s.node for s in t.steps] == ["0.0", "0.0.0", "0.0.0.0", "0.1", "0.1.0", "0.1.1"]
    assert [s.action for s in t.steps] == ["Search", "Lookup", "GiveUp", "Search", None, "Finish"]
    assert t.stop == "finished" and t.answer == "Port Selwick"
    assert {k: t.settings[k] for k in ("width", "depth", "queries", "action_format")} == {
        "width": 2,
        "depth": 5,
        "queries": 20,
        "action_format": "text",
    }  # a scripted model takes no JSON schemas: the text format, said so
    assert "does not take JSON schemas" in t.settings["action_format_note"]
    # A query budget smaller than the tree stops with `budget`.
    small = AgentConfig(workflow="dfsdt", dfsdt_width=2, dfsdt_depth=5, dfsdt_queries=4)
    t = asyncio.run(
        dfsdt(get_model("scripted/dfsdt-tree"), DocumentEnvironment(CHUNKS).session(), "q?", small)
    )
    assert t.stop == "budget" and len(t.steps) == 4
    assert t.interruption is not None and t.interruption.reason == "step_limit"  # the query budget
    # Depth 1: no child is ever expanded; both root children are tried, then the tree is exhausted.
    flat = AgentConfig(workflow="dfsdt", dfsdt_width=2, dfsdt_depth=1, dfsdt_queries=20)
    t = asyncio.run(
        dfsdt(get_model("scripted/dfsdt-tree"), DocumentEnvironment(CHUNKS).session(), "q?", flat)
    )
    assert [s.node for s in t.steps] == ["0.0", "0.1"] and t.stop == "gave_up" and t.answer is None
    assert t.interruption is None  # an exhausted tree is a search that ran to its end


def dfsdt_stuck_script(messages: list[dict[str, Any]], params: Any) -> str:
    text = messages[-1]["content"]
    if "Similar: ['Sellin Line']" in text.split("already tried", 1)[-1] and "already tried" in text:
        return "Action: Search[Sellin Line]"  # the tried sibling's observation named the title
    if "Observation:" not in text:
        return "Action: Search[ferries]"  # not a title: refused, with similar titles
    if "Observation: The Sellin Line" in text and text.count("Observation:") == 1:
        return "Action: Lookup[Sellin]"
    if text.count("Observation:") == 2 and "already tried" not in text:
        return "Action: Lookup[Sellin]"  # no more results: refused
    if "already tried" in text and text.count("Observation:") == 2:
        return "Action: Finish[Port Selwick]"
    return "Action: Search[Sellin Line]"  # the same call as its path's first: a repeat


register_script("dfsdt-stuck", dfsdt_stuck_script)


def test_dfsdt_does_not_expand_refused_or_repeated_calls() -> None:
    """A refused call (no such document, no more results) and a call repeating one of its path's with the
    same result are dead ends: the search moves to a sibling instead of deepening them (before, a run
    spent its budget on 12 levels of the same refused Lookup), and the sibling sees what was tried."""
    from proctor.agents.workflows.base import REPEAT_NOTE
    from proctor.agents.workflows.dfsdt import dfsdt

    cfg = AgentConfig(workflow="dfsdt", dfsdt_width=2, dfsdt_depth=12, dfsdt_queries=12)
    box = DocumentEnvironment(CHUNKS).session()
    t = asyncio.run(dfsdt(get_model("scripted/dfsdt-stuck"), box, "Where do ferries go?", cfg))
    assert [s.node for s in t.steps] == ["0.0", "0.1", "0.1.0", "0.1.0.0", "0.1.0.1"]
    assert [s.action for s in t.steps] == ["Search", "Search", "Lookup", "Lookup", "Finish"]
    assert t.steps[0].error and t.steps[0].error.startswith("refused: Could not find [ferries]")
    assert t.steps[3].error == "refused: No more results."
    assert t.stop == "finished" and t.answer == "Port Selwick"
    # A repeat of the path's own call is told so and not expanded.
    SCRIPTS["dfsdt-repeat"] = ["Action: Search[Sellin Line]"]
    t = asyncio.run(dfsdt(_scripted("dfsdt-repeat"), DocumentEnvironment(CHUNKS).session(), "q?", cfg))
    assert [s.node for s in t.steps] == ["0.0", "0.0.0", "0.0.1", "0.1", "0.1.0", "0.1.1"]
    assert [s.observation == REPEAT_NOTE for s in t.steps] == [False, True, True, False, True, True]
    assert t.stop == "gave_up"


# --- a crash mid-trajectory, then resume -------------------------------------------------------------------

AGENT_CALLS: dict[str, int] = {"n": 0, "crash_after": -1, "crashed": 0}


class Crash(RuntimeError):
    """Escapes the protocol like the death of the process."""


def slow_agent(messages: list[dict[str, Any]], params: Any) -> str:
    if AGENT_CALLS["crash_after"] >= 0 and (
        AGENT_CALLS["crashed"] or AGENT_CALLS["n"] >= AGENT_CALLS["crash_after"]
    ):
        AGENT_CALLS["crashed"] = 1
        raise Crash("killed mid-trajectory")
    AGENT_CALLS["n"] += 1
    text = messages[-1]["content"]
    n = len(re.findall(r"^Observation:", text, re.M))
    if n < 3:
        return f"Thought: step {n}\nAction: Lookup[word{n}]" if n else "Action: Search[Tidal glass]"
    return "Action: Finish[1862]"


register_script("kinds-slow-agent", slow_agent)


def test_crash_mid_trajectory_then_resume_replays_stored_steps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "glass.md").write_text("# Tidal glass\n\nTidal glass is dark green. It was first made in 1862.\n")
    cfg = tmp_path / "qa.yaml"
    cfg.write_text(
        """
protocol: qa
corpus: {path: docs, min_chunk_chars: 10}
models:
  exam: scripted/kinds-examiner
  llm: scripted/kinds-slow-agent
roles: {examiner: exam}
candidates:
  - {name: agent, model: llm, agent: {workflow: react}}
qa: {num_questions: 1, judges: []}
"""
    )
    monkeypatch.setenv("PROCTOR_CACHE_DIR", str(tmp_path / "c0"))
    AGENT_CALLS.update(n=0, crash_after=-1, crashed=0)
    ref = run_config(cfg, out=tmp_path / "ref", show_progress=False)
    ref_calls = AGENT_CALLS["n"]
    assert ref_calls == 4

    monkeypatch.setenv("PROCTOR_CACHE_DIR", str(tmp_path / "c1"))
    AGENT_CALLS.update(n=0, crash_after=2, crashed=0)
    with pytest.raises(Crash):
        run_config(cfg, out=tmp_path / "runs", show_progress=False)
    assert AGENT_CALLS["n"] == 2
    # An empty cache on resume: only the journaled steps in the run store spare the first two calls.
    monkeypatch.setenv("PROCTOR_CACHE_DIR", str(tmp_path / "c2"))
    AGENT_CALLS.update(n=0, crash_after=-1, crashed=0)
    resumed = run_config(cfg, out=tmp_path / "runs", resume=True, show_progress=False)
    assert AGENT_CALLS["n"] == ref_calls - 2

    def trajectory(run_dir: Path) -> dict[str, Any]:
        rows = [json.loads(line) for line in (run_dir / "items.jsonl").read_text().splitlines()]
        t = next(r for r in rows if r.get("kind") == "answer")["trace"]["trajectory"]
        for s in t["steps"]:
            s.pop("latency_s"), s.pop("cached")
            for c in s["tool_calls"]:  # timings differ between runs; the calls themselves may not
                c.pop("latency_s")
        return dict(t)

    got, want = trajectory(resumed.run_dir), trajectory(ref.run_dir)
    for a, b in zip(got["steps"], want["steps"], strict=True):
        assert a == b, {k: (a[k], b.get(k)) for k in a if a[k] != b.get(k)}
    assert got == want


# --- PAL through the sandbox ------------------------------------------------------------------------------


def pal_script(messages: list[dict[str, Any]], params: Any) -> str:
    text = messages[-1]["content"]
    if "It failed" not in text:
        return "```python\nyear = Search(entity='Tidal glass')\nanswer = year.split()[99]\n```"
    return (
        "```python\npage = Search(entity='Tidal glass')\nhit = Lookup(keyword='1862')\n"
        "answer = '1862' if '1862' in hit else 'unknown'\n```"
    )


register_script("pal-script", pal_script)


def test_pal_program_runs_in_the_sandbox_and_is_corrected_after_an_error() -> None:
    from proctor.agents.sandbox import probe_tier
    from proctor.agents.workflows.pal import extract_code, pal

    assert extract_code("Here:\n```python\nanswer = 1\n```") == "answer = 1"
    assert extract_code("answer = 2") == "answer = 2" and extract_code("I think 1862.") is None
    if probe_tier().tier == "none":
        pytest.skip("no sandbox on this machine")
    box = DocumentEnvironment(CHUNKS).session()
    t = asyncio.run(
        pal(
            get_model("scripted/pal-script"),
            box,
            "When was tidal glass first made?",
            AgentConfig(workflow="pal"),
        )
    )
    assert t.stop == "finished" and t.answer == "1862"
    assert t.steps[0].error and t.steps[0].error.startswith("program_error: IndexError")
    assert [c.name for c in t.steps[1].tool_calls] == ["Search", "Lookup"]
    assert t.settings["sandbox"] == probe_tier().tier
    enforced = t.settings["sandbox_enforced"]  # every limit says how this machine enforced it
    assert set(enforced) == {"memory", "disk", "processes", "cpu", "wall"} and all(enforced.values())
    assert "(Result 1 / 1) It was first made in 1862." in t.scratchpad


PAL_SCRIPTS: dict[str, list[str]] = {}
PAL_SEEN: list[str] = []


def _pal_scripted(name: str) -> Any:
    def fn(messages: list[dict[str, Any]], params: Any) -> str:
        text = messages[-1]["content"]
        PAL_SEEN.append(text)
        replies = PAL_SCRIPTS[name]
        return replies[min(text.count("Your earlier program:"), len(replies) - 1)]

    register_script(name, fn)
    return get_model(f"scripted/{name}")


def _pal(model: Any) -> Any:
    from proctor.agents.workflows.pal import pal

    box = DocumentEnvironment(CHUNKS).session()
    return asyncio.run(pal(model, box, "When was tidal glass first made?", AgentConfig(workflow="pal")))


def test_pal_a_refused_call_fails_the_program_instead_of_becoming_its_answer() -> None:
    from proctor.agents.sandbox import probe_tier

    if probe_tier().tier == "none":
        pytest.skip("no sandbox on this machine")
    # Lookup before any Search: the environment's hint was the program's answer; now the call raises in
    # the program, and the next program is shown why.
    PAL_SCRIPTS["pal-lookup-first"] = [
        "```python\nanswer = Lookup(keyword='made')\n```",
        "```python\nSearch(entity='Tidal glass')\nhit = Lookup(keyword='made')\n"
        "answer = hit.split()[-1].strip('.')\n```",
    ]
    PAL_SEEN.clear()
    t = _pal(_pal_scripted("pal-lookup-first"))
    assert t.stop == "finished" and t.answer == "1862" and len(t.steps) == 2
    first = t.steps[0]
    assert first.error and first.error.startswith("program_error: ToolError: refused: No current document")
    assert first.tool_calls[0].error and first.tool_calls[0].result is None
    assert "It failed: program_error: ToolError: refused: No current document" in PAL_SEEN[1]
    assert "No current document" not in t.scratchpad


def test_pal_a_program_that_calls_no_tool_is_reasked_once() -> None:
    from proctor.agents.sandbox import probe_tier
    from proctor.agents.workflows.pal import NO_TOOL_CALL

    if probe_tier().tier == "none":
        pytest.skip("no sandbox on this machine")
    look_up = (
        "```python\nSearch(entity='Tidal glass')\nanswer = Lookup(keyword='made').split()[-1].strip('.')\n```"
    )
    PAL_SCRIPTS["pal-memory-then-tools"] = ["```python\nanswer = '1900'\n```", look_up]
    PAL_SEEN.clear()
    t = _pal(_pal_scripted("pal-memory-then-tools"))
    assert t.stop == "finished" and t.answer == "1862" and len(t.steps) == 2
    assert t.steps[0].error is None and t.steps[0].note and "re-asked once" in t.steps[0].note
    assert t.settings["reasked_without_tools"] == 1 and NO_TOOL_CALL in PAL_SEEN[1]
    assert t.interruption is None
    # Bounded: a second program without a tool call is the answer (AM or RE is then the taxonomy's call).
    PAL_SCRIPTS["pal-memory"] = ["```python\nanswer = '1900'\n```"]
    t = _pal(_pal_scripted("pal-memory"))
    assert t.stop == "finished" and t.answer == "1900" and len(t.steps) == 2
    assert t.settings["reasked_without_tools"] == 1
    # A program that looks the answer up on its first try is not re-asked.
    PAL_SCRIPTS["pal-direct"] = [look_up]
    t = _pal(_pal_scripted("pal-direct"))
    assert len(t.steps) == 1 and t.answer == "1862" and "reasked_without_tools" not in t.settings


def test_pal_programs_get_json_as_values_positional_arguments_and_may_not_fake_tools() -> None:
    from proctor.agents.sandbox import probe_tier, run_program
    from proctor.agents.workflows.pal import _redefined

    box = Toolbox([tool(add)])
    assert _redefined("def add(a, b):\n    return 3\nanswer = add(1, 2)", box) == "add"
    assert _redefined("add = lambda a, b: 3", box) == "add" and _redefined("answer = add(1, 2)", box) is None
    if probe_tier().tier == "none":
        pytest.skip("no sandbox on this machine")

    def info(id: str) -> dict[str, Any]:
        """Attributes of an entity."""
        return {"id": id, "year": 2021}

    r = asyncio.run(
        run_program(
            "answer = str(add(2, 5)) + '/' + str(info('p1')['year'])",
            toolbox=Toolbox([tool(add), tool(info)]),
        )
    )
    assert r.cause == "finished" and r.answer == "7/2021"


# --- native function calling -----------------------------------------------------------------------------


def fc_script(messages: list[dict[str, Any]], params: Any) -> Any:
    assert params.tools and {t["function"]["name"] for t in params.tools} == {"Search", "Lookup"}
    results = [m for m in messages if m["role"] == "tool"]
    if not results:
        return {"tool_calls": [{"name": "Search", "arguments": {"entity": "Tidal glass"}}]}
    if len(results) == 1:
        return {"tool_calls": [{"name": "Lookup", "arguments": '{"keyword": '}]}  # malformed JSON
    if len(results) == 2:
        return {"tool_calls": [{"name": "Lookup", "arguments": '{"keyword": "made"}'}]}
    return "1862"


register_script("fc-script", fc_script)


def test_function_calling_with_scripted_tool_calls() -> None:
    from proctor.agents.workflows.function_calling import function_calling

    box = DocumentEnvironment(CHUNKS).session()
    cfg = AgentConfig(workflow="function_calling")
    t = asyncio.run(
        function_calling(get_model("scripted/fc-script"), box, "When was tidal glass first made?", cfg)
    )
    assert t.stop == "finished" and t.answer == "1862"
    assert [s.action for s in t.steps] == ["Search", "Lookup", "Lookup", None]
    assert t.steps[1].error and t.steps[1].error.startswith("invalid_arguments: arguments are not valid JSON")
    assert t.steps[2].observation == "(Result 1 / 1) It was first made in 1862."
    assert t.had_error  # the malformed call is counted on its step


def test_function_calling_over_http_against_the_mock_server(tmp_path: Path) -> None:
    from proctor.agents.workflows.function_calling import function_calling
    from proctor.testing.mock_server import MockServer

    def reply(body: dict[str, Any]) -> Any:
        tool_msgs = [m for m in body["messages"] if m["role"] == "tool"]
        if body.get("tools") is None:
            return "plain"
        if not tool_msgs:
            return {"tool_calls": [{"name": "Search", "arguments": '{"entity": "Sellin Line"}'}]}
        if len(tool_msgs) == 1:
            return {"tool_calls": [{"name": "Search", "arguments": "{'entity': bad}"}]}
        return "Port Selwick"

    with MockServer(reply=reply) as server:

        async def go() -> tuple[Any, Any, bool]:
            model = get_model("openai/mock", base_url=server.base_url, cache_dir=tmp_path)
            try:
                supported = await model.supports_tools()
                cfg = AgentConfig(workflow="function_calling")
                first = await function_calling(model, DocumentEnvironment(CHUNKS).session(), "Where?", cfg)
                again = await function_calling(model, DocumentEnvironment(CHUNKS).session(), "Where?", cfg)
            finally:
                await model.aclose()
            return first, again, supported

        first, again, supported = asyncio.run(go())
        bodies = [r.body for r in server.requests if r.path.endswith("/chat/completions") and r.body]
    assert supported
    assert first.answer == "Port Selwick" and first.stop == "finished"
    assert first.steps[0].observation == "The Sellin Line runs ferries to Port Selwick."
    assert first.steps[1].error and "not valid JSON" in first.steps[1].error

    # The second run is served from the cache: the same tool calls, no new request.
    def same(t: Any) -> list[Any]:
        out = []
        for s in t.steps:
            calls = [(c.name, c.arguments, c.result, c.error) for c in s.tool_calls]
            out.append((s.model_dump(exclude={"latency_s", "cached", "tool_calls"}), calls))
        return out

    assert same(again) == same(first)
    assert all(s.cached for s in again.steps)
    last = bodies[-1]
    assert last["tools"][0]["function"]["name"] in ("Search", "Lookup")
    tool_results = [m for m in last["messages"] if m["role"] == "tool"]
    assert len(tool_results) == 2 and tool_results[0]["tool_call_id"] == "call_0_0"
    assistant = [m for m in last["messages"] if m["role"] == "assistant"]
    assert assistant[0]["tool_calls"][0]["function"]["arguments"] == '{"entity": "Sellin Line"}'


# --- a reply that only repeats a tool's error message is not the answer ------------------------------------

FC_SEEN: list[list[dict[str, Any]]] = []


def _academic() -> Toolbox:
    from proctor.agents.environments.academic import SHIPPED as ACADEMIC
    from proctor.agents.environments.database import DatabaseEnvironment

    return Toolbox(DatabaseEnvironment.from_schema(ACADEMIC / "schema.yaml").tools())


def _refusal(messages: list[dict[str, Any]]) -> str:
    return next(
        m["content"] for m in messages if m["role"] == "tool" and "no entity has the id" in m["content"]
    )


def fc_echo_then_search(messages: list[dict[str, Any]], params: Any) -> Any:
    """A made-up id, the refusal copied as the reply, then (told so) the search the refusal names."""
    FC_SEEN.append(list(messages))
    last = messages[-1]
    if not any(m["role"] == "tool" for m in messages):
        return {"tool_calls": [{"name": "getPublication", "arguments": {"id": "12345"}}]}
    if last["role"] == "tool" and "no entity has the id" in last["content"]:
        return _refusal(messages)
    if last["role"] == "user":  # the nudge
        return {
            "tool_calls": [{"name": "searchPublication", "arguments": {"name": "peat hydrology at Zatol"}}]
        }
    if '"pub015"' in last["content"] and '"year"' not in last["content"]:
        return {"tool_calls": [{"name": "getPublication", "arguments": {"id": "pub015"}}]}
    return str(json.loads(last["content"])["year"])


def fc_echo_always(messages: list[dict[str, Any]], params: Any) -> Any:
    FC_SEEN.append(list(messages))
    if not any(m["role"] == "tool" for m in messages):
        return {"tool_calls": [{"name": "getPublication", "arguments": {"id": "12345"}}]}
    return "Sorry: " + _refusal(messages)


def fc_answer_sharing_words(messages: list[dict[str, Any]], params: Any) -> Any:
    if not any(m["role"] == "tool" for m in messages):
        return {"tool_calls": [{"name": "getPublication", "arguments": {"id": "12345"}}]}
    return "The publication's id is pub001"


register_script("fc-echo-then-search", fc_echo_then_search)
register_script("fc-echo-always", fc_echo_always)
register_script("fc-answer-sharing-words", fc_answer_sharing_words)


def _fc(name: str) -> Any:
    from proctor.agents.workflows.function_calling import function_calling

    question = "In which year was 'Mapping seasonal peat hydrology at Zatol' published?"
    cfg = AgentConfig(workflow="function_calling")
    return asyncio.run(function_calling(get_model(f"scripted/{name}"), _academic(), question, cfg))


def test_function_calling_a_reply_repeating_a_refusal_is_reasked_once() -> None:
    from proctor.agents.workflows.base import ECHO_NOTE

    FC_SEEN.clear()
    t = _fc("fc-echo-then-search")
    assert t.stop == "finished" and t.answer == "2023" and t.interruption is None
    assert [s.action for s in t.steps] == [
        "getPublication",
        None,
        "searchPublication",
        "getPublication",
        None,
    ]
    echo = t.steps[1]
    assert echo.note == ECHO_NOTE and "no entity has the id '12345'" in echo.raw
    assert t.settings["reasked_tool_message"] == 1
    # The nudge is a user turn right after the copied reply, quoting the message; rebuilt from the steps,
    # so every later request carries it in the same place.
    after = FC_SEEN[2]
    assert [m["role"] for m in after[-2:]] == ["assistant", "user"] and "tool_calls" not in after[-2]
    assert "repeats the tool's message" in after[-1]["content"]
    assert "no entity has the id '12345'" in after[-1]["content"]
    assert FC_SEEN[-1][: len(after)] == after
    assert "2023" in t.scratchpad and "no entity has the id" not in t.scratchpad


def test_function_calling_replays_the_reask_from_the_call_cache(tmp_path: Path) -> None:
    from proctor.agents.workflows.function_calling import function_calling
    from proctor.testing.mock_server import MockServer

    def reply(body: dict[str, Any]) -> Any:
        out = fc_echo_then_search(body["messages"], None)
        if isinstance(out, dict):
            return {"tool_calls": [{"name": c["name"], "arguments": json.dumps(c["arguments"])}
                                   for c in out["tool_calls"]]}  # fmt: skip
        return out

    with MockServer(reply=reply) as server:

        async def go() -> tuple[Any, Any]:
            model = get_model("openai/mock", base_url=server.base_url, cache_dir=tmp_path)
            cfg = AgentConfig(workflow="function_calling")
            try:
                first = await function_calling(model, _academic(), "Which year?", cfg)
                again = await function_calling(model, _academic(), "Which year?", cfg)
            finally:
                await model.aclose()
            return first, again

        first, again = asyncio.run(go())
        sent = [
            r
            for r in server.requests
            if r.path.endswith("/chat/completions") and r.body and "Which year?" in json.dumps(r.body)
        ]  # fmt: skip  (not the tool-support probe)
    assert first.answer == "2023" and first.steps[1].note and len(first.steps) == 5
    assert len(sent) == 5 and all(s.cached for s in again.steps)  # the replay sent nothing
    assert [s.model_dump(exclude={"latency_s", "cached", "tool_calls"}) for s in again.steps] == [
        s.model_dump(exclude={"latency_s", "cached", "tool_calls"}) for s in first.steps
    ]
    assert again.settings == first.settings and again.answer == first.answer


def test_function_calling_reasks_a_repeated_refusal_only_once() -> None:
    FC_SEEN.clear()
    t = _fc("fc-echo-always")
    assert t.stop == "finished" and len(t.steps) == 3 and len(FC_SEEN) == 3
    assert t.answer and t.answer.startswith("Sorry: no entity has the id '12345'")  # the second echo stands
    assert t.steps[1].note and t.steps[2].note is None and t.settings["reasked_tool_message"] == 1


def test_an_answer_sharing_words_with_a_tool_error_is_not_reasked() -> None:
    from proctor.agents.tools import ToolCall
    from proctor.agents.trace import AgentStep
    from proctor.agents.workflows.base import echoed_tool_message

    t = _fc("fc-answer-sharing-words")
    assert t.answer == "The publication's id is pub001" and len(t.steps) == 2
    assert t.steps[1].note is None and "reasked_tool_message" not in t.settings
    refused = AgentStep(
        index=0,
        tool_calls=[
            ToolCall(
                name="Search", arguments={}, error="refused: Could not find [Ada]. Similar: ['Ada Verrane']."
            )
        ],
    )
    ok = AgentStep(
        index=0, tool_calls=[ToolCall(name="Search", arguments={}, result="Could not find it anywhere.")]
    )
    assert echoed_tool_message("could not find ADA!", [refused]) is not None
    assert echoed_tool_message("Could not find [Ada]. Similar: ['Ada Verrane'].", [refused]) is not None
    assert echoed_tool_message("Ada Verrane", [refused]) is None  # a name the message quotes
    assert (
        echoed_tool_message("Ada Verrane could not be found in 1901 or after, says the archive", [refused])
        is None
    )
    assert echoed_tool_message("Could not find it anywhere.", [ok]) is None  # a result, not an error
    assert echoed_tool_message("", [refused]) is None


def test_react_a_finish_repeating_a_refusal_is_answered_with_a_note_once() -> None:
    from proctor.agents.workflows.base import ECHO_NOTE

    refusal = "No current document: Search for an entity first; Lookup reads in the document found."
    SCRIPTS["react-echo"] = [
        "Action: Lookup[made]",
        f"Action: Finish[{refusal}]",
        "Action: Search[Tidal glass]",
        "Action: Lookup[made]",
        "Action: Finish[1862]",
    ]
    SEEN.clear()
    t = _run(_scripted("react-echo"))
    assert t.stop == "finished" and t.answer == "1862" and len(t.steps) == 5
    assert t.steps[1].action == "Finish" and t.steps[1].note == ECHO_NOTE
    assert "repeats the tool's message" in SEEN[2] and t.settings["reasked_tool_message"] == 1
    SCRIPTS["react-echo-twice"] = ["Action: Lookup[made]", f"Action: Finish[{refusal}]"]
    t = _run(_scripted("react-echo-twice"))
    assert t.stop == "finished" and t.answer == refusal and len(t.steps) == 3  # bounded: the second stands


def test_a_python_candidate_in_a_kieval_conversation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Multi-turn protocols hand a Python candidate the conversation; its replies are scored like any."""
    from test_kieval_protocol import write_config

    monkeypatch.setenv("PROCTOR_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "bot.py").write_text(
        "SEEN = []\n"
        "def answer(question, conversation=None):\n"
        "    SEEN.append(len(conversation or []))\n"
        "    first = not conversation or len(conversation) <= 2\n"
        "    return 'B) Carbon dioxide.' if first else 'On-topic reply.'\n"
    )
    cfg = write_config(tmp_path, candidates=f'  - {{name: py, python: "{tmp_path / "bot.py"}:answer"}}')
    result = run_config(cfg, out=tmp_path / "runs", show_progress=False)
    py = result.summary["candidates"]["py"]
    assert py["model"].startswith("python:")
    rounds = [json.loads(line) for line in (result.run_dir / "items.jsonl").read_text().splitlines()]
    replies = [r for r in rounds if r.get("kind") == "kieval_round" and r.get("candidate") == "py"]
    assert replies, "the conversation ran with the Python candidate"
