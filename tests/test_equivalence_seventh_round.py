"""Readings added after the seventh round: a unit in parentheses, a call as an identifier, a hedging
answer, bounds ("below"/"above", "whichever is lower"), words attached to the other quantity, the
question's quantity repeated, numbers in parentheses as an aside, and an answer that only says a command
is run. Each case fails when its fix is undone."""

from __future__ import annotations

import pytest

from equivalence_checks import guard_method as _veto
from equivalence_checks import rule_method as _method
from proctor.judging.equivalence.attached import attached, swapped
from proctor.judging.equivalence.identifiers import identifiers
from proctor.judging.equivalence.quantities import quantities


def test_a_unit_in_parentheses_after_a_number_is_its_unit() -> None:
    assert [(q.value, q.unit) for q in quantities("12 (days)")] == [(12.0, "day")]
    q = "What is the default of CACHE_TTL_D?"
    assert _method("12 hours", "12 (days)", q) is None
    assert _veto("12 hours", "12 (days)", q) == "reference_quantity_missing"
    assert _method("Twelve days", "12 (days)", q) == "numeric_equivalent"
    # Words in parentheses that are no unit stay apart.
    assert [q.unit for q in quantities("3 (default)")] == [None]


def test_a_call_is_an_identifier_written_with_its_case() -> None:
    assert identifiers("Pump.restart() every 30 seconds") == ["Pump.restart()"]
    q = "Which method restarts the pump, and how often?"
    assert _method("It calls Pump.Restart() every 30 seconds.", "Pump.restart() every 30 seconds", q) is None
    assert (
        _veto("It calls Pump.Restart() every 30 seconds.", "Pump.restart() every 30 seconds", q)
        == "reference_identifier_missing"
    )
    assert (
        _method("It calls Pump.restart() every 30 seconds.", "Pump.restart() every 30 seconds", q)
        == "numeric_equivalent"
    )


def test_a_hedging_answer_is_left_to_the_llm() -> None:
    q = "How often is the beacon sent?"
    assert _method("About every 200 ms, perhaps every second on slow links.", "Every 200 ms", q) is None
    assert _method("Every 200 ms, depending on the link.", "Every 200 ms", q) is None
    assert _method("About every 200 ms.", "Every 200 ms", q) == "numeric_equivalent"


@pytest.mark.parametrize(
    ("answer", "reference", "credited"),
    [
        ("Under 30 mL/min", "Below 30 mL/min", True),
        ("When it is < 30 mL/min", "Below 30 mL/min", True),
        ("Under six hours", "less than six hours", True),
        ("Above 30 mL/min", "Below 30 mL/min", False),
        ("More than 4 g", "Less than 4 g", False),
        ("3 mg/kg or 200 mg, whichever is greater", "3 mg/kg or 200 mg, whichever is lower", False),
        ("3 mg/kg or 200 mg, whichever is smaller", "3 mg/kg or 200 mg, whichever is lower", True),
    ],
)
def test_the_side_of_a_bound_is_a_contrast(answer: str, reference: str, credited: bool) -> None:
    assert (_method(answer, reference) == "numeric_equivalent") is credited
    if not credited:
        assert _veto(answer, reference) == "reference_qualifier_contradicted"


def test_no_more_than_is_no_bound_from_above() -> None:
    # "no more than" is a maximum, not "above": "at most" states it.
    assert _veto("At most 4 g a day", "No more than 4 g a day") is None


def test_words_attached_to_the_other_quantity_are_another_fact() -> None:
    reference = "About 60% by the kidneys and 35% by the liver"
    assert {w: q.value for w, q in attached(reference).items() if w in {"kidneys", "liver"}} == {
        "kidneys": 0.6,
        "liver": 0.35,
    }
    swapped_answer = "About 60% by the liver and 35% by the kidneys."
    assert swapped(swapped_answer, reference) is not None
    assert _method(swapped_answer, reference) is None
    assert _veto(swapped_answer, reference) == "reference_order_changed"
    # The same attachments in another order are the same fact.
    reordered = "35% by the liver and about 60% by the kidneys."
    assert swapped(reordered, reference) is None
    assert _veto(reordered, reference) is None


def test_the_questions_quantity_repeated_is_not_the_answer() -> None:
    q = "How many bytes are in 1 MiB?"
    assert _veto("1 MiB is 1,000,000 bytes.", "1,048,576 bytes", q) == "reference_quantity_missing"
    assert _veto("1 MiB is 1,048,576 bytes.", "1,048,576 bytes", q) is None


@pytest.mark.parametrize(
    ("answer", "reference"),
    [
        ("8 hours", "8 hours (range 6–11 hours)"),
        ("20 mg twice daily", "20 mg twice daily (1 mg/kg)"),
        ("4 mg/mL", "20 mg in 5 mL (4 mg/mL)"),
    ],
)
def test_numbers_in_parentheses_are_an_aside(answer: str, reference: str) -> None:
    assert _veto(answer, reference, "What is it?") is None


def test_an_aside_does_not_excuse_the_wrong_unit() -> None:
    reference = "About 300 ng/mL (5th–95th percentile 200–400 ng/mL)"
    assert _veto("About 300 µg/mL.", reference, "What is the peak?") == "reference_quantity_missing"
    # Nor an answer that states neither side.
    assert _veto("6 hours", "8 hours (range 6–11 hours)", "What is it?") is not None


def test_an_answer_that_only_says_a_command_is_run_restates_the_question() -> None:
    q = "What does `netctl cache purge` do?"
    reference = "Deletes every cached route at once"
    assert _veto("It runs the netctl cache purge command.", reference, q) == "answer_within_question"
    assert _veto("It deletes the cached routes.", reference, q) is None


def test_a_range_writes_its_unit_once_for_both_ends() -> None:
    assert [(q.value, q.unit) for q in quantities("15–30 °C")] == [(15.0, "°c"), (30.0, "°c")]
    q = "At what temperature is it stored?"
    assert _method("59–86 °F", "15–30 °C", q) == "numeric_equivalent"
    assert _method("59–95 °F", "15–30 °C", q) is None
