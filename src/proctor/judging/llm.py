"""LLM judges: one structured call per answer, binary verdict plus a short reason, and how sure the judge was.

The schema puts `reason` before `verdict`, so a model that writes its JSON in order (and any
grammar-constrained decoder) reasons before it commits to a verdict.

The verdict's probability is read from the reply's token logprobs where the server gives them (OpenAI,
vLLM, llama.cpp — the embedded models do): at the token that spells the verdict, P(correct) is the
softmax of the "correct" and "incorrect" alternatives. It is recorded, never silently used to flip a
verdict; `samples > 1` adds self-consistency (n samples at a temperature above 0, majority verdict, the
agreement recorded), `verdict_only` drops the reason (a few tokens per judgment) and `threshold` decides
"correct" from the probability; all through the one model-call path and its cache (each sample has its
own seed).

A reply that still does not match the schema after the model path's re-asks raises
`proctor.errors.StructuredOutputError`; judges never catch it and never turn it into a score —
callers record it as an error on their item.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate
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

# Verdict only (`verdict_only=True`): no reason, a few tokens; the probability then carries the judge's
# doubt, which a reason written first would have settled before the verdict.
VERDICT_ONLY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"verdict": {"type": "string", "enum": list(VERDICTS)}},
    "required": ["verdict"],
}
VERDICT_ONLY_MAX_TOKENS = 12

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
    """P("correct") at the single-answer judge's verdict, from the top alternatives at its first token.

    The verdict is the reply's last `"verdict": "<value>"` field (`verdict_distributions`); a reply whose
    tokens spell no such field (a bare verdict word) falls back to the last token that spells a verdict.
    Spellings of one verdict (" correct", "Correct") are added up. A verdict missing from the top list is
    given the lowest listed probability — an upper bound, so the result is never more confident than the
    server's numbers allow."""
    readings = verdict_distributions(tokens, VERDICTS)
    if readings:
        return list(readings.values())[-1]["correct"]
    toks = list(tokens or ())
    for i in reversed(range(len(toks))):
        if _word(toks[i].token) in VERDICTS:
            dist = _value_distribution(toks[i:], VERDICTS)
            return None if dist is None else dist["correct"]
    return None


_OBJECT_KEY = re.compile(r'"([^"\\]*)"\s*:\s*\{')


def verdict_distributions(
    tokens: Sequence[TokenLogprob] | None, verdicts: Sequence[str] = VERDICTS, *, field: str = "verdict"
) -> dict[str, dict[str, float]]:
    """The judge's probability of each verdict word at every `"<field>": "<value>"` of a JSON reply, read from
    the reply's token logprobs; keyed by the key of the object that holds the field ("" at the top level,
    e.g. `{"reason": ..., "verdict": ...}`; "A", "B", ... in `{"A": {"reason": ..., "verdict": ...}, ...}`).
    A later field with the same key wins, as in JSON. Empty without logprobs.

    The tokens are joined to give character offsets (so a provider's text that differs from its tokens —
    stripped, or with a multi-byte character split — does not shift them). A field is read only when its
    value is one of `verdicts` (lower-cased, JSON punctuation stripped). The distribution is read at the
    token holding the value's first character, where the verdict words diverge: each top alternative
    counts for the verdict word it spells or begins ("un" for "uncovered", which Qwen2.5 writes as
    "un" + "covered"; spellings added up); the words are renormalised among themselves (other tokens,
    e.g. "wrong", are left out) and a word missing from the list gets the lowest listed probability. Only
    when the chosen token could still begin several verdict words does the reading move on to the next
    token (the words that diverged at the earlier token keep the probability given to them there)."""
    toks = list(tokens or ())
    if not toks:
        return {}
    text = "".join(t.token for t in toks)
    starts = list(accumulate((len(t.token) for t in toks[:-1]), initial=0))
    keys = [(m.end(), m.group(1)) for m in _OBJECT_KEY.finditer(text)]
    out: dict[str, dict[str, float]] = {}
    pattern = re.compile(rf'"{re.escape(field)}"\s*:\s*"(?P<value>[^"\\]*)"')
    for m in pattern.finditer(text):
        if _word(m.group("value")) not in verdicts:
            continue
        i = bisect_right(starts, m.start("value")) - 1
        dist = _value_distribution(toks[i:], verdicts)
        if dist is not None:
            key = next((k for end, k in reversed(keys) if end <= m.start()), "")
            out.pop(key, None)  # a repeated key: the later field wins, and is the later one in order
            out[key] = dist
    return out


def _value_distribution(tokens: Sequence[TokenLogprob], verdicts: Sequence[str]) -> dict[str, float] | None:
    """The distribution over `verdicts` of a value whose first token is `tokens[0]` (see
    `verdict_distributions`); None when the chosen tokens spell no verdict word."""
    mass: dict[str, float] = {}
    live = list(verdicts)  # the words the value written so far can still become
    prefix, path = "", 1.0
    for t in tokens:
        raw = dict(t.top or {})
        raw.setdefault(t.token, t.logprob)
        floor = math.exp(min(raw.values()))
        here: dict[str, float] = {}
        for alt, lp in raw.items():
            word = _spelled(prefix + _word(alt), live)
            if word is not None:
                here[word] = here.get(word, 0.0) + math.exp(lp)
        chosen = prefix + _word(t.token)
        decided = _spelled(chosen, live) is not None
        ahead = [] if decided else [w for w in live if w.startswith(chosen)]
        if not decided and len(ahead) < 2:
            return None  # the value spells no verdict word
        for w in live:
            if w not in ahead:  # diverges at this token
                mass[w] = path * here.get(w, floor)
        if decided:
            total = sum(mass.values())
            return {w: mass[w] / total for w in verdicts}
        live, prefix, path = ahead, chosen, path * math.exp(t.logprob)
    return None


def _spelled(text: str, words: Sequence[str]) -> str | None:
    """The word of `words` that `text` spells or begins (a spelling wins); None when none or several."""
    if text in words:
        return text
    begun = [w for w in words if text and w.startswith(text)]
    return begun[0] if len(begun) == 1 else None


def _word(token: str) -> str:
    """A token without the JSON punctuation and spaces a tokenizer may glue to a verdict word."""
    return token.strip(' \t\r\n"{}[]:,').lower()


OWN_VERDICT = 0.5  # the threshold at which P(correct) gives the judge's own verdict


@dataclass(frozen=True)
class JudgeStyle:
    """How one judge model is asked. `samples > 1`: self-consistency at `temperature`. `verdict_only`: no
    reason, a few tokens. `threshold`: "correct" when P(correct) reaches it (where logprobs are given;
    without them the judge's own verdict stands); 0.5 (`OWN_VERDICT`) is the judge's own verdict."""

    samples: int = 1
    temperature: float = DEFAULT_SAMPLE_TEMPERATURE
    verdict_only: bool = False
    threshold: float | None = None  # None: OWN_VERDICT, unless the caller knows better (guards behind it)


# proctor's default judge style (`judge_panel` defaults): the verdict alone — measured on
# bench/judge_agreement.py's labelled sets with the embedded 1.5B (bench/README.md). Without the reason the
# small judge is less often talked out of a right answer with extra detail. Its threshold is the judge's own
# verdict; `proctor.kit.shared.judges` lowers it where the equivalence guards stand behind the judge.
DEFAULT_STYLE = JudgeStyle(verdict_only=True)


async def _one(
    model: Model, messages: list[Message], style: JudgeStyle, max_tokens: int, temperature: float, seed: int
) -> tuple[str, str, float | None]:
    completion = await model.generate(
        messages,
        temperature=temperature,
        max_tokens=VERDICT_ONLY_MAX_TOKENS if style.verdict_only else max_tokens,
        seed=seed,
        json_schema=VERDICT_ONLY_SCHEMA if style.verdict_only else VERDICT_SCHEMA,
        top_logprobs=TOP_LOGPROBS,
    )
    parsed = completion.parsed
    p = verdict_probability(completion.logprobs)
    threshold = OWN_VERDICT if style.threshold is None else style.threshold
    verdict = str(parsed["verdict"]) if p is None else ("correct" if p >= threshold else "incorrect")
    if style.verdict_only:
        reason = f"verdict only: {parsed['verdict']}" + (f", P(correct) {p:.3f}" if p is not None else "")
    else:
        reason = str(parsed["reason"]).strip()
    return verdict, reason, p


async def _judge(model: Model, prompt: str, max_tokens: int, style: JudgeStyle, **variables: str) -> Verdict:
    messages = render_messages(prompt, verdict_only=style.verdict_only, **variables)
    if style.samples <= 1:
        replies = [await _one(model, messages, style, max_tokens, 0.0, 0)]
    else:
        replies = [
            await _one(model, messages, style, max_tokens, style.temperature, seed)
            for seed in range(style.samples)
        ]
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
    style: JudgeStyle = JudgeStyle(),
) -> Verdict:
    """Is `answer` correct according to `reference`? The reference wins over world knowledge."""
    return await _judge(
        model,
        PROMPT_WITH_REFERENCE,
        max_tokens,
        style,
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
    style: JudgeStyle = JudgeStyle(),
) -> Verdict:
    """Is `answer` correct according to the judge model's own knowledge?"""
    return await _judge(model, PROMPT_WITHOUT_REFERENCE, max_tokens, style, question=question, answer=answer)
