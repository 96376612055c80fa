"""The English quantity guard: after an LLM "correct", sure that the answer does not state the
reference's numbers (`missing_quantities`)."""

from __future__ import annotations

import re

from proctor.judging.equivalence.attached import swapped
from proctor.judging.equivalence.base import RuleDecision
from proctor.judging.equivalence.codes import has_power_of_ten, multiples
from proctor.judging.equivalence.dates import clock_times, dates
from proctor.judging.equivalence.identifiers import expanded, states_identifier
from proctor.judging.equivalence.numbers import number_mentions
from proctor.judging.equivalence.quantities import (
    Quantity,
    all_numbers,
    answer_dimensions,
    minutes_if_time,
    plain_quantities,
    quantities,
    ratio_unit,
    same,
)
from proctor.judging.equivalence.rates import agreeing, daily_stated
from proctor.judging.equivalence.units import table

_YEAR = re.compile(r"\b(1[0-9]{3}|20[0-9]{2})\b\s*([a-zµμ%°]*)", re.IGNORECASE)
# A currency the answer names with its sign or word; a reference in another (or the corpus's own) currency
# is not the same amount ("€64" for "64 skell").
_CURRENCY = re.compile(r"[€$£¥]|\b(?:euros?|dollars?|pounds? sterling|yen|usd|eur|gbp)\b", re.IGNORECASE)
_MAX_PHRASE_WORDS = 16
_FREQUENCY = re.compile(
    r"\b(?:once|twice|thrice|times)\s+(?:an?|per|each|every)\b|\bevery\b|\b(?:hourly|daily|weekly|monthly)\b",
    re.IGNORECASE,
)
_NEGATED_NUMBER = re.compile(
    r"\b(?:not|never|rather than|instead of)\s+(?:at\s+|the\s+)?[\d\w]", re.IGNORECASE
)


_ASIDE = re.compile(r"\s*\(([^()]*\d[^()]*)\)")


def missing_quantities(answer: str, reference: str, question: str = "") -> RuleDecision | None:
    """`reference_quantity_missing` (`_missing`), where numbers in parentheses are an aside: a reference
    with numbers outside and inside parentheses ("11 hours (range 9–14 hours)", "10 mg in 2 mL (5
    mg/mL)", "15 mg once daily (0.5 mg/kg)") gives a range, a control value or the same amount another
    way in them, so the guard is sure only when the answer states neither what stands outside them nor
    what stands inside (`_states_aside`)."""
    outside = _ASIDE.sub(" ", reference).strip()
    asides = _ASIDE.findall(reference)
    if not asides or not re.search(r"\d", outside):
        return _missing(answer, reference, question)
    found = _missing(answer, outside, question)
    if found is None or any(_states_aside(answer, inside, question) for inside in asides):
        return None
    return found


def _states_aside(answer: str, inside: str, question: str) -> bool:
    """The answer states what the parentheses give ("5 mg/mL" of "(5 mg/mL)"): it shares a number with
    them, in any form, and the guard finds none of their numbers missing."""
    shares = all_numbers(inside) & all_numbers(answer) or any(
        same(q, r) for q in quantities(answer) for r in quantities(inside) if r.unit
    )
    return bool(shares) and _missing(answer, inside, question) is None


def _missing(answer: str, reference: str, question: str = "") -> RuleDecision | None:
    """`reference_quantity_missing`: sure when the answer cannot state the reference's numbers — it states
    no number in any form (no digit, number word, fraction or span) or nothing of the reference's
    dimension, the reference names a year and the answer none or another, the answer states numbers in
    the reference's unit (or both without one) and none of them is the reference's quantity in any form, a
    short several-number reference loses one, the right number comes in a currency the reference does not
    use ("€64" for "64 skell"), or the reference writes a date and the answer another date. A date the
    answer writes in another form ("30 June 2025" for "2025-06-30") is no missing number; a power of ten on
    one side only ("75,000 per µL" for "75 × 10⁹/L") is left to the LLM, and so is anything written
    otherwise (compound number words, other units, "half an hour"). With the question: sure when every
    number the answer states is one the question gives and the reference states one it does not ("the
    threshold set for Day 1" for "9.0 g/dL"). A multiple of a named value ("1.5 × ULN") is no other
    unit's number: "1.5 mg/dL" for it is vetoed.

    Measured precision (`bench/rule_precision.py --exclude biomedical`, nineteen sets): 374/377 alone
    (0.992); 23/24 behind the LLM (0.96).
    """
    if (blanked := agreeing(answer, reference)) is not None:
        answer, reference = blanked  # "twice daily" for "every 12 hours": the rate is stated
    ref_dates, answer_dates = set(dates(reference)), set(dates(answer))
    if ref_dates and answer_dates:
        if ref_dates <= answer_dates:  # "30 June 2025" for "2025-06-30": the date is its numbers
            return None
        if not ref_dates & answer_dates:
            return RuleDecision("reference_quantity_missing", "the answer gives another date")
    # Numbers the answer only repeats from the question say nothing of the reference's (in any notation),
    # unless one is the reference's quantity written otherwise ("a week" for "7 days").
    given = all_numbers(question) if question else set()
    if (
        (have := all_numbers(answer))
        and have <= given
        and all_numbers(reference) - given
        and not any(same(q, r) for q in quantities(answer) for r in quantities(reference) if r.unit)
    ):
        return RuleDecision(
            "reference_quantity_missing", "the answer states only the question's numbers", absent=True
        )
    if question and (bare := _question_number_bare(answer, reference, question)) is not None:
        return bare
    # A power of ten on one side only ("75,000 per µL" for "75 × 10⁹/L") is a conversion the guard does
    # not read: left to the LLM.
    if has_power_of_ten(reference) != has_power_of_ten(answer):
        return None
    # A number word capitalised inside the reference is part of a name ("the Moot of Forty"), not a
    # quantity the answer must state.
    wanted = {v for start, _, v in number_mentions(reference) if start == 0 or not reference[start].isupper()}
    if not wanted or (clock_times(reference) and clock_times(answer)):  # "half past six" for 06:30
        return None
    # "450K" is 450,000 (a thousands suffix on a bare number); "150 mg twice daily" states "300 mg/day".
    have = (
        all_numbers(answer)
        | {q.value * 1000 for q in quantities(answer) if q.unit is None and q.written == "k"}
        | daily_stated(answer, reference)
    )
    if (named := _multiple_in_a_unit(answer, reference)) is not None:
        return named
    money = _CURRENCY.search(answer)
    if money and not _CURRENCY.search(reference) and all_numbers(reference) & have:
        return RuleDecision(
            "reference_quantity_missing",
            f"the answer gives the amount in {money[0]}, the reference in another unit",
        )
    if (in_other_unit := _in_other_unit(answer, reference)) is not None:
        return in_other_unit
    if (other_unit := _same_number_other_unit(answer, reference)) is not None:
        return other_unit
    if all_numbers(reference) & have:
        # A number the answer states converted ("0.75 g" for "750 mg") is had.
        have |= {r.value for r in quantities(reference) for q in quantities(answer) if r.unit and same(q, r)}
        return _lacking_among_several(reference, wanted, have)
    shown = ", ".join(f"{v:g}" for v in sorted(wanted))
    measures = table().measures
    dims = {measures.get(q.unit or "") for q in plain_quantities(reference)}
    if None not in dims and not dims & answer_dimensions(answer):
        shown_dims = ", ".join(sorted(d for d in dims if d))
        return RuleDecision(
            "reference_quantity_missing",
            f"the reference states {shown}; the answer no {shown_dims}",
            absent=True,
        )
    if not re.search(r"\d", answer) and not table().numeric_words.search(answer):
        return RuleDecision(
            "reference_quantity_missing", f"the reference states {shown}; the answer no number", absent=True
        )
    years = _years(reference)
    if years and not years & (answer_years := _years(answer)):
        return RuleDecision(
            "reference_quantity_missing",
            f"the reference names the year {', '.join(sorted(years))}; the answer does not",
            absent=not answer_years,
        )
    # The same quantity written otherwise ("one day and seven hours" for "31 hours") is stated, unless
    # the answer only repeats it from the question ("1 KiB is 1000 bytes" to "How many bytes is 1 KiB?").
    ref_q = [q for q in quantities(reference) if q.unit]
    asked = [q for q in quantities(question) if q.unit] if question else []
    if any(
        same(q, r) for q in quantities(answer) if q.unit and not any(same(q, x) for x in asked) for r in ref_q
    ):
        return None
    ref_units = {q.unit for q in plain_quantities(reference)}
    stated = [q for q in plain_quantities(answer) if q.unit in ref_units]
    if stated:
        other = ", ".join(f"{q.value:g}" for q in stated)
        return RuleDecision(
            "reference_quantity_missing", f"the reference states {shown}; the answer {other} instead"
        )
    return None


def _question_number_bare(answer: str, reference: str, question: str) -> RuleDecision | None:
    """The question gives a number bare ("What does --snaplen 256 do?"), the reference states it in a
    unit ("the first 256 bytes of each packet") and the answer states it without speaking of that unit's
    dimension at all ("sets the snaplen to 256"): the unit is what the reference adds, and the answer's
    number is the question's. Sure: an answer that never speaks of bytes cannot state 256 bytes."""
    measures, given = table().measures, all_numbers(question)
    asked = quantities(question)
    spoken = answer_dimensions(answer)
    for r in plain_quantities(reference):
        dim = measures.get(r.unit or "")
        if (
            dim
            and round(r.value, 6) in given
            and not any(same(q, r) for q in asked if q.unit)
            and round(r.value, 6) in all_numbers(answer)
            and dim not in spoken
            and not any(same(q, r) for q in quantities(answer) if q.unit)
        ):
            unit = r.written or r.unit
            return RuleDecision(
                "reference_quantity_missing",
                f"the answer repeats the question's {r.value:g} without the reference's {unit}",
            )
    return None


def _in_other_unit(answer: str, reference: str) -> RuleDecision | None:
    """The reference states one quantity in a unit that converts; the answer states quantities of its
    dimension and none of them is it ("2 GB" for "2 GiB", "300 ms" for "300s", "72 minutes" for "72
    hours", "410 µg/mL" for "410 ng/mL": a ratio unit whose parts convert), whatever their numbers.
    Not where either states a frequency ("three times a day" for "every 8 hours": "a day" is no span
    there)."""
    ref_q = quantities(reference)
    convert: dict[str, tuple[str, float]] = dict(table().convert)
    convert.update({q.unit: r for q in ref_q if q.unit and (r := ratio_unit(q.unit))})
    if len(ref_q) != 1 or ref_q[0].unit not in convert or _FREQUENCY.search(answer + " " + reference):
        return None
    wanted, dim = ref_q[0], convert[ref_q[0].unit or ""][0]

    def dimension(q: Quantity) -> str:
        unit = minutes_if_time(q, wanted).unit or ""
        found = convert.get(unit) or ratio_unit(unit)
        return found[0] if found else ""

    mine = [q for q in quantities(answer) if dimension(q) == dim]
    if not mine or any(same(q, wanted) for q in mine):
        return None
    said = ", ".join(f"{q.value:g} {q.written or q.unit}" for q in mine)
    return RuleDecision(
        "reference_quantity_missing",
        f"the reference states {wanted.value:g} {wanted.written}; the answer {said}",
    )


def _same_number_other_unit(answer: str, reference: str) -> RuleDecision | None:
    """The answer states a quantity of the reference with its number but in another unit of the same
    dimension or without the reference's denominator, or in a unit of another dimension, and states it in
    no form: "2 to 8 ng/mL" for "2 to 8 µg/mL", "5 M" for "5 mM", "15 mg every 8 hours" for "15 mg/kg
    every 8 hours" (a dose per kilogram is no dose), "125 mg/dL" for "125 mmol/L" (what is measured out
    is of another dimension: a mass, not an amount of substance). Sure: the same digits in another unit
    are another amount."""
    stated = quantities(answer)
    for r in quantities(reference):
        if not r.unit or r.unit == "share" or any(same(q, r) for q in stated):
            continue
        for q in stated:
            same_number = abs(q.value - r.value) <= 1e-9 * max(1.0, r.value)
            if (
                q.unit
                and q.unit != r.unit
                and same_number
                and (
                    _dimension(q.unit) == _dimension(r.unit) != ""
                    or q.unit == r.unit.partition("/")[0]
                    or _other_numerator(q.unit, r.unit)
                    or "" != _dimension(_numerator(q.unit)) != _dimension(_numerator(r.unit)) != ""
                )
            ):
                return RuleDecision(
                    "reference_quantity_missing",
                    f"the reference states {r.value:g} {r.unit}; the answer {q.value:g} {q.unit}",
                )
        if r.unit.endswith("mol/l") and re.search(rf"(?<![\w.]){r.value:g}\s?M\b", answer):
            # "5M" for "5 mM": molar (or a million), never millimolar.
            return RuleDecision(
                "reference_quantity_missing", f"the reference states {r.value:g} {r.unit}; the answer molar"
            )
    return None


def _numerator(unit: str) -> str:
    """What a ratio unit measures out ("mg" of "mg/dl"); a plain unit is its own."""
    return unit.partition("/")[0]


def _other_numerator(stated: str, wanted: str) -> bool:
    """A ratio unit whose numerator is another unit of the reference's dimension: "250 mg per mL" for
    "250 µg" (a per-mL amount whose mass is in milligrams, not micrograms)."""
    numerator = stated.partition("/")[0]
    return (
        "/" in stated
        and "/" not in wanted
        and numerator != wanted
        and _dimension(numerator) == _dimension(wanted) != ""
    )


def _dimension(unit: str) -> str:
    """A unit's dimension ("mass/volume" for a ratio whose parts convert), "" when none is known."""
    found = table().convert.get(unit) or ratio_unit(unit)
    return found[0] if found else ""


def _years(text: str) -> set[str]:
    """Four-digit numbers that can be years: not those a unit follows ("1500 ms", "2000 mg")."""
    aliases = table().aliases
    return {m[1] for m in _YEAR.finditer(text) if m[2].lower() not in aliases}


def _lacking_among_several(reference: str, wanted: set[float], have: set[float]) -> RuleDecision | None:
    """The answer shares a number with the reference: sure only when a short answer-like reference loses
    one of its numbers, or the answer's only match is the number the reference rules out."""
    lacking = sorted(v for v in wanted if v not in have)
    ref_q = plain_quantities(reference)
    convert = table().convert
    ref_dims = {convert.get(q.unit or "", ("", 0.0))[0] for q in ref_q}
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
            "reference_quantity_missing", f"the answer gives the number the reference rules out, not {shown}"
        )
    return None


def multiple_kept(answer: str, reference: str) -> bool:
    """Every multiple of a named value the reference states ("1.5 × ULN") the answer states with that
    name, or the name written out ("times the upper limit of normal")."""
    return all(
        states_identifier(answer, name) or expanded(answer, name) for name in multiples(reference).values()
    )


def _multiple_in_a_unit(answer: str, reference: str) -> RuleDecision | None:
    """The reference states a multiple of a named value ("≤1.5 × ULN"); the answer states its number in
    a unit and does not name the value ("≤1.5 mg/dL"): another quantity."""
    if multiple_kept(answer, reference):
        return None
    for value, name in multiples(reference).items():
        if any(q.unit and abs(q.value - value) <= 1e-9 * max(1.0, value) for q in quantities(answer)):
            return RuleDecision(
                "reference_quantity_missing", f"the reference states {value:g} × {name}; the answer a unit"
            )
    return None


_THEN = re.compile(r"\bthen\b|\bfollowed by\b|\bafter that\b", re.IGNORECASE)


def order_changed(answer: str, reference: str) -> RuleDecision | None:
    """`reference_order_changed`: sure when reference and answer each order steps ("then", "followed
    by") and state the same quantities, each as often, in another order ("every 3 months for the first
    6 months, then every 2 months" for "every 2 months for the first 6 months, then every 3 months"): the
    schedule is reversed however equal its numbers. Also sure when the answer states the quantities of a
    several-quantity reference but attaches one of its words to another of them ("70% in the urine and
    25% in the feces" for "70% in the feces and 25% in the urine": `attached`).

    Measured precision (`bench/rule_precision.py --exclude biomedical`, nineteen sets): 2/2.
    """
    if (found := swapped(answer, reference)) is not None:
        word, given, other = found
        return RuleDecision(
            "reference_order_changed",
            f"the reference gives {word} {given.value:g}; the answer {other.value:g}",
        )
    if not (_THEN.search(answer) and _THEN.search(reference)):
        return None
    ours = [(round(q.value, 9), q.unit) for q in quantities(reference)]
    theirs = [(round(q.value, 9), q.unit) for q in quantities(answer)]
    if len(ours) < 2 or ours == theirs or sorted(ours, key=str) != sorted(theirs, key=str):
        return None
    return RuleDecision(
        "reference_order_changed", "the answer states the reference's quantities in another order"
    )
