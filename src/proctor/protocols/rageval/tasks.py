"""The questions of a rageval run, at three levels, from three sources:

* the domain database: seed templates (plus templates the examiner proposes, kept only when they give
  exact answers), gold answers computed from the database;
* the run's corpus: KS / KU questions written by the examiner from one chunk, KA two-hop questions from
  two chunks linked by a bridge entity on the context graph, the answer in the second chunk; an answer
  the text does not support, or that the question states, is dropped and counted;
* a HotpotQA-format file, whose context paragraphs become the document environment.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import yaml
from pydantic import Field, ValidationError

from proctor.agents.environments.database import DatabaseEnvironment
from proctor.corpus.types import Chunk
from proctor.errors import StepError, UserError
from proctor.ids import content_id
from proctor.kit.context import RunContext
from proctor.kit.shared.graph import build_context_graph
from proctor.kit.shared.hotpotqa import (
    Paragraph,
    corpus_chunks,
    file_format,
    first_per_level,
    paragraph_chunk,
    paragraphs,
)
from proctor.kit.shared.questions import (
    Question,
    QuestionTask,
    keep_questions,
    support,
    write_questions,
)
from proctor.kit.steps import Payload
from proctor.prompts import prompt_version, render_messages
from proctor.protocols.rageval.config import Config, Level
from proctor.protocols.rageval.result import DocumentStats, TaskStats
from proctor.protocols.rageval.templates import Template, instantiate
from proctor.records import read_records

DOC_PROMPT = "rageval/document"
EXPAND_PROMPT = "rageval/expand"


class RagTask(Payload):
    """One question of the run: its task, level, domain and exact gold answer."""

    KIND: ClassVar[str] = "rageval_task"
    task_id: str
    task: str  # template name, "documents/KS", ..., or "hotpotqa/<type>"
    level: Level
    domain: str  # database | documents | hotpotqa
    question: str
    gold: str
    origin: str = "seed"
    support_ids: list[str] = Field(default_factory=list)
    # HotpotQA's own difficulty level (easy / medium / hard), when the file gives one.
    difficulty: str | None = None
    # The environment the task is answered in, when not the domain's one (a HotpotQA question in the
    # distractor setting: its own paragraphs).
    environment: str | None = None


@dataclass(frozen=True)
class HotpotSet:
    """A HotpotQA file read: its tasks, and the paragraphs (as chunks) of the shared corpus and of each
    question (by environment name) for the distractor setting."""

    tasks: list[RagTask]
    shared: list[Chunk]
    own: dict[str, list[Chunk]]


class Proposed(Payload):
    KIND: ClassVar[str] = "rageval_proposed_templates"
    templates: list[dict[str, Any]]


def _task_id(*parts: Any) -> str:
    """A task's id (not a store key): a content hash of what makes the task."""
    return f"rt_{content_id(*parts)}"


async def database_tasks(
    ctx: RunContext[Config], db: DatabaseEnvironment, seeds: list[Template], stats: TaskStats
) -> list[RagTask]:
    cfg = ctx.settings
    templates = [t for t in seeds if t.level in cfg.levels]
    if cfg.expansion:
        templates += await expand(ctx, db, seeds, stats)
    instances, rejected = instantiate(templates, db, ctx.rng, cfg.instances_per_template)
    stats.rejected = dict(sorted(rejected.items()))
    stats.database = dict(Counter(i.level for i in instances))
    return [
        RagTask(
            task_id=_task_id("db", i.template, i.entity_id, i.question),
            task=i.template,
            level=i.level,
            domain="database",
            question=i.question,
            gold=i.gold,
            origin=i.origin,
            support_ids=[i.entity_id],
        )
        for i in instances
    ]


async def expand(
    ctx: RunContext[Config], db: DatabaseEnvironment, seeds: list[Template], stats: TaskStats
) -> list[Template]:
    """The examiner proposes templates from the schema and the seeds; a proposal is kept only if it is a
    valid template that yields at least one exact answer (rejections counted by reason)."""
    examiner = ctx.role("examiner")
    schema = {
        "entities": {
            t: sorted(db.entities(t)[0].attributes) if db.entities(t) else [] for t in db.schema.entities
        },
        "relations": {n: f"{r.from_} -> {r.to}" for n, r in db.schema.relations.items()},
    }
    shown = [t.model_dump(exclude={"origin"}, exclude_defaults=True) for t in seeds[:4]]

    async def propose(_: int) -> Proposed:
        reply = await examiner.generate(
            render_messages(
                EXPAND_PROMPT,
                schema=yaml.safe_dump(schema, sort_keys=True),
                seeds=yaml.safe_dump(shown),
                n=ctx.settings.expansion,
            ),
            json_schema={
                "type": "object",
                "properties": {"templates": {"type": "array", "items": {"type": "object"}}},
                "required": ["templates"],
            },
            temperature=0.0,
            max_tokens=200 * ctx.settings.expansion + 64,
        )
        found = reply.parsed.get("templates")
        if not isinstance(found, list):
            raise StepError("no template list in the reply", cause="invalid_output")
        return Proposed(templates=[t for t in found if isinstance(t, dict)])

    [outcome] = await ctx.map(
        "rageval: proposing templates",
        [0],
        propose,
        unit_id=lambda _: (schema, shown, ctx.settings.expansion),  # what the prompt shows
        role="examiner",
        output=Proposed,
    )
    counts: Counter[str] = Counter()
    kept: list[Template] = []
    for i, raw in enumerate((outcome.value.templates if outcome.value else [])[: ctx.settings.expansion]):
        counts["proposed"] += 1
        try:
            t = Template.model_validate(
                {**raw, "name": f"x{i + 1}_{raw.get('name', 'template')}", "origin": "expansion"}
            )
        except ValidationError:
            counts["rejected: invalid"] += 1
            continue
        if t.level not in ctx.settings.levels:
            counts["rejected: level not asked"] += 1
            continue
        probe, rejected = instantiate([t], db, ctx.rng, 1)
        if not probe:
            reason = rejected.most_common(1)[0][0].split(": ", 1)[1] if rejected else "empty"
            counts[f"rejected: {reason}"] += 1
            continue
        counts["kept"] += 1
        kept.append(t)
    if outcome.value is None:
        counts["failed"] += 1
    stats.expansion = dict(counts)
    return kept


async def document_tasks(ctx: RunContext[Config], stats: TaskStats) -> list[RagTask]:
    cfg = ctx.settings
    chunks = ctx.corpus.chunks
    examiner = ctx.role("examiner")
    version = prompt_version(DOC_PROMPT)
    plans: list[tuple[QuestionTask, Level, list[Chunk], str | None]] = []
    order = [int(i) for i in ctx.rng.permutation(len(chunks))]
    single: list[Level] = [lv for lv in ("KS", "KU") if lv in cfg.levels]
    for level in single:
        for j in range(min(cfg.document_questions, len(chunks))):
            c = chunks[order[(j + (0 if level == "KS" else cfg.document_questions)) % len(chunks)]]
            plans.append((_qtask(ctx, level, [c], None), level, [c], None))
    if "KA" in cfg.levels and cfg.document_questions:
        graph, _ = await build_context_graph(ctx)
        by_id = {c.chunk_id: c for c in chunks}
        bridges = [e for e in graph.entities.values() if len(set(e.chunk_ids)) >= 2]
        bridges.sort(key=lambda e: (-len(set(e.doc_ids)), e.entity_id))
        for j in ctx.rng.permutation(len(bridges))[: cfg.document_questions]:
            e = bridges[int(j)]
            a, b = e.chunk_ids[0], next(c for c in e.chunk_ids if c != e.chunk_ids[0])
            pair = [by_id[a], by_id[b]]
            plans.append((_qtask(ctx, "KA", pair, e.name), "KA", pair, e.name))
    outcomes = await write_questions(
        ctx, [p[0] for p in plans], model=examiner, prompt=DOC_PROMPT, prompt_version=version,
        max_tokens=cfg.examiner_max_tokens, output=Question, description="rageval: document questions",
    )  # fmt: skip
    kept, gen = keep_questions(outcomes)
    plan_of = {o.key: p for o, p in zip(outcomes, plans, strict=True)}  # question_id = its item's key
    out: list[RagTask] = []
    dropped: Counter[str] = Counter()
    for q in kept:
        _, level, cs, _bridge = plan_of[q.question_id]
        if support(q.reference_answer, cs[-1].text) < 0.75:
            dropped["unsupported"] += 1
            continue
        out.append(
            RagTask(
                task_id=_task_id("doc", q.question_id),
                task=f"documents/{level}",
                level=level,
                domain="documents",
                question=q.question,
                gold=q.reference_answer,
                support_ids=[c.chunk_id for c in cs],
            )
        )
    stats.documents = DocumentStats(
        generation=gen, dropped=dict(dropped), kept=dict(Counter(t.level for t in out))
    )
    return out


def _qtask(ctx: RunContext[Config], level: Level, cs: list[Chunk], bridge: str | None) -> QuestionTask:
    """A question to write from `cs` at `level`; it is identified by its chunks (ids by content), level and
    bridge entity."""
    ids = [c.chunk_id for c in cs]
    return QuestionTask(
        (level, ids, bridge), {"passages": [c.text for c in cs], "level": level, "bridge": bridge},
        seed=ctx.config.seed, source_chunk_ids=ids, source=cs[0].source,
    )  # fmt: skip


def hotpotqa_tasks(ctx: RunContext[Config], path: str, stats: TaskStats) -> HotpotSet:
    """HotpotQA records (question, answer, type, level, context) -> tasks (R-Eval level KA: multi-hop), one
    per asked setting: `shared` answers over one document environment of every paragraph of the file (one
    page per title), `distractor` over the question's own paragraphs (its environment is named by its id).
    `shared` keeps the domain `hotpotqa`; `distractor` tasks are domain `hotpotqa-distractor`."""
    p = Path(path)
    if not p.is_file():
        raise UserError(f"rageval.hotpotqa: {p} does not exist. Give a HotpotQA JSON or JSONL file.")
    cfg = ctx.settings
    rows: list[tuple[RagTask, list[Paragraph]]] = []
    skipped = 0
    for rec in read_records(p, field="rageval.hotpotqa", format=file_format(p)):
        d = rec.data
        if not isinstance(d, dict) or not d.get("question") or not d.get("answer") or not d.get("context"):
            skipped += 1
            continue
        try:
            paras = paragraphs(d["context"])
        except (KeyError, TypeError, ValueError):
            skipped += 1
            continue
        level = d.get("level")
        task = RagTask(
            task_id=_task_id("hp", d.get("_id") or d.get("id") or d["question"]),
            task=f"hotpotqa/{d.get('type', 'multi-hop')}",
            level="KA",
            domain="hotpotqa",
            question=str(d["question"]),
            gold=str(d["answer"]),
            support_ids=list(dict.fromkeys(str(t) for t, _ in d.get("supporting_facts") or [])),
            difficulty=str(level) if level else None,
        )
        rows.append((task, paras))
    if cfg.hotpotqa_per_level is not None:
        rows = first_per_level(rows, cfg.hotpotqa_per_level, lambda r: r[0].difficulty)
    elif cfg.hotpotqa_questions is not None and len(rows) > cfg.hotpotqa_questions:
        pick = sorted(int(i) for i in ctx.rng.choice(len(rows), cfg.hotpotqa_questions, replace=False))
        rows = [rows[i] for i in pick]
    # The shared corpus holds every paragraph of the file, not only the sampled questions' (distractors).
    shared = corpus_chunks(p, "rageval.hotpotqa")
    tasks: list[RagTask] = []
    own: dict[str, list[Chunk]] = {}
    for t, paras in rows:
        if "shared" in cfg.hotpotqa_settings:
            tasks.append(t)
        if "distractor" in cfg.hotpotqa_settings:
            env = f"hotpotqa-distractor/{t.task_id}"
            own[env] = [paragraph_chunk(p.name, title, sents) for title, sents in paras]
            distractor = {"domain": "hotpotqa-distractor", "environment": env}
            tasks.append(t.model_copy(update={**distractor, "task_id": _task_id(t.task_id, "distractor")}))
    stats.hotpotqa = {
        "questions": len(rows),
        "paragraphs": len(shared),
        "skipped": skipped,
        **{
            f"level {k}": v for k, v in sorted(Counter(t.difficulty for t, _ in rows if t.difficulty).items())
        },
    }
    return HotpotSet(tasks=tasks, shared=shared if "shared" in cfg.hotpotqa_settings else [], own=own)
