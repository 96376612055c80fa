"""Repairing questions instead of dropping them.

A small examiner often writes a good question with poor wrong options: options that repeat the correct
answer or each other, options closer to the source than the correct answer (partly right), or a correct
answer longer and more specific than every option. It also writes questions that give their answer away
(the key's words in the stem) or point at a text the reader never sees. Dropping such questions cost most
of an exam on an unfamiliar corpus. Here the examiner is asked again, with the failure named in the prompt:

* a question at fault (`answer_in_question`, `not_self_contained`) -> a rewritten question only, naming
  the words of the key found in it (or the phrase pointing at the text); the key and options stay;
* options at fault -> replacements only for the options the filters removed (the filters' deterministic
  pass has already kept one of each group of repeats; the kept options are listed as "already used",
  the removed ones as not to be written again; a distractor stated in the source is named and its
  replacement asked to be one the source does not state).

Every filter runs again on the result, and the question is dropped only when `repair.attempts` repairs
fail (one call per question per attempt). Each repair is one stored examiner call (`exam_repair`), so a
resumed or re-run exam repeats none.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import Field

from proctor.kit.context import RunContext
from proctor.kit.steps import Payload
from proctor.models.types import Message
from proctor.prompts import render_messages, render_text
from proctor.protocols.exam.assemble import filter_drafts, length_cue_strength
from proctor.protocols.exam.config import Config
from proctor.protocols.exam.filters import MIN_DISTRACTORS, Draft, compile_patterns, normalise, words
from proctor.protocols.exam.result import RepairStats

PROMPT = "exam/repair"
REWRITE_PROMPT = "exam/rewrite"
REWRITE_EXAMPLE = "exam/rewrite_example.j2"
# Failures repaired with new options (the question and answer are fine; the options are not).
OPTION_FAILURES = frozenset({"options_repeat", "distractor_closer_to_source", "too_few_distractors", "empty"})
# Failures repaired with a rewritten question (the answer and options are fine; the question is not).
QUESTION_FAILURES = frozenset({"answer_in_question", "not_self_contained"})
REPAIRABLE = OPTION_FAILURES | QUESTION_FAILURES
KEY_STANDS_OUT = "key_stands_out"
# Failures whose repair prompt lists no options (neither kept nor removed): asked for options unlike the
# ones it has (not in the text, or as long as the key), a small examiner copied the listed ones back
# instead, so no such repair ever added an option. The filters still catch a repeat.
UNLISTED_FAILURES = frozenset({"distractor_closer_to_source", KEY_STANDS_OUT})


class ExamRepair(Payload):
    """One repair call: the fresh distractors, or the rewritten question, the examiner wrote for a draft."""

    KIND: ClassVar[str] = "exam_repair"
    draft_key: str
    failure: str
    attempt: int
    distractors: list[str] = Field(default_factory=list)
    question: str | None = None


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


def leaked_words(d: Draft, failure: str, cfg: Config) -> list[str]:
    """What the rewrite prompt names: the words of the key found in the question (answer_in_question),
    or the phrases that point at an unseen text (not_self_contained)."""
    if failure == "answer_in_question":
        in_question = set(words(d.question))
        return list(dict.fromkeys(w for w in words(d.correct) if w in in_question))
    found = (
        m.group(0) for p in compile_patterns(cfg.filters.not_self_contained) if (m := p.search(d.question))
    )
    return list(dict.fromkeys(found))


def replacements_wanted(d: Draft, failure: str, cfg: Config) -> int:
    """New options to ask for: a fresh set when the key stands out by its length, else one for each
    option the filters removed (at least as many as the question lacks), within `distractors`."""
    if failure == KEY_STANDS_OUT:
        return cfg.distractors
    missing = MIN_DISTRACTORS - len(d.distractors)
    return max(1, min(cfg.distractors, max(missing, len(d.rejected))))


def repair_messages(d: Draft, failure: str, passage: str, n: int) -> list[Message]:
    """The prompt asking for `n` new options for `d`; the options it has and had are listed unless the
    failure is one of `UNLISTED_FAILURES`."""
    listed = failure not in UNLISTED_FAILURES
    return render_messages(
        PROMPT,
        passage=passage,
        question=d.question,
        correct=d.correct,
        kept=d.distractors if listed else [],
        rejected=list(dict.fromkeys(d.rejected))[:6] if listed else [],
        failure=failure,
        correct_words=len(words(d.correct)),
        n=n,
    )


def rewrite_messages(d: Draft, failure: str, passage: str, leaked: list[str]) -> list[Message]:
    """System + one worked rewrite (a user turn on an unrelated passage and the ideal reply) + the real
    request. Without the example, a small examiner tends to hand the question back unchanged."""
    ex = json.loads(render_text(REWRITE_EXAMPLE))
    shot = render_messages(
        REWRITE_PROMPT,
        passage=ex["passage"],
        question=ex["question"],
        correct=ex["correct"],
        distractors=ex["distractors"],
        failure="answer_in_question",
        leaked=ex["leaked"],
    )
    real = render_messages(
        REWRITE_PROMPT,
        passage=passage,
        question=d.question,
        correct=d.correct,
        distractors=d.distractors,
        failure=failure,
        leaked=leaked,
    )
    reply: Message = {"role": "assistant", "content": json.dumps({"question": ex["rewritten"]})}
    return [*shot, reply, real[-1]]


def rewrite_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"question": {"type": "string", "minLength": 8}},
        "required": ["question"],
    }


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


def apply_rewrite(d: Draft, question: str | None) -> None:
    """Give `d` the rewritten question (an empty reply leaves it as it was) and mark it for the filters
    again; its answer and options stay."""
    text = " ".join(str(question or "").split())
    if text and text != d.question:
        d.question = text
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
        temperature, seed = (0.0 if call.attempt == 1 else 0.7), ctx.config.seed + call.attempt
        budget = cfg.generation_max_tokens
        if call.failure in QUESTION_FAILURES:
            messages = rewrite_messages(d, call.failure, call.passage, leaked_words(d, call.failure, cfg))
            c = await examiner.generate(
                messages, json_schema=rewrite_schema(), temperature=temperature, seed=seed, max_tokens=budget
            )
            new = (c.parsed or {}).get("question")
            return ExamRepair(
                draft_key=d.key, failure=call.failure, attempt=call.attempt, question=str(new or "")
            )
        n = replacements_wanted(d, call.failure, cfg)
        messages = repair_messages(d, call.failure, call.passage, n)
        c = await examiner.generate(
            messages, json_schema=repair_schema(n), temperature=temperature, seed=seed, max_tokens=budget
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
            "exam: repairing questions" + (f" (attempt {attempt})" if attempt > 1 else ""),
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
            if o.unit.failure in QUESTION_FAILURES:
                apply_rewrite(o.unit.draft, o.value.question)
            else:
                apply_repair(o.unit.draft, o.value.distractors)
        filter_drafts(drafts, cfg, emb, sources, example_passage)
    asked: Counter[str] = Counter(first_failure.values())
    repaired: Counter[str] = Counter(
        f for d in drafts if (f := first_failure.get(d.key)) is not None and failure_of(d, cfg) is None
    )
    stats.asked, stats.repaired = dict(sorted(asked.items())), dict(sorted(repaired.items()))
    return stats, keys
