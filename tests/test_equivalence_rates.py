"""The causes found on the third round's development sets, each fixed generally: rates and dose
frequencies compared by value, contrasts the question names, scope (per node / per cluster), the same
number in another unit, powers, unit names, other names in parentheses, irregular verbs. Each case fails
when its fix is undone."""

from __future__ import annotations

import pytest

from equivalence_checks import guard_method as _veto
from equivalence_checks import rule_method as _method
from proctor.judging.equivalence import quantities, stated_numbers
from proctor.judging.equivalence.identifiers import identifiers
from proctor.judging.equivalence.rates import agreeing, disagreeing, rates
from proctor.judging.equivalence.terms import said_otherwise


@pytest.mark.parametrize(
    ("text", "per_day"),
    [
        ("750 mg every 8 hours", [3.0]),
        ("500 mg q8h", [3.0]),
        ("three times a day at 8-hour intervals", [3.0, 3.0]),
        ("500 mg twice daily", [2.0]),
        ("500 mg b.i.d.", [2.0]),
        ("250 mg once daily", [1.0]),
        ("every hour", [24.0]),
        ("600 requests per minute", [864000.0]),
        ("500 mg per day", []),  # a dose, not a counted rate
    ],
)
def test_rates_are_read_as_events_per_second(text: str, per_day: list[float]) -> None:
    assert [round(r * 86400.0, 6) for r in rates(text)] == per_day


@pytest.mark.parametrize(
    ("answer", "reference"),
    [
        ("500 mg q8h.", "500 mg every 8 hours"),
        ("500 mg twice daily.", "500 mg every 12 hours"),
        ("250 mg once daily, given after dialysis.", "250 mg every 24 hours, after dialysis"),
        ("0.75 g three times a day at 8-hour intervals.", "750 mg every 8 hours"),
        ("10 requests per second per token.", "600 requests per minute per token"),
    ],
)
def test_the_same_rate_in_other_words_is_credited_and_never_vetoed(answer: str, reference: str) -> None:
    assert agreeing(answer, reference) is not None
    assert _method(answer, reference, "What is the dose or limit?") == "numeric_equivalent"
    assert _veto(answer, reference, "What is the dose or limit?") is None


@pytest.mark.parametrize(
    ("answer", "reference"),
    [("500 mg twice daily.", "500 mg every 8 hours"), ("20 requests per second.", "600 requests per minute")],
)
def test_another_rate_is_vetoed_and_never_credited(answer: str, reference: str) -> None:
    assert disagreeing(answer, reference) is not None
    assert _method(answer, reference, "What is it?") is None
    assert _veto(answer, reference, "What is it?") == "reference_qualifier_contradicted"


def test_a_contrast_the_question_names_binds_a_bare_reference() -> None:
    q = "By how much does rifampin reduce corvalixin AUC?"
    assert _method("It increases AUC by 45%.", "45%", q) is None
    assert _veto("It increases AUC by 45%.", "45%", q) == "reference_qualifier_contradicted"
    assert _method("It reduces AUC by 45%.", "45%", q) is not None
    assert _veto("It reduces AUC by 45%.", "45%", q) is None


def test_a_limit_per_cluster_is_not_one_per_node() -> None:
    q = "What is the default net.max_connections?"
    assert _method("4096 per cluster.", "4096 per node", q) is None
    assert _veto("4096 per cluster.", "4096 per node", q) == "reference_qualifier_contradicted"
    assert _method("4096 per node.", "4096 per node", q) is not None


@pytest.mark.parametrize(
    ("answer", "reference"),
    [
        ("2 to 8 ng/mL.", "2 to 8 µg/mL"),  # same digits, another mass prefix
        ("5M", "5 mM"),  # molar (or a million), never millimolar
        ("15 mg every 8 hours, max 750 mg per dose.", "15 mg/kg every 8 hours, max 750 mg per dose"),
        ("8 bits", "8 bytes"),
    ],
)
def test_the_same_number_in_another_unit_is_vetoed(answer: str, reference: str) -> None:
    assert _veto(answer, reference, "What is the value?") == "reference_quantity_missing"


def test_bits_convert_to_bytes() -> None:
    assert _method("64 bits", "8 bytes", "How big is the field?") == "numeric_equivalent"


def test_a_plural_span_word_without_a_count_is_no_number() -> None:
    q = "How long are backups retained by default?"
    assert _veto("Backups are retained for a default number of days.", "14 days", q) == (
        "reference_quantity_missing"
    )
    assert _veto("For a fortnight.", "14 days", q) is None


def test_a_power_with_a_caret_is_its_value() -> None:
    assert stated_numbers("2^16 tables") == {65536.0}
    assert quantities("2**10")[0].value == 1024.0
    q = "How many tables can a database hold at most?"
    assert _method("2^16 tables.", "65,536", q) == "numeric_equivalent"
    assert _veto("2^15 tables.", "65,536", q) == "reference_quantity_missing"


def test_a_unit_name_is_said_by_its_symbol() -> None:
    q = "Which environment variable limits the heap, and in what unit?"
    assert _veto("QS_HEAP_LIMIT_MIB, expressed in MiB.", "QS_HEAP_LIMIT_MIB, in mebibytes", q) is None
    assert _veto("QS_HEAP_LIMIT_MIB, expressed in MB.", "QS_HEAP_LIMIT_MIB, in mebibytes", q) == (
        "reference_term_missing"
    )


def test_the_other_name_in_parentheses_stands_for_the_identifier() -> None:
    ref = "LpxC (UDP-3-O-acyl-N-acetylglucosamine deacetylase)"
    q = "Which enzyme does the drug inhibit?"
    assert _veto("UDP-3-O-acyl-N-acetylglucosamine deacetylase.", ref, q) is None
    assert _veto("LpxA.", ref, q) == "reference_identifier_missing"


def test_an_irregular_verb_form_says_its_verb() -> None:
    assert said_otherwise("left", ["crew", "leaves", "list"])
    assert said_otherwise("leaves", ["left"])
    assert not said_otherwise("left", ["right"])
    ref = "it is reported for repair and left lowered"
    assert _veto("The crew leaves it down and lists it for mending.", ref) is None


def test_an_activated_factor_is_an_identifier_and_its_name_writes_it() -> None:
    ref = "Calibrated anti-FXIa chromogenic assay"
    q = "Which assay should be used when drug effect must be measured?"
    assert _veto("An anti-FXa chromogenic assay", ref, q) == "reference_identifier_missing"
    assert _veto("A calibrated anti-factor XIa chromogenic assay.", ref, q) is None
    assert _veto("A calibrated anti-FXIa chromogenic assay.", ref, q) is None
    assert identifiers("the APIs and URLs") == []  # a plural is no code


def test_an_answer_that_only_restates_the_question_is_vetoed() -> None:
    q = "What does fwctl drain --node <id> do?"
    ref = "Moves queue leadership off a broker before maintenance"
    assert _veto("It drains the node.", ref, q) == "answer_within_question"
    assert _veto("It moves leadership off the node.", ref, q) is None
    # Where the reference adds nothing to the question, restating it is the answer.
    assert _veto("Smaller.", "smaller", "Is the old bridge larger or smaller?") is None
