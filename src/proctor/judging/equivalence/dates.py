"""Dates, times of day and ratios: the same day written differently ("12 March 1887" = "March 12, 1887"),
the same time ("06:30" = "half past six in the morning"), the terms of a ratio ("6 : 2 : 1")."""

from __future__ import annotations

import re

from proctor.judging.equivalence.codes import ISO_DATE
from proctor.judging.equivalence.numbers import NUMBER_WORDS

_MONTH_NAMES = "january february march april may june july august september october november december"
_MONTHS = {m: i for i, m in enumerate(_MONTH_NAMES.split(), 1)}
_DATE_DMY = re.compile(r"\b(\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?([a-z]+),?\s+(\d{3,4})\b", re.IGNORECASE)
_DATE_MDY = re.compile(r"\b([a-z]+)\s+(\d{1,2})(?:st|nd|rd|th)?,?\s+(\d{3,4})\b", re.IGNORECASE)

_RATIO = re.compile(r"^\s*(\d+(?:\.\d+)?)(?:\s*:\s*(\d+(?:\.\d+)?))+\s*$")


def ratio(reference: str) -> list[float] | None:
    """The terms of a reference that is a ratio ("6 : 2 : 1"), else None."""
    if not _RATIO.match(reference):
        return None
    return [float(x) for x in re.findall(r"\d+(?:\.\d+)?", reference)]


def dates(text: str) -> list[tuple[int, int, int]]:
    """(year, month, day) of each date a text writes with a month name, day first or month first, or as
    an ISO date ("2025-06-30")."""
    out = [
        (int(m["y"]), int(m["m"]), int(m["d"]))
        for m in ISO_DATE.finditer(text)
        if 1 <= int(m["m"]) <= 12 and 1 <= int(m["d"]) <= 31
    ]
    for d, mon, y in _DATE_DMY.findall(text):
        if mon.lower() in _MONTHS:
            out.append((int(y), _MONTHS[mon.lower()], int(d)))
    for mon, d, y in _DATE_MDY.findall(text):
        if mon.lower() in _MONTHS:
            out.append((int(y), _MONTHS[mon.lower()], int(d)))
    return out


def date(text: str) -> tuple[int, int, int] | None:
    """The one date a text states, else None."""
    found = set(dates(text))
    return found.pop() if len(found) == 1 else None


_CLOCK_WORDS = {**{w: v for w, v in NUMBER_WORDS.items() if isinstance(v, int) and 1 <= v <= 12}}
_HOUR = r"(?:\d{1,2}|" + "|".join(w for w in _CLOCK_WORDS if " " not in w) + ")"
_DIGITAL = re.compile(
    r"\b(?P<h>\d{1,2})(?::(?P<m>\d{2})\b(?!\s*(?:h\b|hours?|hrs?|min|minutes?|mins?))"
    r"|\.(?P<m2>\d{2})(?=\s*[ap]\.?m\b))"
)
_AMPM_ONLY = re.compile(r"\b(?P<h>\d{1,2})\s*(?=[ap]\.?m\.?(?:\W|$))")
_SPOKEN = re.compile(
    rf"\b(?:(?P<part>half|quarter|five|ten|twenty|twenty-five)\s+(?P<dir>past|to)\s+(?P<h>{_HOUR})"
    rf"|(?P<h2>{_HOUR})\s+o'?\s?clock)\b"
)
_NOON = re.compile(r"\b(?P<w>noon|midday|midnight)\b")
_AM = re.compile(r"^\s*(?:a\.?m\b|in the morning\b|at dawn\b)")
_PM = re.compile(r"^\s*(?:p\.?m\b|in the (?:afternoon|evening)\b|at night\b|tonight\b)")
_PART_MINUTES = {"half": 30, "quarter": 15, "five": 5, "ten": 10, "twenty": 20, "twenty-five": 25}


def hhmm(minutes: int) -> str:
    """Minutes after midnight as "HH:MM"."""
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def clock_times(text: str) -> list[set[int]]:
    """Each time of day a text states ("06:30", "6.30 pm", "half past six in the morning", "7 o'clock",
    "noon"), as the minutes after midnight it can mean: one value when the writing fixes it (a leading zero,
    an hour after 12, am/pm, "in the evening"), else both the morning and the evening reading."""
    t = text.lower()
    out: list[tuple[int, set[int]]] = []

    def readings(hour: int, minute: int, end: int, fixed: bool) -> set[int] | None:
        if not (0 <= hour <= 24 and 0 <= minute < 60):
            return None
        after = t[end:]
        if _AM.search(after) or _PM.search(after):
            if not 1 <= hour <= 12:
                return None
            base = hour % 12 + (12 if _PM.search(after) else 0)
            return {base * 60 + minute}
        if fixed or hour == 0 or hour > 12:
            return {(hour % 24) * 60 + minute}
        return {(hour % 12) * 60 + minute, (hour % 12 + 12) * 60 + minute}

    for m in _DIGITAL.finditer(t):
        minute = int(m["m"] or m["m2"])
        r = readings(int(m["h"]), minute, m.end(), fixed=len(m["h"]) == 2 and m["h"].startswith("0"))
        if r:
            out.append((m.start(), r))
    for m in _AMPM_ONLY.finditer(t):
        inside = any(a <= m.start() < a + 5 for a, _ in out)  # the minutes of "6:10 pm", read above
        if not inside and (r := readings(int(m["h"]), 0, m.end(), False)):
            out.append((m.start(), r))
    for m in _SPOKEN.finditer(t):
        word = m["h"] or m["h2"]
        hour = int(word) if word.isdigit() else _CLOCK_WORDS[word]
        minute = 0
        if m["part"]:
            minute = _PART_MINUTES[m["part"]]
            if m["dir"] == "to":
                hour, minute = (hour - 1) % 12 or 12, 60 - minute
        if r := readings(hour, minute, m.end(), False):
            out.append((m.start(), r))
    for m in _NOON.finditer(t):
        out.append((m.start(), {0 if m["w"] == "midnight" else 720}))
    return [r for _, r in sorted(out, key=lambda x: x[0])]
