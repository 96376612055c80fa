"""Answer selection for multiple-choice questions: which option did a model pick?

Three methods, chosen per model and recorded on every item (with the reason whenever ``auto`` fell back):

* ``option_loglik`` — score each option's text as a continuation of a plain-text prompt (question, options,
  "Answer:") and pick the highest log-likelihood per token. Needs prompt logprobs: a completions server
  that honours ``echo`` (vLLM, OpenAI's completion models), asked through the one model-call path
  (`Model.continuation_logprob`: cached, retried, budgeted, recorded). Per token rather than per character:
  the pick compares options under one model, so its own tokens are the natural unit, and the mean is the
  log of the geometric-mean token probability (it also turns into ``probs``); the raw sums and lengths are
  kept (``logliks``) for other normalisations.
* ``letter_logprobs`` — ask for a one-token answer and read the probabilities of the option letters from
  that token's top logprobs (works with any chat server that returns generation logprobs, including the
  embedded llama.cpp one, which has no prompt logprobs). The pick is the most probable letter.
* ``generated_letter`` — let the model write a short answer and parse the letter robustly ("B",
  "(B)", "Answer: B", "option B", or the exact text of one option). A reply naming no option is an
  error on its item (cause ``unparseable``), never a silently wrong answer.

``auto`` uses ``option_loglik`` when the model's server returns prompt logprobs (declared by the provider
or probed once per model, the answer cached), else ``letter_logprobs``, and per item falls back to
``generated_letter`` when the reply carries no logprobs or no option letter among the top alternatives.
Asking for ``option_loglik`` from a model known to lack prompt logprobs is a user error before any call.
"""

from __future__ import annotations

import asyncio
import math
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from proctor.constants import LETTERS
from proctor.errors import ModelCallError, StructuredOutputError, UserError
from proctor.models.base import Model
from proctor.models.types import Message, TokenLogprob
from proctor.prompts import render_text

METHODS = ("auto", "letter_logprobs", "generated_letter", "option_loglik")
_STRIP = " \t\n\r*_`'\"([{<>.:)]}"

MAX_OPTIONS = 10  # option letters A..J


@dataclass(frozen=True)
class Selection:
    """The option a model picked, how it was determined, and the evidence."""

    letter: str
    index: int
    method: str  # the method that produced the pick: option_loglik | letter_logprobs | generated_letter
    text: str  # the raw reply (option_loglik: the text of the picked option)
    # letter -> probability, renormalised over the options (option_loglik: softmax of `scores`)
    probs: dict[str, float] | None = None
    letter_mass: float | None = None  # probability mass of the option letters among the top tokens
    fallback: str | None = None  # why `auto` did not use the methods before `method` ("; "-joined)
    usage: dict[str, int] = field(default_factory=dict)
    scores: dict[str, float] | None = None  # option_loglik: letter -> mean log-probability per token
    logliks: dict[str, list[float]] | None = None  # option_loglik: letter -> [logprob sum, tokens, chars]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def letter_of_token(token: str, n_options: int) -> str | None:
    """The option letter a single token stands for ("B", " B", "B.", "(B", "**B"), else None.

    Lower-case letters are not accepted: "a" is far more often the article than option A."""
    core = token.strip(_STRIP)
    if len(core) == 1 and core in LETTERS[:n_options]:
        return core
    return None


def letter_probs(tokens: list[TokenLogprob] | None, n_options: int) -> tuple[dict[str, float], float] | None:
    """Letter probabilities at the first generated token: (renormalised probs, raw letter mass).

    The chosen token is counted too, in case the server left it out of its top list. None when no
    option letter appears among the alternatives."""
    if not tokens:
        return None
    first = tokens[0]
    alternatives = dict(first.top)
    alternatives.setdefault(first.token, first.logprob)
    mass: dict[str, float] = {}
    for tok, lp in alternatives.items():
        letter = letter_of_token(tok, n_options)
        if letter is not None and math.isfinite(lp):
            mass[letter] = mass.get(letter, 0.0) + math.exp(lp)
    total = sum(mass.values())
    if total <= 0.0:
        return None
    probs = {letter: mass.get(letter, 0.0) / total for letter in LETTERS[:n_options]}
    return probs, min(1.0, total)


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"[^\w\s]", " ", text.lower())).strip()


def parse_letter(text: str, choices: list[str]) -> str | None:
    """The option a free-text reply names, or None when it names none (or several) unambiguously."""
    n = len(choices)
    valid = LETTERS[:n]
    t = text.strip()
    if not t:
        return None
    cls = f"[{valid}]"
    # The whole reply is a letter, possibly decorated: "B", "(B)", "B.", "**B**".
    m = re.fullmatch(rf"[\s*_`'\"(\[]*({cls})[\s*_`'\")\].:]*", t)
    if m:
        return m.group(1)
    # "Answer: B", "the correct answer is (B)", "option B", "choice: B".
    m = re.search(rf"\b(?i:answer|option|choice|letter)\s*(?i:is|would be|:)?\s*[*_`'\"(\[]*({cls})\b", t)
    if m:
        return m.group(1)
    # Starts with a letter followed by a delimiter: "B. 1742", "B) 1742", "B: 1742".
    m = re.match(rf"[\s*_`'\"(\[]*({cls})\s*[.):\]]", t)
    if m:
        return m.group(1)
    # A parenthesised letter anywhere: "... so (C)".
    found = set(re.findall(rf"\(({cls})\)", t))
    if len(found) == 1:
        return found.pop()
    # The exact text of exactly one option.
    reply = f" {_norm(t)} "
    hits = [i for i, c in enumerate(choices) if _norm(c) and f" {_norm(c)} " in reply]
    if len(hits) == 1:
        return LETTERS[hits[0]]
    # A single standalone capital letter that is not sentence-initial "A".
    standalone = {x for x in re.findall(rf"(?<![\w'])({cls})(?![\w'])", t)}
    if re.match(r"A\s+[a-z]", t):
        standalone.discard("A")
    if len(standalone) == 1:
        return standalone.pop()
    return None


def check_method(method: str, where: str, model: Model | None = None) -> None:
    """Reject unknown methods, and option_loglik for a model known to lack prompt logprobs, before any
    call is made (servers of unknown ability are probed at the first item)."""
    if method not in METHODS:
        raise UserError(
            f"{where}: unknown answer-selection method '{method}'; use one of {', '.join(METHODS)}."
        )
    if (
        method == "option_loglik"
        and model is not None
        and getattr(model.provider, "supports_prompt_logprobs", None) is False
    ):
        raise UserError(
            f"{where}: option_loglik needs prompt logprobs (/v1/completions with echo), which "
            f"{model.spec} does not return (the embedded llama.cpp server ignores echo). Use `auto` (picks "
            "the best method the server supports) or `letter_logprobs`."
        )


def loglik_prompt_from_messages(messages: list[Message]) -> str:
    """The chat messages as one plain text ending in "Answer:", for callers without their own template."""
    return render_text("candidates/option_loglik.user.j2", messages=messages)


def _usage(*usages: Any) -> dict[str, int]:
    return {
        "prompt_tokens": sum(u.prompt_tokens for u in usages),
        "completion_tokens": sum(u.completion_tokens for u in usages),
    }


async def _option_loglik(model: Model, prompt: str, choices: list[str]) -> Selection:
    """Score every option as a continuation of `prompt` and pick the best mean per-token logprob."""
    letters = LETTERS[: len(choices)]
    scored = await asyncio.gather(*(model.continuation_logprob(prompt, " " + c.strip()) for c in choices))
    scores = {x: sc.per_token for x, sc in zip(letters, scored, strict=True)}
    top = max(scores.values())
    weights = {x: math.exp(v - top) for x, v in scores.items()}
    total = sum(weights.values())
    best = max(letters, key=lambda x: (scores[x], -LETTERS.index(x)))
    return Selection(
        best,
        LETTERS.index(best),
        "option_loglik",
        choices[LETTERS.index(best)],
        probs={x: w / total for x, w in weights.items()},
        usage=_usage(*(sc.usage for sc in scored)),
        scores=scores,
        logliks={x: [sc.logprob_sum, sc.n_tokens, sc.n_chars] for x, sc in zip(letters, scored, strict=True)},
    )


async def select_option(
    model: Model,
    messages: list[Message],
    choices: list[str],
    *,
    method: str = "auto",
    seed: int | None = 0,
    top_logprobs: int = 10,
    generate_max_tokens: int = 24,
    loglik_prompt: str | None = None,
) -> Selection:
    """Ask `model` the question in `messages` and return the option it picked.

    `loglik_prompt` is the plain text option_loglik continues with each option (default: `messages` as
    text, see `loglik_prompt_from_messages`). Raises `StructuredOutputError` (cause ``unparseable``) when
    the reply names no option, `ModelCallError` (cause ``unsupported``) when option_loglik was asked of a
    server without prompt logprobs; transient failures raise `ModelCallError` as usual."""
    check_method(method, "selection")
    n = len(choices)
    if not 2 <= n <= MAX_OPTIONS:
        raise ValueError(f"need 2..{MAX_OPTIONS} options, got {n}")
    fallbacks: list[str] = []
    if method in ("auto", "option_loglik"):
        reason = None if await model.supports_prompt_logprobs() else "the server returns no prompt logprobs"
        if reason is None:
            prompt = loglik_prompt if loglik_prompt is not None else loglik_prompt_from_messages(messages)
            try:
                return await _option_loglik(model, prompt, choices)
            except ModelCallError as e:
                if e.cause != "unsupported" or method == "option_loglik":
                    raise
                reason = f"option_loglik: {e}"
        if method == "option_loglik":
            raise ModelCallError(f"{model.spec}: option_loglik: {reason}", cause="unsupported")
        fallbacks.append(reason)
    if method in ("auto", "letter_logprobs"):
        c = await model.generate(
            messages, temperature=0.0, max_tokens=1, seed=seed, top_logprobs=top_logprobs
        )
        found = letter_probs(c.logprobs, n)
        if found is not None:
            probs, mass = found
            best = max(LETTERS[:n], key=lambda x: (probs[x], -LETTERS.index(x)))
            return Selection(
                best,
                LETTERS.index(best),
                "letter_logprobs",
                c.text,
                probs,
                mass,
                fallback="; ".join(fallbacks) or None,
                usage=_usage(c.usage),
            )
        reason = "no logprobs returned" if not c.logprobs else "no option letter among the top logprobs"
        if method == "letter_logprobs":
            raise StructuredOutputError(
                f"{model.spec}: letter_logprobs: {reason} (reply {c.text[:40]!r})", raw=c.text
            )
        fallbacks.append(reason)
    c = await model.generate(messages, temperature=0.0, max_tokens=generate_max_tokens, seed=seed)
    letter = parse_letter(c.text, choices)
    if letter is None:
        raise StructuredOutputError(f"{model.spec}: the reply names no option: {c.text[:120]!r}", raw=c.text)
    return Selection(
        letter,
        LETTERS.index(letter),
        "generated_letter",
        c.text,
        fallback="; ".join(fallbacks) or None,
        usage=_usage(c.usage),
    )
