"""LLM judges: one structured call per answer, binary verdict plus a short reason, and how sure the judge was.

The schema puts `reason` before `verdict`, so a model that writes its JSON in order (and any
grammar-constrained decoder) reasons before it commits to a verdict.

The verdict's probability is read from the reply's token logprobs where the server gives them (OpenAI,
vLLM, llama.cpp — the embedded models do): at the token that spells the verdict, P(correct) is the
softmax of the "correct" and "incorrect" alternatives. It is recorded, never silently used to flip a
verdict; `samples > 1` adds self-consistency (n samples at a temperature above 0, majority verdict, the
agreement recorded), all through the one model-call path and its cache (each sample has its own seed).

A reply that still does not match the schema after the model path's re-asks raises
`proctor.errors.StructuredOutputError`; judges never catch it and never turn it into a score —
callers record it as an error on their item.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from proctor.models import Message, Model, TokenLogprob
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
# Alternatives asked for at each token: enough to hold both verdict words at the verdict position.
TOP_LOGPROBS = 5
DEFAULT_SAMPLE_TEMPERATURE = 0.7


@dataclass(frozen=True)
class Verdict:
    """One judgment. `judge` is the judge model's spec; `prompt_version` hashes the prompt wording.

    `p_correct` is the judge's probability of "correct" (from logprobs; the mean over samples), None when
    the server gives no logprobs. `samples` is how many replies were drawn and `agreement` the share that
    gave the majority verdict (1.0 for a single reply)."""

    verdict: str
    correct: bool
    reason: str
    judge: str
    prompt_version: str
    p_correct: float | None = None
    samples: int = 1
    agreement: float = 1.0


def verdict_probability(tokens: Sequence[TokenLogprob] | None) -> float | None:
    """P("correct") at the last token that spells a verdict, from its top alternatives.

    The two verdicts are single tokens for common tokenizers; spellings of one verdict (" correct",
    "Correct") are added up. A verdict missing from the top list is given the lowest listed probability —
    an upper bound, so the result is never more confident than the server's numbers allow."""
    for t in reversed(tokens or ()):
        if _word(t.token) not in VERDICTS:
            continue
        raw = dict(t.top or {})
        raw.setdefault(t.token, t.logprob)
        floor = min(raw.values())
        mass = {w: sum(math.exp(v) for k, v in raw.items() if _word(k) == w) for w in VERDICTS}
        pc, pi = (mass[w] or math.exp(floor) for w in VERDICTS)
        return pc / (pc + pi)
    return None


def _word(token: str) -> str:
    """A token without the JSON punctuation and spaces a tokenizer may glue to a verdict word."""
    return token.strip(' \t\n"{}:,').lower()


async def _one(
    model: Model, messages: list[Message], max_tokens: int, temperature: float, seed: int
) -> tuple[str, str, float | None]:
    completion = await model.generate(
        messages,
        temperature=temperature,
        max_tokens=max_tokens,
        seed=seed,
        json_schema=VERDICT_SCHEMA,
        top_logprobs=TOP_LOGPROBS,
    )
    parsed = completion.parsed
    return str(parsed["verdict"]), str(parsed["reason"]).strip(), verdict_probability(completion.logprobs)


async def _judge(
    model: Model, prompt: str, max_tokens: int, samples: int, temperature: float, **variables: str
) -> Verdict:
    messages = render_messages(prompt, **variables)
    if samples <= 1:
        replies = [await _one(model, messages, max_tokens, 0.0, 0)]
    else:
        replies = [await _one(model, messages, max_tokens, temperature, seed) for seed in range(samples)]
    n_correct = sum(1 for v, _, _ in replies if v == "correct")
    # A tie is not a majority for "correct": the judge was not sure.
    verdict = "correct" if n_correct * 2 > len(replies) else "incorrect"
    reason = next(r for v, r, _ in replies if v == verdict)
    probs = [p for _, _, p in replies if p is not None]
    return Verdict(
        verdict=verdict,
        correct=verdict == "correct",
        reason=reason,
        judge=model.spec,
        prompt_version=prompt_version(prompt),
        p_correct=round(sum(probs) / len(probs), 4) if len(probs) == len(replies) else None,
        samples=len(replies),
        agreement=round(max(n_correct, len(replies) - n_correct) / len(replies), 4),
    )


async def judge_with_reference(
    model: Model,
    *,
    question: str,
    answer: str,
    reference: str,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    samples: int = 1,
    temperature: float = DEFAULT_SAMPLE_TEMPERATURE,
) -> Verdict:
    """Is `answer` correct according to `reference`? The reference wins over world knowledge."""
    return await _judge(
        model,
        PROMPT_WITH_REFERENCE,
        max_tokens,
        samples,
        temperature,
        question=question,
        answer=answer,
        reference=reference,
    )


async def judge_without_reference(
    model: Model,
    *,
    question: str,
    answer: str,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    samples: int = 1,
    temperature: float = DEFAULT_SAMPLE_TEMPERATURE,
) -> Verdict:
    """Is `answer` correct according to the judge model's own knowledge?"""
    return await _judge(
        model, PROMPT_WITHOUT_REFERENCE, max_tokens, samples, temperature, question=question, answer=answer
    )
