"""PAL (program-aided): the model writes a Python program that calls the tools; the program runs in the
sandbox (`proctor.agents.sandbox`), its tool calls proxied back to the parent, and its `answer` is the
answer. A program that fails (an exception, a limit) is shown to the model with the error, and it may write
a corrected one, up to `max_steps` programs in all.
"""

from __future__ import annotations

import re
from functools import partial

from proctor.agents.config import AgentConfig
from proctor.agents.journal import Journal
from proctor.agents.sandbox import SandboxLimits, probe_tier, refuse_message, run_program
from proctor.agents.tools import Toolbox
from proctor.agents.trace import AgentStep, StopReason, Trajectory
from proctor.agents.workflows.base import Guard, model_turn, take_turn
from proctor.errors import UserError
from proctor.models.base import Model
from proctor.models.types import Completion
from proctor.prompts import render_messages

PROMPT = "agents/pal"
_CODE = re.compile(r"```(?:python|py)?\s*\n(.*?)```", re.S)


def extract_code(text: str) -> str | None:
    """The program in the reply: the first fenced block, else the whole reply when it parses as Python."""
    m = _CODE.search(text)
    if m:
        return m.group(1).strip() or None
    try:
        compile(text, "program.py", "exec")
    except SyntaxError:
        return None
    return text.strip() or None


def _redefined(code: str, toolbox: Toolbox) -> str | None:
    """The name of a tool the program defines or assigns itself (faking its results), if any."""
    import ast

    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        names = [node.name] if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) else []
        if isinstance(node, ast.Assign):
            names = [t.id for t in node.targets if isinstance(t, ast.Name)]
        for n in names:
            if n in toolbox.tools:
                return n
    return None


async def pal(
    model: Model, toolbox: Toolbox, question: str, cfg: AgentConfig, choices: list[str] | None = None
) -> Trajectory:
    probe = probe_tier()
    unsafe = cfg.sandbox == "unsafe_local"
    if probe.tier == "none" and not unsafe:
        raise UserError(refuse_message(probe))
    tier = probe.tier
    journal = Journal("pal")
    guard = Guard(cfg.limits)
    limits = SandboxLimits(
        wall_seconds=min(cfg.limits.max_seconds, 30.0), output_chars=cfg.limits.max_result_chars * 4
    )
    steps: list[AgentStep] = []
    attempts: list[dict[str, str]] = []
    settings: dict[str, object] = {"sandbox": tier, "max_programs": cfg.limits.max_steps}
    first = next(iter(toolbox.tools.values()), None)
    example = (
        f"{first.name}({next(iter(first.arguments.model_fields), 'x')}='...')" if first else "f(x='...')"
    )

    def end(stop: StopReason, detail: str, answer: str | None = None) -> Trajectory:
        return Trajectory(
            workflow="pal", answer=answer, stop=stop, steps=steps, detail=detail, settings=settings
        )

    async def execute(step: AgentStep, completion: Completion | None) -> AgentStep:
        code = extract_code(step.raw)
        if code is None:
            step.error = "parse_error: no Python program in the reply"
            step.observation = "No program found: reply with one ```python code block."
            return step
        redefined = _redefined(code, toolbox)
        if redefined:
            step.action, step.arguments = "program", {"code": code}
            step.error = f"program_error: the program defines {redefined} itself instead of calling the tool"
            step.observation = step.error
            return step
        result = await run_program(code, toolbox=toolbox, limits=limits, tier=tier, allow_unsafe=unsafe)
        settings["sandbox_enforced"] = result.enforced  # what this machine actually bounded, per limit
        step.action, step.arguments = "program", {"code": code}
        step.tool_calls = result.tool_calls
        if result.ok and result.answer is not None:
            step.observation = f"answer = {result.answer}"
        else:
            tail = result.stderr.strip().splitlines()[-1:] if result.stderr.strip() else []
            step.error = f"program_{result.cause}: {tail[0] if tail else 'no answer'}"
            step.observation = step.error
        return step

    while True:
        messages = render_messages(
            PROMPT, tools=toolbox.describe(), example=example, question=question, choices=choices or [],
            attempts=attempts,
        )  # fmt: skip
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
                max_tokens=cfg.step_max_tokens * 2,
                then=execute,
            ),
        )
        if stopped is not None:
            return end(*stopped)
        step = steps[-1]
        if step.error is None and step.observation is not None:
            return end("finished", "the program set `answer`", step.observation.removeprefix("answer = "))
        attempts.append(
            {"code": str(step.arguments.get("code", step.raw)), "problem": step.error or "no answer"}
        )
        if step.error and step.error.startswith("parse_error"):
            problem = guard.parse_failed()
            if problem is not None:
                return end(*problem)
