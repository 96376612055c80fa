"""Reading quantities: a number (digits, words, fractions, "one in four") with its unit from the unit table,
spans written in several units, and whether two quantities are the same after conversion."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from proctor.judging.equivalence.codes import mask_codes, written_out
from proctor.judging.equivalence.numbers import (
    FRACTIONS,
    NOT_A_QUANTITY,
    NUM,
    NUMBER_WORD,
    NUMBER_WORDS,
    SCALES,
    compounds_as_digits,
    half_last_place,
    number,
    stated_numbers,
)
from proctor.judging.equivalence.units import DEFAULT_TOLERANCE, table


@dataclass(frozen=True)
class Quantity:
    value: float
    unit: str | None  # a unit table symbol; "share" for fractions and percentages; "mg/kg" for a ratio
    written: str = field(default="", compare=False)  # the unit as written ("m" or "metres")


# How far two quantities in different units may differ after conversion, where the unit table says no
# other (`units.TOLERANCE`): writers round converted values ("340 km" is 211.3 miles, written "211 miles").
CONVERSION_TOLERANCE = DEFAULT_TOLERANCE
# Numbers written as an idiom, read after the units.
_IDIOMS = [
    (re.compile(r"\bhalf\s+a\s+dozen\b"), " 6 "),
    (re.compile(r"\bbiennial(?:ly)?\b"), " every 2 years"),
    (re.compile(r"\btriennial(?:ly)?\b"), " every 3 years"),
    (re.compile(r"\bfortnightly\b"), " once a fortnight"),
    # "Halve all doses": a half of what was, as "reduce by 50%" states it (a share; the direction is a
    # contrast of `qualifiers`).
    (re.compile(r"\bhalv(?:e|es|ed|ing)\b"), "half"),
    # "5 consecutive days", "3 more hours": a word between a number and its unit that counts no other
    # thing (else "5 consecutive weeks" reads as the bare count of "5 consecutive days").
    (
        re.compile(
            r"(?<=\d)(\s+)(?:consecutive|successive|straight|additional|further|extra|more|full)\s+(?=[a-zµμ])"
        ),
        r"\1",
    ),
]


# "0.38 nM", "5 mM": molar concentrations, read before lower case ("mm" is millimetres, "pm" p.m.).
_MOLAR = re.compile(r"(?<=\d)(\s*)([nµμpm]?)M\b")
# "180 Mb", "1 Gb/s": a capital prefix before a lower-case "b" is bits (a "B" is bytes), read before lower
# case.
_BITS = re.compile(r"(?<=\d)(\s*)([KMGT])b\b")


_RANGE_UNIT = re.compile(rf"(?<![\w.])({NUM})(\s*(?:[–—]|to)\s*)({NUM})\s*(°[cf]|[µμ]?[a-z%]+)(?![\w/])")
_UNIT_IN_PARENTHESES = re.compile(r"(\d)\s*\(\s*([a-zµμ°%]+)\s*\)")


def unit_text(text: str) -> str:
    """Lower case, codes blanked (versions, ISO dates, variants: `codes`), "4k" and "75 × 10⁹" as digits,
    molar units as amounts per litre ("0.38 nM" as "0.38 nmol/l"), "Mb" as megabits, "per cent" as
    "percent", "twenty-five" as "25", multi-word units as one token, number-unit hyphens as spaces, a unit
    in parentheses after a number as its unit ("6 (hours)" as "6 hours"), a range's unit on both ends
    ("20–25 °C" as "20 °c–25 °c")."""
    units = table()
    t = _MOLAR.sub(lambda m: f"{m[1]}{m[2]}mol/l", written_out(mask_codes(text)))
    t = _BITS.sub(lambda m: f"{m[1]}{m[2]}bit", t)
    t = t.lower().replace("per cent", "percent")
    # A unit named alone in parentheses after a number is that number's unit ("6 (hours)").
    t = _UNIT_IN_PARENTHESES.sub(lambda m: f"{m[1]} {m[2]}" if m[2] in units.aliases else m[0], t)
    t = units.hyphenated.sub(" ", compounds_as_digits(t))
    for pattern, unit in [*units.phrases, *_IDIOMS]:
        t = pattern.sub(unit, t)
    # A range writes its unit once, after its upper end ("20–25 °c"): the lower end has it too.
    return _RANGE_UNIT.sub(
        lambda m: f"{m[1]} {m[4]}{m[2]}{m[3]} {m[4]}" if m[4] in units.aliases else m[0], t
    )


QUANTITY = re.compile(
    rf"(?<![a-z_\d])(?P<num>{NUM})\s*(?P<scale>thousand|million|billion)?\s*"
    r"(?P<unit>°[cf]|%|per cent|[a-z]+2\b|[µμ]?[a-z]+)?"
    # A ratio unit: "mg/kg", "mmol/l", "mg per kg" (a "per day" was read as a rate before: `units.rate`).
    r"(?P<per>(?:\s*/\s*[µμ]?[a-z]+\d?)+|\s+per\s+(?!cent\b)[a-z]+)?",
    re.IGNORECASE,
)
# "between 85 and 140": a range, no commitment to either end.
RANGE = re.compile(
    rf"\bbetween\s+(?:{NUM}|{NUMBER_WORD})\b.{{0,20}}?\band\s+(?:{NUM}|{NUMBER_WORD})\b", re.IGNORECASE
)
# A range as a reference writes it: "5–10 mg", "10 to 20", "from 5 to 10" (also "between 5 and 10").
WRITTEN_RANGE = re.compile(rf"(?:{NUM})\s*(?:[-–—]|to)\s*(?:{NUM})\b|{RANGE.pattern}", re.IGNORECASE)
# "one in four", "seven pieces in ten", "3 out of 5" (a lookahead: "about one in four" finds "one in four").
_IN = re.compile(
    r"(?=\b(?P<full>(?P<a>\w+)(?:\s+(?P<what>[a-z]+))?\s+(?:in|out of)\s+(?P<b>\w+))\b)", re.IGNORECASE
)
_SPAN_JOIN = re.compile(r"\s*,?\s*(?:and\s+)?")


def _unit(word: str | None) -> str | None:
    return table().aliases.get((word or "").lower())


def _read(m: re.Match[str]) -> Quantity:
    """The quantity a `QUANTITY` match states: a share for "%", a ratio unit ("mg/kg": each part its
    symbol, or the word when the table has none) with "/" or "per". A time below the line is dropped, as
    `units.rate` drops "a year" ("10 mg/day" is "10 mg"; the qualifier guard tells "per day" from "per
    week")."""
    value = float(m["num"].replace(",", "")) * SCALES.get((m["scale"] or "").lower(), 1.0)
    unit = _unit(m["unit"])
    if m["per"] and m["unit"] and m["unit"] != "%":
        words = re.findall(r"[µμ]?[a-z]+\d?", m["per"].lower())
        measures = table().measures
        below = [
            u
            for w in (words[1:] if words[0] == "per" else words)
            if measures.get(u := _unit(w) or w) != "time"
        ]
        if below:
            return Quantity(value, "/".join([_unit(m["unit"]) or m["unit"].lower(), *below]), m["unit"])
    return Quantity(value / 100.0, "share") if unit == "%" else Quantity(value, unit, m["unit"] or "")


def _blank(t: str, start: int, end: int) -> str:
    """The text with [start, end) spaced out: later patterns do not read it again, positions stay."""
    return t[:start] + " " * (end - start) + t[end:]


def _with_half(m: re.Match[str]) -> str:
    """ "nine and a half hours" as "9.5 hours", padded to the same length."""
    whole = 1.0 if m["u1"] else (number(m["n"].replace(",", "")) or 0.0)
    return f"{whole + 0.5:g} {m['u1'] or m['u']}".ljust(len(m[0]))


def _span_chains(t: str) -> list[tuple[int, int, float]]:
    """(start, end, seconds) of each span written in two or more units, largest first."""
    seconds = table().span_seconds
    parts = [
        (m.start(), m.end(), number(m["n"]) or 1.0, seconds[m["u"]]) for m in table().span_part.finditer(t)
    ]
    chains: list[tuple[int, int, float]] = []
    i = 0
    while i < len(parts):
        j = i
        while (
            j + 1 < len(parts)
            and _SPAN_JOIN.fullmatch(t[parts[j][1] : parts[j + 1][0]])
            and parts[j + 1][3] < parts[j][3]
        ):
            j += 1
        if j > i:
            chains.append((parts[i][0], parts[j][1], sum(n * unit for _, _, n, unit in parts[i : j + 1])))
        i = j + 1
    return chains


def quantities(text: str) -> list[Quantity]:
    """The quantities a text states, in the order it states them: "one in four", fractions, number words,
    digits with scale and unit, spans in several units ("a day and seven hours" = 31 h)."""
    units = table()
    t = units.rate.sub(lambda m: m["unit"] + " " * len(m["per"]), unit_text(text))
    t = units.and_a_half.sub(_with_half, t)
    found: list[tuple[int, Quantity]] = []
    for start, end, secs in _span_chains(t):
        found.append((start, Quantity(secs, "s")))
        t = _blank(t, start, end)
    for m in units.every_other.finditer(t):
        found.append((m.start(), Quantity(2.0, _unit(m["unit"]))))
        t = _blank(t, m.start(), m.end())
    for m in units.part_of_unit.finditer(t):
        found.append((m.start(), Quantity(FRACTIONS[m["frac"]] if m["frac"] else 1.0, _unit(m["unit"]))))
        t = _blank(t, m.start(), m.end())
    for m in list(_IN.finditer(t)):
        a, b = number(m["a"]), number(m["b"])
        if a is not None and b and (m["what"] is None or number(m["what"]) is None):
            found.append((m.start(), Quantity(a / b, "share")))
            t = _blank(t, m.start("full"), m.end("full"))
    for phrase, v in sorted(FRACTIONS.items(), key=lambda kv: -len(kv[0])):
        for m in re.finditer(rf"\b{phrase}\b", t):
            found.append((m.start(), Quantity(v, "share")))
            t = _blank(t, m.start(), m.end())
    for m in QUANTITY.finditer(t):
        found.append((m.start(), _read(m)))
    for word, v in NUMBER_WORDS.items():
        for m in re.finditer(rf"\b{word}\b(?:\s+(?P<unit>[a-z%]+))?", t):
            unit = _unit(m["unit"])
            found.append(
                (m.start(), Quantity(v / 100.0, "share") if unit == "%" else Quantity(float(v), unit))
            )
    return [q for _, q in sorted(found, key=lambda x: x[0])]


def all_numbers(text: str) -> set[float]:
    """Every value a text states, in every form the rules read (a share also as its percentage)."""
    out = stated_numbers(text)
    for q in quantities(text):
        out.add(round(q.value, 6))
        if q.unit == "share":
            out.add(round(q.value * 100, 6))
    return out


_A_NUMBER_WORD = re.compile(rf"\b(?P<w>{NUMBER_WORD})\b(?:\s+(?P<unit>[a-z%]+))?")
_COMPOUND_BEFORE = re.compile(rf"(?:\b(?:{NUMBER_WORD})(?:\s+and)?\s+|-)$")
_COMPOUND_AFTER = re.compile(rf"^(?:-|\s+(?:and\s+)?(?:{NUMBER_WORD}|thousand|million|billion)\b)")


def _lone_number_words(t: str) -> list[Quantity]:
    """Number words on their own ("two skell", "every five years"), not parts of "thirty-eight" or "nine
    hundred and sixty", each with the known unit that follows it."""
    out = []
    for m in _A_NUMBER_WORD.finditer(t):
        word_end = m.start() + len(m["w"])
        if _COMPOUND_BEFORE.search(t[: m.start()]) or _COMPOUND_AFTER.search(t[word_end:]):
            continue
        if m["w"] not in NOT_A_QUANTITY:
            out.append(Quantity(float(NUMBER_WORDS[m["w"]]), _unit(m["unit"])))
    return out


def plain_quantities(text: str) -> list[Quantity]:
    """Quantities written with digits, or as one number word on its own, each with its unit (None when no
    known unit follows). Compound number words are left out: the rules do not read them."""
    t = unit_text(text)
    out = []
    for m in QUANTITY.finditer(t):
        q = _read(m)
        out.append(Quantity(q.value * 100.0, "%") if q.unit == "share" else q)
    return out + _lone_number_words(t)


def answer_dimensions(answer: str) -> set[str]:
    """The dimensions an answer speaks of in any form: a unit after a number, or a unit word alone."""
    measures = table().measures
    stated = plain_quantities(answer)
    found = {d for q in stated if (d := measures.get(q.unit or ""))}
    found |= {"time" for q in stated if q.written.lower() == "m"}  # "5m" may be five minutes
    low = answer.lower()
    found |= {d for d, pattern in table().dimension_words.items() if pattern.search(low)}
    return found


def ratio_unit(unit: str | None) -> tuple[str, float] | None:
    """A ratio unit whose two parts convert ("ng/ml", "nmol/l") as ("mass/volume", its factor to the base
    units), else None."""
    num, _, den = (unit or "").partition("/")
    convert = table().convert
    if not den or num not in convert or den not in convert:
        return None
    (dim_n, f_n), (dim_d, f_d) = convert[num], convert[den]
    return f"{dim_n}/{dim_d}", f_n / f_d


def minutes_if_time(q: Quantity, other: Quantity) -> Quantity:
    """ "5m" is metres, except beside a time: then minutes, as in configuration files ("5m" for "300s")."""
    if (
        q.unit == "m"
        and q.written.lower() == "m"
        and table().convert.get(other.unit or "", ("",))[0] == "time"
    ):
        return Quantity(q.value, "min", "m")
    return q


def same(a: Quantity, b: Quantity) -> bool:
    """The same quantity: equal, or equal after converting between units of one dimension (within the
    dimension's tolerance, `units.TOLERANCE`: none for data sizes), or a temperature converted between °C
    and °F and rounded as written. A ratio unit ("mg/kg") is the same only with the same denominator."""
    a, b = minutes_if_time(a, b), minutes_if_time(b, a)
    if "/" in (a.unit or "") or "/" in (b.unit or ""):
        if a.unit is None or b.unit is None:
            return abs(a.value - b.value) <= 1e-6 * max(1.0, abs(b.value))
        (num_a, _, den_a), (num_b, _, den_b) = a.unit.partition("/"), b.unit.partition("/")
        if den_a != den_b and (ratio_a := ratio_unit(a.unit)) and (ratio_b := ratio_unit(b.unit)):
            # "2 g/dL" = "20 g/L": numerator and denominator each convert within their dimension.
            (dim_a, fa), (dim_b, fb) = ratio_a, ratio_b
            x, y = a.value * fa, b.value * fb
            return dim_a == dim_b and abs(x - y) <= CONVERSION_TOLERANCE * max(abs(x), abs(y))
        return den_a == den_b and bool(den_a) and same(Quantity(a.value, num_a), Quantity(b.value, num_b))
    if {a.unit, b.unit} == {"°c", "°f"}:
        # A converted temperature, rounded as the answer writes it ("about 2,590 °F" for 1,420 °C, which
        # is 2,588 °F): half its last written place, and never less than 0.3 °C.
        c = [q.value if q.unit == "°c" else (q.value - 32.0) * 5.0 / 9.0 for q in (a, b)]
        # Rounding is capped at the 2 % other conversions allow ("about 200 °F" is not 100 °C).
        scale = 5.0 / 9.0 if a.unit == "°f" else 1.0
        place = min(half_last_place(a.value), CONVERSION_TOLERANCE * abs(a.value)) * scale
        return abs(c[0] - c[1]) <= max(0.3, place)
    convert = table().convert
    if a.unit != b.unit and a.unit in convert and b.unit in convert:
        (dim_a, fa), (dim_b, fb) = convert[a.unit], convert[b.unit]
        x, y = a.value * fa, b.value * fb
        return dim_a == dim_b and abs(x - y) <= table().tolerance(dim_a) * max(abs(x), abs(y))
    if a.unit != b.unit and not (a.unit is None or b.unit is None):
        return False
    if (a.unit == "share") != (b.unit == "share"):
        return False
    return abs(a.value - b.value) <= 1e-6 * max(1.0, abs(b.value))
