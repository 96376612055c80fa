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
invalid verdict is recorded as an error (cause "unparseable") and the others are kept. Either way each
unit gets its own `reckon_verdict` item of the same shape. `judge_mode: unit` makes one call per unit.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Any

from proctor.errors import ModelCallError, StructuredOutputError
from proctor.prompts import prompt_version, render_messages
from proctor.protocols.base import RunContext, work_key
from proctor.protocols.reckon.config import Config
from proctor.protocols.reckon.units import normalise

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


@dataclass(frozen=True)
class ExtractJob:
    key: str
    answer_key: str
    answer: str
    units: list[dict[str, Any]]


def extract_jobs(
    ctx: RunContext, cfg: Config, answer_key: str, answer: str, units: list[dict]
) -> list[ExtractJob]:
    judge = ctx.role("judge")
    if cfg.extract_mode == "cluster":
        version = prompt_version(EXTRACT_PROMPT)
        key = work_key("rx", answer_key, [u["unit_id"] for u in units], version, judge.provider.identity())
        return [ExtractJob(key, answer_key, answer, units)]
    version = prompt_version(EXTRACT_UNIT_PROMPT)
    return [
        ExtractJob(
            work_key("rxu", answer_key, u["unit_id"], version, judge.provider.identity()),
            answer_key,
            answer,
            [u],
        )
        for u in units
    ]


async def run_extraction(ctx: RunContext, cfg: Config, round_no: int, jobs: list[ExtractJob]) -> None:
    """Stage 1 for every job; writes `reckon_extract` items with `excerpts: {unit_id: text}`."""
    judge = ctx.role("judge")
    by_key = {j.key: j for j in jobs}

    def make(job: ExtractJob) -> Any:
        async def fn() -> None:
            if cfg.extract_mode == "cluster":
                names = labels(len(job.units))
                messages = render_messages(
                    EXTRACT_PROMPT,
                    answer=job.answer,
                    units=[
                        {"label": n, "keyword": u["keyword"], "description": u["description"]}
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
                excerpts = {u["unit_id"]: str(c.parsed[n]) for n, u in zip(names, job.units, strict=True)}
            else:
                u = job.units[0]
                messages = render_messages(
                    EXTRACT_UNIT_PROMPT,
                    answer=job.answer,
                    keyword=u["keyword"],
                    description=u["description"],
                    not_mentioned=NOT_MENTIONED,
                )
                c = await judge.generate(
                    messages,
                    json_schema=UNIT_EXTRACT_SCHEMA,
                    temperature=0.0,
                    max_tokens=cfg.extract_max_tokens,
                )
                excerpts = {u["unit_id"]: str(c.parsed["related"])}
            ctx.store.put_item(
                job.key,
                "reckon_extract",
                {"answer_key": job.answer_key, "round": round_no, "excerpts": excerpts},
            )

        return fn

    def on_error(key: str, e: ModelCallError) -> None:
        job = by_key[key]
        ctx.store.put_failed(
            key,
            "reckon_extract",
            {"answer_key": job.answer_key, "round": round_no, "unit_ids": [u["unit_id"] for u in job.units]},
            e,
        )

    await ctx.run_items(
        f"reckon round {round_no}: extracting",
        ((j.key, EXTRACT_ROLE, make(j)) for j in jobs),
        is_done=ctx.store.is_settled,
        on_error=on_error,
    )


def verdict_key(ctx: RunContext, cfg: Config, answer_key: str, unit_id: str) -> str:
    """Per-unit verdict key; cluster mode adds its mode and prompt version (unit mode keeps the old key)."""
    judge = ctx.role("judge")
    if cfg.judge_mode == "cluster":
        version = prompt_version(JUDGE_CLUSTER_PROMPT)
        return work_key("rv", answer_key, unit_id, "cluster", version, judge.provider.identity())
    return work_key("rv", answer_key, unit_id, prompt_version(JUDGE_PROMPT), judge.provider.identity())


@dataclass(frozen=True)
class JudgeJob:
    key: str
    base: dict[str, Any]  # candidate, round, question_id, answer_key, unit_id, excerpt, overlap
    unit: dict[str, Any]


def _verdict(job: JudgeJob, verdict: str, reason: Any) -> dict[str, Any]:
    return {**job.base, "verdict": verdict, "reason": " ".join(str(reason).split()), "stage": "judge"}


def _failed(job: JudgeJob) -> dict[str, Any]:
    return {**job.base, "verdict": None, "reason": None, "stage": "judge"}


def new_evidence(unit: dict[str, Any]) -> str:
    """The unit's source sentence, or "" when the description already contains it word for word (it would
    only repeat the fact in every cluster-judge prompt)."""
    evidence = unit.get("evidence") or ""
    return "" if normalise(evidence) in normalise(unit["description"]) else evidence


async def run_judging(ctx: RunContext, cfg: Config, round_no: int, jobs: list[JudgeJob]) -> None:
    """Stage 2 for units with an excerpt; writes one `reckon_verdict` item per unit."""
    if cfg.judge_mode == "cluster":
        await _judge_clusters(ctx, cfg, round_no, jobs)
        return
    judge = ctx.role("judge")
    by_key = {j.key: j for j in jobs}

    def make(job: JudgeJob) -> Any:
        async def fn() -> None:
            u = job.unit
            messages = render_messages(
                JUDGE_PROMPT,
                keyword=u["keyword"],
                description=u["description"],
                evidence=u.get("evidence") or "",
                excerpt=job.base["excerpt"],
            )
            c = await judge.generate(
                messages, json_schema=JUDGE_SCHEMA, temperature=0.0, max_tokens=cfg.judge_max_tokens
            )
            ctx.store.put_item(
                job.key, "reckon_verdict", _verdict(job, c.parsed["verdict"], c.parsed["reason"])
            )

        return fn

    def on_error(key: str, e: ModelCallError) -> None:
        ctx.store.put_failed(key, "reckon_verdict", _failed(by_key[key]), e)

    await ctx.run_items(
        f"reckon round {round_no}: judging",
        ((j.key, JUDGE_ROLE, make(j)) for j in jobs),
        is_done=ctx.store.is_settled,
        on_error=on_error,
    )


async def _judge_clusters(ctx: RunContext, cfg: Config, round_no: int, jobs: list[JudgeJob]) -> None:
    """One call per answer (= candidate and cluster question) for all its units that need stage 2."""
    judge = ctx.role("judge")
    version = prompt_version(JUDGE_CLUSTER_PROMPT)
    groups: dict[str, list[JudgeJob]] = {}
    for j in jobs:
        groups.setdefault(j.base["answer_key"], []).append(j)
    batches = {
        work_key("rvc", akey, [j.base["unit_id"] for j in group], version, judge.provider.identity()): group
        for akey, group in groups.items()
    }

    def make(batch: list[JudgeJob]) -> Any:
        async def fn() -> None:
            names = labels(len(batch))
            items = [
                {
                    "label": n,
                    "keyword": j.unit["keyword"],
                    "description": j.unit["description"],
                    "evidence": new_evidence(j.unit),
                    "excerpt": j.base["excerpt"],
                }
                for n, j in zip(names, batch, strict=True)
            ]
            c = await judge.generate(
                render_messages(JUDGE_CLUSTER_PROMPT, items=items),
                json_schema=judge_cluster_schema(len(batch)),
                temperature=0.0,
                max_tokens=cfg.judge_max_tokens * len(batch),
            )
            for n, j in zip(names, batch, strict=True):
                field = c.parsed.get(n) or {}
                verdict = str(field.get("verdict") or "").strip().lower()
                if verdict in VERDICTS:
                    ctx.store.put_item(
                        j.key, "reckon_verdict", _verdict(j, verdict, field.get("reason") or "")
                    )
                else:
                    why = "missing from the reply" if n not in c.parsed else f"invalid verdict {verdict!r}"
                    err = StructuredOutputError(f"cluster judge: {n} {why}", raw=c.text)
                    ctx.store.put_failed(j.key, "reckon_verdict", _failed(j), err)

        return fn

    def on_error(key: str, e: ModelCallError) -> None:
        for j in batches[key]:
            ctx.store.put_failed(j.key, "reckon_verdict", _failed(j), e)

    await ctx.run_items(
        f"reckon round {round_no}: judging",
        ((k, JUDGE_ROLE, make(b)) for k, b in batches.items()),
        is_done=lambda k: all(ctx.store.is_settled(j.key) for j in batches[k]),
        on_error=on_error,
    )
