"""Readings added after the sixth round: bits against bytes by the case of the "b", a daily amount from a
dose and its frequency, the period a day belongs to, a unit of another dimension, a question's bare
number, "in N divided doses", "halve", a gene's full name, and longer references held whole. Each case
fails when its fix is undone."""

from __future__ import annotations

import pytest

from equivalence_checks import guard_method as _veto
from equivalence_checks import rule_method as _method
from proctor.judging.equivalence.identifiers import abbreviated, expanded
from proctor.judging.equivalence.qualifiers import said_as_member
from proctor.judging.equivalence.quantities import quantities
from proctor.judging.equivalence.rates import daily_amounts, daily_differs, rates
from proctor.judging.equivalence.rules import contains_reference, read_pair


@pytest.mark.parametrize(
    ("written", "unit"),
    [("180 Mb", "mbit"), ("180 MB", "mb"), ("2 Gb/s", "gbit"), ("2.4 Gbps", "gbit"), ("10 mbps", "mbit"),
     ("64 KB", "kb"), ("64 Kb", "kbit"), ("3 mb", "mb")],
)  # fmt: skip
def test_a_capital_prefix_before_a_lower_case_b_is_bits(written: str, unit: str) -> None:
    assert [q.unit for q in quantities(written)] == [unit]


def test_bits_are_not_bytes_and_a_bit_rate_written_otherwise_is_credited() -> None:
    q = "How large is the image?"
    assert _method("Around 40 Mb.", "About 40 MB", q) is None
    assert _veto("Around 40 Mb.", "About 40 MB", q) == "reference_quantity_missing"
    assert _method("Around 40 MB.", "About 40 MB", q) == "numeric_equivalent"
    assert _method("10 Gbps", "10 Gbit/s", "What is the uplink speed?") == "numeric_equivalent"
    assert _veto("10 Gbps", "10 Gbit/s", "What is the uplink speed?") is None


@pytest.mark.parametrize(
    ("text", "per_day_mg"),
    [
        ("300 mg/day", 300.0),
        ("300 mg per day", 300.0),
        ("150 mg twice daily", 300.0),
        ("100 mg q8h", 300.0),
        ("100 mg three times a day", 300.0),
        ("300 mg/day in two divided doses", 300.0),
        ("0.1 g every 8 hours", 300.0),
    ],
)
def test_a_dose_times_its_frequency_is_a_daily_amount(text: str, per_day_mg: float) -> None:
    [amount] = daily_amounts(text)
    assert amount.dimension == "mass"
    assert amount.base == pytest.approx(per_day_mg * 1e-6)


def test_a_daily_amount_that_differs_is_a_contradiction() -> None:
    q = "What is the maximum daily dose?"
    assert daily_differs("300 mg twice daily", "300 mg/day") == ("300 mg", "600 mg")
    assert daily_differs("150 mg twice daily", "300 mg/day") is None
    assert _method("300 mg twice daily", "300 mg/day", q) is None
    assert _veto("300 mg twice daily", "300 mg/day", q) == "reference_qualifier_contradicted"
    assert _veto("150 mg twice daily", "300 mg/day", q) is None
    assert _veto("4 mg/kg/day divided twice daily", "4 mg/kg/day in two divided doses", q) is None


def test_in_n_divided_doses_is_n_a_day() -> None:
    assert rates("in three divided doses") == rates("three times a day")
    q = "What is the starting dose?"
    assert _method("6 mg/kg/day given three times daily", "6 mg/kg/day in 3 divided doses", q) == (
        "numeric_equivalent"
    )
    assert _method("6 mg/kg/day given twice daily", "6 mg/kg/day in 3 divided doses", q) is None


@pytest.mark.parametrize(
    ("answer", "reference"),
    [
        ("Until day 5 of the same cycle.", "Day 5 of the following cycle"),
        ("From the next week on.", "From the current week"),
        ("On day 2 of the previous cycle.", "Day 2 of the next cycle"),
    ],
)
def test_the_period_a_day_belongs_to_is_a_contrast(answer: str, reference: str) -> None:
    assert _veto(answer, reference, "When does it stop?") == "reference_qualifier_contradicted"


def test_the_same_period_in_other_words_passes() -> None:
    q = "When is it checked?"
    assert _veto("On day 1 of every later cycle.", "On Day 1 of each subsequent cycle", q) is None
    assert _veto("Day 3 of the next cycle.", "Day 3 of the following cycle", q) is None


def test_the_same_number_in_a_unit_of_another_dimension_is_vetoed() -> None:
    q = "Below what glucose level is it withheld?"
    assert _veto("Below 70 mg/dL.", "Below 70 mmol/L", q) == "reference_quantity_missing"
    assert _veto("Below 70 mL.", "Below 70 mg", q) == "reference_quantity_missing"
    assert _veto("Below 3.9 mmol/L.", "Below 3.9 mmol/L", q) is None


def test_a_question_number_repeated_without_the_reference_unit_is_vetoed() -> None:
    q = "What does the --mtu 1400 flag set?"
    assert (
        _veto("It sets the MTU to 1400.", "Packets of at most 1400 bytes", q) == "reference_quantity_missing"
    )
    assert _veto("Packets are at most 1400 bytes.", "Packets of at most 1400 bytes", q) is None
    # The question states the unit itself: the bare number is the reference's.
    assert _veto("It is 1400.", "1400 bytes", "Is the MTU 1400 bytes or 1500 bytes?") is None


def test_halve_states_a_half() -> None:
    q = "How are doses adjusted in renal impairment?"
    assert [q_.value for q_ in quantities("Halve the dose.")] == [0.5]
    assert _veto("Halve the dose.", "Reduce the dose by 50%", q) is None
    assert _veto("Halve the dose.", "Reduce the dose by 25%", q) == "reference_quantity_missing"


def test_a_gene_full_name_writes_its_code() -> None:
    assert expanded("UDP glucuronosyltransferase family 1 member A9", "UGT1A9")
    assert expanded("cytochrome P450 family 2 subfamily C member 19", "CYP2C19")
    assert not expanded("UDP glucuronosyltransferase family 1 member A9", "UGT1A4")
    q = "Which enzyme glucuronidates it?"
    assert _veto("UDP glucuronosyltransferase family 1 member A9", "UGT1A9", q) is None
    assert _veto("UDP glucuronosyltransferase family 2 member B7", "UGT1A9", q) is not None


def test_a_numeric_phrase_held_whole_is_credited() -> None:
    q = "For how long has the infusion been studied?"
    answer = "It has been studied for up to 7 consecutive days; longer use has not been studied."
    assert _method(answer, "Up to 7 consecutive days", q) == "contains_reference"
    # A sentence is no phrase: its numbers may be changed further on.
    long_ref = "It was studied for up to 7 consecutive days in adults with normal renal function only"
    pair = read_pair(f"{long_ref}, later 10 days.", long_ref, q)
    assert pair is not None and contains_reference(pair) is None


def test_a_list_of_thresholds_that_loses_one_is_vetoed() -> None:
    q = "When is the drug stopped for liver injury?"
    reference = "AST above 8× ULN, or above 5× ULN with total bilirubin above 3× ULN"
    assert _veto("When AST exceeds 5× ULN.", reference, q) == "reference_quantity_missing"
    assert _veto("AST above 8× ULN, or above 5× ULN with bilirubin above 3× ULN.", reference, q) is None


def test_a_word_between_a_number_and_its_unit_keeps_the_unit() -> None:
    q = "For how long has it been studied?"
    assert [(x.value, x.unit) for x in quantities("5 consecutive days")] == [(5.0, "day")]
    assert _method("Up to 5 consecutive weeks.", "Up to 5 consecutive days", q) is None
    assert _veto("Up to 5 consecutive weeks.", "Up to 5 consecutive days", q) == "reference_quantity_missing"
    assert _method("For 3 more hours.", "3 more days", q) is None
    assert _method("Up to 5 days in a row.", "Up to 5 consecutive days", q) == "numeric_equivalent"


def test_an_abbreviation_in_parentheses_stands_for_the_words_before_it() -> None:
    assert abbreviated("It sends a TCP reset (RST) back.") == "It sends a TCP RST back."
    assert abbreviated("the time to live (TTL) of a packet") == "the TTL of a packet"
    assert abbreviated("the server (RST)") == "the server (RST)"  # the letters are not its
    q = "What does a rejected TCP connection get back?"
    answer = "A TCP reset (RST); UDP gets an ICMP port unreachable instead."
    assert _method(answer, "A TCP RST", q) == "contains_reference"
    assert _method("A TCP segment (RST) of some kind.", "A TCP RST", q) is None


def test_a_contrast_member_in_other_words_is_no_missing_term() -> None:
    assert said_as_member("the next day", "the following day") == {"next", "day"}
    assert said_as_member("the next day", "the same day") == set()
    q = "When is it repeated?"
    assert _veto("The following day.", "The next day", q) is None
    assert _veto("The same day.", "The next day", q) == "reference_qualifier_contradicted"
