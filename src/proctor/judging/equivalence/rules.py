"""The English rules: each decides "correct" only when it is sure, never "incorrect"."""

from __future__ import annotations

import re
from dataclasses import dataclass

from proctor.judging.equivalence.attached import swapped
from proctor.judging.equivalence.base import Rule, RuleDecision
from proctor.judging.equivalence.dates import clock_times, date, dates, hhmm, ratio
from proctor.judging.equivalence.guards import missing_part
from proctor.judging.equivalence.identifiers import (
    abbreviated,
    aside,
    identifiers,
    states_identifier,
    written_as_reference,
)
from proctor.judging.equivalence.numbers import NUM, number, stated_numbers
from proctor.judging.equivalence.qualifiers import contradicted, dropped
from proctor.judging.equivalence.quantities import Quantity, quantities, same
from proctor.judging.equivalence.quantity_guard import multiple_kept
from proctor.judging.equivalence.rates import agreeing
from proctor.judging.equivalence.terms import (
    ALTERNATIVES,
    NOT_NEGATIONS,
    contains_phrase,
    negated_anywhere,
    negated_in_clause,
)
from proctor.judging.equivalence.units import table
from proctor.judging.equivalence.versions import without_v
from proctor.judging.metrics import normalize_answer

# The longest reference with numbers `contains_reference` credits when the answer holds it whole: a
# phrase ("up to 5 consecutive days"), not a sentence whose numbers the answer may go on to change.
_MAX_NUMERIC_WORDS = 8
_HEDGED_AMONG_NUMBERS = re.compile(r"\b(?:between|maybe|possibly|perhaps|probably|likely|might)\b")
# An answer that hedges ("or possibly every second", "depending on the radio") may state another value
# beside the reference's in words the quantities do not read: no rule is sure of it.
_HEDGED = re.compile(r"\b(?:maybe|possibly|perhaps|probably|might|depending)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Pair:
    """An answer and its reference as the rules read them; `kind` is what the reference is: "date",
    "time" (of day), "ratio", "quantity" (one), "quantities" (several) or "text"."""

    answer: str
    reference: str
    a: str  # normalised
    r: str
    kind: str
    ref_date: tuple[int, int, int] | None
    ref_times: list[set[int]]
    ref_ratio: list[float] | None
    ref_quantities: list[Quantity]
    question: str = ""


def read_pair(answer: str, reference: str, question: str = "") -> Pair | None:
    """The pair, or None when either is empty after normalisation (no rule can be sure)."""
    a, r = normalize_answer(without_v(answer)), normalize_answer(without_v(reference))
    if not a or not r:
        return None
    ref_date = date(reference)
    times = clock_times(reference) if ref_date is None else []
    terms = ratio(reference) if ref_date is None and len(times) != 1 else None
    q_r = quantities(reference) if ref_date is None and len(times) != 1 and terms is None else []
    kind = (
        "date" if ref_date is not None
        else "time" if len(times) == 1
        else "ratio" if terms is not None
        else "quantity" if len(q_r) == 1
        else "quantities" if q_r
        else "text"
    )  # fmt: skip
    return Pair(answer, reference, a, r, kind, ref_date, times, terms, q_r, question)


def normalised_match(p: Pair) -> RuleDecision | None:
    """Sure: the answer equals the reference after SQuAD/HotpotQA normalisation (case, punctuation,
    articles, a "v" before a version), and writes the reference's identifiers and words with inner
    punctuation as the reference does (`identifiers.written_as_reference`: "-N" is not "-n",
    "max-memory" not "maxmemory").

    Measured precision (`bench/rule_precision.py`, six label sets): 31/31 (1.00).
    """
    if p.a == p.r and written_as_reference(without_v(p.answer), without_v(p.reference)):
        return RuleDecision("normalised_match", p.r)
    return None


def same_date(p: Pair) -> RuleDecision | None:
    """Sure: every date the answer writes is the reference's one day, month and year, written in either
    order ("12 March 1887" = "March 12, 1887").

    Measured precision (`bench/rule_precision.py`, six label sets): 1/1.
    """
    found = dates(p.answer)
    if p.ref_date is not None and found and all(d == p.ref_date for d in found):
        return RuleDecision("same_date", "-".join(map(str, p.ref_date)))
    return None


def same_time(p: Pair) -> RuleDecision | None:
    """Sure: every time of day the answer states can be the reference's ("06:30" = "half past six in the
    morning"; without am/pm either reading counts), and nothing in it is negated. Not when a qualifier of
    the answer contrasts with the reference's ("Daily at 02:00" for "Weekly, Sunday at 02:00") or the
    answer names no member of a contrast the reference names (`qualifiers.dropped`).

    Measured precision (`bench/rule_precision.py`, fifteen sets): 4/4.
    """
    times_a = clock_times(p.answer)
    if (
        times_a
        and all(t & p.ref_times[0] for t in times_a)
        and not negated_anywhere(p.a)
        and contradicted(p.answer, p.reference, p.question) is None
        and dropped(p.answer, p.reference) is None
    ):
        return RuleDecision("same_time", " or ".join(hhmm(v) for v in sorted(p.ref_times[0])))
    return None


def same_ratio(p: Pair) -> RuleDecision | None:
    """Sure: the answer states the terms of a ratio reference ("6 : 2 : 1") in order and no other
    number, not negated.

    Measured precision (`bench/rule_precision.py`, six label sets): 2/2.
    """
    stated = [
        v for w in re.findall(r"[a-z]+|\d+(?:\.\d+)?", p.answer.lower()) if (v := number(w)) is not None
    ]
    if p.ref_ratio is not None and stated == p.ref_ratio and not negated_anywhere(p.a):
        return RuleDecision("same_ratio", " : ".join(f"{v:g}" for v in p.ref_ratio))
    return None


def numeric_equivalent(p: Pair) -> RuleDecision | None:
    """Sure: the reference states one quantity (digits, number words, fractions such as "one in four",
    percentages, a unit) and the answer states that quantity, converted between units of one dimension
    within 2 % if need be, and no other; or the reference states several and the answer the same ones in
    the same order and no other ("about 39 feet wide by 13 feet high" for "12 metres wide and 4 metres
    high"); a reference that states one amount in several units ("168 hours (7 days)") states one
    quantity ("One week"). Not when the answer negates, or lacks a listed part ("six rowers" for "six
    rowers and a steerer"), or names a qualifier that contrasts with the reference's ("TCP 7420" for "UDP
    port 7420", "per cluster" for "per node"; the question's where the reference names none:
    `qualifiers`), or lacks one of its identifiers (not one in parentheses after a quantity:
    `identifiers.aside`), or states a multiple of a named value without the name ("1.5 mg/dL" for "1.5 ×
    ULN"), or writes a decimal of the reference with other places ("2.10" for
    "2.1": a version, perhaps). Version strings are no quantities (`versions`). Against a bare count ("3"),
    a quantity of a measured dimension beside the count is side detail ("Three missed heartbeats, which is
    45 s"), not another number. A rate stated in other words ("twice daily" for "every 12 hours", "q8h",
    "10 per second" for "600 per minute": `rates`) is the same rate; the rest is compared without it.
    Not either when the answer names no member of a contrast the reference names ("Port 7411" for "UDP
    7411": `qualifiers.dropped`), when the reference negates something ("128 KiB; not configurable": a
    fact beyond its number), or when the answer states the number bare and names another unit of the
    reference's dimension apart from it ("30, measured in milliseconds" for "30 seconds"). Not when the
    answer hedges ("possibly", "depending": it may state another value in words the rule does not read)
    or attaches the reference's words to its quantities the other way round ("70% in the urine and 25%
    in the feces" for "70% in the feces and 25% in the urine": `attached`).

    Measured precision (`bench/rule_precision.py --exclude biomedical`, nineteen sets): 354/355 (0.997).
    """
    q_r, q_a, kind = p.ref_quantities, quantities(p.answer), p.kind
    if (blanked := agreeing(p.answer, p.reference)) is not None:
        # The same rate in other words ("twice daily" for "every 12 hours"): compare the rest.
        q_a, q_r = quantities(blanked[0]), quantities(blanked[1])
        kind = "quantity" if len(q_r) == 1 else "quantities"
    if kind == "quantities" and q_r and q_r[0].unit and all(same(q, q_r[0]) for q in q_r[1:]):
        # One amount in several units ("168 hours (7 days)"): the answer may state it in any.
        kind = "quantity"
    plain = normalize_answer(NOT_NEGATIONS.sub(" ", p.answer))
    if kind == "quantity":
        matches = bool(q_a) and all(same(q, q_r[0]) for q in _counts_if_count(q_a, q_r[0]))
    else:
        matches = len(q_a) == len(q_r) and all(same(x, y) for x, y in zip(q_a, q_r, strict=True))
    if (
        matches
        and not negated_anywhere(plain)
        and not _HEDGED.search(p.answer)
        and (kind == "quantity" or swapped(p.answer, p.reference) is None)
        and missing_part(p.answer, p.reference) is None
        and contradicted(p.answer, p.reference, p.question) is None
        and dropped(p.answer, p.reference) is None
        and not _reference_negates(p.reference)
        and not _other_unit_named(p.answer, q_a, q_r)
        and all(states_identifier(p.answer, i) or aside(p.reference, i) for i in identifiers(p.reference))
        and not _decimal_written_otherwise(p.answer, p.reference)
        and multiple_kept(p.answer, p.reference)
    ):
        shown = ", ".join(f"{q.value:g} {q.unit or ''}".strip() for q in q_r) or "the same rate"
        return RuleDecision("numeric_equivalent", shown)
    return None


def _reference_negates(reference: str) -> bool:
    """The reference negates something ("128 KiB; not configurable"): it states a fact beyond its numbers
    that the rule cannot check; "no more than 4 g" is a bound, not a negation."""
    return negated_anywhere(normalize_answer(NOT_NEGATIONS.sub(" ", reference)))


def _other_unit_named(answer: str, stated: list[Quantity], wanted: list[Quantity]) -> bool:
    """The answer names a unit of a reference quantity's dimension that is neither the reference's unit
    nor the unit of one of its own quantities ("defaults to 30, measured in milliseconds" for "30
    seconds"): its bare number may be in that unit."""
    convert, aliases = table().convert, table().aliases
    dims = {convert[q.unit][0]: q.unit for q in wanted if q.unit in convert}
    if not any(q.unit is None for q in stated):
        return False  # every number of the answer carries its unit
    own = {q.unit for q in stated}
    words = re.findall(r"[a-zµμ]+", answer.lower())
    for w in words:
        unit = aliases.get(w)
        if (
            unit in convert
            and unit not in own
            and convert[unit][0] in dims
            and dims[convert[unit][0]] != unit
        ):
            return True
    return False


def _counts_if_count(stated: list[Quantity], wanted: Quantity) -> list[Quantity]:
    """Where the reference is a bare count ("3") and the answer states it without a unit, the answer's
    quantities in a unit of a measured dimension are side detail, not other counts ("Three missed
    heartbeats, which is 45 s at the default interval")."""
    convert = table().convert
    bare = [q for q in stated if q.unit is None]
    if wanted.unit is not None or not bare or not all(same(q, wanted) for q in bare):
        return stated
    return [q for q in stated if q.unit is None or q.unit not in convert]


def _decimal_written_otherwise(answer: str, reference: str) -> bool:
    """The answer writes a decimal of the reference with other decimal places ("2.10" for "2.1")."""
    ref = {w: float(w) for w in re.findall(NUM, reference) if "." in w and "," not in w}
    return any(float(w) == v and w != r for w in re.findall(NUM, answer) if "." in w for r, v in ref.items())


def contains_reference(p: Pair) -> RuleDecision | None:
    """Sure: the normalised reference stands in the normalised answer as a whole phrase, not negated in
    its clause, in an answer that offers no alternatives ("X or Y"). A reference with numbers counts only
    when a phrase of up to eight words ("41,300 inhabitants, of whom 18,000 …" for "41,300"; "… studied
    for up to 5 consecutive days; longer use has not been studied" for "Up to 5 consecutive days") and the
    answer does not
    hedge between numbers ("maybe", "between", "depending"), and no qualifier of the answer contrasts with the
    reference's or the question's ("It increases AUC by 45%" for "45%" to "By how much does X reduce
    AUC?": `qualifiers`). An abbreviation in parentheses stands for the words before it ("a TCP reset
    (RST)" holds "TCP RST": `identifiers.abbreviated`). Identifiers and words with inner punctuation must be
    written as the reference writes them (`identifiers.written_as_reference`).

    Measured precision (`bench/rule_precision.py --exclude biomedical`, eleven label sets): 104/104.
    """
    words = p.r.split()
    # "a TCP reset (RST)" holds "TCP RST": the abbreviation stands for the words before it.
    answer = p.answer if contains_phrase(p.a.split(), words) else abbreviated(p.answer)
    a = p.a if answer is p.answer else normalize_answer(without_v(answer))
    if not contains_phrase(a.split(), words) or negated_in_clause(answer, words):
        return None
    if ALTERNATIVES.search(answer) or not written_as_reference(answer, p.reference):
        return None
    if contradicted(answer, p.reference, p.question) is not None:  # "It increases AUC by 45%"
        return None
    short = len(words) <= _MAX_NUMERIC_WORDS
    if p.kind == "quantity" and not (
        stated_numbers(p.reference)
        and short
        and not _HEDGED_AMONG_NUMBERS.search(a)
        and not _HEDGED.search(a)
    ):
        return None
    return RuleDecision("contains_reference", p.r)


_ALL = frozenset({"date", "time", "ratio", "quantity", "quantities", "text"})
ENGLISH_RULES = (
    Rule("normalised_match", "en", _ALL, normalised_match),
    Rule("same_date", "en", frozenset({"date"}), same_date),
    Rule("same_time", "en", frozenset({"time"}), same_time),
    Rule("same_ratio", "en", frozenset({"ratio"}), same_ratio),
    Rule("numeric_equivalent", "en", frozenset({"quantity", "quantities"}), numeric_equivalent),
    Rule("contains_reference", "en", frozenset({"quantity", "text"}), contains_reference),
)
