"""How ReAct and DFSDT steps are written: as JSON under the step's schema, or as the paper's text.

`json` (the default) asks for `{"thought": ..., "action": <tool | Finish>, "arguments": {...}}` under a
JSON schema with one alternative per tool (its arguments schema from `agents.tools`), so a server that
enforces schemas (the embedded llama.cpp server, vLLM, OpenAI, ...) cannot produce an unparseable action,
and the reply goes through the one structured-output path (`Model.generate(json_schema=...)`, with its
tolerant parsing and re-asks). `text` is R-Eval's `Thought: ... / Action: Name[argument]` format, kept for
comparability. A provider that does not take JSON schemas (`supports_json_schema` false) gets `text`: its
replies would be free text anyway, which the text grammar reads better than the JSON parser.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from proctor.agents.tools import Toolbox
from proctor.agents.trace import AgentStep
from proctor.models.base import Model

ActionFormat = Literal["json", "text"]
THOUGHT_CHARS = 400  # a bounded thought leaves the step's token budget to the action
ANSWER_CHARS = 200


def action_format(model: Model, wanted: ActionFormat) -> tuple[ActionFormat, str | None]:
    """The format a trajectory uses, and why it is not the one asked for (None when it is)."""
    if wanted == "json" and not getattr(model.provider, "supports_json_schema", False):
        return "text", f"{model.spec} does not take JSON schemas: the text format is used"
    return wanted, None


def _option(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "thought": {"type": "string", "maxLength": THOUGHT_CHARS},
            "action": {"const": name},
            "arguments": arguments,
        },
        "required": ["thought", "action", "arguments"],
        "additionalProperties": False,
    }


def step_schema(toolbox: Toolbox, *, give_up: bool = False) -> dict[str, Any]:
    """One alternative per tool (its arguments schema), plus Finish (and DFSDT's GiveUp)."""
    options: list[dict[str, Any]] = []
    defs: dict[str, Any] = {}
    for t in toolbox.tools.values():
        params = dict(t.schema()["function"]["parameters"])
        defs.update(params.pop("$defs", {}))  # references stay valid at the root ("#/$defs/...")
        options.append(_option(t.name, params))
    answer = {"type": "string", "maxLength": ANSWER_CHARS}
    finish = {"type": "object", "properties": {"answer": answer}, "required": ["answer"]}
    options.append(_option("Finish", {**finish, "additionalProperties": False}))
    if give_up:
        options.append(_option("GiveUp", {"type": "object", "properties": {}, "additionalProperties": False}))
    schema: dict[str, Any] = {"anyOf": options}
    if defs:
        schema["$defs"] = defs
    return schema


def json_forms(toolbox: Toolbox) -> list[str]:
    """Each tool's action as the JSON prompt shows it: `Search {"entity": "<entity>"}`."""
    forms = []
    for t in toolbox.tools.values():
        args = {name: f"<{name}>" for name in t.arguments.model_fields}
        forms.append(f'"action": "{t.name}", "arguments": {json.dumps(args)}')
    return forms


def read_json_step(step: AgentStep, parsed: Any) -> None:
    """Thought, action and arguments of a step from its schema-checked reply."""
    step.thought = str(parsed.get("thought") or "").strip() or None
    step.action = str(parsed["action"])
    step.arguments = dict(parsed.get("arguments") or {})


def json_action_text(s: AgentStep) -> str:
    """A step's action as the JSON prompt's history shows it."""
    if s.action is None:
        return s.raw.strip().splitlines()[-1] if s.raw.strip() else ""
    return json.dumps({"action": s.action, "arguments": s.arguments}, ensure_ascii=False)
