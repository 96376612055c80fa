"""DFSDT (ToolLLM's depth-first search decision tree).

Each node is a trajectory prefix. Expanding a node asks the model for the next action, up to `width`
times; when the node already has children, the prompt lists the earlier siblings' actions so the next
one differs. A tool action makes a child node, expanded depth first (depth <= `depth`). `Finish[answer]`
ends the whole search. `GiveUp[]` abandons this node and its parent: the search continues at the
grandparent's next child. A reply without a valid action, a tool error (a refused call included: Lookup
before Search, no such document), a call that repeats one of its path's with the same result (the step is
told so, as in ReAct), or the depth limit moves on to the next sibling; the next sibling's prompt lists
the tried actions with the start of their observations. Every model turn counts against `queries`;
running out stops with `budget`, an exhausted tree with `gave_up`. Steps are journaled by node id, so a
resumed search replays its tree. Steps are written in the trajectory's action format
(`workflows.actions`), as ReAct's are. A step's prompt carries its path (the prefix it extends) and the
tried siblings, never the rest of the tree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Any

from proctor.agents.config import AgentConfig
from proctor.agents.journal import Journal
from proctor.agents.tools import Toolbox
from proctor.agents.trace import AgentStep, Interruption, InterruptionReason, StopReason, Trajectory
from proctor.agents.workflows.actions import (
    action_format,
    json_action_text,
    json_forms,
    read_json_step,
    step_schema,
)
from proctor.agents.workflows.base import REPEAT_NOTE, Guard, model_turn, tool_step
from proctor.agents.workflows.react import THOUGHT, action_forms, action_text, parse_action
from proctor.errors import ModelCallError
from proctor.models.base import Model
from proctor.models.types import Completion
from proctor.prompts import render_messages

PROMPT = "agents/dfsdt"
ABANDON_PARENT = "abandon_parent"
TRIED_CHARS = 200  # how much of a tried sibling's observation the next sibling's prompt shows


def _tried(action: str, observation: str | None) -> str:
    """A tried sibling as the next prompt lists it: the action and the start of what it gave, so that a
    failed search's suggestions ("Similar: [...]") reach the next attempt."""
    obs = " ".join((observation or "").split())
    return f"{action} -> {obs[:TRIED_CHARS]}{'…' if len(obs) > TRIED_CHARS else ''}" if obs else action


class _Stop(Exception):
    def __init__(
        self,
        reason: StopReason,
        detail: str,
        answer: str | None = None,
        interruption: InterruptionReason | None = None,
    ) -> None:
        super().__init__(detail)
        self.reason: StopReason = reason
        self.detail = detail
        self.answer = answer
        self.interruption = interruption  # when the stop alone does not say it


@dataclass
class _Search:
    model: Model
    toolbox: Toolbox
    question: str
    cfg: AgentConfig
    choices: list[str]
    journal: Journal = field(default_factory=lambda: Journal("dfsdt"))
    steps: list[AgentStep] = field(default_factory=list)
    queries: int = 0

    def __post_init__(self) -> None:
        self.guard = Guard(self.cfg.limits)
        self.format, self.format_note = action_format(self.model, self.cfg.action_format)
        json_steps = self.format == "json"
        self.schema = step_schema(self.toolbox, give_up=True) if json_steps else None
        self.forms = json_forms(self.toolbox) if json_steps else action_forms(self.toolbox)
        self.shown = json_action_text if json_steps else action_text

    async def _act(self, path: list[AgentStep], step: AgentStep, completion: Completion | None) -> AgentStep:
        if self.schema is not None and completion is not None and isinstance(completion.parsed, dict):
            read_json_step(step, completion.parsed)
            if step.action == "GiveUp":
                return step
        else:
            thought = THOUGHT.search(step.raw)
            step.thought = thought.group(1).strip() if thought else None
            if "giveup[" in step.raw.replace(" ", "").lower().split("\nobservation")[0]:
                step.action = "GiveUp"
                return step
            parsed = parse_action(step.raw, self.toolbox)
            if isinstance(parsed, str):
                step.error = f"parse_error: {parsed}"
                step.observation = f"Invalid action ({parsed})."
                return step
            step.action, step.arguments = parsed
        if step.action != "Finish":
            return await tool_step(step, self.toolbox, path)
        return step

    async def expand(self, node: str, path: list[AgentStep], depth: int) -> str | None:
        """Expand `node` (the prefix `path`); returns ABANDON_PARENT when a child gave up, else None."""
        tried: list[str] = []
        for i in range(self.cfg.dfsdt_width):
            if self.queries >= self.cfg.dfsdt_queries:
                raise _Stop("budget", f"{self.cfg.dfsdt_queries} model calls", interruption="step_limit")
            view = [
                {"thought": s.thought, "action_text": self.shown(s), "observation": s.observation}
                for s in path
            ]
            messages = render_messages(
                PROMPT, tools=self.toolbox.describe(), forms=self.forms, question=self.question,
                choices=self.choices, steps=view, siblings=tried, json=self.schema is not None,
            )  # fmt: skip
            limit = self.guard.before_turn(0, sum(len(m["content"]) for m in messages))
            if limit is not None:
                raise _Stop(*limit)
            child = f"{node}.{i}"
            try:
                step = await model_turn(
                    self.journal, child, self.model, messages, max_tokens=self.cfg.step_max_tokens,
                    stop=() if self.schema is not None else ("\nObservation",), then=partial(self._act, path),
                    toolbox=self.toolbox, json_schema=self.schema,
                )  # fmt: skip
            except ModelCallError as e:
                if e.cause == "budget":
                    raise _Stop("budget", str(e)) from e
                raise
            step.index, step.node = len(self.steps), child
            self.queries += 1
            self.steps.append(step)
            self.guard.spend(step)
            if step.action == "Finish":
                raise _Stop(
                    "finished", f"Finish at node {child}", str(step.arguments.get("answer", "")).strip()
                )
            if step.action == "GiveUp":
                return ABANDON_PARENT
            tried.append(_tried(self.shown(step), step.observation))
            if step.error or step.observation == REPEAT_NOTE or depth + 1 >= self.cfg.dfsdt_depth:
                continue  # an error, a call repeated on this path, or the depth limit: try a sibling
            if await self.expand(child, [*path, step], depth + 1) == ABANDON_PARENT:
                return None  # the child gave up: abandon this node too (its parent goes on)
        return None


async def dfsdt(
    model: Model, toolbox: Toolbox, question: str, cfg: AgentConfig, choices: list[str] | None = None
) -> Trajectory:
    search = _Search(model, toolbox, question, cfg, choices or [])
    settings: dict[str, Any] = {
        "width": cfg.dfsdt_width,
        "depth": cfg.dfsdt_depth,
        "queries": cfg.dfsdt_queries,
        "action_format": search.format,
    }
    if search.format_note:
        settings["action_format_note"] = search.format_note
    interruption: Interruption | None = None
    try:
        await search.expand("0", [], 0)
        stop: StopReason = "gave_up"
        detail, answer = "the search tree was exhausted without an answer", None
    except _Stop as s:
        stop, detail, answer = s.reason, s.detail, s.answer
        if s.interruption is not None:  # the query budget is DFSDT's step limit
            interruption = Interruption(reason=s.interruption, detail=detail)
    return Trajectory(
        workflow="dfsdt", answer=answer, stop=stop, steps=search.steps, detail=detail, settings=settings,
        interruption=interruption,
    )  # fmt: skip
