"""ReAct: Thought / Action / Observation turns.

Each turn is written in the trajectory's action format (`workflows.actions`): a JSON object under the
step's schema (the default where the provider takes schemas), or R-Eval's text. In the text format an
action is `Name[argument]` for a tool with one text parameter (Search[entity], Lookup[keyword]) — the
call form `Name(argument)` (also `Name("argument")`, `Name(key: argument)`) is read the same way —,
`Name{"arg": value, ...}` (a JSON object) for any tool, or `Finish[answer]`. A reply without a valid action
gets an observation naming the valid forms (and counts toward `max_parse_errors`). A call that repeats an
earlier step's call with the same result is answered with a note (`base.REPEAT_NOTE`: take another action
or Finish) instead of the result again; the same call with the same result `repeat_limit` times in a row
still stops the trajectory (`loop`). The observation of a step never contains a grade of the answer
(R-Eval's code writes the verdict into the scratchpad, which leaks it into later prompts). A `Finish` whose
answer only repeats a tool's error or refusal message (`base.echoed_tool_message`) is answered, once per
trajectory, with an observation saying so (`settings.reasked_tool_message`, the step's `note`); the next
`Finish` stands.
"""

from __future__ import annotations

import json
import re
from functools import partial
from typing import Any

from proctor.agents.config import AgentConfig
from proctor.agents.journal import Journal
from proctor.agents.tools import Tool, Toolbox
from proctor.agents.trace import AgentStep, StopReason, Trajectory
from proctor.agents.workflows.actions import (
    action_format,
    json_action_text,
    json_forms,
    read_json_step,
    step_schema,
)
from proctor.agents.workflows.base import (
    ECHO_NOTE,
    Guard,
    call_result,
    echo_nudge,
    echoed_tool_message,
    model_turn,
    take_turn,
    tool_step,
)
from proctor.models.base import Model
from proctor.models.types import Completion
from proctor.prompts import render_messages

PROMPT = "agents/react"
ACTION = re.compile(r"^\s*Action\s*\d*\s*:\s*([A-Za-z_]\w*)\s*(\[.*\]|\{.*\}|\(.*\))\s*$", re.M | re.S)
# A final answer written on its own line without the "Action:" label (small models do) still ends the task.
BARE_FINISH = re.compile(r"^\s*Finish\s*(\[.*\])\s*$", re.M | re.S)
_KWARG = re.compile(r"^\s*(\w+)\s*[:=]\s*(.*)$", re.S)
THOUGHT = re.compile(r"Thought\s*\d*\s*:\s*(.*?)(?=\n\s*Action\s*\d*\s*:|\Z)", re.S)


def _single_text_param(t: Tool) -> str | None:
    required = [n for n, f in t.arguments.model_fields.items() if f.is_required()]
    return required[0] if len(required) == 1 else None


def action_forms(toolbox: Toolbox) -> list[str]:
    forms = []
    for t in toolbox.tools.values():
        p = _single_text_param(t)
        forms.append(f"{t.name}[<{p}>]" if p else f"{t.name}{{...JSON arguments...}}")
    return forms


def parse_action(text: str, toolbox: Toolbox) -> tuple[str, dict[str, Any]] | str:
    """(tool name, arguments), ("Finish", {"answer": ...}), or the parse problem as text."""
    found = ACTION.findall(text.split("\nObservation")[0])
    if not found:
        bare = BARE_FINISH.findall(text.split("\nObservation")[0])
        if bare:
            return "Finish", {"answer": bare[-1][1:-1].strip()}
        return "no 'Action: Name[argument]' line"
    name, body = found[-1]
    inner = body[1:-1].strip()
    if body.startswith(
        "("
    ):  # Name(x), Name("x"), Name(key: x) or Name(key=x): the call form small models write
        kw = _KWARG.match(inner)
        inner = (kw.group(2) if kw else inner).strip().strip("\"'")
        body = f"[{inner}]"
    if name.lower() == "finish":
        return "Finish", {"answer": inner}
    t = next((t for n, t in toolbox.tools.items() if n.lower() == name.lower()), None)
    if t is None:
        return f"unknown action '{name}'"
    if body.startswith("{"):
        try:
            args = json.loads(body)
        except json.JSONDecodeError:
            return f"the arguments of {t.name} are not a JSON object"
        return t.name, args
    param = _single_text_param(t)
    if param is None:
        return f"{t.name} takes JSON arguments: {t.name}{{...}}"
    return t.name, {param: inner}


def action_text(s: AgentStep) -> str:
    if s.action is None:
        return s.raw.strip().splitlines()[-1] if s.raw.strip() else ""
    if s.action == "Finish":
        return f"Finish[{s.arguments.get('answer', '')}]"
    if len(s.arguments) == 1:
        return f"{s.action}[{next(iter(s.arguments.values()))}]"
    return f"{s.action}{json.dumps(s.arguments, ensure_ascii=False)}"


async def react(
    model: Model, toolbox: Toolbox, question: str, cfg: AgentConfig, choices: list[str] | None = None
) -> Trajectory:
    journal = Journal("react")
    guard = Guard(cfg.limits)
    fmt, fmt_note = action_format(model, cfg.action_format)
    schema = step_schema(toolbox) if fmt == "json" else None
    forms = json_forms(toolbox) if fmt == "json" else action_forms(toolbox)
    shown = json_action_text if fmt == "json" else action_text
    steps: list[AgentStep] = []
    settings: dict[str, Any] = {
        "max_steps": cfg.limits.max_steps,
        "repeat_limit": cfg.limits.repeat_limit,
        "action_format": fmt,
    }
    if fmt_note:
        settings["action_format_note"] = fmt_note

    def end(stop: StopReason, detail: str, answer: str | None = None) -> Trajectory:
        return Trajectory(
            workflow="react", answer=answer, stop=stop, steps=steps, detail=detail, settings=settings
        )

    async def act(step: AgentStep, completion: Completion | None) -> AgentStep:
        if schema is not None and completion is not None and isinstance(completion.parsed, dict):
            read_json_step(step, completion.parsed)
        else:
            thought = THOUGHT.search(step.raw)
            step.thought = thought.group(1).strip() if thought else None
            parsed = parse_action(step.raw, toolbox)
            if isinstance(parsed, str):
                step.error = f"parse_error: {parsed}"
                step.observation = (
                    f"Invalid action ({parsed}). Valid actions: {', '.join(forms)}, Finish[<answer>]."
                )
                return step
            step.action, step.arguments = parsed
        if step.action == "Finish":
            return step
        return await tool_step(step, toolbox, steps)

    while True:
        view = [{"thought": s.thought, "action_text": shown(s), "observation": s.observation} for s in steps]
        messages = render_messages(
            PROMPT,
            tools=toolbox.describe(),
            forms=forms,
            question=question,
            choices=choices or [],
            steps=view,
            json=fmt == "json",
        )
        stopped = await take_turn(
            guard,
            steps,
            messages,
            partial(
                model_turn,
                journal,
                len(steps),
                model,
                messages,
                max_tokens=cfg.step_max_tokens,
                stop=() if schema is not None else ("\nObservation",),
                then=act,
                toolbox=toolbox,
                json_schema=schema,
            ),
        )
        if stopped is not None:
            return end(*stopped)
        step = steps[-1]
        if step.action == "Finish":
            answer = str(step.arguments.get("answer", "")).strip()
            echoed = None if settings.get("reasked_tool_message") else echoed_tool_message(answer, steps[:-1])
            if echoed is None:
                return end("finished", "Finish", answer)
            # Finish with a tool's message copied: shown as this step's observation, once per trajectory
            settings["reasked_tool_message"] = 1
            step.note, step.observation = ECHO_NOTE, echo_nudge(echoed)
            guard.parsed_ok()
            continue
        if step.action is None:
            problem = guard.parse_failed()
        else:
            guard.parsed_ok()
            problem = guard.after_call(step.action, step.arguments, call_result(step))
        if problem is not None:
            return end(*problem)
