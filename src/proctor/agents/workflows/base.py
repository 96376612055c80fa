"""What every workflow shares: the per-question guards (steps, tokens, cost, wall time, context length,
repeated calls) and the journaled model turn."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from proctor.agents.config import Limits
from proctor.agents.journal import Journal
from proctor.agents.tools import Toolbox, ToolCall
from proctor.agents.trace import AgentStep, StopReason
from proctor.errors import ModelCallError, StructuredOutputError
from proctor.models.base import Model
from proctor.models.types import Completion, Message
from proctor.prompts import render_text


@dataclass
class Guard:
    """Counts what a trajectory used and says when a limit is reached (the stop reason), else None."""

    limits: Limits
    started: float = field(default_factory=time.monotonic)
    tokens: int = 0
    cost: float = 0.0
    recent: list[str] = field(default_factory=list)
    parse_errors: int = 0

    def spend(self, step: AgentStep) -> None:
        self.tokens += step.prompt_tokens + step.completion_tokens
        self.cost += step.cost_usd

    def before_turn(self, steps_done: int, prompt_chars: int) -> tuple[StopReason, str] | None:
        lim = self.limits
        if steps_done >= lim.max_steps:
            return "max_steps", f"{lim.max_steps} steps"
        if self.tokens >= lim.max_tokens or (lim.max_cost_usd is not None and self.cost >= lim.max_cost_usd):
            return "budget", f"{self.tokens} tokens, ${self.cost:.4f}"
        if time.monotonic() - self.started >= lim.max_seconds:
            return "timeout", f"{lim.max_seconds:.0f} s"
        if prompt_chars / 4 > lim.max_context_tokens:  # ~4 characters per token, checked before paying
            return "context_limit", f"about {prompt_chars // 4} prompt tokens"
        return None

    def after_call(
        self, name: str, arguments: dict[str, Any], result: str | None = None
    ) -> tuple[StopReason, str] | None:
        """The same call with the same result `repeat_limit` times in a row is a loop. A stateful call
        repeated for its next result (Lookup's "Result 2 / 3") is not: its result changes."""
        self.recent.append(json.dumps([name, arguments, result], sort_keys=True, default=str))
        tail = self.recent[-self.limits.repeat_limit :]
        if len(tail) == self.limits.repeat_limit and len(set(tail)) == 1:
            return "loop", f"{name} called {self.limits.repeat_limit} times in a row with the same arguments"
        return None

    def parse_failed(self) -> tuple[StopReason, str] | None:
        self.parse_errors += 1
        if self.parse_errors >= self.limits.max_parse_errors:
            return "parse_error", f"{self.parse_errors} replies in a row without a valid action"
        return None

    def parsed_ok(self) -> None:
        self.parse_errors = 0


REPEAT_NOTE = (
    "You already took this action and it gave this same result (above): repeating it gives nothing new. "
    "Take a different action, or Finish with the answer."
)


def call_result(step: AgentStep) -> str | None:
    """What a ReAct / DFSDT step's tool call gave (its observation before any note replaced it)."""
    return step.tool_calls[0].observation if step.tool_calls else step.observation


def repeats(step: AgentStep, call: ToolCall, earlier: Sequence[AgentStep]) -> bool:
    """The step makes a call an earlier step made, with the same result. The model is then told so
    (`REPEAT_NOTE`) instead of being shown the result again: a small model that repeats a search it
    already read tends to repeat it until the loop stop; the note names the way out before that stop."""
    return any(
        s.action == step.action and s.arguments == step.arguments and call_result(s) == call.observation
        for s in earlier
    )


ECHO_PROMPT = "agents/tool_message_echo.user.j2"
ECHO_NOTE = "the reply repeated a tool's message instead of answering: the model was told so once"
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_NOT_WORD = re.compile(r"[^\w]+")


def _normalised(text: str) -> str:
    return _NOT_WORD.sub(" ", text.lower()).strip()


def echoed_tool_message(reply: str, earlier: Sequence[AgentStep]) -> str | None:
    """The tool error or refusal message (as the model read it) that `reply` only repeats, if any.

    Small models answer a refused call ("no entity has the id '12345': pass a publication's id, not a
    name. Call searchPublication ...") by copying the message; taken as the answer, it scores 0 and hides
    that the model never looked the answer up. A reply repeats a message when, normalised (case,
    punctuation, spacing), it holds the message's first sentence or is a large part of the message (at
    least half its first sentence and four words), and adds few words of its own (at most three, or a
    quarter of the reply). An answer that merely shares words with a message (a name the message quotes)
    is neither."""
    said = _normalised(reply)
    if not said:
        return None
    words = said.split()
    for step in reversed(earlier):
        for call in step.tool_calls:
            if call.error is None:
                continue
            message = call.observation
            whole = _normalised(message)
            first = _normalised(_SENTENCE_END.split(message.strip(), maxsplit=1)[0])
            holds = bool(first) and first in said
            part = said in whole and len(words) >= max(4, len(first.split()) // 2)
            if not (holds or part):
                continue
            known = set(whole.split())
            extra = [w for w in words if w not in known]
            if len(extra) <= max(3, len(words) // 4):
                return message
    return None


def echo_nudge(message: str) -> str:
    """The user turn telling the model that its reply was the tool's message, not an answer."""
    return render_text(ECHO_PROMPT, message=message)


async def tool_step(step: AgentStep, toolbox: Toolbox, earlier: Sequence[AgentStep]) -> AgentStep:
    """Run the tool a ReAct / DFSDT step names: its call recorded, its observation (or the repeat note)."""
    call = await toolbox.call(str(step.action), step.arguments)
    step.tool_calls = [call]
    step.error = call.error
    if repeats(step, call, earlier):
        step.observation = REPEAT_NOTE
        step.note = "the same call with the same result as an earlier step: the model was told so"
    else:
        step.observation = call.observation
    return step


def step_from(index: int, completion: Completion, started: float) -> AgentStep:
    return AgentStep(
        index=index,
        raw=completion.text,
        prompt_tokens=completion.usage.prompt_tokens,
        completion_tokens=completion.usage.completion_tokens,
        cost_usd=completion.cost_usd,
        latency_s=round(time.perf_counter() - started, 4) if not completion.cached else 0.0,
        cached=completion.cached,
    )


async def model_turn(
    journal: Journal,
    index: int | str,
    model: Model,
    messages: list[Message],
    *,
    max_tokens: int,
    stop: tuple[str, ...] = (),
    then: Callable[[AgentStep, Completion | None], Awaitable[AgentStep]] | None = None,
    toolbox: Toolbox | None = None,
    tools: list[dict[str, Any]] | None = None,
    json_schema: dict[str, Any] | None = None,
) -> AgentStep:
    """One journaled turn: the stored step on replay (its tool call re-run on `toolbox` to restore the
    tools' state), else a model call (plus `then`, e.g. running the action the reply names) stored once
    complete. With `json_schema` the reply is parsed (and re-asked) by the model-call path; a reply that
    still does not match becomes a step with a `parse_error` (and no completion for `then`)."""

    async def run() -> AgentStep:
        started = time.perf_counter()
        try:
            completion = await model.generate(
                messages, temperature=0.0, max_tokens=max_tokens, stop=stop, tools=tools,
                json_schema=json_schema,
            )  # fmt: skip
        except StructuredOutputError as e:
            step = AgentStep(index=int(index) if isinstance(index, int) else 0, raw=e.raw)
            step.error = f"parse_error: {str(e).split(': ', 1)[-1]}"
            step.observation = "Invalid reply: it is not one JSON object in the asked format."
            step.latency_s = round(time.perf_counter() - started, 4)
            return step
        step = step_from(int(index) if isinstance(index, int) else 0, completion, started)
        return await then(step, completion) if then is not None else step

    async def replay(step: AgentStep) -> None:
        if toolbox is None:
            return
        if step.tool_calls and step.action != "program":  # every call the step made, in order
            for c in step.tool_calls:
                if c.name in toolbox.tools and "_raw" not in c.arguments:
                    await toolbox.call(c.name, c.arguments)
        elif step.action in toolbox.tools:
            await toolbox.call(step.action, step.arguments)

    return await journal.step(index, run, replay)


async def take_turn(
    guard: Guard,
    steps: list[AgentStep],
    messages: list[Message],
    turn: Callable[[], Awaitable[AgentStep]],
) -> tuple[StopReason, str] | None:
    """One turn under the guard: a limit reached before it (steps, tokens, cost, time, the prompt's
    length) stops the trajectory; else the turn runs and is counted (`steps`, tokens, cost); a call the
    run's budget refused becomes the `budget` stop instead of an error."""
    limit = guard.before_turn(len(steps), sum(len(str(m["content"])) for m in messages))
    if limit is not None:
        return limit
    try:
        step = await turn()
    except ModelCallError as e:
        if e.cause == "budget":
            return "budget", str(e)
        raise
    steps.append(step)
    guard.spend(step)
    return None
