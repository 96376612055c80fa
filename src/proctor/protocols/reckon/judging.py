"""Step 5: per-unit judging in two stages.

Stage 1 (extract): the judge model copies from the answer the part related to each unit, or writes
"not mentioned". With `extract_mode: cluster` one call reads the answer once for all units of its
cluster (one JSON field per unit); with `extract_mode: unit` there is one call per unit.
An excerpt that is "not mentioned", or whose word pairs mostly do not occur in the answer (the extractor
copied the reference instead of the answer), makes the unit *uncovered* without a stage-2 call.

Stage 2 (judge): the excerpt is judged against the unit's reference (keyword, description, source
sentence) -> correct / incorrect / uncovered, with a reason. The prompt makes the reference the ground
truth even where it contradicts the judge's world knowledge. With `judge_mode: cluster` one call judges
all of an answer's excerpts that need stage 2, each against its own reference (one JSON field per unit),
so the rules are sent once per cluster instead of once per unit; a unit missing from the reply or with an
invalid verdict is recorded as an error (cause "invalid_output") and the others are kept. Either way each
unit gets its own `reckon_verdict` item of the same shape. `judge_mode: unit` makes one call per unit.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import BaseModel

from proctor.errors import StepError
from proctor.prompts import prompt_version, render_messages
from proctor.protocols.context import RunContext, work_key
from proctor.protocols.reckon.config import Config
from proctor.protocols.reckon.units import KnowledgeUnit, normalise
from proctor.protocols.steps import Failure, Payload

VERDICTS = ("correct", "incorrect", "uncovered")
NOT_MENTIONED = "not mentioned"
EXTRACT_ROLE = "reckon:extract"
JUDGE_ROLE = "reckon:judge"
EXTRACT_PROMPT = "reckon/extract"
EXTRACT_UNIT_PROMPT = "reckon/extract_unit"
JUDGE_PROMPT = "reckon/judge"
JUDGE_CLUSTER_PROMPT = "reckon/judge_cluster"

JUDGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "reason": {"type": "string", "description": "one sentence comparing the excerpt with the reference"},
        "verdict": {"type": "string", "enum": list(VERDICTS)},
    },
    "required": ["reason", "verdict"],
}
UNIT_EXTRACT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"related": {"type": "string"}},
    "required": ["related"],
}
_NONE_WORDS = {
    "",
    "none",
    "n a",
    "na",
    "nothing",
    "not mentioned",
    "not mentioned in the answer",
    "no mention",
}


def labels(n: int) -> list[str]:
    """Field names the extractor sees for a cluster's units: U1, U2, ..."""
    return [f"U{i}" for i in range(1, n + 1)]


def extract_schema(n: int) -> dict[str, Any]:
    names = labels(n)
    return {
        "type": "object",
        "properties": {k: {"type": "string"} for k in names},
        "required": names,
    }


def judge_cluster_schema(n: int) -> dict[str, Any]:
    """One field per unit label. Deliberately lenient (no required labels, verdict checked by us): a missing
    or bad field costs only its own unit, not a re-ask or the whole call."""
    unit = {
        "type": "object",
        "properties": {"reason": {"type": "string"}, "verdict": {"type": "string"}},
    }
    return {"type": "object", "properties": {k: unit for k in labels(n)}}


def is_not_mentioned(excerpt: str) -> bool:
    norm = " ".join(re.findall(r"[a-z0-9]+", excerpt.lower()))
    return norm in _NONE_WORDS or norm.startswith("not mentioned")


def overlap(excerpt: str, answer: str) -> float:
    """Share of the excerpt's word pairs (bigrams) that also occur in the answer: 1.0 for a verbatim copy,
    low for text copied from the unit instead (common words alone do not match). Single words: unigrams."""
    words = re.findall(r"\w+", excerpt.lower())
    if not words:
        return 0.0
    answer_words = re.findall(r"\w+", answer.lower())
    if len(words) == 1:
        return float(words[0] in set(answer_words))
    pairs = list(itertools.pairwise(words))
    vocab = set(itertools.pairwise(answer_words))
    return sum(1 for p in pairs if p in vocab) / len(pairs)


class Extraction(Payload):
    """Stage 1 for one job: the answer's excerpt about each of its units."""

    KIND: ClassVar[str] = "reckon_extract"
    answer_key: str
    round: int
    excerpts: dict[str, str]


class UnitVerdict(Payload):
    """Stage 2 (or the extraction rule) for one unit of one answer: correct / incorrect / uncovered."""

    KIND: ClassVar[str] = "reckon_verdict"
    candidate: str
    round: int
    question_id: str
    answer_key: str
    unit_id: str
    excerpt: str
    overlap: float
    verdict: str | None = None
    reason: str | None = None
    stage: str = "judge"


class UnitReply(BaseModel):
    """The cluster judge's verdict and reason on one unit, or why the reply has none for it."""

    verdict: str | None = None
    reason: str = ""
    error: str | None = None


class ClusterVerdicts(Payload):
    """One cluster-judge reply, per verdict key."""

    KIND: ClassVar[str] = "reckon_verdict_batch"
    answer_key: str
    verdicts: dict[str, UnitReply]


@dataclass(frozen=True)
class ExtractJob:
    key: str
    answer_key: str
    answer: str
    units: list[KnowledgeUnit]


def extract_jobs(
    ctx: RunContext[Config], answer_key: str, answer: str, units: list[KnowledgeUnit]
) -> list[ExtractJob]:
    judge = ctx.role("judge")
    if ctx.settings.extract_mode == "cluster":
        version = prompt_version(EXTRACT_PROMPT)
        key = work_key("rx", answer_key, [u.unit_id for u in units], version, judge.provider.identity())
        return [ExtractJob(key, answer_key, answer, units)]
    version = prompt_version(EXTRACT_UNIT_PROMPT)
    return [
        ExtractJob(
            work_key("rxu", answer_key, u.unit_id, version, judge.provider.identity()),
            answer_key,
            answer,
            [u],
        )
        for u in units
    ]


async def run_extraction(
    ctx: RunContext[Config], round_no: int, jobs: list[ExtractJob]
) -> dict[str, Extraction]:
    """Stage 1 for every job; returns the extractions that succeeded, by job key."""
    cfg = ctx.settings
    judge = ctx.role("judge")

    async def extract(job: ExtractJob) -> Extraction:
        if cfg.extract_mode == "cluster":
            names = labels(len(job.units))
            messages = render_messages(
                EXTRACT_PROMPT,
                answer=job.answer,
                units=[
                    {"label": n, "keyword": u.keyword, "description": u.description}
                    for n, u in zip(names, job.units, strict=True)
                ],
                not_mentioned=NOT_MENTIONED,
            )
            c = await judge.generate(
                messages,
                json_schema=extract_schema(len(job.units)),
                temperature=0.0,
                max_tokens=cfg.extract_max_tokens,
            )
            excerpts = {u.unit_id: str(c.parsed[n]) for n, u in zip(names, job.units, strict=True)}
        else:
            u = job.units[0]
            messages = render_messages(
                EXTRACT_UNIT_PROMPT,
                answer=job.answer,
                keyword=u.keyword,
                description=u.description,
                not_mentioned=NOT_MENTIONED,
            )
            c = await judge.generate(
                messages, json_schema=UNIT_EXTRACT_SCHEMA, temperature=0.0, max_tokens=cfg.extract_max_tokens
            )
            excerpts = {u.unit_id: str(c.parsed["related"])}
        return Extraction(answer_key=job.answer_key, round=round_no, excerpts=excerpts)

    outcomes = await ctx.map(
        f"reckon round {round_no}: extracting",
        jobs,
        extract,
        key=lambda j: j.key,
        role=EXTRACT_ROLE,
        output=Extraction,
        context=lambda j: {
            "answer_key": j.answer_key,
            "round": round_no,
            "unit_ids": [u.unit_id for u in j.units],
        },
    )
    return {o.key: o.value for o in outcomes if o.value is not None}


def verdict_key(ctx: RunContext[Config], answer_key: str, unit_id: str) -> str:
    """Per-unit verdict key; cluster mode adds its mode and prompt version (unit mode keeps the old key)."""
    judge = ctx.role("judge")
    if ctx.settings.judge_mode == "cluster":
        version = prompt_version(JUDGE_CLUSTER_PROMPT)
        return work_key("rv", answer_key, unit_id, "cluster", version, judge.provider.identity())
    return work_key("rv", answer_key, unit_id, prompt_version(JUDGE_PROMPT), judge.provider.identity())


@dataclass(frozen=True)
class JudgeJob:
    key: str
    pending: UnitVerdict  # everything but the verdict and its reason
    unit: KnowledgeUnit
    uncovered: str | None = None  # why stage 1 already settles the unit as uncovered (no stage-2 call)


def _verdict(job: JudgeJob, verdict: str, reason: Any) -> UnitVerdict:
    return job.pending.model_copy(update={"verdict": verdict, "reason": " ".join(str(reason).split())})


def new_evidence(unit: KnowledgeUnit) -> str:
    """The unit's source sentence, or "" when the description already contains it word for word (it would
    only repeat the fact in every cluster-judge prompt)."""
    evidence = unit.evidence or ""
    return "" if normalise(evidence) in normalise(unit.description) else evidence


async def run_judging(ctx: RunContext[Config], round_no: int, jobs: list[JudgeJob]) -> dict[str, UnitVerdict]:
    """Stage 2: one `reckon_verdict` item per job; a job stage 1 settled is uncovered without a call.
    Returns the verdicts given, by key: stage 1's first, then the judge's, each in job order."""
    cfg = ctx.settings
    judge = ctx.role("judge")
    settled = [j for j in jobs if j.uncovered is not None]
    to_judge = [j for j in jobs if j.uncovered is None]
    replies: dict[str, UnitReply | Failure] = {}
    if cfg.judge_mode == "cluster":
        replies = await _judge_clusters(ctx, round_no, to_judge)

    async def judge_unit(job: JudgeJob) -> UnitVerdict:
        if job.uncovered is not None:
            update = {"verdict": "uncovered", "reason": job.uncovered, "stage": "extract"}
            return job.pending.model_copy(update=update)
        if cfg.judge_mode == "cluster":
            reply = replies[job.key]
            if isinstance(reply, Failure):
                raise StepError(reply.message, cause=reply.cause)
            if reply.verdict is None:
                raise StepError(reply.error or "cluster judge: no verdict", cause="invalid_output")
            return _verdict(job, reply.verdict, reply.reason)
        u = job.unit
        messages = render_messages(
            JUDGE_PROMPT,
            keyword=u.keyword,
            description=u.description,
            evidence=u.evidence or "",
            excerpt=job.pending.excerpt,
        )
        c = await judge.generate(
            messages, json_schema=JUDGE_SCHEMA, temperature=0.0, max_tokens=cfg.judge_max_tokens
        )
        return _verdict(job, c.parsed["verdict"], c.parsed["reason"])

    outcomes = await ctx.map(
        f"reckon round {round_no}: " + ("verdicts" if cfg.judge_mode == "cluster" else "judging"),
        settled + to_judge,
        judge_unit,
        key=lambda j: j.key,
        role=JUDGE_ROLE,
        output=UnitVerdict,
        context=lambda j: j.pending.model_dump(mode="json"),
    )
    return {o.key: o.value for o in outcomes if o.value is not None}


async def _judge_clusters(
    ctx: RunContext[Config], round_no: int, jobs: list[JudgeJob]
) -> dict[str, UnitReply | Failure]:
    """One call per answer (= candidate and cluster question) for all its units that need stage 2, stored
    whole as a `reckon_verdict_batch` item. Returns, per job key, the reply on its unit (a verdict, or why
    there is none: missing from the reply or an invalid verdict), or the failure of its call."""
    cfg = ctx.settings
    judge = ctx.role("judge")
    version = prompt_version(JUDGE_CLUSTER_PROMPT)
    groups: dict[str, list[JudgeJob]] = {}
    for j in jobs:
        groups.setdefault(j.pending.answer_key, []).append(j)
    batches = [
        (work_key("rvc", akey, [j.pending.unit_id for j in group], version, judge.provider.identity()), group)
        for akey, group in groups.items()
    ]

    async def judge_batch(batch: tuple[str, list[JudgeJob]]) -> ClusterVerdicts:
        group = batch[1]
        names = labels(len(group))
        items = [
            {
                "label": n,
                "keyword": j.unit.keyword,
                "description": j.unit.description,
                "evidence": new_evidence(j.unit),
                "excerpt": j.pending.excerpt,
            }
            for n, j in zip(names, group, strict=True)
        ]
        c = await judge.generate(
            render_messages(JUDGE_CLUSTER_PROMPT, items=items),
            json_schema=judge_cluster_schema(len(group)),
            temperature=0.0,
            max_tokens=cfg.judge_max_tokens * len(group),
        )
        verdicts = {}
        for n, j in zip(names, group, strict=True):
            field = c.parsed.get(n) or {}
            verdict = str(field.get("verdict") or "").strip().lower()
            if verdict in VERDICTS:
                verdicts[j.key] = UnitReply(verdict=verdict, reason=str(field.get("reason") or ""))
            else:
                why = "missing from the reply" if n not in c.parsed else f"invalid verdict {verdict!r}"
                verdicts[j.key] = UnitReply(error=f"cluster judge: {n} {why}")
        return ClusterVerdicts(answer_key=group[0].pending.answer_key, verdicts=verdicts)

    outcomes = await ctx.map(
        f"reckon round {round_no}: judging",
        batches,
        judge_batch,
        key=lambda b: b[0],
        role=JUDGE_ROLE,
        output=ClusterVerdicts,
        context=lambda b: {
            "answer_key": b[1][0].pending.answer_key,
            "unit_ids": [j.pending.unit_id for j in b[1]],
        },
    )
    replies: dict[str, UnitReply | Failure] = {}
    for o in outcomes:
        for j in o.unit[1]:
            if o.value is not None:
                replies[j.key] = o.value.verdicts.get(j.key) or UnitReply(error="cluster judge: no reply")
            else:
                assert o.failure is not None
                replies[j.key] = o.failure
    return replies
