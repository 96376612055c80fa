"""Native function calling: the model gets the tools' JSON schemas (OpenAI `tools`) and answers with tool
calls through the one model-call path (cached, retried, accounted); each result goes back as a `tool`
message; a reply without tool calls is the answer. Malformed tool-call arguments are returned to the model as
an error and counted on the step. A model whose server does not do function calling is refused with a
clear message (rageval marks the system not applicable).

A reply without tool calls that only repeats a tool's error or refusal message of this trajectory
(`base.echoed_tool_message`) is not taken as the answer: small models answer a refused call ("no entity has
the id '12345' ... Call searchPublication") by copying it. The model is told once, as a user turn after that
reply, that it was the tool's message and to call the tool it names or answer (recorded as
`settings.reasked_tool_message` and the step's `note`); the next reply without tool calls stands, whatever
it says, so the re-ask is bounded and a model that keeps echoing is still scored on what it said.
"""

from __future__ import annotations

import json
from functools import partial

from proctor.agents.config import AgentConfig
from proctor.agents.journal import Journal
from proctor.agents.tools import Toolbox, ToolCall
from proctor.agents.trace import AgentStep, StopReason, Trajectory
from proctor.agents.workflows.base import (
    ECHO_NOTE,
    Guard,
    echo_nudge,
    echoed_tool_message,
    model_turn,
    take_turn,
)
from proctor.errors import UserError
from proctor.models.base import Model
from proctor.models.types import Completion, Message
from proctor.prompts import render_messages

PROMPT = "agents/function_calling"


def _conversation(base: list[Message], steps: list[AgentStep]) -> list[Message]:
    """The chat so far, rebuilt from the steps (so a replayed trajectory sends the same messages). A step
    without tool calls that is not the last was a reply repeating a tool's message: the nudge follows it."""
    msgs = list(base)
    for n, s in enumerate(steps):
        calls = [
            {"id": f"call_{s.index}_{i}", "type": "function",
             "function": {"name": c.name, "arguments": str(c.arguments.get("_raw", json.dumps(c.arguments)))}}
            for i, c in enumerate(s.tool_calls)
        ]  # fmt: skip
        turn: Message = {"role": "assistant", "content": s.raw}
        if calls:  # no `tool_calls: []` on a reply without calls: OpenAI's API refuses an empty list
            turn["tool_calls"] = calls
        msgs.append(turn)
        msgs += [
            {"role": "tool", "tool_call_id": f"call_{s.index}_{i}", "content": c.observation}
            for i, c in enumerate(s.tool_calls)
        ]
        if not s.tool_calls:
            echoed = echoed_tool_message(s.raw, steps[:n])
            msgs.append({"role": "user", "content": echo_nudge(echoed or s.raw.strip())})
    return msgs


async def function_calling(
    model: Model, toolbox: Toolbox, question: str, cfg: AgentConfig, choices: list[str] | None = None
) -> Trajectory:
    if not await model.supports_tools():
        raise UserError(
            f"agent.workflow: {model.spec} does not do native function calling (its server takes no "
            f"`tools`). Use workflow react, pal or dfsdt with this model, or a model served with tools."
        )
    journal = Journal("function_calling")
    guard = Guard(cfg.limits)
    base = render_messages(PROMPT, question=question, choices=choices or [])
    schemas = toolbox.schemas()
    steps: list[AgentStep] = []
    settings: dict[str, object] = {"action_format": "tool_calls", "tools_note": model.tools_note}

    def end(stop: StopReason, detail: str, answer: str | None = None) -> Trajectory:
        return Trajectory(
            workflow="function_calling", answer=answer, stop=stop, steps=steps, detail=detail,
            settings=settings,
        )  # fmt: skip

    async def act(step: AgentStep, completion: Completion | None) -> AgentStep:
        assert completion is not None
        results: list[ToolCall] = []
        for call in completion.tool_calls:
            if call.parsed_arguments is None:
                results.append(
                    ToolCall(
                        name=call.name,
                        arguments={"_raw": call.arguments},
                        error=f"invalid_arguments: {call.error}",
                    )
                )
            else:
                results.append(await toolbox.call(call.name, call.parsed_arguments))
        step.tool_calls = results
        if results:
            step.action, step.arguments = results[0].name, dict(results[0].arguments)
            errors = [r.error for r in results if r.error]
            step.error = "; ".join(e for e in errors if e) or None
            step.observation = "\n".join(r.observation for r in results)
        return step

    while True:
        messages = _conversation(base, steps)
        stopped = await take_turn(
            guard, steps, messages,
            partial(model_turn,
                journal, len(steps), model, messages, max_tokens=cfg.step_max_tokens, then=act,
                toolbox=toolbox, tools=schemas,
            ),
        )  # fmt: skip
        if stopped is not None:
            return end(*stopped)
        step = steps[-1]
        if not step.tool_calls:
            answer = step.raw.strip()
            if settings.get("reasked_tool_message") or echoed_tool_message(answer, steps[:-1]) is None:
                return end("finished", "a reply without tool calls", answer)
            settings["reasked_tool_message"] = 1  # once per trajectory: the next such reply stands
            step.note = ECHO_NOTE
            continue
        problem = guard.after_call(step.action or "", step.arguments, step.observation)
        if problem is not None:
            return end(*problem)
