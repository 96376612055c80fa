"""The rageval protocol (R-Eval), top to bottom: tasks at three levels (database templates with exact gold
answers, questions from the corpus, HotpotQA) -> every system answers every task through the task's
domain environment — workflow x LLM agents from the grid, plus any configured candidate (an LLM, a RAG
pipeline, a user's Python callable or HTTP service) -> HotpotQA F1 / EM and R-Eval's error taxonomy per
answer (`taxonomy.classify_answer`) -> rank table, matching, error and deployment analyses.

A workflow a system cannot run (PAL without a sandbox, function calling on a server without `tools`) is
marked not applicable with the reason, not failed.
Every answer is a keyed unit and agent steps are journaled, so a killed run resumes without repeating a
stored call.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from proctor.agents.config import AgentConfig
from proctor.agents.environments.academic import SHIPPED as ACADEMIC
from proctor.agents.environments.database import DatabaseEnvironment
from proctor.agents.environments.documents import DocumentEnvironment
from proctor.agents.sandbox import probe_tier
from proctor.agents.tools import Toolbox
from proctor.agents.trace import Trajectory
from proctor.candidates import SystemUnderTest
from proctor.candidates.kinds import AgentCandidate
from proctor.judging.equivalence import decide
from proctor.judging.metrics import exact_match
from proctor.kit.context import RunContext
from proctor.models.base import Model
from proctor.protocols.rageval.answers import RagAnswer, System
from proctor.protocols.rageval.config import Config
from proctor.protocols.rageval.result import RagevalResult, TaskStats
from proctor.protocols.rageval.summary import summarise
from proctor.protocols.rageval.tasks import RagTask, database_tasks, document_tasks, hotpotqa_tasks
from proctor.protocols.rageval.taxonomy import classify_answer
from proctor.protocols.rageval.templates import SHIPPED as SEED_TEMPLATES
from proctor.protocols.rageval.templates import load_templates


async def run(ctx: RunContext[Config]) -> RagevalResult:
    cfg = ctx.settings
    stats = TaskStats()
    tasks: list[RagTask] = []
    envs: dict[str, Callable[[], Toolbox]] = {}
    if cfg.database is not None:
        schema = ACADEMIC / "schema.yaml" if cfg.database == "academic" else Path(cfg.database)
        db = DatabaseEnvironment.from_schema(schema)
        envs["database"] = lambda: Toolbox(db.tools())
        seeds = load_templates(cfg.templates or SEED_TEMPLATES, "rageval.templates")
        tasks += await database_tasks(ctx, db, seeds, stats)
    if cfg.documents and cfg.document_questions and ctx.config.corpus.path is not None:
        envs["documents"] = ctx.environment("documents", "rageval")
        tasks += await document_tasks(ctx, stats)
    if cfg.hotpotqa is not None:
        hp = hotpotqa_tasks(ctx, cfg.hotpotqa, stats)
        if hp.shared:
            envs["hotpotqa"] = DocumentEnvironment(hp.shared).session
        for name, chunks in hp.own.items():
            envs[name] = DocumentEnvironment(chunks).session
        tasks += hp.tasks
    await _record(ctx, tasks)
    systems = await _systems(ctx, envs)
    answers, failed = await _answer(ctx, [s for s in systems if s.not_applicable is None], tasks)
    return summarise(ctx, tasks, systems, answers, failed, stats)


async def _record(ctx: RunContext[Config], tasks: list[RagTask]) -> None:
    """Store the tasks as items (exports and the viewer show them)."""

    async def keep(t: RagTask) -> RagTask:
        return t

    await ctx.map("rageval: tasks", tasks, keep, unit_id=lambda t: t, role=None, output=RagTask)


async def _systems(ctx: RunContext[Config], envs: dict[str, Callable[[], Toolbox]]) -> list[System]:
    cfg = ctx.settings
    grid = cfg.grid
    out: list[System] = []
    tier = probe_tier()
    for workflow in grid.workflows:
        for llm in grid.llms:
            model = ctx.models[llm]
            agent = AgentConfig(
                workflow=workflow,
                limits=grid.limits,
                action_format=grid.action_format,
                step_max_tokens=grid.step_max_tokens,
                dfsdt_queries=grid.dfsdt_queries,
                sandbox=grid.sandbox,
            )
            na = None
            if workflow == "pal" and tier.tier == "none" and grid.sandbox != "unsafe_local":
                na = "no sandbox on this machine: " + "; ".join(
                    f"{k}: {v}" for k, v in tier.unavailable.items()
                )
            if workflow == "function_calling" and not await model.supports_tools():
                na = f"{model.spec} does no native function calling ({model.tools_note})"

            def make(
                domain: str, llm: str = llm, agent: AgentConfig = agent, model: Model = model
            ) -> SystemUnderTest:
                return AgentCandidate(f"{agent.workflow}:{llm}", model, agent, envs[domain])

            out.append(
                System(
                    f"{workflow}:{llm}",
                    workflow,
                    llm,
                    make,
                    na,
                )
            )
    for c in ctx.config.candidates:
        cand = ctx.candidate(c)
        out.append(
            System(
                c.name,
                c.agent.workflow if c.agent else None,
                c.model,
                _fixed(cand),
            )
        )
    return out


def _fixed(cand: SystemUnderTest) -> Callable[[str], SystemUnderTest]:
    """A configured candidate answers the same way whatever the domain (it has its own retrieval/tools)."""
    return lambda domain: cand


async def _answer(
    ctx: RunContext[Config], systems: list[System], tasks: list[RagTask]
) -> tuple[list[RagAnswer], dict[str, dict[str, int]]]:
    """The answers, and per system the failed answers by cause (recorded on their items)."""
    made: dict[tuple[str, str], SystemUnderTest] = {}

    def system_for(s: System, domain: str) -> SystemUnderTest:
        if (s.name, domain) not in made:
            made[(s.name, domain)] = s.make(domain)
        return made[(s.name, domain)]

    async def answer(unit: tuple[System, RagTask]) -> RagAnswer:
        s, t = unit
        ans = await system_for(s, t.environment or t.domain).answer(t.question)
        raw = ans.trace.get("trajectory") if ans.trace else None
        traj = Trajectory.model_validate(raw) if raw else None
        text = ans.text
        # A candidate without an agent trace: its retrieved contexts are its scratchpad (none: closed book),
        # and answering at all is running to its end.
        contexts = [str(c) for c in (ans.trace or {}).get("contexts", []) or []] if traj is None else []
        c = classify_answer(
            text, t.gold, trajectory=traj, contexts=contexts, threshold=ctx.settings.f1_threshold
        )
        if traj is not None:
            stop = str(traj.stop)
            totals = traj.totals()
            fmt = traj.settings.get("action_format")
            parse_errors = sum(1 for st in traj.steps if (st.error or "").startswith("parse_error"))
        else:
            stop = "finished" if text.strip() else "no_answer"
            totals, fmt, parse_errors = {}, None, 0
        return RagAnswer(
            system=s.name,
            workflow=s.workflow,
            llm=s.llm,
            task_id=t.task_id,
            task=t.task,
            level=t.level,
            domain=t.domain,
            difficulty=t.difficulty,
            question=t.question,
            gold=t.gold,
            answer=text,
            f1=round(c.f1, 6),
            em=exact_match(text, t.gold),
            equivalent=(rule.method if (rule := decide(text, t.gold, t.question)) is not None else None),
            category=c.category,
            stop=stop,
            interruption=c.interruption,
            steps=int(totals.get("steps", 0)),
            action_format=str(fmt) if fmt else None,
            parse_errors=parse_errors,
            prompt_tokens=int(totals.get("prompt_tokens", 0)),
            completion_tokens=int(totals.get("completion_tokens", 0)),
            cost_usd=float(totals.get("cost_usd", 0.0)),
            latency_s=float(totals.get("latency_s", 0.0)),
            trace=ans.trace or None,
        )

    units = [(s, t) for s in systems for t in tasks]
    outcomes = await ctx.map(
        "rageval: answering",
        units,
        answer,
        unit_id=lambda u: (u[0].name, u[1]),
        role="candidate",
        output=RagAnswer,
        context=lambda u: {"system": u[0].name, "task_id": u[1].task_id, "question": u[1].question},
    )
    failed: dict[str, dict[str, int]] = {}
    for o in outcomes:
        if o.failure is not None:
            by_cause = failed.setdefault(o.unit[0].name, {})
            by_cause[o.failure.cause] = by_cause.get(o.failure.cause, 0) + 1
    return [o.value for o in outcomes if o.value is not None], failed
