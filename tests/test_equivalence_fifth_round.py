"""The rules abstain where the reference holds more than its number, and the quantity guard reads a
ratio's numerator and a thousands suffix. Each case fails when its fix is undone."""

from __future__ import annotations

import pytest

from equivalence_checks import guard_method as _veto
from equivalence_checks import rule_method as _method
from proctor.judging.equivalence.qualifiers import contradicted, dropped


@pytest.mark.parametrize(
    ("answer", "reference", "question"),
    [
        # A member of a contrast the reference names and the answer drops (a protocol, a period).
        ("Port 7411.", "UDP 7411", "Which protocol and port does the heartbeat use?"),
        ("Daily at 02:00.", "Weekly, Sunday at 02:00 local time", "When does the scrub run?"),
        ("At 02:00.", "Weekly, Sunday at 02:00 local time", "When does the scrub run?"),
        # A reference that negates something states more than its number.
        ("128 KiB, and you can tune it with block_size_kib.", "128 KiB; not configurable", "What size?"),
        # A bare number beside another unit of the reference's dimension.
        ("The timeout defaults to 30, measured in milliseconds.", "30 seconds", "What is the timeout?"),
        # Peak and trough exclude each other (here the question names the trough).
        ("20–60 ng/mL, measured at peak.", "20–60 ng/mL", "What is the trough concentration?"),
    ],
)
def test_no_rule_credits_a_number_whose_qualifier_is_dropped_or_contradicted(
    answer: str, reference: str, question: str
) -> None:
    assert _method(answer, reference, question) is None


@pytest.mark.parametrize(
    ("answer", "reference", "method"),
    [
        ("UDP 7411.", "UDP 7411", "normalised_match"),
        ("Every Sunday at 02:00.", "Weekly, Sunday at 02:00", "same_time"),
        ("30 seconds, i.e. 30,000 ms.", "30 seconds", "numeric_equivalent"),
        ("It is 128 KiB.", "128 KiB", "numeric_equivalent"),
        ("503 Service Unavailable", "HTTP 503", "numeric_equivalent"),
    ],
)
def test_the_rules_still_credit_what_they_are_sure_of(answer: str, reference: str, method: str) -> None:
    assert _method(answer, reference, "What is it?") == method


def test_dropped_and_contrasts_read_peak_trough_and_weekdays() -> None:
    assert dropped("Port 7411", "UDP 7411") == "udp"
    assert dropped("Every Sunday at 2 AM", "Weekly, Sunday at 02:00") is None
    assert dropped("503 Service Unavailable", "HTTP 503") is None  # a status code, not the protocol
    assert contradicted("measured at peak", "20 ng/mL", "What is the trough level?") == ("trough", "peak")
    assert contradicted("the pre-dose level", "20 ng/mL at trough") is None


def test_the_quantity_guard_reads_a_ratio_numerator_and_a_thousands_suffix() -> None:
    question = "How much sodium benzoate does each mL contain?"
    assert _veto("250 mg per mL.", "250 µg", question) == "reference_quantity_missing"
    assert _veto("250 µg per mL.", "250 µg", question) is None
    assert _veto("0.25 mg per mL.", "250 µg", question) is None
    assert _veto("450K IOPS (4 KiB random read)", "450,000 IOPS at 4 KiB", "What IOPS rating?") is None
    assert _veto("450 IOPS (4 KiB random read)", "450,000 IOPS at 4 KiB", "What IOPS rating?") is not None


def test_the_qualifier_guard_vetoes_a_member_the_question_asks_for_and_the_answer_drops() -> None:
    question = "Which protocol and port does the cluster heartbeat use?"
    assert _veto("Port 7411.", "UDP 7411", question) == "reference_qualifier_contradicted"
    assert _veto("UDP port 7411.", "UDP 7411", question) is None
    # Not asked by name: a shorter answer may leave the protocol out.
    assert _veto("Port 7411.", "UDP 7411", "Which port does the heartbeat use?") is None
