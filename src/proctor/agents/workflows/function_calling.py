"""Native function calling: the model gets the tools' JSON schemas (OpenAI `tools`) and answers with tool
calls through the one model-call path (cached, retried, accounted); each result goes back as a `tool`
message; a reply without tool calls is the answer. Malformed tool-call arguments are returned to the model as
an error and counted on the step. A model whose server does not do function calling is refused with a
clear message (rageval marks the system not applicable).
"""

from __future__ import annotations

import json
from functools import partial

from proctor.agents.config import AgentConfig
from proctor.agents.journal import Journal
from proctor.agents.tools import Toolbox, ToolCall
from proctor.agents.trace import AgentStep, StopReason, Trajectory
from proctor.agents.workflows.base import Guard, model_turn, take_turn
from proctor.errors import UserError
from proctor.models.base import Model
from proctor.models.types import Completion, Message
from proctor.prompts import render_messages

PROMPT = "agents/function_calling"


def _conversation(base: list[Message], steps: list[AgentStep]) -> list[Message]:
    """The chat so far, rebuilt from the steps (so a replayed trajectory sends the same messages)."""
    msgs = list(base)
    for s in steps:
        calls = [
            {"id": f"call_{s.index}_{i}", "type": "function",
             "function": {"name": c.name, "arguments": str(c.arguments.get("_raw", json.dumps(c.arguments)))}}
            for i, c in enumerate(s.tool_calls)
        ]  # fmt: skip
        msgs.append({"role": "assistant", "content": s.raw, "tool_calls": calls})
        msgs += [
            {"role": "tool", "tool_call_id": f"call_{s.index}_{i}", "content": c.observation}
            for i, c in enumerate(s.tool_calls)
        ]
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

    def end(stop: StopReason, detail: str, answer: str | None = None) -> Trajectory:
        return Trajectory(
            workflow="function_calling", answer=answer, stop=stop, steps=steps, detail=detail,
            settings={"action_format": "tool_calls", "tools_note": model.tools_note},
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
            return end("finished", "a reply without tool calls", step.raw.strip())
        problem = guard.after_call(step.action or "", step.arguments, step.observation)
        if problem is not None:
            return end(*problem)
