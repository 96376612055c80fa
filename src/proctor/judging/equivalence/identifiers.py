"""Code identifiers are compared exactly: `-n` is not `-N`, `--dry-run` not `--dryrun`, `TBCACHE_CONFIG` not
`tbcache_config`, `max_memory` not `max-memory`. SQuAD normalisation drops case and punctuation, which is
right for prose and wrong here, so `normalised_match` and `contains_reference` also require every word
with inner punctuation (`tight_words`) as written and every identifier with its case, and the guard
`reference_identifier_missing` requires the reference's identifiers.

An identifier (`identifiers`) is a token written in a way prose is not: a command flag (`-n`,
`--dry-run`), an environment variable or constant (`TB_CACHE_CONF`), snake_case (`max_memory`), a dotted
key (`cache.size`, `tls.key_file`), a file path (`/etc/x.toml`), camelCase or CamelCase inside a word
(`maxMemory`, `McDonald`), a code of capitals and digits (`CYP2C19`, `HER2`, `E2210`), capitals and one
lower-case letter other than a plural "s" (`FXIa`, `FXa`: "anti-FXa" is not "anti-FXIa"), or a reference that
is one kebab-case token (`tarnbrook-cache`, its case aside; inside prose "non-empty" is an ordinary
word). Prose words,
acronyms in capitals ("TCP") and hyphenated prose keep case-insensitive matching.
"""

from __future__ import annotations

import re

_FLAG = r"(?<![\w-])--?[A-Za-z][\w-]*"
# A call: a name, dotted perhaps, then "()" ("AcuLink.reconnect()", "flush()"); compared with its case.
_CALL = r"\b[A-Za-z_][\w.]*\w\(\)"
_PATH = r"(?<![\w/])(?:~|\.{1,2})?/[\w.\-]+(?:/[\w.\-]+)*"
_CONSTANT = r"\b[A-Z][A-Z0-9]*_[A-Z0-9_]*[A-Z0-9]\b"
_SNAKE = r"\b[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+\b"
_DOTTED = r"\b[a-z][a-z0-9_]+(?:\.[a-z][a-z0-9_]+)+\b"
_CAMEL = r"\b[A-Za-z]*[a-z][A-Z][A-Za-z0-9]*\b"
_CODE = r"\b(?=[A-Z0-9]*[A-Z])(?=[A-Z0-9]*\d)[A-Z][A-Z0-9]+\b"
# Capitals and one lower-case letter, not a plural "s": an activated factor ("FXIa", "FVIIa").
_CAPS_THEN_LOWER = r"\b[A-Z]{2,}[a-rt-z]\b"
_IDENTIFIER = re.compile(
    "|".join(
        f"(?:{p})" for p in (_CALL, _FLAG, _PATH, _CONSTANT, _SNAKE, _DOTTED, _CAMEL, _CODE, _CAPS_THEN_LOWER)
    )
)
_KEBAB = re.compile(r"\s*`?(?P<id>[a-z][a-z0-9]*(?:-[a-z0-9]+)+)`?\s*\.?\s*")
_BACKTICKED = re.compile(r"`([^`\s]+)`")
# A word with punctuation inside it ("2.10.3", "x86_64", "tarnbrook-cache", "0.0.0.0:7419"); edges trimmed.
_TIGHT = re.compile(r"[^\s,;()\"'“”`]+")
_INNER = re.compile(r"\w[^\w\s]+\w")
_SUBSCRIPTS = str.maketrans("₀₁₂₃₄₅₆₇₈₉", "0123456789")


# A number, then perhaps a unit and a slash, just before a token: the token is that quantity's unit
# ("8 vCPU", "2 g/dL", "0.38 nM").
_AFTER_NUMBER = re.compile(r"\d\s*(?:[µμ]?[A-Za-z]+\s*/\s*)?$")


def is_unit(text: str, start: int, token: str) -> bool:
    """A unit symbol is never an identifier: a token of the unit table ("KiB", "dL", any case), or one
    that directly follows a number ("8 vCPU"), is a quantity's unit, not a code."""
    from proctor.judging.equivalence.units import table

    return token.lower() in table().aliases or _AFTER_NUMBER.search(text[:start]) is not None


def identifiers(text: str) -> list[str]:
    """The identifiers a text writes, in order, each once; unit symbols are none (`is_unit`)."""
    t = text.translate(_SUBSCRIPTS)
    found = [
        m[0].rstrip(".-")
        for m in _IDENTIFIER.finditer(t)
        if m[0][0] in "-/~." or not is_unit(t, m.start(), m[0].rstrip(".-"))
    ]
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


_INITIALS_WORDS = re.compile(r"[A-Za-z][\w'-]*")
# "family 1 member A4", "family 2 subfamily C member 19": a gene code's "1A4", "2C19" in words.
_GENE_MEMBER = re.compile(
    r"\bfamily\s+(?P<family>\d+),?\s+(?:subfamily\s+(?P<sub>[A-Z]),?\s+)?member\s+(?P<member>[A-Z]?\d+)\b",
    re.IGNORECASE,
)
_SKIPPED = frozenset({"of", "the", "and", "for", "to", "in", "on", "a", "an"})


def expanded(answer: str, identifier: str) -> bool:
    """The answer writes an abbreviation out: an acronym of three or more letters, at least half of them
    capitals ("aPTT"), as consecutive words
    whose initials spell its letters ("activated partial thromboplastin time"), or a code of letters and
    digits ("CYP3A4") as its part from the first digit on ("3A4"), written as a word, just after words
    whose first begins with the code's first letter and which hold its other leading letters in order
    ("Cytochrome P450 3A4", "human epidermal growth factor receptor 2" for "HER2"); capitals and a
    lower-case letter ("FXIa") as all but the first letter, after a word with that letter ("factor XIa").
    A gene's full name writes its code's family, subfamily and member in words ("UDP glucuronosyltransferase
    family 1 member A4" for "UGT1A4"; "family 2 subfamily C member 19" for "2C19")."""
    if re.fullmatch(r"[A-Za-z]{3,}", identifier) and 2 * sum(c.isupper() for c in identifier) >= len(
        identifier
    ):
        letters = identifier.lower()
        initials = "".join(w[0].lower() for w in _INITIALS_WORDS.findall(answer))
        # Initials of hyphenated parts count too ("activated partial thromboplastin-time").
        parts = "".join(p[0].lower() for w in _INITIALS_WORDS.findall(answer) for p in w.split("-") if p)
        # Acronyms skip short function words ("upper limit of normal" for "ULN").
        skipping = "".join(w[0].lower() for w in _INITIALS_WORDS.findall(answer) if w.lower() not in _SKIPPED)
        if letters in initials or letters in parts or letters in skipping:
            return True
    # A code from its first digit on ("CYP3A4": "3A4"), or an activated factor after its letter ("FXIa":
    # "XIa", written after "factor").
    answer = _GENE_MEMBER.sub(lambda g: f"{g['family']}{g['sub'] or ''}{g['member']}", answer)
    m = re.fullmatch(r"(?P<lead>[A-Za-z]+)(?P<rest>\d[A-Za-z0-9]*)", identifier) or re.fullmatch(
        r"(?P<lead>[A-Z])(?P<rest>[A-Z]+[a-rt-z])", identifier
    )
    if m is None:
        return False
    lead = m["lead"].lower()
    for found in re.finditer(rf"(?<![\w-]){re.escape(m['rest'])}(?![\w-])", answer, re.IGNORECASE):
        words = re.findall(r"\w+", answer[: found.start()])[-6:]  # "anti-factor XIa": "factor"
        for i in range(len(words)):
            if words[i][0].lower() != lead[0]:
                continue
            it = iter("".join(words[i:]).lower())
            if all(c in it for c in lead):
                return True
    return False


def dotted_tail(answer: str, reference: str, question: str) -> bool:
    """The reference is a dotted identifier whose prefix the question names, and the answer writes its
    last segment ("AT_LEAST_ONCE" for "DeliveryMode.AT_LEAST_ONCE" asked about `DeliveryMode`)."""
    m = re.fullmatch(r"\s*`?(?P<head>[\w.]+)\.(?P<tail>\w+)`?\s*\.?\s*", reference)
    if m is None or not question:
        return False
    head_named = states_identifier(question, m["head"]) or states_identifier(
        question, m["head"].split(".")[-1]
    )
    # The tail alone, not joined to a word by other punctuation ("payments-dlq" is not "payments.dlq").
    alone = re.search(rf"(?<![\w./-]){re.escape(m['tail'])}(?![\w-])", answer) is not None
    return head_named and alone and states_identifier(answer, m["tail"])


# The kinds of identifier an answer can write in another's place: "--replicas" for "--replication-factor".
_KINDS = {
    "flag": re.compile(r"--?[A-Za-z][\w-]*"),
    "constant": re.compile(_CONSTANT),
    "dotted": re.compile(_DOTTED),
}
# A dotted name that is a file ("broker.toml") is no key.
_FILE = re.compile(r".*\.(?:toml|ya?ml|json|conf|cfg|ini|log|txt|xml|properties|sh|py)")


def kind(identifier: str) -> str:
    """ "flag", "constant" (an environment variable) or "dotted" (a key), "" for the other identifiers."""
    if _FILE.fullmatch(identifier):
        return ""
    return next((k for k, p in _KINDS.items() if p.fullmatch(identifier)), "")


def substituted(answer: str, reference: str, question: str = "") -> tuple[str, str] | None:
    """(the reference's identifier, the answer's) when the reference writes a flag, environment
    variable or dotted key the answer does not, and the answer writes another of that kind that neither
    the reference nor the question writes ("--replicas 3" for "--replication-factor 3"): in a command
    or a sentence of any length, another identifier of the kind in its place is another setting."""
    ours = identifiers(reference)
    theirs = [
        i for i in identifiers(answer) if kind(i) and i not in ours and not states_identifier(question, i)
    ]
    for identifier in ours:
        if kind(identifier) and not states_identifier(answer, identifier):
            if question and states_identifier(question, identifier):
                continue
            other = next((i for i in theirs if kind(i) == kind(identifier)), None)
            if other is not None and not aside(reference, identifier):
                return identifier, other
    return None


def aside(reference: str, identifier: str) -> bool:
    """The identifier stands only inside parentheses, after a quantity the reference states outside them
    ("64 KiB (ProducerConfig.setBatchBytes())"): where the value is set, side detail to the answer."""
    outside = re.sub(r"\((?:[^()]|\([^()]*\))+\)", " ", reference)  # not a call's "()"
    return bool(re.search(r"\d", outside)) and identifier not in identifiers(outside)


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


# A word and the abbreviation it is given in parentheses: "a TCP reset (RST)", "time to live (TTL)".
_WORDS_THEN_ABBREVIATION = re.compile(
    r"(?P<words>(?:[A-Za-z][\w-]*\s+){0,4}[A-Za-z][\w-]*)\s*\((?P<abbr>[A-Z]{2,6})\)"
)


def abbreviated(text: str) -> str:
    """The text with each "words (ABBR)" written as "ABBR", where the abbreviation stands for the words
    just before it: their initials spell it ("time to live (TTL)") or the last word begins with its first
    letter and holds its letters in order ("reset (RST)"). Sure: a writer who puts an abbreviation in
    parentheses after words that spell it names one thing twice."""

    def one(m: re.Match[str]) -> str:
        words, abbr = m["words"].split(), m["abbr"]
        for k in range(1, len(words) + 1):
            tail = words[-k:]
            if expanded(" ".join(tail), abbr) or (
                k == 1 and tail[0][0].upper() == abbr[0] and _in_order(abbr.lower(), tail[0].lower())
            ):
                return " ".join([*words[:-k], abbr])
        return m[0]

    return _WORDS_THEN_ABBREVIATION.sub(one, text)


def _in_order(letters: str, word: str) -> bool:
    it = iter(word)
    return all(c in it for c in letters)
