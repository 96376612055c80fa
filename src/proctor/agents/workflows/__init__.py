"""Workflows: how an LLM acts through tools to answer one question."""

from __future__ import annotations

from proctor.agents.config import AgentConfig
from proctor.agents.tools import Toolbox
from proctor.agents.trace import Trajectory
from proctor.models.base import Model


async def run_workflow(
    model: Model, toolbox: Toolbox, question: str, cfg: AgentConfig, choices: list[str] | None = None
) -> Trajectory:
    """Answer `question` with the configured workflow."""
    from proctor.agents.workflows.dfsdt import dfsdt
    from proctor.agents.workflows.function_calling import function_calling
    from proctor.agents.workflows.pal import pal
    from proctor.agents.workflows.react import react

    workflows = {"react": react, "dfsdt": dfsdt, "pal": pal, "function_calling": function_calling}
    return await workflows[cfg.workflow](model, toolbox, question, cfg, choices)
