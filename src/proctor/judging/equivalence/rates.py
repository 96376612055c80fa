"""How often something happens: dose frequencies ("every 8 hours", "q8h", "three times a day", "twice
daily", "bid") and counted rates ("600 requests per minute", "10 msg/s"), each read as events per second.

Two texts that state the same rate in other words ("twice daily" for "every 12 hours", "10 requests per
second" for "600 requests per minute") state one fact: the rules compare what is left once the agreeing
rates are blanked, and the qualifier guard does not take "per minute" against "per second" for a
contrast there. Two texts that each state rates, none of them equal, state different facts.

What it is sure of: a count of events over a span is exactly that rate ("every 8 hours" is three a day;
"q8h" is the clinical shorthand for it). A quantity in a unit ("500 mg per day", "41 cm a year") is no
counted rate: it is a dose or a speed, read by `quantities`. A bare "daily" is once a day.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from proctor.judging.equivalence.codes import written_out
from proctor.judging.equivalence.numbers import NUM, NUMBER_WORD, number
from proctor.judging.equivalence.units import table

# The spans a rate is counted over, with their length in seconds.
_SPANS = {
    "second": 1.0, "sec": 1.0, "s": 1.0, "minute": 60.0, "min": 60.0, "hour": 3600.0, "hr": 3600.0,
    "h": 3600.0, "day": 86400.0, "d": 86400.0, "week": 604800.0,
}  # fmt: skip
_ADVERBS = {"hourly": 3600.0, "daily": 86400.0, "nightly": 86400.0, "weekly": 604800.0}
_SPAN = r"(?P<span>seconds?|secs?|minutes?|mins?|hours?|hrs?|h|days?|d|weeks?|s)"
_COUNT = rf"(?P<n>{NUM}|{NUMBER_WORD}|once|twice|thrice)"
_TIMES = {"once": 1.0, "twice": 2.0, "thrice": 3.0}
_ABBREVIATED = {"qd": 1.0, "od": 1.0, "bid": 2.0, "tid": 3.0, "qid": 4.0}
# Order matters: each match is blanked before the next pattern reads the text.
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    # "q8h", "q 12 h", "q24h": every N hours.
    ("every", re.compile(r"\bq\s?(?P<n>\d+)\s?h\b")),
    # "qd", "b.i.d.", "tid": so many a day.
    ("abbreviated", re.compile(r"(?<![\w.])(?P<abbr>q\.?d|o\.?d|b\.?i\.?d|t\.?i\.?d|q\.?i\.?d)\.?(?![\w])")),
    # "three times a day", "twice daily", "2x per day", "once every week" (a word before the span stands
    # apart from it: "7.0 and" is no "7 a day").
    (
        "times",
        re.compile(
            rf"\b{_COUNT}(?:\s*(?:times|x))?\s+(?:(?:an?|per|each|every)\s+|/\s*){_SPAN}\b"
            rf"|\b(?P<n2>{NUM}|{NUMBER_WORD}|once|twice|thrice)(?:\s*(?:times|x))?\s+(?P<adv>hourly|daily|nightly|weekly)\b"
        ),
    ),
    # "in two divided doses": a daily amount given so many times a day.
    ("divided", re.compile(rf"\b(?:in\s+)?(?P<n>{NUM}|{NUMBER_WORD})\s+divided\s+doses\b")),
    # "every 8 hours", "every 12 h", "at 8-hour intervals", "every hour".
    ("every", re.compile(rf"\bevery\s+(?:(?P<n>{NUM}|{NUMBER_WORD})\s*)?{_SPAN}\b")),
    ("every", re.compile(rf"\b(?P<n>{NUM}|{NUMBER_WORD})[\s-]*{_SPAN}(?:ly)?\s+intervals?\b")),
    # "600 requests per minute", "two new connections per second", "10 msg/s": a count of things that
    # are no unit.
    ("counted", re.compile(
        rf"\b(?P<n>{NUM}|{NUMBER_WORD})\s+(?P<what>[a-z]+(?:\s+[a-z]+)?)\s*(?:per\s+|an?\s+|each\s+|/\s*){_SPAN}\b"
    )),
    ("adverb", re.compile(r"\b(?P<adv>hourly|daily|nightly|weekly)\b")),
)  # fmt: skip


def _span(word: str) -> float:
    return _SPANS[word.rstrip("s") if word not in _SPANS else word]


def _read(kind: str, m: re.Match[str]) -> float | None:
    """Events per second a match states, None when it is no rate (a unit counted per span)."""
    if kind == "abbreviated":
        return _ABBREVIATED[m["abbr"].replace(".", "")] / 86400.0
    if kind == "adverb":
        return 1.0 / _ADVERBS[m["adv"]]
    if kind == "counted" and any(w in table().aliases for w in m["what"].split()):
        return None  # "500 mg per day" is a dose, "41 cm a year" a speed
    if kind == "divided":
        return (number(m["n"]) or 0.0) / 86400.0 or None
    if kind == "times":
        raw = m["n"] or m["n2"]
        count = _TIMES.get(raw) or number(raw) or 0.0
        return count / (_span(m["span"]) if m["span"] else _ADVERBS[m["adv"]])
    n = number(m["n"]) if m["n"] else 1.0
    if not n:
        return None
    span = _span(m.groupdict().get("span") or "h")  # "q8h" has its span in the pattern
    return n / span if kind == "counted" else 1.0 / (span * n)


def _matches(text: str) -> tuple[str, list[tuple[int, str, float]]]:
    """(the text lower-cased with every rate blanked, (start, kind, events per second) of each rate in
    the order the text states them)."""
    t = written_out(text).lower()  # "4k msg/s" as 4000 a second
    found: list[tuple[int, str, float]] = []
    for kind, pattern in _PATTERNS:
        for m in pattern.finditer(t):
            if (rate := _read(kind, m)) is not None:
                found.append((m.start(), kind, rate))
                t = t[: m.start()] + " " * (m.end() - m.start()) + t[m.end() :]
    return t, sorted(found)


def _scan(text: str) -> tuple[str, list[float]]:
    """(the text with every rate blanked, the rates it states in events per second)."""
    blanked, found = _matches(text)
    return blanked, [r for _, _, r in found]


def rates(text: str) -> list[float]:
    """The rates a text states, in events per second, in the order it states them."""
    return _scan(text)[1]


# An amount in a unit ("400 mg"), then what makes it a daily amount: "/day", "per day", "a day".
_AMOUNT = re.compile(rf"(?<![\w.])(?P<num>{NUM})\s*(?P<unit>[µμ]?[a-z]+)\b")
_PER_DAY = re.compile(r"\s*(?:/\s*d(?:ay)?\b|(?:per|a|each)\s+day\b)")
_BEFORE_RATE = re.compile(r"[\s,]*")


@dataclass(frozen=True)
class DailyAmount:
    """An amount taken in a day: its dimension, its value in the dimension's base unit, how to show it
    (in the text's unit) and the number the text wrote for it."""

    dimension: str
    base: float
    shown: str
    written: float


def daily_amounts(text: str) -> list[DailyAmount]:
    """The amounts taken in a day a text states: over a day ("400 mg/day", "400 mg a day") or directly
    before a frequency ("400 mg twice daily" is 800 mg a day, "500 mg q8h" 1500 mg); "400 mg/day in two
    divided doses" is 400 mg a day. Sure: a dose per administration times the administrations in a day
    is the daily amount."""
    convert = table().convert
    original = written_out(text).lower()
    blanked, found = _matches(text)
    starts = {start: (kind, rate) for start, kind, rate in found}
    out = []
    for m in _AMOUNT.finditer(blanked):
        unit = table().aliases.get(m["unit"])
        if unit not in convert:
            continue
        dimension, factor = convert[unit]
        value = float(m["num"].replace(",", ""))
        if _PER_DAY.match(original, m.end()):
            out.append(DailyAmount(dimension, value * factor, f"{value:g} {m['unit']}", value))
            continue
        if original.startswith("/", m.end()):
            continue  # "mg/kg": an amount per something else
        gap = _BEFORE_RATE.match(original, m.end())
        following = starts.get(gap.end()) if gap else None
        if following is not None:
            kind, rate = following
            daily = value if kind == "divided" else value * rate * 86400.0
            out.append(DailyAmount(dimension, daily * factor, f"{daily:g} {m['unit']}", value))
    return out


def daily_differs(answer: str, reference: str) -> tuple[str, str] | None:
    """(a daily amount of the reference, one of the answer, as written) when both state daily amounts of
    one dimension and none of the answer's is one of the reference's ("400 mg twice daily" for "400
    mg/day": 800 mg a day against 400); else None."""
    ours, theirs = daily_amounts(reference), daily_amounts(answer)
    for wanted in ours:
        stated = [d for d in theirs if d.dimension == wanted.dimension]
        if stated and not any(_equal(d.base, w.base) for d in stated for w in ours):
            return wanted.shown, stated[0].shown
    return None


def daily_stated(answer: str, reference: str) -> set[float]:
    """The numbers the reference writes for daily amounts the answer states in another form ("300" of
    "300 mg/day" where the answer says "150 mg twice daily")."""
    theirs = daily_amounts(answer)
    return {w.written for w in daily_amounts(reference) if any(_equal(d.base, w.base) for d in theirs)}


def _equal(x: float, y: float) -> bool:
    return abs(x - y) <= 1e-6 * max(x, y)


def agreeing(answer: str, reference: str) -> tuple[str, str] | None:
    """(answer, reference) with their rates blanked, when both state rates and every one the answer
    states is one the reference states and back; else None."""
    a_text, a_rates = _scan(answer)
    r_text, r_rates = _scan(reference)
    if not a_rates or not r_rates:
        return None
    if all(any(_equal(x, y) for y in r_rates) for x in a_rates) and all(
        any(_equal(x, y) for x in a_rates) for y in r_rates
    ):
        return a_text, r_text
    return None


def disagreeing(answer: str, reference: str) -> tuple[float, float] | None:
    """(a rate of the reference, one of the answer) when both state rates and none of the answer's is one
    of the reference's ("twice daily" for "every 8 hours"); else None."""
    a_rates, r_rates = rates(answer), rates(reference)
    if a_rates and r_rates and not any(_equal(x, y) for x in a_rates for y in r_rates):
        return r_rates[0], a_rates[0]
    return None


def per_day(rate: float) -> str:
    """A rate as people write a dose frequency: "3 a day"."""
    return f"{rate * 86400.0:g} a day"
