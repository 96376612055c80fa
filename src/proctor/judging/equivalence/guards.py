"""The English guards: after an LLM judge said "correct", each turns it into "incorrect" only when sure.
A small judge credits confident guesses and near misses; these catch the sure cases."""

from __future__ import annotations

import re

from proctor.judging.equivalence.base import RuleDecision
from proctor.judging.equivalence.codes import has_power_of_ten
from proctor.judging.equivalence.dates import clock_times, dates
from proctor.judging.equivalence.identifiers import dotted_tail, expanded, identifiers
from proctor.judging.equivalence.numbers import number_mentions, stated_numbers
from proctor.judging.equivalence.quantities import (
    RANGE,
    WRITTEN_RANGE,
    Quantity,
    all_numbers,
    answer_dimensions,
    minutes_if_time,
    plain_quantities,
    quantities,
    ratio_unit,
    same,
)
from proctor.judging.equivalence.rates import agreeing
from proctor.judging.equivalence.terms import (
    NEGATIONS,
    OFFERS,
    asked,
    content_words,
    could_name,
    informative,
    names,
    near_spelling,
    negated_anywhere,
    said_otherwise,
    stem,
)
from proctor.judging.equivalence.units import table
from proctor.judging.metrics import normalize_answer

_YEAR = re.compile(r"\b(1[0-9]{3}|20[0-9]{2})\b\s*([a-zµμ%°]*)", re.IGNORECASE)
# A currency the answer names with its sign or word; a reference in another (or the corpus's own) currency
# is not the same amount ("€64" for "64 skell").
_CURRENCY = re.compile(r"[€$£¥]|\b(?:euros?|dollars?|pounds? sterling|yen|usd|eur|gbp)\b", re.IGNORECASE)
_MAX_PHRASE_WORDS = 12
_FREQUENCY = re.compile(
    r"\b(?:once|twice|thrice|times)\s+(?:an?|per|each|every)\b|\bevery\b|\b(?:hourly|daily|weekly|monthly)\b",
    re.IGNORECASE,
)
# "2.8.0 or any later release", "5.4 or newer": a bound, not alternatives.
_OR_BEYOND = re.compile(
    r"\bor\s+(?:any\s+)?(?:later|newer|higher|above|more|greater|earlier|older|lower|below|less|fewer)\b",
    re.IGNORECASE,
)
_NEGATED_NUMBER = re.compile(
    r"\b(?:not|never|rather than|instead of)\s+(?:at\s+|the\s+)?[\d\w]", re.IGNORECASE
)
_PART_SEPARATORS = re.compile(r"(?<!\d),(?!\d)|;|\band\b(?!\s+a\s+half\b)|\bthen\b|\bplus\b", re.IGNORECASE)
MAX_PART_WORDS = 4
# "What is it called?", "By what name …": a what/which question about a name, not "who reads out the names".
_ASKS_FOR_THE_NAME = re.compile(r"\b(?:what|which)\b[^?]*\b(?:name[ds]?|called)\b", re.IGNORECASE)
_QUESTION_ASKS_NAME = re.compile(r"\b(?:name[ds]?|called|who|whom|whose)\b", re.IGNORECASE)
_MAX_NAME_WORDS = 4  # a reference this short, asked for by name, is the name itself ("skell")
# Words of a reference that place a term, not name it ("until independence").
_PREPOSITIONS = frozenset({"until", "till", "after", "before", "since", "during", "within", "through"})


# Code in a question: a placeholder ("<name>"), a backticked span, a flag ("--name").
_CODE_IN_QUESTION = re.compile(r"<[^<>\n]*>|`[^`\n]*`|(?<![\w-])--?[A-Za-z][\w-]*")


def _prose(question: str) -> str:
    """The question without its code: "name" in "purge <name>" or "--name" asks for no name."""
    return _CODE_IN_QUESTION.sub(" ", question)


def alternatives_listed(answer: str, reference: str) -> RuleDecision | None:
    """`alternatives_listed`: sure when the answer offers alternatives ("Dunmere, Orrinsford or Kettle
    Point"), not negated, where the reference does not itself state a choice; or gives a range around the
    reference's number ("between 85 and 140" for "about 85"), which commits to neither end.

    Measured precision (`bench/rule_precision.py`, six label sets): 30/31 alone (0.97); 10/10 behind the LLM.
    """
    if (
        OFFERS.search(_OR_BEYOND.sub(" ", answer))
        and not OFFERS.search(reference)
        and not negated_anywhere(normalize_answer(answer))
    ):
        return RuleDecision("alternatives_listed", "the answer offers alternatives")
    span = RANGE.search(answer)
    if span and not WRITTEN_RANGE.search(reference) and stated_numbers(span[0]) & stated_numbers(reference):
        return RuleDecision("alternatives_listed", f"the answer gives a range: {span[0]}")
    return None


def missing_quantities(answer: str, reference: str) -> RuleDecision | None:
    """`reference_quantity_missing`: sure when the answer cannot state the reference's numbers — it states
    no number in any form (no digit, number word, fraction or span) or nothing of the reference's
    dimension, the reference names a year and the answer none or another, the answer states numbers in
    the reference's unit (or both without one) and none of them is the reference's quantity in any form, a
    short several-number reference loses one, the right number comes in a currency the reference does not
    use ("€64" for "64 skell"), or the reference writes a date and the answer another date. A date the
    answer writes in another form ("30 June 2025" for "2025-06-30") is no missing number; a power of ten on
    one side only ("75,000 per µL" for "75 × 10⁹/L") is left to the LLM, and so is anything written
    otherwise (compound number words, other units, "half an hour").

    Measured precision (`bench/rule_precision.py --exclude biomedical`, nine label sets): 193/195 alone
    (0.99); 23/24 behind the LLM (0.96).
    """
    if (blanked := agreeing(answer, reference)) is not None:
        answer, reference = blanked  # "twice daily" for "every 12 hours": the rate is stated
    ref_dates, answer_dates = set(dates(reference)), set(dates(answer))
    if ref_dates and answer_dates:
        if ref_dates <= answer_dates:  # "30 June 2025" for "2025-06-30": the date is its numbers
            return None
        if not ref_dates & answer_dates:
            return RuleDecision("reference_quantity_missing", "the answer gives another date")
    # A power of ten on one side only ("75,000 per µL" for "75 × 10⁹/L") is a conversion the guard does
    # not read: left to the LLM.
    if has_power_of_ten(reference) != has_power_of_ten(answer):
        return None
    # A number word capitalised inside the reference is part of a name ("the Moot of Forty"), not a
    # quantity the answer must state.
    wanted = {v for start, _, v in number_mentions(reference) if start == 0 or not reference[start].isupper()}
    if not wanted or (clock_times(reference) and clock_times(answer)):  # "half past six" for 06:30
        return None
    have = all_numbers(answer)
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
            "reference_quantity_missing", f"the reference states {shown}; the answer no {shown_dims}"
        )
    if not re.search(r"\d", answer) and not table().numeric_words.search(answer):
        return RuleDecision(
            "reference_quantity_missing", f"the reference states {shown}; the answer no number"
        )
    years = _years(reference)
    if years and not years & _years(answer):
        return RuleDecision(
            "reference_quantity_missing",
            f"the reference names the year {', '.join(sorted(years))}; the answer does not",
        )
    # The same quantity written otherwise ("one day and seven hours" for "31 hours") is stated.
    ref_q = [q for q in quantities(reference) if q.unit]
    if any(same(q, r) for q in quantities(answer) if q.unit for r in ref_q):
        return None
    ref_units = {q.unit for q in plain_quantities(reference)}
    stated = [q for q in plain_quantities(answer) if q.unit in ref_units]
    if stated:
        other = ", ".join(f"{q.value:g}" for q in stated)
        return RuleDecision(
            "reference_quantity_missing", f"the reference states {shown}; the answer {other} instead"
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
    dimension or without the reference's denominator, and states it in no form: "2 to 8 ng/mL" for "2 to
    8 µg/mL", "5 M" for "5 mM", "15 mg every 8 hours" for "15 mg/kg every 8 hours" (a dose per kilogram
    is no dose). Sure: the same digits in another unit are another amount."""
    stated = quantities(answer)
    for r in quantities(reference):
        if not r.unit or r.unit == "share" or any(same(q, r) for q in stated):
            continue
        for q in stated:
            if q.unit and q.unit != r.unit and abs(q.value - r.value) <= 1e-9 * max(1.0, r.value):
                if _dimension(q.unit) == _dimension(r.unit) != "" or q.unit == r.unit.partition("/")[0]:
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


def _substituted(
    word: str, wanted: list[str], have: list[str], ref_names: set[str], answer_names: set[str]
) -> bool:
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
        if 0 <= slot < len(have) and have[slot] not in wanted and could_name(have[slot]):
            # In a name's place only another name is sure ("the Marrow Current" for "the Ostrel
            # Current"); a description ("the research institute" for "the Orrinsford Institute") is not.
            return stem(word) not in ref_names or stem(have[slot]) in answer_names
    return False


def missing_term(answer: str, reference: str) -> RuleDecision | None:
    """`reference_term_missing`: sure when a short reference without numbers (a name or term of at most
    three content words) has words the answer lacks while it has a near spelling of one of its names
    ("Maren Oakhill" for "Maren Oakhalt") or another word in a missing word's place ("the fog months" for
    "the grey months"; in a name's place, another name). An answer with none of its words, or that says a
    missing word otherwise ("water from the sea" for "seawater", "from the west" for "westerly",
    "Mondays" for "Monday") or drops it, is left to the LLM (a paraphrase: "no charge" for "free").

    Measured precision (`bench/rule_precision.py`, six label sets): 52/55 alone (0.95); 27/28 behind the LLM
    (0.96).
    """
    if stated_numbers(reference):
        return None
    wanted = content_words(reference)
    if not wanted or len(wanted) > 3:
        return None
    have = content_words(answer)
    missing = [w for w in wanted if w not in have and w not in _PREPOSITIONS and not said_otherwise(w, have)]
    if not missing:
        return None
    ref_names, answer_names = names(reference, all_capitalised=True), names(answer, all_capitalised=True)
    # A near spelling of a name is another name ("Oakhill" for "Oakhalt"); of an ordinary word it is as
    # often another word altogether ("south" for "mouth"): not sure.
    near = [x for m in missing if stem(m) in ref_names for x in have if near_spelling(m, x)]
    if not near and not any(_substituted(m, wanted, have, ref_names, answer_names) for m in missing):
        return None
    said = f"; it says {', '.join(dict.fromkeys(near))}" if near else ""
    return RuleDecision("reference_term_missing", f"the answer lacks {', '.join(missing)}{said}")


def missing_part(answer: str, reference: str) -> RuleDecision | None:
    """`reference_part_missing`: sure when the reference lists several short items ("black sand, kelp ash
    and crushed seashell", "six rowers and a steerer") and the answer has no word (by stem or near
    spelling) and no quantity of one of them. References that are not such lists are left alone.

    Measured precision (`bench/rule_precision.py`, six label sets): 12/13 alone (0.92, a paraphrase: "leaves
    it down" for "left lowered"); 8/8 behind the LLM.
    """
    raw_parts = [
        (raw, words)
        for raw in _PART_SEPARATORS.split(reference)
        if (words := content_words(raw)) and words[0] not in NEGATIONS  # "not 100 °C": a contrast
    ]
    if len(raw_parts) < 2 or any(len(words) > MAX_PART_WORDS for _, words in raw_parts):
        return None
    numbers = all_numbers(answer)
    stated = quantities(answer)

    def stated_in_answer(raw: str) -> bool:
        """The part's numbers are there as written ("12 metres wide" in "12 m by 4 m") or as the same
        quantity ("a fortnight" for "for two weeks")."""
        if stated_numbers(raw) and stated_numbers(raw) <= numbers:
            return True
        own = quantities(raw)
        return bool(own) and all(any(same(q, mine) for q in stated) for mine in own)

    aliases = table().aliases
    parts = [
        # Numbers and units are the other guard's business.
        [w for w in words if not re.fullmatch(r"[\d.]+", w) and w not in aliases]
        for raw, words in raw_parts
        if not stated_in_answer(raw)
    ]
    have = content_words(answer)
    stems = {stem(w) for w in have}

    def present(word: str) -> bool:
        return stem(word) in stems or said_otherwise(word, have) or any(near_spelling(word, x) for x in have)

    lacking = [" ".join(p) for p in parts if p and not any(present(w) for w in p)]
    if not lacking:
        return None
    return RuleDecision("reference_part_missing", f"the answer lacks {'; '.join(lacking)}")


def name_missing(answer: str, reference: str, question: str) -> RuleDecision | None:
    """`reference_name_missing`: sure when the question asks what something is named or called and the
    answer has no word of the reference's name — its capitalised words the question did not give, or the
    whole of a short reference ("skell"). A description is no answer to "what is it called" ("the leader
    of the Fog Warden's team" for "Hanne Cortwell"); a near spelling is another name.

    Measured precision (`bench/rule_precision.py`, six label sets): 3/3 alone.
    """
    if not _ASKS_FOR_THE_NAME.search(_prose(question)):
        return None
    given = asked(question)
    name = names(reference, all_capitalised=True) - given
    if not name and len(content_words(reference)) <= _MAX_NAME_WORDS:
        name = {stem(w) for w in content_words(reference)} - given
    if not name or name & {stem(w) for w in content_words(answer)}:
        return None
    return RuleDecision("reference_name_missing", "the question asks for a name; the answer does not give it")


def other_name(answer: str, reference: str, question: str) -> RuleDecision | None:
    """`other_name`: sure when the reference is a name (a capitalised word the question did not give, or
    the question asks for a name: "What is the name of the currency?" — "skell"), the answer has none of
    the reference's words beyond the question, and it names something the question and the reference do
    not ("The capital of Teskavar is Tashkent." for "Orrinsford"): a confident guess, however fluent. An
    answer that describes the referent without naming another ("the only research institute" for "the
    Orrinsford Institute") is left to the LLM, and so is an answer that writes the reference's identifier
    out ("Cytochrome P450 3A4" for "CYP3A4") or its last dotted segment; unit symbols name nothing.

    Measured precision (`bench/rule_precision.py`, six label sets): 16/17 alone (0.94); 1/1 behind the LLM.
    """
    if dotted_tail(answer, reference, question) or any(expanded(answer, i) for i in identifiers(reference)):
        return None
    given = asked(question)
    ref_names = names(reference, all_capitalised=True) - given
    if not ref_names and not _QUESTION_ASKS_NAME.search(_prose(question)):
        return None
    wanted = (informative(reference) | ref_names) - informative(question) - given
    have = {stem(w) for w in content_words(answer)}
    if not wanted or wanted & have:
        return None
    # A unit symbol ("GB", "KiB") names nothing.
    other = names(answer) - given - {stem(w) for w in content_words(reference)} - set(table().aliases)
    if not other:
        return None
    said = [w for w in re.findall(r"[\w'’-]+", answer) if stem(w.lower()) in other]
    return RuleDecision(
        "other_name", f"the answer names {', '.join(dict.fromkeys(said))}, not the reference's"
    )


def nothing_beyond_question(answer: str, reference: str, question: str) -> RuleDecision | None:
    """`nothing_beyond_question`: sure when the answer has no word (by stem) and no number of the reference
    that the question did not already give — it can only be echoing the question, which shows no knowledge
    however well it matches the reference. None when the question gives the whole reference away (nothing
    left to require) or the answer says something of the reference beyond it.

    Measured precision (`bench/rule_precision.py`, six label sets): 147/173 (0.85) on the short-answer label
    sets, which are not its use (RECKON's units).
    """
    wanted = informative(reference) - informative(question)
    wanted_numbers = stated_numbers(reference) - all_numbers(question)
    if not wanted and not wanted_numbers:
        return None
    if wanted & informative(answer) or wanted_numbers & all_numbers(answer):
        return None
    return RuleDecision(
        "nothing_beyond_question", "the answer says nothing of the reference that the question did not say"
    )
