"""Answer selection for multiple-choice questions: which option did a model pick?

Three methods exist in the literature; proctor implements the two that work through chat endpoints and
records on every item which one produced the answer:

* ``letter_logprobs`` — ask for a one-token answer and read the probabilities of the option letters from
  that token's top logprobs (works with any chat server that returns generation logprobs, including the
  embedded llama.cpp one). The pick is the most probable letter; the letter distribution is kept.
* ``generated_letter`` — let the model write a short answer and parse the letter robustly ("B",
  "(B)", "Answer: B", "option B", or the exact text of one option). A reply naming no option is an
  error on its item (cause ``unparseable``), never a silently wrong answer.
* ``option_loglik`` — the length-normalised log-likelihood of each option as a continuation (used by
  the method's paper) needs prompt logprobs (``/v1/completions`` with ``echo``), which OpenAI-compatible
  chat servers do not return and proctor's single model-call path does not request. It is not
  supported; asking for it is a user error.

``auto`` is ``letter_logprobs`` with a per-item fallback to ``generated_letter`` when the reply carries
no logprobs or no option letter among the top alternatives.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from proctor.errors import StructuredOutputError, UserError
from proctor.models.base import Model
from proctor.models.types import Message, TokenLogprob

LETTERS = "ABCDEFGHIJ"
METHODS = ("auto", "letter_logprobs", "generated_letter", "option_loglik")
_STRIP = " \t\n\r*_`'\"([{<>.:)]}"


@dataclass(frozen=True)
class Selection:
    """The option a model picked, how it was determined, and the evidence."""

    letter: str
    index: int
    method: str  # the method that produced the pick: letter_logprobs | generated_letter
    text: str  # the raw reply
    probs: dict[str, float] | None = None  # letter -> probability, renormalised over the option letters
    letter_mass: float | None = None  # probability mass of the option letters among the top tokens
    fallback: str | None = None  # why `auto` fell back to generated_letter
    usage: dict[str, int] = field(default_factory=dict)

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


def check_method(method: str, where: str) -> None:
    """Reject unknown or unsupported selection methods before any call is made."""
    if method not in METHODS:
        raise UserError(
            f"{where}: unknown answer-selection method '{method}'; use one of {', '.join(METHODS)}."
        )
    if method == "option_loglik":
        raise UserError(
            f"{where}: option_loglik needs prompt logprobs (/v1/completions with echo), which chat "
            "servers such as the embedded llama.cpp one and OpenAI's chat API do not return. Use "
            "`letter_logprobs` (reads the option letters' probabilities from a one-token answer) or `auto`."
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
) -> Selection:
    """Ask `model` the question in `messages` and return the option it picked.

    Raises `StructuredOutputError` (cause ``unparseable``) when the reply names no option; transient
    failures raise `ModelCallError` from the model path as usual."""
    check_method(method, "selection")
    n = len(choices)
    if not 2 <= n <= len(LETTERS):
        raise ValueError(f"need 2..{len(LETTERS)} options, got {n}")
    fallback = None
    if method in ("auto", "letter_logprobs"):
        c = await model.generate(
            messages, temperature=0.0, max_tokens=1, seed=seed, top_logprobs=top_logprobs
        )
        usage = {"prompt_tokens": c.usage.prompt_tokens, "completion_tokens": c.usage.completion_tokens}
        found = letter_probs(c.logprobs, n)
        if found is not None:
            probs, mass = found
            best = max(LETTERS[:n], key=lambda x: (probs[x], -LETTERS.index(x)))
            return Selection(best, LETTERS.index(best), "letter_logprobs", c.text, probs, mass, usage=usage)
        fallback = "no logprobs returned" if not c.logprobs else "no option letter among the top logprobs"
        if method == "letter_logprobs":
            raise StructuredOutputError(
                f"{model.spec}: letter_logprobs: {fallback} (reply {c.text[:40]!r})", raw=c.text
            )
    c = await model.generate(messages, temperature=0.0, max_tokens=generate_max_tokens, seed=seed)
    usage = {"prompt_tokens": c.usage.prompt_tokens, "completion_tokens": c.usage.completion_tokens}
    letter = parse_letter(c.text, choices)
    if letter is None:
        raise StructuredOutputError(f"{model.spec}: the reply names no option: {c.text[:120]!r}", raw=c.text)
    return Selection(
        letter, LETTERS.index(letter), "generated_letter", c.text, fallback=fallback, usage=usage
    )
