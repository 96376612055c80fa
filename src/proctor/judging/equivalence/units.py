"""The one unit table. Every unit the rules read is one `Unit` row: its names, abbreviations, what it
measures and its factor to that dimension's base unit. Every pattern and lookup about units (reading a
quantity's unit, multi-word units such as "square feet", "a 12-metre boat", spans such as "an hour" or
"9 hours 30 minutes", conversions, the words that show an answer speaks of a dimension) is generated
from the table, so adding a unit is one row (`add_unit` at run time).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property

from proctor.judging.equivalence.numbers import HYPHENED_FRACTIONS, NUM, NUMBER_WORD


@dataclass(frozen=True)
class Unit:
    """One unit. `names` are words (singular and plural); `abbreviations` are read after a number only
    ("m", "h"), and from two characters on also show that an answer speaks of the unit's dimension.
    Units of one `dimension` with a `factor` (to the dimension's base unit) convert into each other;
    without a factor a unit is compared only with itself."""

    symbol: str
    names: tuple[str, ...] = ()
    abbreviations: tuple[str, ...] = ()
    dimension: str | None = None
    factor: float | None = None
    # An area unit: "square <names of that unit>", "<its abbreviation>²" are read as this unit.
    square_of: str | None = None
    # Spellings in several words (regular expressions), read as this unit before anything else.
    phrases: tuple[str, ...] = ()
    # "an hour", "a year", "every other week" mean one (two) of it ("a second" is an ordinal).
    counted_with_a: bool = False


def _plural(*singular: str) -> tuple[str, ...]:
    return tuple(w for s in singular for w in (s, f"{s}s"))


UNITS: tuple[Unit, ...] = (
    Unit("m", _plural("metre", "meter"), ("m",), "length", 1.0),
    Unit("km", _plural("kilometre", "kilometer"), ("km",), "length", 1e3),
    Unit("cm", _plural("centimetre", "centimeter"), ("cm",), "length", 1e-2),
    Unit("mm", _plural("millimetre", "millimeter"), ("mm",), "length", 1e-3),
    Unit("mile", _plural("mile"), ("mi",), "length", 1609.344),
    Unit("ft", ("foot", "feet"), ("ft",), "length", 0.3048),
    Unit("yd", _plural("yard"), ("yd",), "length", 0.9144),
    Unit("in", ("inch", "inches"), (), "length", 0.0254),  # "in" is a word: not read as inches
    Unit("kg", _plural("kilogram", "kilo"), ("kg",), "mass", 1.0),
    Unit("g", _plural("gram"), ("g",), "mass", 1e-3),
    Unit("t", _plural("tonne", "ton"), ("t",), "mass", 1e3),
    Unit("mg", _plural("milligram"), ("mg",), "mass", 1e-6),
    Unit("µg", _plural("microgram"), ("µg", "μg", "mcg", "ug"), "mass", 1e-9),
    Unit("ng", _plural("nanogram"), ("ng",), "mass", 1e-12),
    Unit("lb", _plural("pound"), ("lb", "lbs"), "mass", 0.45359237),
    Unit("oz", _plural("ounce"), ("oz",), "mass", 0.028349523125),
    Unit("m2", (), ("m2",), "area", 1.0, square_of="m"),
    Unit("km2", (), ("km2",), "area", 1e6, square_of="km"),
    Unit("sqft", (), ("sqft",), "area", 0.3048**2, square_of="ft"),
    Unit("sqmi", (), ("sqmi",), "area", 1609.344**2, square_of="mile"),
    Unit("ha", _plural("hectare"), ("ha",), "area", 1e4),
    Unit("acre", _plural("acre"), (), "area", 4046.8564224),
    Unit("l", _plural("litre", "liter"), ("l",), "volume", 1.0),
    Unit("dl", _plural("decilitre", "deciliter"), ("dl",), "volume", 1e-1),
    Unit("ml", _plural("millilitre", "milliliter"), ("ml",), "volume", 1e-3),
    Unit("µl", _plural("microlitre", "microliter"), ("µl", "μl", "ul"), "volume", 1e-6),
    # A plain "gallon" is no unit here: US and imperial gallons differ by a fifth.
    Unit("usgal", (), ("usgal",), "volume", 3.785411784, phrases=(r"\b(?:us|u\.s\.|american)\s+gallons?\b",)),
    Unit("impgal", (), ("impgal",), "volume", 4.54609, phrases=(r"\b(?:imperial|uk|british)\s+gallons?\b",)),
    # Temperatures have an offset: °C and °F are compared by `quantities.same`, not by a factor.
    Unit("°c", ("celsius",), ("°c", "c"), "temperature",
         phrases=(r"(?:°\s*|\bdegrees?\s+)(?:c\b|celsius\b|centigrade\b)",)),
    Unit("°f", ("fahrenheit",), ("°f", "f"), "temperature",
         phrases=(r"(?:°\s*|\bdegrees?\s+)(?:f\b|fahrenheit\b)",)),
    Unit("°", _plural("degree"), (), "temperature"),  # no scale: ambiguous, never converted
    # Duration suffixes of configuration files: "300s", "30ms", "5min", "2h" ("5m" is metres unless the
    # other side is a time: `quantities.same`).
    Unit("ns", _plural("nanosecond"), ("ns",), "time", 1e-9),
    Unit("µs", _plural("microsecond"), ("µs", "μs"), "time", 1e-6),
    Unit("ms", _plural("millisecond"), ("ms", "msec"), "time", 1e-3),
    Unit("s", _plural("second"), ("s", "sec", "secs"), "time", 1.0),
    Unit("min", _plural("minute"), ("min", "mins"), "time", 60.0, counted_with_a=True),
    Unit("h", _plural("hour"), ("h", "hr", "hrs"), "time", 3600.0, counted_with_a=True),
    Unit("day", _plural("day"), (), "time", 86400.0, counted_with_a=True),
    Unit("week", _plural("week"), (), "time", 604800.0, counted_with_a=True),
    Unit("fortnight", _plural("fortnight"), (), "time", 1209600.0, counted_with_a=True),
    # Calendar spans convert among themselves exactly, not into days (a month's length varies).
    Unit("month", _plural("month"), (), "calendar", 1.0, counted_with_a=True),
    Unit("year", _plural("year"), (), "calendar", 12.0, counted_with_a=True),
    Unit("decade", _plural("decade"), (), "calendar", 120.0, counted_with_a=True),
    Unit("century", ("century", "centuries"), (), "calendar", 1200.0, counted_with_a=True),
    # Data sizes, SI and IEC kept apart: a kilobyte is 1000 bytes, a kibibyte 1024 (2 GiB is not 2 GB).
    # Their conversions are exact (`TOLERANCE`), so no rounding makes one family the other.
    Unit("byte", _plural("byte"), (), "data", 1.0),
    Unit("kb", _plural("kilobyte"), ("kb",), "data", 1e3),
    Unit("mb", _plural("megabyte"), ("mb",), "data", 1e6),
    Unit("gb", _plural("gigabyte"), ("gb",), "data", 1e9),
    Unit("tb", _plural("terabyte"), ("tb",), "data", 1e12),
    # Bits are an eighth of a byte ("8 bits" is not "8 bytes"). A capital prefix before a lower-case "b"
    # ("Mb", "Gb") is bits, read before lower case (`quantities.unit_text`); an all-lower-case "mb" stays
    # megabytes (informal writing). "Gbps" is gigabits (a rate's "per second" is dropped as for "Gbit/s").
    Unit("bit", _plural("bit"), ("bps",), "data", 0.125),
    Unit("kbit", _plural("kilobit"), ("kbit", "kbps"), "data", 125.0),
    Unit("mbit", _plural("megabit"), ("mbit", "mbps"), "data", 1.25e5),
    Unit("gbit", _plural("gigabit"), ("gbit", "gbps"), "data", 1.25e8),
    Unit("tbit", _plural("terabit"), ("tbit", "tbps"), "data", 1.25e11),
    Unit("kib", _plural("kibibyte"), ("kib",), "data", 2.0**10),
    Unit("mib", _plural("mebibyte"), ("mib",), "data", 2.0**20),
    Unit("gib", _plural("gibibyte"), ("gib",), "data", 2.0**30),
    Unit("tib", _plural("tebibyte"), ("tib",), "data", 2.0**40),
    # Amounts of substance; a molar concentration is read as one per litre ("0.38 nM" is "0.38 nmol/l").
    Unit("mol", _plural("mole"), ("mol",), "amount", 1.0),
    Unit("mmol", _plural("millimole"), ("mmol",), "amount", 1e-3),
    Unit("µmol", _plural("micromole"), ("µmol", "μmol", "umol"), "amount", 1e-6),
    Unit("nmol", _plural("nanomole"), ("nmol",), "amount", 1e-9),
    Unit("pmol", _plural("picomole"), ("pmol",), "amount", 1e-12),
    Unit("%", ("percent", "percentage"), ("%",)),
    Unit("people", ("people", "persons", "inhabitants", "residents")),
)  # fmt: skip

# How far two quantities of a dimension may differ after conversion, where not `DEFAULT_TOLERANCE`: writers
# round converted lengths ("340 km" written "211 miles"), not data sizes (1 MB is 2.4 % short of 1 MiB).
DEFAULT_TOLERANCE = 0.02
TOLERANCE = {"data": 0.005}
# What the quantity guard asks an answer to speak of, when a dimension is not its own word.
_SPOKEN_AS = {"calendar": "time"}
# Words that show an answer speaks of a dimension without being units the rules convert.
_ALSO_SPOKEN_OF = {
    "temperature": ("°", "kelvin", "centigrade"),
    "volume": ("gallon", "gallons", "pint", "pints"),
    "area": ("square", "sq"),
    "time": (
        "night",
        "nights",
        "morning",
        "mornings",
        "evening",
        "evenings",
        "hourly",
        "daily",
        "nightly",
        "weekly",
        "monthly",
        "yearly",
        "annually",
    ),
}
# Spans short enough to be written in several units at once ("a day and seven hours").
_LONGEST_CHAINED_SPAN = 86400.0


def _alternation(words: list[str]) -> str:
    return "|".join(re.escape(w) for w in sorted(set(words), key=lambda w: (-len(w), w)))


class UnitTable:
    """Everything generated from a tuple of units; `table()` is the one in use."""

    def __init__(self, units: tuple[Unit, ...]) -> None:
        self.units = units
        self.by_symbol = {u.symbol: u for u in units}

    @cached_property
    def aliases(self) -> dict[str, str]:
        """Each name and abbreviation (lower case) → its unit's symbol (a symbol is no alias: "in")."""
        return {w: u.symbol for u in self.units for w in (*u.names, *u.abbreviations)}

    @cached_property
    def convert(self) -> dict[str, tuple[str, float]]:
        """symbol → (dimension, factor to its base unit), for the units that convert."""
        return {u.symbol: (u.dimension, u.factor) for u in self.units if u.dimension and u.factor}

    def tolerance(self, dimension: str) -> float:
        """How far two quantities of `dimension` may differ after conversion."""
        return TOLERANCE.get(dimension, DEFAULT_TOLERANCE)

    @cached_property
    def measures(self) -> dict[str, str]:
        """symbol → the dimension an answer must speak of (the quantity guard)."""
        return {u.symbol: _SPOKEN_AS.get(u.dimension, u.dimension) for u in self.units if u.dimension}

    @cached_property
    def dimension_words(self) -> dict[str, re.Pattern[str]]:
        """dimension → the words that show a text speaks of it: unit names, abbreviations of two
        characters or more, "m²"-style areas, and the words of `_ALSO_SPOKEN_OF`."""
        words: dict[str, list[str]] = {}
        for u in self.units:
            if not u.dimension:
                continue
            dim = _SPOKEN_AS.get(u.dimension, u.dimension)
            words.setdefault(dim, []).extend([*u.names, *(a for a in u.abbreviations if len(a) >= 2)])
            if u.square_of:
                words[dim] += [f"{a}²" for a in self.by_symbol[u.square_of].abbreviations]
        for dim, extra in _ALSO_SPOKEN_OF.items():
            words.setdefault(dim, []).extend(extra)
        return {d: re.compile(rf"(?<![a-z])(?:{_alternation(ws)})\b") for d, ws in words.items()}

    @cached_property
    def phrases(self) -> list[tuple[re.Pattern[str], str]]:
        """Units written in several words or with a superscript, each with the token it is read as."""
        out = []
        for u in self.units:
            if u.square_of:
                base = self.by_symbol[u.square_of]
                spelled = _alternation([*base.names, *base.abbreviations])
                short = _alternation(list(base.abbreviations))
                square = rf"\b(?:square|sq\.?)\s+(?:{spelled})\b" + (
                    rf"|\b(?:{short})(?:²|\^2)" if short else ""
                )
                out.append((re.compile(square), f" {u.symbol}"))
            out += [(re.compile(p), f" {u.symbol}") for p in u.phrases]
        return out

    @cached_property
    def hyphenated(self) -> re.Pattern[str]:
        """The hyphen between a number and its unit or fraction ("a two-week voyage", "two-thirds")."""
        spelled = [w for u in self.units for w in (*u.names, *u.abbreviations) if w.isalpha()]
        return re.compile(rf"(?<=[\w])-(?=(?:{'|'.join(HYPHENED_FRACTIONS)}|{_alternation(spelled)})\b)")

    @cached_property
    def span_units(self) -> str:
        """The spans counted with "a"/"an" ("an hour", "a fortnight"), singular, as an alternation."""
        return "|".join(u.names[0] for u in self.units if u.counted_with_a)

    @cached_property
    def span_seconds(self) -> dict[str, float]:
        """Names of the short spans that chain ("9 hours 30 minutes") → their length in seconds."""
        return {
            w: u.factor
            for u in self.units
            if u.dimension == "time" and u.factor and u.factor <= _LONGEST_CHAINED_SPAN
            for w in (*u.names, *u.abbreviations)
        }

    @cached_property
    def span_part(self) -> re.Pattern[str]:
        """One part of a span written in several units ("a day and seven hours")."""
        return re.compile(
            rf"(?P<n>{NUM}|an?|{NUMBER_WORD})\s+(?P<u>{_alternation(list(self.span_seconds))})\b"
        )

    @cached_property
    def part_of_unit(self) -> re.Pattern[str]:
        """ "half an hour", "a third of an hour", "within a week", "once a fortnight"."""
        from proctor.judging.equivalence.numbers import FRACTION_WORDS

        return re.compile(
            rf"\b(?:(?P<frac>{FRACTION_WORDS})\s+(?:of\s+)?)?\b(?:an?)\s+(?P<unit>{self.span_units})\b",
            re.IGNORECASE,
        )

    @cached_property
    def every_other(self) -> re.Pattern[str]:
        return re.compile(rf"\bevery\s+other\s+(?P<unit>{self.span_units})\b", re.IGNORECASE)

    @cached_property
    def rate(self) -> re.Pattern[str]:
        """A rate's "per ..." after a quantity with its unit ("41 cm a year"): not a second quantity."""
        return re.compile(
            rf"(?<=\d)(?P<unit>\s*(?:[a-z]+|%|°[cf]))(?P<per>\s+(?:a|an|per|each)\s+(?:{self.span_units})\b)"
        )

    @cached_property
    def and_a_half(self) -> re.Pattern[str]:
        """ "nine and a half hours", "an hour and a half": the half joins the number."""
        return re.compile(
            rf"\b(?P<n>{NUM}|{NUMBER_WORD})\s+and\s+a\s+half\s+"
            rf"(?P<u>(?:{self.span_units})s?|[a-z]+)\b"
            rf"|\ban?\s+(?P<u1>{self.span_units})\s+and\s+a\s+half\b"
        )

    @cached_property
    def numeric_words(self) -> re.Pattern[str]:
        """Words that make an answer numeric without digits: a fraction, a span, a count ("half an hour",
        "within a week", "every other year", "nine hundred")."""
        # Singular spans only: "an hour" is a number, "a default number of days" is none.
        spans = [u.names[0] for u in self.units if u.counted_with_a]
        shares = list(self.by_symbol["%"].names) if "%" in self.by_symbol else []
        return re.compile(
            r"\b(?:"
            + NUMBER_WORD
            + r"|half|third|quarter|fifth|tenth|hundred|thousand|million|billion|score|"
            rf"{_alternation(spans + shares)}|per cent|couple|few|several|dozens?|once|twice|thrice)\b",
            re.IGNORECASE,
        )


_table = UnitTable(UNITS)


def table() -> UnitTable:
    """The unit table in use."""
    return _table


def add_unit(unit: Unit) -> None:
    """Add a unit (or replace the one with its symbol): every pattern is generated again."""
    global _table
    _table = UnitTable((*(u for u in _table.units if u.symbol != unit.symbol), unit))


@contextmanager
def units_added(*units: Unit) -> Iterator[UnitTable]:
    """The table with `units` added, for a block; the previous table after it."""
    global _table
    before = _table
    for u in units:
        add_unit(u)
    try:
        yield _table
    finally:
        _table = before
