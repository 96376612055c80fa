"""Readings the rules and guards gained on the fourth round of label sets: yes/no answers, another
identifier of a kind, two names for one path, an identifier as an aside, a multiple of a named value, a
reordered schedule, a resumed dose, numbers only from the question, counted rates in words and one amount in
several units. Examples are made up; each fails when its reading breaks."""

from __future__ import annotations

import pytest

from equivalence_checks import guard_method as _veto
from equivalence_checks import rule_method as _method
from proctor.judging.equivalence.guards import missing_term
from proctor.judging.equivalence.identifiers import expanded
from proctor.judging.equivalence.rates import rates

# --- yes/no questions -------------------------------------------------------------------------------

_UPGRADE = "Can a 4.1 cluster be upgraded in place to 4.3.0?"
_UPGRADE_REF = "Yes; in-place upgrades are supported from 4.1.x and 4.2.x"


def test_the_reference_s_yes_need_not_repeat_its_justification() -> None:
    assert _veto("Yes.", _UPGRADE_REF, _UPGRADE) is None
    # Without the question nothing says "yes" answers it: the version guard still asks for 4.2.x.
    assert _veto("Yes.", _UPGRADE_REF) == "reference_version_missing"
    # A justification of its own is checked.
    assert _veto("Yes, from 4.0.x.", _UPGRADE_REF, _UPGRADE) == "reference_version_missing"


def test_the_other_word_to_a_yes_no_question_is_vetoed() -> None:
    assert _veto("No, it needs a full reinstall.", _UPGRADE_REF, _UPGRADE) == "polarity_contradicted"
    # Not a yes/no question, or "no longer": no polarity to contradict.
    assert _veto("No.", "Yes, daily", "How often are backups taken?") != "polarity_contradicted"
    assert _veto("No longer than a day.", "Yes", "Is it kept for a day?") is None


# --- identifiers --------------------------------------------------------------------------------------


def test_another_flag_in_the_place_of_the_reference_s_is_vetoed_in_a_long_command() -> None:
    ref = "mqctl topic create audit --partitions 6 --retention-hours 48"
    wrong = "mqctl topic create audit --partitions 6 --retention 48"
    assert _veto(wrong, ref) == "reference_identifier_missing"
    assert _veto(ref + ", then list it", ref) is None


def test_a_dotted_name_written_with_other_punctuation_is_not_its_tail() -> None:
    question = "What is the retry topic called for a topic named invoices?"
    assert _veto("invoices-retry", "invoices.retry", question) == "reference_identifier_missing"
    assert _veto("invoices_retry", "invoices.retry", question) == "reference_identifier_missing"


def test_the_other_name_after_i_e_stands_for_the_identifier() -> None:
    ref = "$MQ_HOME/etc/mq.conf, i.e. /srv/mq/etc/mq.conf"
    assert _veto("/srv/mq/etc/mq.conf", ref, "Where is the config file?") is None
    assert _veto("/srv/mq/etc/other.conf", ref, "Where is the config file?") == "reference_identifier_missing"


def test_an_identifier_in_parentheses_after_a_quantity_is_an_aside() -> None:
    ref = "32 KiB (ClientConfig.setFrameBytes())"
    assert _method("32,768 bytes", ref) == "numeric_equivalent"
    assert _veto("32 KiB", ref) is None
    # Outside parentheses it is wanted.
    assert _veto("32 KiB", "ClientConfig.setFrameBytes() to 32 KiB") == "reference_identifier_missing"


# --- quantities ---------------------------------------------------------------------------------------


def test_a_multiple_of_a_named_value_is_no_number_in_a_unit() -> None:
    ref = "≤3 × ULN"
    assert _method("≤3 mg/dL", ref) is None
    assert _veto("≤3 mg/dL", ref) == "reference_quantity_missing"
    assert _method("at most three times the upper limit of normal", ref) == "numeric_equivalent"
    assert expanded("the upper limit of normal", "ULN")


def test_the_same_quantities_in_another_order_of_steps_are_vetoed() -> None:
    ref = "every 4 weeks for the first 12 weeks, then every 8 weeks"
    assert _veto("every 8 weeks for the first 12 weeks, then every 4 weeks", ref) == "reference_order_changed"
    assert _veto("every 4 weeks for 12 weeks, then every 8 weeks", ref) is None


def test_numbers_taken_only_from_the_question_state_nothing() -> None:
    question = "What platelet count is required on Day 15?"
    answer = "The platelet count required on Day 15 is the threshold set for that day."
    assert _veto(answer, "100 ×10⁹/L", question) == "reference_quantity_missing"
    assert _veto(answer, "100 ×10⁹/L") is None  # without the question the 15 is a number
    # The reference's quantity written otherwise is stated, whatever else repeats the question.
    assert _veto("A week after Day 1.", "7 days", "When is the Day 1 dose repeated?") is None


def test_one_amount_in_several_units_is_one_quantity() -> None:
    assert _method("Two weeks.", "336 hours (14 days)") == "numeric_equivalent"
    assert _method("Two weeks and 14 days.", "336 hours (20 days)") is None


def test_counted_rates_in_words_agree_by_value() -> None:
    ref = "180 new sessions per minute per client"
    assert _method("Three new sessions per second for each client.", ref) == "numeric_equivalent"
    assert _veto("Three new sessions per second for each client.", ref) is None


def test_a_word_before_a_span_letter_is_no_rate() -> None:
    # "1.0 and" once read as "1 a d(ay)".
    assert rates("Removed in 2.0 and replaced in 3.0.") == []
    assert rates("TLS 1.0 and TLS 1.1") == []
    assert rates("twice a day") == [2 / 86400]


# --- contrasts and terms -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "credited"),
    [("Resume at the same dose once potassium is ≥3.5 mmol/L.", False),
     ("Resume at the next lower dose once potassium is ≥3.5 mmol/L.", True)],
)  # fmt: skip
def test_the_dose_a_treatment_resumes_at_is_a_contrast(answer: str, credited: bool) -> None:
    ref = "When potassium is ≥3.5 mmol/L, at the next lower dose level"
    assert (_method(answer, ref) == "numeric_equivalent") is credited
    assert (_veto(answer, ref) == "reference_qualifier_contradicted") is not credited


def test_term_guard_leaves_prepositions_clause_verbs_and_rewordings() -> None:
    assert missing_term("The default is warn, set with MQ_LOG_LEVEL.", "warn, via MQ_LOG_LEVEL") is None
    assert missing_term("It prompts for a password.", "It asks for a password") is None
    assert missing_term("A little heron shape pressed in.", "a small stamped heron") is None
    # One word swapped in an intact phrase is still another thing.
    assert missing_term("A small stamped gull.", "a small stamped heron") is not None
    assert missing_term("It is removed from the pool.", "It is marked suspect") is None
