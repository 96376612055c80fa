"""Code identifiers are compared exactly: `-n` is not `-N`, `--dry-run` not `--dryrun`, `TBCACHE_CONFIG` not
`tbcache_config`, `max_memory` not `max-memory`. SQuAD normalisation drops case and punctuation, which is
right for prose and wrong here, so `normalised_match` and `contains_reference` also require every word
with inner punctuation (`tight_words`) as written and every identifier with its case, and the guard
`reference_identifier_missing` requires the reference's identifiers.

An identifier (`identifiers`) is a token written in a way prose is not: a command flag (`-n`,
`--dry-run`), an environment variable or constant (`TB_CACHE_CONF`), snake_case (`max_memory`), a dotted
key (`cache.size`, `tls.key_file`), a file path (`/etc/x.toml`), camelCase or CamelCase inside a word
(`maxMemory`, `McDonald`), a code of capitals and digits (`CYP2C19`, `HER2`, `E2210`), or a reference that
is one kebab-case token (`tarnbrook-cache`, its case aside; inside prose "non-empty" is an ordinary
word). Prose words,
acronyms in capitals ("TCP") and hyphenated prose keep case-insensitive matching.
"""

from __future__ import annotations

import re

_FLAG = r"(?<![\w-])--?[A-Za-z][\w-]*"
_PATH = r"(?<![\w/])(?:~|\.{1,2})?/[\w.\-]+(?:/[\w.\-]+)*"
_CONSTANT = r"\b[A-Z][A-Z0-9]*_[A-Z0-9_]*[A-Z0-9]\b"
_SNAKE = r"\b[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+\b"
_DOTTED = r"\b[a-z][a-z0-9_]+(?:\.[a-z][a-z0-9_]+)+\b"
_CAMEL = r"\b[A-Za-z]*[a-z][A-Z][A-Za-z0-9]*\b"
_CODE = r"\b(?=[A-Z0-9]*[A-Z])(?=[A-Z0-9]*\d)[A-Z][A-Z0-9]+\b"
_IDENTIFIER = re.compile(
    "|".join(f"(?:{p})" for p in (_FLAG, _PATH, _CONSTANT, _SNAKE, _DOTTED, _CAMEL, _CODE))
)
_KEBAB = re.compile(r"\s*`?(?P<id>[a-z][a-z0-9]*(?:-[a-z0-9]+)+)`?\s*\.?\s*")
_BACKTICKED = re.compile(r"`([^`\s]+)`")
# A word with punctuation inside it ("2.10.3", "x86_64", "tarnbrook-cache", "0.0.0.0:7419"); edges trimmed.
_TIGHT = re.compile(r"[^\s,;()\"'“”`]+")
_INNER = re.compile(r"\w[^\w\s]+\w")
_SUBSCRIPTS = str.maketrans("₀₁₂₃₄₅₆₇₈₉", "0123456789")


def identifiers(text: str) -> list[str]:
    """The identifiers a text writes, in order, each once."""
    found = [m[0].rstrip(".-") for m in _IDENTIFIER.finditer(text.translate(_SUBSCRIPTS))]
    found += _BACKTICKED.findall(text)
    if (m := _KEBAB.fullmatch(text)) is not None:
        found.append(m["id"])
    return list(dict.fromkeys(f for f in found if f))


def states_identifier(answer: str, identifier: str) -> bool:
    """The answer writes the identifier exactly (case, hyphens, underscores, dots), as a whole token:
    "TBCACHE_CONF" does not state "TBCACHE_CONFIG", "--namespace" does not state "-n"."""
    before = r"(?<![\w-])" if identifier[0] in "-" else r"(?<![\w/])" if identifier[0] == "/" else r"(?<!\w)"
    # A flag or path goes on after a hyphen or slash ("--dry" is not "--dry-run"); a code does not
    # ("HER2-positive" states "HER2").
    after = r"(?![\w]|[-/]\w)" if identifier[0] in "-/" else r"(?!\w)"
    pattern = before + re.escape(identifier) + after
    # A kebab-case word is also prose ("Steam-kettles."): its hyphens count, its case does not.
    flags = re.IGNORECASE if _KEBAB.fullmatch(identifier) else 0
    return re.search(pattern, answer.translate(_SUBSCRIPTS), flags) is not None


def tight_words(text: str) -> list[str]:
    """The words of a text with punctuation inside them, lower case, edges trimmed ("2.10.3", "x86_64")."""
    words = (w.strip(".:!?").lower() for w in _TIGHT.findall(text))
    return [w for w in words if _INNER.search(w)]


def written_as_reference(answer: str, reference: str) -> bool:
    """Whether the answer writes the reference's identifiers exactly and its words with inner punctuation
    as written (case aside for those that are not identifiers): what `normalised_match` and
    `contains_reference` require beyond normalised text."""
    if not all(states_identifier(answer, i) for i in identifiers(reference)):
        return False
    have = set(tight_words(answer))
    if not all(w in have for w in tight_words(reference)):
        return False
    # Nor may the answer join or split what the reference writes as one plain word ("max-memory" for
    # "maxmemory"): its words with inner punctuation must stand in the reference too.
    ref_plain = set(re.findall(r"\w+", reference.lower()))
    return not any(re.sub(r"[^\w]", "", w) in ref_plain for w in have - set(tight_words(reference)))
