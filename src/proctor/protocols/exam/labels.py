"""Question labels: Bloom level (revised taxonomy) and question word.

The examiner labels questions in batches (one call per `label_batch_size` questions); a label it does
not give, or gives outside the allowed set, comes from the rules below, and every question records
where each of its labels came from (``examiner`` or ``rules``).
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from pydantic import BaseModel

from proctor.kit.context import RunContext
from proctor.kit.steps import Payload
from proctor.protocols.exam.exam_file import ExamQuestion

BLOOM_LEVELS = ("remember", "understand", "apply", "analyze", "evaluate", "create")
QUESTION_WORDS = ("what", "which", "how", "why", "when", "where", "who", "other")

# Cue words per level, checked from the highest level down (a question asking to design something is
# "create" even if it also says "what"). Our own lists, after the taxonomy's usual verb tables.
_BLOOM_CUES: dict[str, tuple[str, ...]] = {
    "create": ("design", "devise", "propose a", "draft a", "compose", "construct", "invent", "formulate"),
    "evaluate": (
        "best",
        "most appropriate",
        "most likely",
        "most effective",
        "justify",
        "assess",
        "evaluate",
        "recommend",
        "should",
        "judge",
        "prioriti",
    ),
    "analyze": (
        "compare",
        "contrast",
        "difference",
        "differ",
        "distinguish",
        "relationship",
        "cause",
        "led to",
        "because of",
        "why",
        "reason",
        "analy",
    ),
    "apply": (
        "if a",
        "if an",
        "if the",
        "suppose",
        "would happen",
        "would you",
        "calculate",
        "how many more",
        "how long would",
        "apply",
        "what would",
        "in order to",
    ),
    "understand": (
        "explain",
        "describe",
        "mean",
        "purpose",
        "role of",
        "function of",
        "summar",
        "interpret",
        "main idea",
        "how does",
        "how do",
        "how is",
        "how are",
    ),
}
_WH = re.compile(r"\b(what|which|how|why|when|where|who|whom|whose)\b", re.IGNORECASE)


def rule_question_word(question: str) -> str:
    """The first wh-word of the question ("In which year ..." -> which); `other` when there is none."""
    m = _WH.search(question)
    if not m:
        return "other"
    w = m.group(1).lower()
    return "who" if w in ("whom", "whose") else w


_BLOOM_PATTERNS = {
    level: re.compile(r"\b(?:" + "|".join(re.escape(c.strip()) for c in cues) + ")", re.IGNORECASE)
    for level, cues in _BLOOM_CUES.items()
}


def rule_bloom(question: str) -> str:
    """Bloom level from cue words (matched at word starts), highest level first; plain fact questions
    are `remember`."""
    for level in ("create", "evaluate", "analyze", "apply", "understand"):
        if _BLOOM_PATTERNS[level].search(question):
            return level
    return "remember"


def rule_labels(question: str) -> dict[str, str]:
    return {
        "bloom": rule_bloom(question),
        "question_word": rule_question_word(question),
        "bloom_source": "rules",
        "question_word_source": "rules",
    }


def merge_labels(question: str, examiner: dict[str, Any] | None) -> dict[str, str]:
    """Examiner labels where valid, rules otherwise. A question word the question does not contain is
    rejected (the examiner cannot be right about it)."""
    out = rule_labels(question)
    if not examiner:
        return out
    bloom = str(examiner.get("bloom") or "").strip().lower()
    bloom = {"analyse": "analyze", "remembering": "remember", "understanding": "understand"}.get(bloom, bloom)
    if bloom in BLOOM_LEVELS:
        out["bloom"], out["bloom_source"] = bloom, "examiner"
    word = str(examiner.get("question_word") or "").strip().lower()
    if word == "other":
        plausible = not _WH.search(question)
    else:
        plausible = word in QUESTION_WORDS and bool(re.search(rf"\b{word}\b", question, re.I))
    if plausible:
        out["question_word"], out["question_word_source"] = word, "examiner"
    return out


LABEL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "labels": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "id": {"type": "string"},
                    "bloom": {"type": "string", "enum": list(BLOOM_LEVELS)},
                    "question_word": {"type": "string", "enum": list(QUESTION_WORDS)},
                },
                "required": ["id", "bloom", "question_word"],
            },
        }
    },
    "required": ["labels"],
}


class ExaminerLabel(BaseModel):
    """The labels the examiner gave one question (checked by `merge_labels`)."""

    bloom: Any = None
    question_word: Any = None


class ExamLabels(Payload):
    """The examiner's labels for one batch of questions, by question id."""

    KIND: ClassVar[str] = "exam_labels"
    labels: dict[str, ExaminerLabel]
    prompt_version: str


async def label_exam(
    ctx: RunContext[Any], exam: list[ExamQuestion], *, use_examiner: bool, batch_size: int
) -> dict[str, int]:
    """Set `bloom`, `question_word` (and their `_source`) on every question; returns label counts by source.

    Examiner batches are items (`exam_labels`, their unit id the batch's questions), so resumes and
    re-runs repeat no call; a failed or unparseable batch leaves its questions to the rules."""
    from proctor.prompts import prompt_version, render_messages

    found: dict[str, ExaminerLabel] = {}
    if use_examiner and exam:
        examiner = ctx.role("examiner")
        version = prompt_version("exam/labels")
        batches = [exam[i : i + batch_size] for i in range(0, len(exam), batch_size)]

        async def label(batch: list[ExamQuestion]) -> ExamLabels:
            shown = [{"id": str(i + 1), "question": q.question} for i, q in enumerate(batch)]
            c = await examiner.generate(
                render_messages("exam/labels", questions=shown),
                json_schema=LABEL_SCHEMA,
                temperature=0.0,
                seed=ctx.config.seed,
                max_tokens=40 * len(batch) + 40,
            )
            labels: dict[str, ExaminerLabel] = {}
            for pos, lab in enumerate(c.parsed["labels"]):
                ref = str(lab.get("id", "")).strip().strip("[]")
                i = int(ref) - 1 if ref.isdigit() else pos
                if 0 <= i < len(batch) and batch[i].id not in labels:
                    labels[batch[i].id] = ExaminerLabel(
                        bloom=lab.get("bloom"), question_word=lab.get("question_word")
                    )
            return ExamLabels(labels=labels, prompt_version=version)

        outcomes = await ctx.map(
            "labelling questions",
            batches,
            label,
            unit_id=lambda b: [(q.id, q.question) for q in b],
            role="examiner",
            output=ExamLabels,
            context=lambda b: {"labels": {}},
        )
        for o in outcomes:
            if o.value is not None:
                found.update(o.value.labels)
    counts: dict[str, int] = {
        "bloom_examiner": 0,
        "bloom_rules": 0,
        "question_word_examiner": 0,
        "question_word_rules": 0,
    }
    for q in exam:
        given = found.get(q.id)
        lab = merge_labels(q.question, given.model_dump() if given else None)
        q.bloom, q.question_word = lab["bloom"], lab["question_word"]
        q.bloom_source, q.question_word_source = lab["bloom_source"], lab["question_word_source"]
        counts[f"bloom_{lab['bloom_source']}"] += 1
        counts[f"question_word_{lab['question_word_source']}"] += 1
    return counts
