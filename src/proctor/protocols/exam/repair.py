"""Repairing questions instead of dropping them.

A small examiner often writes a good question with poor wrong options: options that repeat the correct
answer or each other, options closer to the source than the correct answer (partly right), or a correct
answer longer and more specific than every option. Dropping such questions cost most of an exam on an
unfamiliar corpus. Here the examiner is asked again for fresh distractors only, with the failure named in
the prompt; the new options go through the same filters, and the question is dropped only when
`repair.attempts` repairs fail. Each repair is one stored examiner call (`exam_repair`), so a resumed or
re-run exam repeats none.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, ClassVar

from proctor.kit.context import RunContext
from proctor.kit.steps import Payload
from proctor.prompts import render_messages
from proctor.protocols.exam.assemble import filter_drafts, length_cue_strength
from proctor.protocols.exam.config import Config
from proctor.protocols.exam.filters import Draft, normalise, words
from proctor.protocols.exam.result import RepairStats

PROMPT = "exam/repair"
# Failures a question can be repaired from (its question and answer are fine; its options are not).
REPAIRABLE = frozenset({"options_repeat", "distractor_closer_to_source", "too_few_distractors", "empty"})
KEY_STANDS_OUT = "key_stands_out"


class ExamRepair(Payload):
    """One repair call: the fresh distractors the examiner wrote for a draft."""

    KIND: ClassVar[str] = "exam_repair"
    draft_key: str
    failure: str
    attempt: int
    distractors: list[str]


@dataclass(frozen=True)
class RepairCall:
    draft: Draft
    failure: str
    attempt: int
    passage: str


def failure_of(d: Draft, cfg: Config) -> str | None:
    """What a repair would fix in `d` (already filtered), or None: a repairable drop reason, or a correct
    answer longer than every distractor (spares included) by at least `repair.key_length_cue`."""
    if d.reason is not None:
        return d.reason if d.reason in REPAIRABLE else None
    cue = cfg.repair.key_length_cue
    if cue is not None and d.distractors:
        longest_other = max(len(x.strip()) for x in d.distractors)
        if (
            len(d.correct.strip()) > longest_other
            and length_cue_strength([d.correct, *d.distractors], 0) >= cue
        ):
            return KEY_STANDS_OUT
    return None


def repair_schema(n: int) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "distractors": {
                "type": "array",
                "items": {"type": "string", "minLength": 1},
                "minItems": 1,
                "maxItems": n + 2,
            }
        },
        "required": ["distractors"],
    }


def apply_repair(d: Draft, new: list[str]) -> None:
    """Add the fresh distractors to `d` (exact repeats of what it has or had are skipped) and mark it for
    the filters again."""
    seen = {normalise(x) for x in (d.correct, *d.distractors, *d.rejected)}
    for x in (" ".join(str(t).split()) for t in new):
        if x and normalise(x) not in seen:
            d.distractors.append(x)
            seen.add(normalise(x))
    d.reason = None
    d.checked = False


async def repair_drafts(
    ctx: RunContext[Config],
    drafts: list[Draft],
    emb: Any,
    sources: dict[str, str],
    example_passage: str | None,
) -> tuple[RepairStats, set[str]]:
    """Filter `drafts` in place and repair the repairable ones, up to `repair.attempts` rounds. Returns
    the counts (asked and repaired by failure, calls failed) and the keys of the repair items."""
    cfg = ctx.settings
    filter_drafts(drafts, cfg, emb, sources, example_passage)
    stats = RepairStats()
    keys: set[str] = set()
    if cfg.repair.attempts == 0:
        return stats, keys
    examiner = ctx.role("examiner")
    first_failure: dict[str, str] = {}

    async def write(call: RepairCall) -> ExamRepair:
        d = call.draft
        n = (
            max(cfg.distractors - len(d.distractors), 2)
            if call.failure != KEY_STANDS_OUT
            else cfg.distractors
        )
        messages = render_messages(
            PROMPT,
            passage=call.passage,
            question=d.question,
            correct=d.correct,
            kept=d.distractors,
            rejected=d.rejected[:4],
            failure=call.failure,
            correct_words=len(words(d.correct)),
            n=n,
        )
        c = await examiner.generate(
            messages,
            json_schema=repair_schema(n),
            temperature=0.0 if call.attempt == 1 else 0.7,
            seed=ctx.config.seed + call.attempt,
            max_tokens=cfg.generation_max_tokens,
        )
        got = (c.parsed or {}).get("distractors", [])
        return ExamRepair(
            draft_key=d.key, failure=call.failure, attempt=call.attempt, distractors=[str(x) for x in got]
        )

    for attempt in range(1, cfg.repair.attempts + 1):
        todo = [(d, f) for d in drafts if (f := failure_of(d, cfg)) is not None]
        if not todo:
            break
        for d, f in todo:
            first_failure.setdefault(d.key, f)
        calls = [RepairCall(d, f, attempt, sources.get(d.chunk_id, "")) for d, f in todo]
        outcomes = await ctx.map(
            "exam: repairing distractors" + (f" (attempt {attempt})" if attempt > 1 else ""),
            calls,
            write,
            unit_id=lambda c: (
                c.draft.key,
                c.draft.question,
                c.draft.correct,
                c.draft.distractors,
                c.failure,
                c.attempt,
            ),
            role="examiner",
            output=ExamRepair,
            context=lambda c: {"draft_key": c.draft.key, "failure": c.failure, "attempt": c.attempt},
        )
        stats.calls += len(outcomes)
        for o in outcomes:
            keys.add(o.key)
            if o.value is None:
                cause = o.failure.cause if o.failure is not None else "not_run"
                stats.calls_failed[cause] = stats.calls_failed.get(cause, 0) + 1
                continue
            apply_repair(o.unit.draft, o.value.distractors)
        filter_drafts(drafts, cfg, emb, sources, example_passage)
    asked: Counter[str] = Counter(first_failure.values())
    repaired: Counter[str] = Counter(
        f for d in drafts if (f := first_failure.get(d.key)) is not None and failure_of(d, cfg) is None
    )
    stats.asked, stats.repaired = dict(sorted(asked.items())), dict(sorted(repaired.items()))
    return stats, keys
