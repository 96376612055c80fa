"""Deterministic equivalence before any LLM judge: rules that decide "correct" only when they are sure.

A small judge model is too strict when an answer holds the reference plus detail ("It opened in 1887
after a public vote." for "1887") and misses equivalent quantities ("roughly 25 percent" for "about one in
four"). These rules catch exactly those cases and nothing else; an answer they do not decide goes to the
LLM judge. No rule ever decides "incorrect".

* `normalised_match` — equal after SQuAD/HotpotQA normalisation;
* `contains_reference` — the normalised reference stands in the normalised answer as a whole phrase, not
  negated just before it, in an answer that does not offer alternatives ("X or Y");
* `contains_reference` also for a short reference with digits written out word for word among other
  numbers ("41,300 inhabitants, of whom 18,000 …" for "41,300"), unless the answer hedges ("maybe",
  "possibly", "between") or offers alternatives;
* `numeric_equivalent` — the reference is one quantity (digits, number words, fractions such as "one in
  four" or "a quarter", percentages, a unit) and the answer states that quantity and no other number; or
  the reference states several and the answer the same ones in the same order and no other ("about 39
  feet wide by 13 feet high" for "12 metres wide and 4 metres high");
* `same_date` — the same day, month and year written differently ("12 March 1887" = "March 12, 1887");
* `same_time` — the same time of day ("06:30" = "half past six in the morning"; without am/pm either
  reading counts);
* `same_ratio` — the terms of a ratio reference in order ("6 : 2 : 1").

Quantities convert between units of one dimension (length, area, mass, volume, spans of time, months to
centuries; 2 % rounding allowed) and between °C and °F (0.3 °C: a whole °F of rounding); multi-word units
("square feet", "US gallons"), hyphens ("a two-week voyage"), spans in several units ("a day and seven
hours" = 31 h, "nine and a half hours"), idioms ("half a dozen", "biennially", "fortnightly") and a rate's
"a year" ("41 cm a year" is one quantity) are read first. A plain "gallon" does not convert: US and
imperial gallons differ by a fifth.

Guards run *after* an LLM judge said "correct", and only ever turn that into "incorrect" (`veto`), each
only when sure. A small judge credits confident guesses and near misses; these catch the sure cases:

* `reference_quantity_missing` (`missing_quantities`) — the reference states numbers and the answer
  cannot state them: it states no number in any form, another year, or another number in the same unit
  ("the temperature is lower there" for "91 °C"; "1578" for "1587"), or the right number in a currency
  the reference does not use ("€64" for "64 skell");
* `reference_term_missing` — a short reference without numbers (a name or term of at most three content
  words) of which the answer has some words or a near spelling but not all ("Maren Oakhill" for "Maren
  Oakhalt") or another word in a missing word's place ("the fog months" for "the grey months"); an answer
  with none of its words, or that says a missing word otherwise ("water from the sea" for "seawater",
  "from the west" for "westerly") or drops it, is left to the LLM (a paraphrase: "no charge" for "free");
* `reference_part_missing` (`missing_part`) — the reference lists short items and the answer has no word
  or quantity of one of them ("six rowers" for "six rowers and a steerer");
* `alternatives_listed` — the answer offers alternatives ("Dunmere, Orrinsford or Kettle Point") where
  the reference does not itself state a choice;
* `reference_name_missing` (`name_missing`, with the question) — the question asks what something is
  named or called and the answer has no word of the reference's name;
* `other_name` (with the question) — the reference is a name, the answer has none of its words beyond
  the question and names something else ("The capital of Teskavar is Tashkent." for "Orrinsford"): the
  confident guesses a small judge credits;
* `nothing_beyond_question` (`nothing_beyond_question`, where the question is known: RECKON's unit
  judging) — the answer has no word or number of the reference beyond what the question gave.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from proctor.judging.metrics import normalize_answer

NEGATIONS = frozenset({"not", "no", "never", "nor", "neither", "without", "isnt", "wasnt", "arent", "werent",
                       "doesnt", "didnt", "dont", "cannot", "cant", "wont", "hardly"})  # fmt: skip
_NEGATION_WINDOW = 3  # words before the phrase that may negate it
_ALTERNATIVES = re.compile(r"\b(or|either)\b|/", re.IGNORECASE)

_UNITS = {
    "m": "m", "metre": "m", "metres": "m", "meter": "m", "meters": "m",
    "km": "km", "kilometre": "km", "kilometres": "km", "kilometer": "km", "kilometers": "km",
    "cm": "cm", "centimetre": "cm", "centimetres": "cm", "mm": "mm", "millimetres": "mm",
    "kg": "kg", "kilogram": "kg", "kilograms": "kg", "g": "g", "gram": "g", "grams": "g",
    "t": "t", "tonne": "t", "tonnes": "t", "ton": "t", "tons": "t",
    "l": "l", "litre": "l", "litres": "l", "liter": "l", "liters": "l",
    "c": "°c", "°c": "°c", "celsius": "°c", "degrees": "°", "degree": "°",
    "f": "°f", "°f": "°f", "fahrenheit": "°f",
    "h": "h", "hour": "h", "hours": "h", "min": "min", "minute": "min", "minutes": "min",
    "s": "s", "second": "s", "seconds": "s", "day": "day", "days": "day", "week": "week", "weeks": "week",
    "fortnight": "fortnight", "fortnights": "fortnight",
    "year": "year", "years": "year", "month": "month", "months": "month",
    "decade": "decade", "decades": "decade", "century": "century", "centuries": "century",
    "mile": "mile", "miles": "mile", "ft": "ft", "foot": "ft", "feet": "ft",
    "yard": "yd", "yards": "yd", "yd": "yd", "inch": "in", "inches": "in",
    "lb": "lb", "lbs": "lb", "pound": "lb", "pounds": "lb", "oz": "oz", "ounce": "oz", "ounces": "oz",
    "m2": "m2", "km2": "km2", "sqft": "sqft", "sqmi": "sqmi", "ha": "ha", "hectare": "ha", "hectares": "ha",
    "acre": "acre", "acres": "acre",
    "ml": "ml", "millilitre": "ml", "millilitres": "ml", "usgal": "usgal", "impgal": "impgal",
    "%": "%", "percent": "%", "per cent": "%", "percentage": "%",
    "people": "people", "persons": "people", "inhabitants": "people", "residents": "people",
}  # fmt: skip
_WORDS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15,
    "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30,
    "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90, "hundred": 100,
    "a dozen": 12, "dozen": 12,
}  # fmt: skip
_FRACTIONS = {
    "half": 0.5, "a half": 0.5, "one half": 0.5, "a third": 1 / 3, "one third": 1 / 3,
    "a quarter": 0.25, "one quarter": 0.25, "three quarters": 0.75, "two thirds": 2 / 3,
}  # fmt: skip
_SCALES = {"thousand": 1e3, "million": 1e6, "billion": 1e9}
# Units one converts exactly: (dimension, factor to its base unit). Months and years are left out (their
# length varies), as are temperatures (an offset, and "degrees" without a scale is ambiguous).
_CONVERT = {
    "m": ("length", 1.0), "km": ("length", 1e3), "cm": ("length", 1e-2), "mm": ("length", 1e-3),
    "mile": ("length", 1609.344), "ft": ("length", 0.3048),
    "yd": ("length", 0.9144), "in": ("length", 0.0254),
    "kg": ("mass", 1.0), "g": ("mass", 1e-3), "t": ("mass", 1e3), "lb": ("mass", 0.45359237),
    "oz": ("mass", 0.028349523125),
    "m2": ("area", 1.0), "km2": ("area", 1e6), "sqft": ("area", 0.09290304), "ha": ("area", 1e4),
    "sqmi": ("area", 2589988.110336),
    "acre": ("area", 4046.8564224),
    "l": ("volume", 1.0), "ml": ("volume", 1e-3), "usgal": ("volume", 3.785411784),
    "impgal": ("volume", 4.54609),
    "s": ("time", 1.0), "min": ("time", 60.0), "h": ("time", 3600.0), "day": ("time", 86400.0),
    "week": ("time", 604800.0), "fortnight": ("time", 1209600.0),
    # Calendar spans convert among themselves exactly, not into days (a month's length varies).
    "month": ("calendar", 1.0), "year": ("calendar", 12.0), "decade": ("calendar", 120.0),
    "century": ("calendar", 1200.0),
}  # fmt: skip
# How far two quantities in different units may differ after conversion: writers round converted values
# ("340 km" is 211.3 miles, written "211 miles").
_CONVERSION_TOLERANCE = 0.02
# Units written in several words or with a superscript, rewritten as one token before quantities are read.
# A plain "gallon" stays unknown (US and imperial gallons differ by a fifth): only a named one converts.
_UNIT_PHRASES = [
    (re.compile(r"\b(?:square|sq\.?)\s+(?:metres?|meters?|m)\b|\bm(?:²|\^2)"), " m2"),
    (re.compile(r"\b(?:square|sq\.?)\s+(?:kilometres?|kilometers?|km)\b|\bkm(?:²|\^2)"), " km2"),
    (re.compile(r"\b(?:square|sq\.?)\s+(?:feet|foot|ft)\b|\bft(?:²|\^2)"), " sqft"),
    (re.compile(r"\b(?:square|sq\.?)\s+(?:miles?|mi)\b|\bmi(?:²|\^2)"), " sqmi"),
    (re.compile(r"\b(?:us|u\.s\.|american)\s+gallons?\b"), " usgal"),
    (re.compile(r"\b(?:imperial|uk|british)\s+gallons?\b"), " impgal"),
    (re.compile(r"(?:°\s*|\bdegrees?\s+)(?:c\b|celsius\b|centigrade\b)"), " °c"),
    (re.compile(r"(?:°\s*|\bdegrees?\s+)(?:f\b|fahrenheit\b)"), " °f"),
    # Spans written as one word or an idiom.
    (re.compile(r"\bhalf\s+a\s+dozen\b"), " 6 "),
    (re.compile(r"\bbiennial(?:ly)?\b"), " every 2 years"),
    (re.compile(r"\btriennial(?:ly)?\b"), " every 3 years"),
    (re.compile(r"\bfortnightly\b"), " once a fortnight"),
]
# "a two-week voyage", "a 12-metre boat", "two-thirds": the hyphen between a number and its unit or
# fraction is a space ("thirty-eight" keeps its hyphen).
_HYPHENATED = re.compile(
    r"(?<=[\w])-(?=(?:thirds?|quarters?|halves|half|fifths?|tenths?|[a-z]*(?:metre|meter|mile|week|day|"
    r"hour|minute|second|month|year|litre|liter|gram|tonne|foot|feet|inch|yard|acre|hectare)s?|km|kg|m|cm|mm)"
    r"\b)"
)


# "twenty-five": a tens word and a units word, from the number words above.
_TENS = {w: v for w, v in _WORDS.items() if isinstance(v, int) and 20 <= v <= 90 and v % 10 == 0}
_UNITS_WORDS = {w: v for w, v in _WORDS.items() if isinstance(v, int) and 1 <= v <= 9}
_COMPOUND = re.compile(rf"\b({'|'.join(_TENS)})[-\s]({'|'.join(_UNITS_WORDS)})\b(?!\s+hundred)")


def _unit_text(text: str) -> str:
    """Lower case, "per cent" as "percent", "twenty-five" as "25", multi-word units as one token,
    number-unit hyphens as spaces."""
    t = _COMPOUND.sub(
        lambda m: str(_TENS[m[1]] + _UNITS_WORDS[m[2]]), text.lower().replace("per cent", "percent")
    )
    t = _HYPHENATED.sub(" ", t)
    for pattern, unit in _UNIT_PHRASES:
        t = pattern.sub(unit, t)
    return t


# Comparisons that are not negations ("no less than half a day").
_NOT_NEGATIONS = re.compile(
    r"\b(?:no|not)\s+(?:less|more|fewer|later|earlier|sooner)\s+than\b", re.IGNORECASE
)
_MONTH_NAMES = "january february march april may june july august september october november december"
_MONTHS = {m: i for i, m in enumerate(_MONTH_NAMES.split(), 1)}


@dataclass(frozen=True)
class RuleDecision:
    """A rule decided the answer is correct: which rule, and on what."""

    method: str
    detail: str


@dataclass(frozen=True)
class Quantity:
    value: float
    unit: str | None  # normalised; "share" for fractions and percentages


_HEDGED_AMONG_NUMBERS = re.compile(r"\b(?:between|maybe|possibly|perhaps|probably|likely|might)\b")


def decide(answer: str, reference: str) -> RuleDecision | None:
    """ "correct" when a rule is sure (see the module docstring), else None: the LLM judges."""
    a, r = normalize_answer(answer), normalize_answer(reference)
    if not a or not r:
        return None
    if a == r:
        return RuleDecision("normalised_match", r)
    date_r = _date(reference)
    if date_r is not None:
        dates_a = _dates(answer)
        if dates_a and all(d == date_r for d in dates_a):
            return RuleDecision("same_date", "-".join(map(str, date_r)))
        return None
    time_r = _clock_times(reference)
    if len(time_r) == 1:
        times_a = _clock_times(answer)
        if times_a and all(t & time_r[0] for t in times_a) and not _negated_anywhere(a):
            return RuleDecision("same_time", " or ".join(_hhmm(v) for v in sorted(time_r[0])))
        return None
    ratio = _ratio(reference)
    if ratio is not None:
        stated = [
            v for w in re.findall(r"[a-z]+|\d+(?:\.\d+)?", answer.lower()) if (v := _number(w)) is not None
        ]
        if stated == ratio and not _negated_anywhere(a):
            return RuleDecision("same_ratio", " : ".join(f"{v:g}" for v in ratio))
        return None
    q_r = quantities(reference)
    if len(q_r) == 1:
        q_a = quantities(answer)
        plain = normalize_answer(_NOT_NEGATIONS.sub(" ", answer))
        if (
            q_a
            and all(_same(q, q_r[0]) for q in q_a)
            and not _negated_anywhere(plain)
            and missing_part(answer, reference) is None  # "six rowers" for "six rowers and a steerer"
        ):
            return RuleDecision("numeric_equivalent", f"{q_r[0].value:g} {q_r[0].unit or ''}".strip())
        # The reference written out word for word among other numbers ("41,300 inhabitants, of whom 18,000
        # lived in the capital" for "41,300"): a short reference with its digits, not negated just before,
        # in an answer that offers no alternatives, range or hedge ("Maybe 2017, maybe 2019").
        if (
            stated_numbers(reference)
            and len(r.split()) <= _MAX_PART_WORDS
            and _contains_phrase(a.split(), r.split())
            and not _negated_in_clause(answer, r.split())
            and not _ALTERNATIVES.search(answer)
            and not _HEDGED_AMONG_NUMBERS.search(a)
        ):
            return RuleDecision("contains_reference", r)
        return None
    if q_r:
        # Several quantities: the answer states the same ones in the same order and no other ("about 39
        # feet wide by 13 feet high" for "12 metres wide and 4 metres high"); else the LLM weighs them.
        q_a = quantities(answer)
        if (
            len(q_a) == len(q_r)
            and all(_same(x, y) for x, y in zip(q_a, q_r, strict=True))
            and not _negated_anywhere(normalize_answer(_NOT_NEGATIONS.sub(" ", answer)))
            and missing_part(answer, reference) is None
        ):
            shown = ", ".join(f"{q.value:g} {q.unit or ''}".strip() for q in q_r)
            return RuleDecision("numeric_equivalent", shown)
        return None
    if (
        _contains_phrase(a.split(), r.split())
        and not _negated_in_clause(answer, r.split())
        and not _ALTERNATIVES.search(answer)
    ):
        return RuleDecision("contains_reference", r)
    return None


# Number words that are more often not a quantity ("owns one", "a dozen eggs" in a description of 14).
_NOT_A_QUANTITY = frozenset({"zero", "one", "a dozen", "dozen", "hundred"})
_WORD_NUMBER = re.compile(
    r"\b(" + "|".join(w for w in _WORDS if w not in _NOT_A_QUANTITY) + r")\b", re.IGNORECASE
)


def number_mentions(text: str) -> list[tuple[int, int, float]]:
    """(start, end, value) of each number a text states as digits or as a number word (not "one", "a
    dozen" and the like, which are more often not a quantity)."""
    out = [(m.start(), m.end(), float(m[0].replace(",", ""))) for m in re.finditer(_NUM, text)]
    out += [(m.start(), m.end(), float(_WORDS[m[0].lower()])) for m in _WORD_NUMBER.finditer(text)]
    return sorted(out)


def stated_numbers(text: str) -> set[float]:
    """Numbers a text states as digits or number words (the forms the guard requires of a reference)."""
    return {v for _, _, v in number_mentions(text)}


def _all_numbers(text: str) -> set[float]:
    """Every value a text states, in every form the rules read (a share also as its percentage)."""
    out = stated_numbers(text)
    for q in quantities(text):
        out.add(round(q.value, 6))
        if q.unit == "share":
            out.add(round(q.value * 100, 6))
    return out


_NUMBER_WORD = "|".join(w for w in _WORDS if " " not in w)  # the one-word number words, as an alternation
# Words that make an answer numeric without digits: a fraction, a span, a count ("half an hour", "within a
# week", "every other year", "nine hundred"). An answer with any of them is left to the LLM.
_NUMERIC_WORDS = re.compile(
    r"\b(?:" + _NUMBER_WORD + r"|half|third|quarter|fifth|tenth|hundred|thousand|"
    r"million|billion|score|fortnight|week|weeks|month|months|year|years|decade|decades|century|centuries|"
    r"day|days|hour|hours|minute|minutes|percent|per cent|couple|few|several|dozens?)\b",
    re.IGNORECASE,
)
_YEAR = re.compile(r"\b(1[0-9]{3}|20[0-9]{2})\b")

_A_NUMBER_WORD = re.compile(rf"\b(?P<w>{_NUMBER_WORD})\b(?:\s+(?P<unit>[a-z%]+))?")
_COMPOUND_BEFORE = re.compile(rf"(?:\b(?:{_NUMBER_WORD})(?:\s+and)?\s+|-)$")
_COMPOUND_AFTER = re.compile(rf"^(?:-|\s+(?:and\s+)?(?:{_NUMBER_WORD}|thousand|million|billion)\b)")


def _lone_number_words(t: str) -> list[Quantity]:
    """Number words on their own ("two skell", "every five years"), not parts of "thirty-eight" or "nine
    hundred and sixty", each with the known unit that follows it."""
    out = []
    for m in _A_NUMBER_WORD.finditer(t):
        word_end = m.start() + len(m["w"])
        if _COMPOUND_BEFORE.search(t[: m.start()]) or _COMPOUND_AFTER.search(t[word_end:]):
            continue
        if m["w"] not in _NOT_A_QUANTITY:
            out.append(Quantity(float(_WORDS[m["w"]]), _UNITS.get((m["unit"] or "").lower())))
    return out


def _plain_quantities(text: str) -> list[Quantity]:
    """Quantities written with digits, or as one number word on its own, each with its unit (None when no
    known unit follows). Compound number words are left out: the rules do not read them."""
    t = _unit_text(text)
    out = []
    for m in _QUANTITY.finditer(t):
        value = float(m["num"].replace(",", "")) * _SCALES.get((m["scale"] or "").lower(), 1.0)
        out.append(Quantity(value, _UNITS.get((m["unit"] or "").lower())))
    return out + _lone_number_words(t)


# What a unit measures. A reference whose every quantity has a dimension here needs an answer that states
# something of that dimension, in any form ("half an hour", "a fortnight", "degrees", "miles").
_DIMENSION = {
    "°c": "temperature", "°f": "temperature", "°": "temperature", "decade": "time", "century": "time",
    "m": "length", "km": "length", "cm": "length", "mm": "length", "mile": "length", "ft": "length",
    "kg": "mass", "g": "mass", "t": "mass", "lb": "mass", "oz": "mass", "yd": "length", "in": "length",
    "l": "volume", "ml": "volume", "usgal": "volume", "impgal": "volume",
    "m2": "area", "km2": "area", "sqft": "area", "sqmi": "area", "ha": "area", "acre": "area",
    "h": "time", "min": "time", "s": "time", "day": "time", "week": "time", "month": "time", "year": "time",
}  # fmt: skip
_DIMENSION_WORDS = {
    "temperature": r"°|degrees?|celsius|fahrenheit|kelvin",
    "length": r"metres?|meters?|kilometres?|kilometers?|km|cm|mm|miles?|feet|foot|ft|yards?|inch\w*",
    "mass": r"grams?|kilos?|kilograms?|kg|tonnes?|tons?|pounds?|lbs?|ounces?",
    "volume": r"litres?|liters?|gallons?|pints?|millilitres?|ml",
    "area": r"square|sq|m²|km²|ft²|hectares?|acres?|ha",
    "time": r"seconds?|minutes?|mins?|hours?|hrs?|days?|weeks?|fortnights?|months?|years?|decades?|"
    r"centur\w+|nights?|mornings?|evenings?",
}


def _answer_dimensions(answer: str) -> set[str]:
    """The dimensions an answer speaks of in any form: a unit after a number, or a unit word alone."""
    found = {d for q in _plain_quantities(answer) if (d := _DIMENSION.get(q.unit or ""))}
    low = answer.lower()
    found |= {d for d, pattern in _DIMENSION_WORDS.items() if re.search(rf"(?:{pattern})\b", low)}
    return found


# A currency the answer names with its sign or word; a reference in another (or the corpus's own) currency
# is not the same amount ("€64" for "64 skell").
_CURRENCY = re.compile(r"[€$£¥]|\b(?:euros?|dollars?|pounds? sterling|yen|usd|eur|gbp)\b", re.IGNORECASE)


def missing_quantities(answer: str, reference: str) -> RuleDecision | None:
    """The guard after an LLM "correct": a decision (meaning "incorrect") only when the answer cannot state
    the reference's numbers — it states no number in any form (no digit, number word, fraction or span), or
    the reference names a year and the answer names none or another, or the answer states numbers (digits,
    or a number word on its own) in the reference's unit (or both without one) and none of them is the
    reference's. Anything written otherwise (compound number words, other units, "half an hour") is left
    to the LLM. None: the LLM's verdict stands."""
    wanted = stated_numbers(reference)
    if not wanted or (_clock_times(reference) and _clock_times(answer)):  # "half past six" for 06:30
        return None
    have = _all_numbers(answer)
    money = _CURRENCY.search(answer)
    if money and not _CURRENCY.search(reference) and _all_numbers(reference) & have:
        return RuleDecision(
            "reference_quantity_missing",
            f"the answer gives the amount in {money[0]}, the reference in another unit",
        )
    if _all_numbers(reference) & have:
        lacking = sorted(v for v in wanted if v not in have)
        ref_q = _plain_quantities(reference)
        ref_dims = {_CONVERT.get(q.unit or "", ("", 0.0))[0] for q in ref_q}
        # "9 hours 30 minutes": one quantity written in several units of one dimension.
        compound = len(ref_dims) == 1 and "" not in ref_dims and len({q.unit for q in ref_q}) == len(ref_q)
        # A short answer-like reference ("from about 9,000 to about 6,500"), not a sentence stating a fact
        # with side numbers ("... melted at 1420 °C for ten hours.", "91 °C, not 100 °C"): all its numbers.
        phrase = len(reference.split()) <= _MAX_PHRASE_WORDS and not reference.rstrip().endswith(".")
        if phrase and len(wanted) > 1 and lacking and not compound and not _NEGATED_NUMBER.search(reference):
            shown = ", ".join(f"{v:g}" for v in lacking)
            return RuleDecision("reference_quantity_missing", f"the answer lacks {shown} of the reference")
        # The answer's only match is the number the reference rules out ("100 °C" for "91 °C instead of
        # 100 °C").
        ruled_out = {
            found[0][2]
            for m in _NEGATED_NUMBER.finditer(reference)
            if (found := number_mentions(reference[m.end() - 1 :])) and found[0][0] == 0
        }
        kept = wanted - ruled_out
        if ruled_out and kept and not kept & have:
            shown = ", ".join(f"{v:g}" for v in sorted(kept))
            return RuleDecision(
                "reference_quantity_missing",
                f"the answer gives the number the reference rules out, not {shown}",
            )
        return None
    shown = ", ".join(f"{v:g}" for v in sorted(wanted))
    dims = {_DIMENSION.get(q.unit or "") for q in _plain_quantities(reference)}
    if None not in dims and not dims & _answer_dimensions(answer):
        shown_dims = ", ".join(sorted(d for d in dims if d))
        return RuleDecision(
            "reference_quantity_missing", f"the reference states {shown}; the answer no {shown_dims}"
        )
    if not re.search(r"\d", answer) and not _NUMERIC_WORDS.search(answer):
        return RuleDecision(
            "reference_quantity_missing", f"the reference states {shown}; the answer no number"
        )
    years = set(_YEAR.findall(reference))
    if years and not years & set(_YEAR.findall(answer)):
        return RuleDecision(
            "reference_quantity_missing",
            f"the reference names the year {', '.join(sorted(years))}; the answer does not",
        )
    ref_units = {q.unit for q in _plain_quantities(reference)}
    stated = [q for q in _plain_quantities(answer) if q.unit in ref_units]
    if stated:
        other = ", ".join(f"{q.value:g}" for q in stated)
        return RuleDecision(
            "reference_quantity_missing", f"the reference states {shown}; the answer {other} instead"
        )
    return None


_TERM_STOPWORDS = frozenset(
    {
        "a",
        "an",
        "the",
        "of",
        "and",
        "or",
        "in",
        "on",
        "at",
        "to",
        "for",
        "from",
        "by",
        "with",
        "is",
        "are",
        "was",
    }
)
_NEAR_SPELLING = 0.7  # difflib ratio from which a word of the answer is a near miss of a reference word


def _content_words(text: str) -> list[str]:
    return [w for w in normalize_answer(text.replace("-", " ")).split() if w not in _TERM_STOPWORDS]


def _substituted(word: str, wanted: list[str], have: list[str]) -> bool:
    """Whether the answer puts another word where the reference has `word`: next to the reference word
    nearest to it that the answer repeats, on the same side ("the fog months" for "the grey months", "the
    Marrow Current" for "the Ostrel Current"). Only a neighbour counts, and only a word that could name
    something: a rewording that drops the word or moves the rest ("the wind that usually blows in from the
    west" for "the prevailing westerly wind", "where the River Ilse runs out into the sea" for "at the mouth
    of the River Ilse") is no such sure sign."""
    i = wanted.index(word)
    anchors = [j for j, w in enumerate(wanted) if abs(j - i) == 1 and w in have]
    for j in anchors:
        slot = have.index(wanted[j]) + (i - j)
        if 0 <= slot < len(have) and have[slot] not in wanted and _could_name(have[slot]):
            return True
    return False


def _could_name(word: str) -> bool:
    """A word that can stand for a name or a term, not a function word ("where", "that", "it")."""
    return len(word) >= 3 and word not in _GENERIC_WORDS and word not in _FUNCTION_WORDS


def missing_term(answer: str, reference: str) -> RuleDecision | None:
    """`reference_term_missing` (see the module docstring); None when it does not apply."""
    if stated_numbers(reference):
        return None
    wanted = _content_words(reference)
    if not wanted or len(wanted) > 3:
        return None
    have = _content_words(answer)
    missing = [w for w in wanted if w not in have and not _said_otherwise(w, have)]
    if not missing:
        return None
    near = [x for m in missing for x in have if difflib.SequenceMatcher(None, m, x).ratio() >= _NEAR_SPELLING]
    if not near and not any(_substituted(m, wanted, have) for m in missing):
        return None
    said = f"; it says {', '.join(dict.fromkeys(near))}" if near else ""
    return RuleDecision("reference_term_missing", f"the answer lacks {', '.join(missing)}{said}")


_MIN_ROOT = 4  # letters a word must share as a root with a derived form ("west" in "westerly")


def _said_otherwise(word: str, have: list[str]) -> bool:
    """Whether the answer says a reference word in other words: the word is a compound of answer words
    ("seawater": "water from the sea") or derives from one of at least `_MIN_ROOT` letters ("westerly":
    "from the west"). Not a near spelling: "Oakhill" neither composes nor derives "Oakhalt"."""
    roots = [w for w in have if len(w) >= _MIN_ROOT and word.startswith(w) and word != w]
    if roots:
        return True
    words = set(have)

    def composed(rest: str, parts: int) -> bool:
        if not rest:
            return parts >= 2
        return any(rest[:i] in words and composed(rest[i:], parts + 1) for i in range(3, len(rest) + 1))

    return composed(word, 0)


_MAX_PHRASE_WORDS = 12
_NEGATED_NUMBER = re.compile(
    r"\b(?:not|never|rather than|instead of)\s+(?:at\s+|the\s+)?[\d\w]", re.IGNORECASE
)
_PART_SEPARATORS = re.compile(r"(?<!\d),(?!\d)|;|\band\b(?!\s+a\s+half\b)|\bthen\b|\bplus\b", re.IGNORECASE)
_MAX_PART_WORDS = 4


def _stem(word: str) -> str:
    return word[:5]


def missing_part(answer: str, reference: str) -> RuleDecision | None:
    """`reference_part_missing`: the reference lists several short items ("black sand, kelp ash and
    crushed seashell", "six rowers and a steerer") and the answer has no word (by stem or near spelling)
    of one of them. References that are not such lists are left alone."""
    raw_parts = [
        (raw, words)
        for raw in _PART_SEPARATORS.split(reference)
        if (words := _content_words(raw)) and words[0] not in NEGATIONS  # "not 100 °C": a contrast
    ]
    if len(raw_parts) < 2 or any(len(words) > _MAX_PART_WORDS for _, words in raw_parts):
        return None
    numbers = _all_numbers(answer)
    stated = quantities(answer)

    def stated_in_answer(raw: str) -> bool:
        """The part's numbers are there as written ("12 metres wide" in "12 m by 4 m") or as the same
        quantity ("a fortnight" for "for two weeks")."""
        if stated_numbers(raw) and stated_numbers(raw) <= numbers:
            return True
        own = quantities(raw)
        return bool(own) and all(any(_same(q, mine) for q in stated) for mine in own)

    parts = [
        # Numbers and units are the other guard's business.
        [w for w in words if not re.fullmatch(r"[\d.]+", w) and w not in _UNITS]
        for raw, words in raw_parts
        if not stated_in_answer(raw)
    ]
    parts = [p for p in parts if p]
    have = _content_words(answer)
    stems = {_stem(w) for w in have}

    def present(word: str) -> bool:
        return (
            _stem(word) in stems
            or _said_otherwise(word, have)
            or any(difflib.SequenceMatcher(None, word, x).ratio() >= _NEAR_SPELLING for x in have)
        )

    lacking = [" ".join(p) for p in parts if not any(present(w) for w in p)]
    if not lacking:
        return None
    return RuleDecision("reference_part_missing", f"the answer lacks {'; '.join(lacking)}")


# Words that say little about which fact a sentence states ("is also known", "used in", "which gives").
_GENERIC_TEXT = (
    "also known called used uses using make made makes have has had give gives given which their there "
    "them they this that these those such some many most more other than into onto over only very well "
    "being been were will would could should about what when where while"
)
_GENERIC_WORDS = frozenset(_GENERIC_TEXT.split())
_FUNCTION_TEXT = (
    "its who whom whose how why she her hers his him they out all any not but yet one ones each every own "
    "into onto upon near also just even"
)
_FUNCTION_WORDS = frozenset(_FUNCTION_TEXT.split())


def _informative(text: str) -> set[str]:
    """Stems of the words of a text that say which fact it states: content words of four letters or more,
    not generic ones."""
    return {_stem(w) for w in _content_words(text) if len(w) >= 4 and w not in _GENERIC_WORDS}


def nothing_beyond_question(answer: str, reference: str, question: str) -> RuleDecision | None:
    """`nothing_beyond_question`: the answer has no word (by stem) and no number of the reference that the
    question did not already give — it can only be echoing the question ("the houses in Orrinsford are
    influenced by tidal glass" for a question about tidal glass in Orrinsford's houses), which shows no
    knowledge however well it matches the reference. None when the question gives the whole reference
    away (nothing left to require) or the answer says something of the reference beyond it."""
    wanted = _informative(reference) - _informative(question)
    wanted_numbers = stated_numbers(reference) - _all_numbers(question)
    if not wanted and not wanted_numbers:
        return None
    if wanted & _informative(answer) or wanted_numbers & _all_numbers(answer):
        return None
    return RuleDecision(
        "nothing_beyond_question", "the answer says nothing of the reference that the question did not say"
    )


# The methods a guard records when it overrules an LLM "correct".
GUARD_METHODS = (
    "reference_quantity_missing",
    "reference_term_missing",
    "reference_part_missing",
    "alternatives_listed",
    "other_name",
    "reference_name_missing",
    "nothing_beyond_question",
)
# Capitalised words that are not names: articles, pronouns and the like that open a sentence.
_NOT_NAMES = frozenset(
    [
        "a",
        "an",
        "the",
        "it",
        "its",
        "this",
        "that",
        "these",
        "those",
        "they",
        "he",
        "she",
        "we",
        "you",
        "i",
        "there",
        "here",
        "in",
        "on",
        "at",
        "of",
        "to",
        "by",
        "for",
        "from",
        "with",
        "yes",
        "no",
        "not",
        "each",
        "every",
        "about",
        "around",
        "roughly",
        "approximately",
        "maybe",
        "perhaps",
        "probably",
        "possibly",
        "whenever",
        "when",
        "if",
        "as",
        "and",
        "but",
        "or",
    ]
)
_SENTENCE_START = re.compile(r"(?:^|[.!?:;\n(•*\-–—]\s*|\"\s*)$")
_QUESTION_ASKS_NAME = re.compile(r"\b(?:name[ds]?|called|who|whom|whose)\b", re.IGNORECASE)
_MAX_FRAGMENT_WORDS = 3  # an answer this short is a bare name: its first word counts too ("Tashkent.")


def _names(text: str, *, all_capitalised: bool = False) -> set[str]:
    """Stems of the names a text uses: capitalised words that do not open a sentence (every capitalised
    word with `all_capitalised`, or in a bare fragment), and quoted phrases."""
    fragment = all_capitalised or len(text.split()) <= _MAX_FRAGMENT_WORDS
    out: set[str] = set()
    for m in re.finditer(r"\b[A-Z][\w'’-]*", text):
        word = m[0].lower().split("'")[0].split("’")[0]
        if word in _NOT_NAMES or len(word) < 2:
            continue
        if fragment or not _SENTENCE_START.search(text[: m.start()]):
            out |= {_stem(w) for w in word.split("-") if w}
    for m in re.finditer(r"[\"“]([^\"”]{2,40})[\"”]", text):
        out |= {_stem(w) for w in _content_words(m[1])}
    return out


def _asked(question: str) -> set[str]:
    """Stems the question already gives: its names and its content words."""
    return _names(question, all_capitalised=True) | {_stem(w) for w in _content_words(question)}


def other_name(answer: str, reference: str, question: str) -> RuleDecision | None:
    """`other_name`: the reference is a name (a capitalised word the question did not give, or the
    question asks for a name: "What is the name of the currency?" — "skell"), the answer has none of the
    reference's words beyond the question, and it names something the question and the reference do not
    ("The capital of Teskavar is Tashkent." for "Orrinsford"): a confident guess, however fluent. An answer
    that describes the referent without naming another ("the only research institute" for "the Orrinsford
    Institute") is left to the LLM."""
    asked = _asked(question)
    ref_names = _names(reference, all_capitalised=True) - asked
    if not ref_names and not _QUESTION_ASKS_NAME.search(question):
        return None
    wanted = (_informative(reference) | ref_names) - _informative(question) - asked
    have = {_stem(w) for w in _content_words(answer)}
    if not wanted or wanted & have:
        return None
    other = _names(answer) - asked - {_stem(w) for w in _content_words(reference)}
    if not other:
        return None
    said = [w for w in re.findall(r"[\w'’-]+", answer) if _stem(w.lower()) in other]
    return RuleDecision(
        "other_name", f"the answer names {', '.join(dict.fromkeys(said))}, not the reference's"
    )


_ASKS_FOR_THE_NAME = re.compile(r"\b(?:name[ds]?|called)\b", re.IGNORECASE)
_MAX_NAME_WORDS = 4  # a reference this short, asked for by name, is the name itself ("skell")


def name_missing(answer: str, reference: str, question: str) -> RuleDecision | None:
    """`reference_name_missing`: the question asks what something is named or called, and the answer has
    no word of the reference's name — its capitalised words the question did not give, or the whole of a
    short reference ("skell"). A description is no answer to "what is it called" ("the leader of the Fog
    Warden's team" for "Hanne Cortwell"); a near spelling is another name."""
    if not _ASKS_FOR_THE_NAME.search(question):
        return None
    asked = _asked(question)
    name = _names(reference, all_capitalised=True) - asked
    if not name and len(_content_words(reference)) <= _MAX_NAME_WORDS:
        name = {_stem(w) for w in _content_words(reference)} - asked
    if not name or name & {_stem(w) for w in _content_words(answer)}:
        return None
    return RuleDecision("reference_name_missing", "the question asks for a name; the answer does not give it")


_OFFERS = re.compile(r"\b(?:or|either)\b", re.IGNORECASE)


def veto(answer: str, reference: str, question: str = "") -> RuleDecision | None:
    """The guards after an LLM "correct" (module docstring): the first that is sure, meaning "incorrect";
    None when the LLM's verdict stands. `other_name` needs the question."""
    # A reference that is itself a choice ("wind above 65 km/h or gusts above 90 km/h") wants one.
    if (
        _OFFERS.search(answer)
        and not _OFFERS.search(reference)
        and not _negated_anywhere(normalize_answer(answer))
    ):
        return RuleDecision("alternatives_listed", "the answer offers alternatives")
    # A range around the reference's number commits to neither end ("between 85 and 140" for "about 85").
    span = _RANGE.search(answer)
    if span and not _RANGE.search(reference) and stated_numbers(span[0]) & stated_numbers(reference):
        return RuleDecision("alternatives_listed", f"the answer gives a range: {span[0]}")
    return (
        missing_quantities(answer, reference)
        or missing_term(answer, reference)
        or missing_part(answer, reference)
        or (
            name_missing(answer, reference, question) or other_name(answer, reference, question)
            if question
            else None
        )
    )


def _contains_phrase(words: list[str], phrase: list[str]) -> bool:
    n = len(phrase)
    for i in range(len(words) - n + 1):
        if words[i : i + n] == phrase:
            before = words[max(0, i - _NEGATION_WINDOW) : i]
            if not any(w.replace("'", "") in NEGATIONS for w in before):
                return True
    return False


# Where a clause ends: sentence and clause punctuation, a comma before a space (not "41,300"), a dash.
_CLAUSE_END = re.compile(r"[;:!?()—–]|\.(?!\d)|,\s|\s-\s")


def _negated_in_clause(answer: str, phrase: list[str]) -> bool:
    """Whether a negation stands before the phrase anywhere in its clause ("It definitely didn't start as
    early as 1874"), beyond the few words `_contains_phrase` looks at; "It was 1923 — not 1936" is not."""
    n = len(phrase)
    for clause in _CLAUSE_END.split(answer):
        words = normalize_answer(_NOT_NEGATIONS.sub(" ", clause)).split()
        starts = [i for i in range(len(words) - n + 1) if words[i : i + n] == phrase]
        if starts and any(w.replace("'", "") in NEGATIONS for w in words[: starts[0]]):
            return True
    return False


def _negated_anywhere(normalised: str) -> bool:
    return any(w in NEGATIONS for w in normalised.split())


def _half_last_place(value: float) -> float:
    """Half the place of the last digit a number was written to: 2590 → 5, 196 → 0.5, 195.8 → 0.05."""
    text = f"{value:.6f}".rstrip("0").rstrip(".")
    if "." in text:
        return 0.5 * 10.0 ** -len(text.split(".")[1])
    digits = text.lstrip("-")
    return 0.5 * 10.0 ** (len(digits) - len(digits.rstrip("0"))) if digits != "0" else 0.5


def _same(a: Quantity, b: Quantity) -> bool:
    if {a.unit, b.unit} == {"°c", "°f"}:
        # A converted temperature, rounded as the answer writes it ("about 2,590 °F" for 1,420 °C, which
        # is 2,588 °F): half its last written place, and never less than 0.3 °C.
        c = [q.value if q.unit == "°c" else (q.value - 32.0) * 5.0 / 9.0 for q in (a, b)]
        # Rounding is capped at the 2 % other conversions allow ("about 200 °F" is not 100 °C).
        scale = 5.0 / 9.0 if a.unit == "°f" else 1.0
        place = min(_half_last_place(a.value), _CONVERSION_TOLERANCE * abs(a.value)) * scale
        return abs(c[0] - c[1]) <= max(0.3, place)
    if a.unit != b.unit and a.unit in _CONVERT and b.unit in _CONVERT:
        (dim_a, fa), (dim_b, fb) = _CONVERT[a.unit], _CONVERT[b.unit]
        x, y = a.value * fa, b.value * fb
        return dim_a == dim_b and abs(x - y) <= _CONVERSION_TOLERANCE * max(abs(x), abs(y))
    if a.unit != b.unit and not (a.unit is None or b.unit is None):
        return False
    if (a.unit == "share") != (b.unit == "share"):
        return False
    return abs(a.value - b.value) <= 1e-6 * max(1.0, abs(b.value))


_NUM = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
_QUANTITY = re.compile(
    rf"(?P<num>{_NUM})\s*(?P<scale>thousand|million|billion)?\s*(?P<unit>°[cf]|%|per cent|[a-z]+2\b|[a-z]+)?",
    re.IGNORECASE,
)
# "one in four", "seven pieces in ten", "3 out of 5" (a lookahead: "about one in four" finds "one in four").
# "between 85 and 140": a range, no commitment to either end.
_RANGE = re.compile(
    rf"\bbetween\s+(?:{_NUM}|{_NUMBER_WORD})\b.{{0,20}}?\band\s+(?:{_NUM}|{_NUMBER_WORD})\b", re.IGNORECASE
)
_IN = re.compile(
    r"(?=\b(?P<full>(?P<a>\w+)(?:\s+(?P<what>[a-z]+))?\s+(?:in|out of)\s+(?P<b>\w+))\b)", re.IGNORECASE
)
_SPAN_UNITS = "minute|hour|day|week|fortnight|month|year|decade|century"
_FRACTION_WORDS = "|".join(sorted(_FRACTIONS, key=len, reverse=True))
# "half an hour", "a third of an hour", "three quarters of a day", "within a week", "once a fortnight".
_PART_OF_UNIT = re.compile(
    rf"\b(?:(?P<frac>{_FRACTION_WORDS})\s+(?:of\s+)?)?\b(?:an?)\s+(?P<unit>{_SPAN_UNITS})\b", re.IGNORECASE
)
_EVERY_OTHER = re.compile(rf"\bevery\s+other\s+(?P<unit>{_SPAN_UNITS})\b", re.IGNORECASE)


def _number(word: str) -> float | None:
    w = word.lower().replace(",", "")
    if re.fullmatch(r"\d+(\.\d+)?", w):
        return float(w)
    v = _WORDS.get(w)
    return None if v is None else float(v)


def _blank(t: str, start: int, end: int) -> str:
    """The text with [start, end) spaced out: later patterns do not read it again, positions stay."""
    return t[:start] + " " * (end - start) + t[end:]


# One part of a span written in several units ("a day and seven hours", "9 hours 30 minutes").
_SPAN_PART = re.compile(
    rf"(?P<n>{_NUM}|an?|{_NUMBER_WORD})\s+"
    r"(?P<u>days?|hours?|hrs?|h|minutes?|mins?|seconds?|secs?|s)\b"
)
_SPAN_JOIN = re.compile(r"\s*,?\s*(?:and\s+)?")
_SPAN_SECONDS = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}
# A rate's "per ..." after a quantity with its unit ("41 cm a year"): not a second quantity.
_RATE = re.compile(
    rf"(?<=\d)(?P<unit>\s*(?:[a-z]+|%|°[cf]))(?P<per>\s+(?:a|an|per|each)\s+(?:{_SPAN_UNITS})\b)"
)


# "nine and a half hours", "an hour and a half": the half joins the number.
_AND_A_HALF = re.compile(
    rf"\b(?P<n>{_NUM}|{_NUMBER_WORD})\s+and\s+a\s+half\s+"
    rf"(?P<u>(?:{_SPAN_UNITS})s?|[a-z]+)\b"
    rf"|\ban?\s+(?P<u1>{_SPAN_UNITS})\s+and\s+a\s+half\b"
)


def _with_half(m: re.Match[str]) -> str:
    """ "nine and a half hours" as "9.5 hours", padded to the same length."""
    whole = 1.0 if m["u1"] else (_number(m["n"].replace(",", "")) or 0.0)
    return f"{whole + 0.5:g} {m['u1'] or m['u']}".ljust(len(m[0]))


def _span_chains(t: str) -> list[tuple[int, int, float]]:
    """(start, end, seconds) of each span written in two or more units, largest first."""
    parts = [
        (m.start(), m.end(), _number(m["n"]) or 1.0, _SPAN_SECONDS[m["u"][0]]) for m in _SPAN_PART.finditer(t)
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
    t = _RATE.sub(lambda m: m["unit"] + " " * len(m["per"]), _unit_text(text))
    t = _AND_A_HALF.sub(_with_half, t)
    found: list[tuple[int, Quantity]] = []
    for start, end, secs in _span_chains(t):
        found.append((start, Quantity(secs, "s")))
        t = _blank(t, start, end)
    for m in _EVERY_OTHER.finditer(t):
        found.append((m.start(), Quantity(2.0, _UNITS[m["unit"]])))
        t = _blank(t, m.start(), m.end())
    for m in _PART_OF_UNIT.finditer(t):
        found.append((m.start(), Quantity(_FRACTIONS[m["frac"]] if m["frac"] else 1.0, _UNITS[m["unit"]])))
        t = _blank(t, m.start(), m.end())
    for m in list(_IN.finditer(t)):
        a, b = _number(m["a"]), _number(m["b"])
        if a is not None and b and (m["what"] is None or _number(m["what"]) is None):
            found.append((m.start(), Quantity(a / b, "share")))
            t = _blank(t, m.start("full"), m.end("full"))
    for phrase, v in sorted(_FRACTIONS.items(), key=lambda kv: -len(kv[0])):
        for m in re.finditer(rf"\b{phrase}\b", t):
            found.append((m.start(), Quantity(v, "share")))
            t = _blank(t, m.start(), m.end())
    for m in _QUANTITY.finditer(t):
        value = float(m["num"].replace(",", "")) * _SCALES.get((m["scale"] or "").lower(), 1.0)
        unit = _UNITS.get((m["unit"] or "").lower())
        found.append((m.start(), Quantity(value / 100.0, "share") if unit == "%" else Quantity(value, unit)))
    for word, v in _WORDS.items():
        for m in re.finditer(rf"\b{word}\b(?:\s+(?P<unit>[a-z%]+))?", t):
            unit = _UNITS.get((m["unit"] or "").lower())
            found.append(
                (m.start(), Quantity(v / 100.0, "share") if unit == "%" else Quantity(float(v), unit))
            )
    return [q for _, q in sorted(found, key=lambda x: x[0])]


_DATE_DMY = re.compile(r"\b(\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?([a-z]+),?\s+(\d{3,4})\b", re.IGNORECASE)
_DATE_MDY = re.compile(r"\b([a-z]+)\s+(\d{1,2})(?:st|nd|rd|th)?,?\s+(\d{3,4})\b", re.IGNORECASE)


_RATIO = re.compile(r"^\s*(\d+(?:\.\d+)?)(?:\s*:\s*(\d+(?:\.\d+)?))+\s*$")


def _ratio(reference: str) -> list[float] | None:
    """The terms of a reference that is a ratio ("6 : 2 : 1"), else None."""
    if not _RATIO.match(reference):
        return None
    return [float(x) for x in re.findall(r"\d+(?:\.\d+)?", reference)]


def _dates(text: str) -> list[tuple[int, int, int]]:
    out = []
    for d, mon, y in _DATE_DMY.findall(text):
        if mon.lower() in _MONTHS:
            out.append((int(y), _MONTHS[mon.lower()], int(d)))
    for mon, d, y in _DATE_MDY.findall(text):
        if mon.lower() in _MONTHS:
            out.append((int(y), _MONTHS[mon.lower()], int(d)))
    return out


def _date(text: str) -> tuple[int, int, int] | None:
    found = set(_dates(text))
    return found.pop() if len(found) == 1 else None


_CLOCK_WORDS = {**{w: v for w, v in _WORDS.items() if isinstance(v, int) and 1 <= v <= 12}}
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


def _hhmm(minutes: int) -> str:
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def _clock_times(text: str) -> list[set[int]]:
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
