"""Version strings are not numbers: "2.1.3" is not "2.10.3", though 2.1 = 2.10 as a decimal. The number
readers (`numbers.number_mentions`, `quantities.unit_text`) blank every version string, so no rule credits
a version by its numeric value; only the exact string counts (`contains_reference`, `normalised_match`),
and the guard `reference_version_missing` requires it.

What is a version: three or more dotted parts ("2.10.3", an address "0.0.0.0"), a "v" before dotted parts
("v2.1"), a series ("2.1.x"), or two parts after a word that says so ("release 2.10", "kernel 5.4"). A
bare "5.4" is a version only where the question asks for one (`asks_for_version`). "v2.1.0" is "2.1.0".
"2.1" and "2.1.0" differ only by trailing zero parts: no rule credits one for the other and the guard does
not veto it either (a trailing ".0" is often the same release, not always): the LLM decides.
"""

from __future__ import annotations

import re

_VERSION = re.compile(
    r"(?<![\w.])(?:v(?=\d))?(?P<v>\d+(?:\.\d+){2,}(?:\.x)?|\d+(?:\.\d+)*\.x|(?<=v)\d+(?:\.\d+)+)"
    r"(?:-[a-z0-9.]+)?(?![\w]|\.\d)",
    re.IGNORECASE,
)
_NAMED = re.compile(
    r"\b(?:versions?|releases?|kernel|series|ver\.?|updates?|upgrade\s+to)\s+v?(?P<v>\d+\.\d+)(?![\w]|\.\d)",
    re.IGNORECASE,
)
_BARE = re.compile(r"\s*v?(?P<v>\d+\.\d+)\s*\.?\s*")
_ASKS_FOR_VERSION = re.compile(r"\b(?:versions?|releases?|kernel)\b", re.IGNORECASE)


def version_spans(text: str) -> list[tuple[int, int, str]]:
    """(start, end, version without its "v") of each version string a text writes."""
    found = {(m.start("v"), m.end("v"), m["v"].lower()) for p in (_VERSION, _NAMED) for m in p.finditer(text)}
    return sorted(found)


def mask_versions(text: str) -> str:
    """The text with its version strings blanked (same length), for the number readers."""
    for start, end, _ in version_spans(text):
        text = text[:start] + " " * (end - start) + text[end:]
    return text


def asks_for_version(question: str) -> bool:
    return bool(_ASKS_FOR_VERSION.search(question))


def versions(text: str, question: str = "") -> list[str]:
    """The version strings a text writes; a bare "5.4" too when the question asks for a version."""
    out = [v for _, _, v in version_spans(text)]
    if not out and question and asks_for_version(question) and (m := _BARE.fullmatch(text)):
        out.append(m["v"])
    return out


_V_BEFORE = re.compile(r"(?<![\w.])v(?=\d+\.\d)", re.IGNORECASE)


def without_v(text: str) -> str:
    """The text with the "v" before each version dropped: "v2.1.0" is "2.1.0"."""
    return _V_BEFORE.sub("", text)


def _parts(version: str) -> list[str]:
    parts = version.split(".")
    while len(parts) > 1 and parts[-1] == "0":
        parts.pop()
    return parts


def states_version(answer: str, version: str) -> bool:
    """The answer writes `version` exactly (with or without a "v"), or the same after trailing ".0" parts
    ("2.1.0" for "2.1"): not another version that shares its digits ("2.1.3" for "2.10.3")."""
    pattern = rf"(?<![\w.])v?{re.escape(version)}(?![\w]|\.\d)"
    if re.search(pattern, answer, re.IGNORECASE):
        return True
    written = [v for _, _, v in version_spans(answer)] + re.findall(r"(?<![\w.])v?(\d+(?:\.\d+)+)", answer)
    return any(_parts(v) == _parts(version) for v in written)
