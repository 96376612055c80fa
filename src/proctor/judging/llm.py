"""LLM judges: one structured call per answer, binary verdict plus a short reason.

The schema puts `reason` before `verdict`, so a model that writes its JSON in order (and any
grammar-constrained decoder) reasons before it commits to a verdict.

A reply that still does not match the schema after the model path's re-asks raises
`proctor.errors.StructuredOutputError`; judges never catch it and never turn it into a score —
callers record it as an error on their item.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from proctor.models import Model
from proctor.prompts import prompt_version, render_messages

VERDICTS = ("correct", "incorrect")

VERDICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "reason": {"type": "string", "description": "One or two sentences justifying the verdict."},
        "verdict": {"type": "string", "enum": list(VERDICTS)},
    },
    "required": ["reason", "verdict"],
}

PROMPT_WITH_REFERENCE = "judging/with_reference"
PROMPT_WITHOUT_REFERENCE = "judging/without_reference"
DEFAULT_MAX_TOKENS = 200


@dataclass(frozen=True)
class Verdict:
    """One judgment. `judge` is the judge model's spec; `prompt_version` hashes the prompt wording."""

    verdict: str
    correct: bool
    reason: str
    judge: str
    prompt_version: str


async def _judge(model: Model, prompt: str, max_tokens: int, **variables: str) -> Verdict:
    messages = render_messages(prompt, **variables)
    completion = await model.generate(
        messages, temperature=0.0, max_tokens=max_tokens, json_schema=VERDICT_SCHEMA
    )
    parsed = completion.parsed
    verdict = str(parsed["verdict"])
    return Verdict(
        verdict=verdict,
        correct=verdict == "correct",
        reason=str(parsed["reason"]).strip(),
        judge=model.spec,
        prompt_version=prompt_version(prompt),
    )


async def judge_with_reference(
    model: Model, *, question: str, answer: str, reference: str, max_tokens: int = DEFAULT_MAX_TOKENS
) -> Verdict:
    """Is `answer` correct according to `reference`? The reference wins over world knowledge."""
    return await _judge(
        model, PROMPT_WITH_REFERENCE, max_tokens, question=question, answer=answer, reference=reference
    )


async def judge_without_reference(
    model: Model, *, question: str, answer: str, max_tokens: int = DEFAULT_MAX_TOKENS
) -> Verdict:
    """Is `answer` correct according to the judge model's own knowledge?"""
    return await _judge(model, PROMPT_WITHOUT_REFERENCE, max_tokens, question=question, answer=answer)
