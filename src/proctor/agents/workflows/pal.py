"""PAL (program-aided): the model writes a Python program that calls the tools; the program runs in the
sandbox (`proctor.agents.sandbox`), its tool calls proxied back to the parent, and its `answer` is the
answer. A program that fails (an exception, a limit) is shown to the model with the error, and it may write
a corrected one, up to `max_steps` programs in all.

A program that sets `answer` without calling any tool is shown once more (once per question, recorded
as `settings.reasked_without_tools` and the step's `note`), asking it to look the answer up; the next
program's answer stands whatever it calls. R-Eval's PAL generates "python programs for executing API
queries": a program that queries nothing is outside that workflow, and answering from memory is what the
taxonomy's AM class detects — one re-ask keeps that signal (a second memory answer is kept and classified)
while a small model that skipped the tools on its first try gets the workflow it is measured on. A tool
call the tool refuses (`ToolRefusal`: nothing found, Lookup before Search, a name where an id is expected)
raises in the program like any failed call, so its hint is shown to the next program instead of becoming
the answer.

The program comes in a fenced code block (every action format: code is written best as code). What small
models get wrong around it is repaired rather than charged as a parse error: a block cut off by the token
limit keeps its complete statements, and a program's own stand-in definitions of the tools are dropped so
that it calls the real ones (`drop_tool_definitions`; the step's `note` says so).
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
NO_TOOL_CALL = (
    "it called none of the functions, so its answer comes from memory, not from a lookup. Call the "
    "functions to find the answer."
)
# A fenced block; its closing fence may be missing when the reply ran out of tokens.
_CODE = re.compile(r"```[ \t]*(?:python|py|python3)?[ \t]*\n(.*?)(```|\Z)", re.S | re.I)


def _compiles(code: str) -> bool:
    try:
        compile(code, "program.py", "exec")
    except (SyntaxError, ValueError):
        return False
    return True


def extract_code(text: str) -> str | None:
    """The program in the reply: the first fenced block, else the whole reply when it parses as Python.

    A block cut off by the reply's token limit (no closing fence) loses its unfinished last statements:
    the longest prefix of whole lines that compiles is kept (what failed then shows when it runs)."""
    m = _CODE.search(text)
    if m:
        code = m.group(1).strip()
        if not m.group(2) and not _compiles(code):
            lines = code.splitlines()
            while lines and not _compiles("\n".join(lines)):
                lines.pop()
            code = "\n".join(lines).strip() or code
        return code or None
    if not _compiles(text):
        return None
    return text.strip() or None


def drop_tool_definitions(code: str, toolbox: Toolbox) -> tuple[str, list[str]]:
    """The program without its own top-level definitions of tool names (a `def`, a class or an assignment
    such as `Search = ...`), and the names dropped. Small models often write a stand-in for a tool (a
    function querying a database file that does not exist) before calling it; without the stand-in the
    program calls the real tool, which is what it meant, and it cannot fake a tool's result."""
    import ast

    try:
        tree = ast.parse(code)
    except SyntaxError:
        return code, []
    dropped: list[str] = []
    kept: list[ast.stmt] = []
    for node in tree.body:
        names: list[str] = []
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names = [node.name]
        elif isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) for t in node.targets):
            names = [t.id for t in node.targets if isinstance(t, ast.Name)]
        if names and all(n in toolbox.tools for n in names):
            dropped += names
            continue
        kept.append(node)
    if not dropped:
        return code, []
    tree.body = kept
    return ast.unparse(tree), dropped


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
    settings: dict[str, object] = {
        "sandbox": tier,
        "max_programs": cfg.limits.max_steps,
        "action_format": "code",
    }
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
        code, dropped = drop_tool_definitions(code, toolbox)
        if dropped:
            step.note = f"the program's own definitions of {', '.join(dropped)} were dropped: the tools ran"
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
            why = tail[0] if tail else "no answer"
            if dropped and not result.tool_calls and not tail:
                # What is left after the stand-ins went is shown as "the earlier program"; without this the
                # model cannot tell why it did nothing, and writes the same definitions again.
                names = ", ".join(dict.fromkeys(dropped))
                why = (
                    f"no answer: the program only defined {names} itself (removed: these functions already "
                    f"exist) and never called them; write no definitions, call them, e.g. {example}"
                )
            step.error = f"program_{result.cause}: {why}"
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
            if step.tool_calls or not toolbox.tools or settings.get("reasked_without_tools"):
                answer = step.observation.removeprefix("answer = ")
                return end("finished", "the program set `answer`", answer)
            # An answer from a program that called no tool is the model's memory, not retrieval: the
            # program is shown once more with the rule (bounded: once per question, counted).
            settings["reasked_without_tools"] = 1
            reask = "the program called no tool: re-asked once to look the answer up"
            step.note = f"{step.note}; {reask}" if step.note else reask
            attempts.append({"code": str(step.arguments.get("code", step.raw)), "problem": NO_TOOL_CALL})
            continue
        attempts.append(
            {"code": str(step.arguments.get("code", step.raw)), "problem": step.error or "no answer"}
        )
        if step.error and step.error.startswith("parse_error"):
            problem = guard.parse_failed()
            if problem is not None:
                return end(*problem)
