"""Digits that are not a quantity's number, and numbers written in a notation the plain readers miss.

Not numbers (blanked, same length, before any number is read): a version string (`versions`), an ISO date
("2025-06-30": a date, read by `dates`), a sequence variant ("c.699G>A", "p.Arg233Ter") and a star allele
("SLCO1B3*4", "CYP2C19*2"). Numbers in other notations: a power of ten ("75 × 10⁹/L", "1.2 x 10^9") is
its value, and so is a power written with a caret ("2^16" is 65,536); a "k" or "M" glued to digits
and not followed by a letter or digit ("4k msg/s", "2.5M rows") is thousands or millions ("5m" is
metres or minutes, lower case: not a scale).
"""

from __future__ import annotations

import re

from proctor.judging.equivalence.versions import mask_versions

ISO_DATE = re.compile(r"(?<![\w.-])(?P<y>\d{4})-(?P<m>\d{2})-(?P<d>\d{2})(?![\w-])")
_VARIANT = re.compile(r"(?<![\w.])[cgmnpr]\.[\w>_*+-]*\d[\w>_*+-]*", re.IGNORECASE)
_STAR_ALLELE = re.compile(r"\b[A-Z][A-Z0-9]*\d?[A-Z0-9]*\*\d+[A-Z]?\b")
_SUPERSCRIPTS = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻", "0123456789-")
_NUM = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
POWER_OF_TEN = re.compile(
    rf"(?<![\w.])(?P<num>{_NUM})\s*[×x*·]\s*10\s*(?:\^|\*\*)?\s*(?P<exp>[⁻-]?[\d⁰¹²³⁴⁵⁶⁷⁸⁹]+)"
)
# "2^16", "2**10": a power written with a caret (a power of ten after a "×" is read first).
POWER = re.compile(r"(?<![\w.^*])(?P<base>\d{1,3})\s*(?:\^|\*\*)\s*(?P<exp>\d{1,2})(?![\w.])")
# Not "K" (kelvin, "300K") nor "m" (metres, minutes).
SCALED = re.compile(r"(?<![\w.,])(?P<num>\d+(?:\.\d+)?)(?P<scale>[kM])(?![\w])")
SCALE_SUFFIX = {"k": 1e3, "M": 1e6}


def _blank(text: str, pattern: re.Pattern[str]) -> str:
    return pattern.sub(lambda m: " " * len(m[0]), text)


def mask_codes(text: str) -> str:
    """The text with versions, ISO dates, variants and star alleles blanked (same length)."""
    text = mask_versions(text)
    for pattern in (ISO_DATE, _VARIANT, _STAR_ALLELE):
        text = _blank(text, pattern)
    return text


def power_value(m: re.Match[str]) -> float:
    """The value of a `POWER_OF_TEN` match: "75 × 10⁹" is 7.5e10."""
    return float(m["num"].replace(",", "")) * 10.0 ** int(m["exp"].translate(_SUPERSCRIPTS))


def _power(m: re.Match[str]) -> float:
    return float(m["base"]) ** int(m["exp"])  # at most 999^99: no overflow


def has_power_of_ten(text: str) -> bool:
    return POWER_OF_TEN.search(text) is not None


def special_numbers(text: str) -> tuple[str, list[tuple[int, int, float]]]:
    """(the text with powers of ten and scaled numbers blanked, their (start, end, value))."""
    found = []
    for pattern, value in (
        (POWER_OF_TEN, power_value),
        (POWER, _power),
        (SCALED, lambda m: float(m["num"]) * SCALE_SUFFIX[m["scale"]]),
    ):
        for m in pattern.finditer(text):
            found.append((m.start(), m.end(), value(m)))
        text = _blank(text, pattern)
    return text, found


def written_out(text: str) -> str:
    """Powers of ten and scaled numbers as plain digits ("4k" as "4000"), for the quantity readers."""
    text = POWER_OF_TEN.sub(lambda m: _plain(power_value(m)), text)
    text = POWER.sub(lambda m: _plain(_power(m)), text)
    return SCALED.sub(lambda m: _plain(float(m["num"]) * SCALE_SUFFIX[m["scale"]]), text)


def _plain(value: float) -> str:
    """Digits without an exponent: 7.5e10 as "75000000000", 0.0012 as "0.0012"."""
    return f"{value:.0f}" if value == int(value) else f"{value:.12f}".rstrip("0")


# "1.5 × ULN", "3x MIC", "2 times the ULN": a multiple of a named reference value, not a plain number.
MULTIPLE = re.compile(
    rf"(?<![\w.])(?P<num>{_NUM})\s*(?:[×x*]|times)\s*(?:the\s+)?(?P<of>[A-Z]{{2,}}[A-Za-z0-9]*)\b"
)


def multiples(text: str) -> dict[float, str]:
    """The numbers a text states as multiples of a named value ("≤1.5 × ULN": 1.5 → "ULN"). Such a
    number's unit is the named value: "1.5 mg/dL" is another quantity."""
    return {float(m["num"].replace(",", "")): m["of"] for m in MULTIPLE.finditer(text)}
