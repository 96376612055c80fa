"""KIEval scores against hand-computed values (both forms, early-stopped conversations), evaluator
voting, and the contamination rule."""

from __future__ import annotations

import math

import pytest

from proctor.protocols.kieval import contamination, score
from proctor.protocols.kieval.scoring import reference_value, vote_scores, vote_stop

# Weights by hand: exp(-0.2) = 0.8187307531, exp(-0.4) = 0.6703200460 (reference form);
# exp(-1/2) = 0.6065306597, exp(-1/3) = 0.7165313106, exp(-2/3) = 0.5134171190 (paper form, n rounds).


def test_reference_form_hand_computed() -> None:
    assert score([4, 4, 4, 4, 4]) == pytest.approx(100.0)
    assert score([1]) == pytest.approx(10.0)  # 1 -> 1 on the 0-10 scale, x 10
    assert score([0, 0]) == pytest.approx(0.0)
    # [4, 3]: (10 * 1 + 7 * 0.8187307531) / (1 + 0.8187307531) * 10 = 15.7311152717 / 1.8187307531 * 10
    assert score([4, 3]) == pytest.approx(86.4950199, abs=1e-6)
    # [4, 3, 2]: (10 + 7 * 0.8187307531 + 3 * 0.6703200460) / (1 + 0.8187307531 + 0.6703200460) * 10
    #          = 17.7420754097 / 2.4890507991 * 10
    assert score([4, 3, 2]) == pytest.approx(71.2804874, abs=1e-6)
    assert score([2, 3, 4]) < score([4, 3, 2])  # early rounds weigh more


def test_reference_form_early_stopped_conversation_keeps_the_stopping_round_without_padding() -> None:
    # Stopped in round 2 (off topic) after [4, 1]: (10 + 1 * 0.8187307531) / 1.8187307531 * 10
    assert score([4, 1]) == pytest.approx(59.4850598, abs=1e-6)
    # Not the same as padding the missing rounds with zeros up to 5 rounds:
    padded = 10 * (10 + 1 * math.exp(-0.2)) / sum(math.exp(-0.2 * i) for i in range(5))
    assert score([4, 1]) != pytest.approx(padded)
    # Stopped in round 1 with score 2: a single round -> 3 on the 0-10 scale -> 30.
    assert score([2]) == pytest.approx(30.0)


def test_paper_form_hand_computed() -> None:
    assert score([4, 4, 4], mode="paper") == pytest.approx(100.0)
    assert score([1, 1], mode="paper") == pytest.approx(0.0)  # (1 - 1) / 3 = 0
    # [4, 3], n = 2: normalised 1, 2/3; weights 1, exp(-1/2)
    #   (1 + 0.6666667 * 0.6065306597) / 1.6065306597 * 100 = 1.4043537731 / 1.6065306597 * 100
    assert score([4, 3], mode="paper") == pytest.approx(87.4153110, abs=1e-6)
    # [4, 3, 2], n = 3: normalised 1, 2/3, 1/3; weights 1, exp(-1/3), exp(-2/3)
    #   (1 + 0.4776875404 + 0.1711390397) / 2.2299484296 * 100
    assert score([4, 3, 2], mode="paper") == pytest.approx(73.9401216, abs=1e-6)


def test_paper_form_early_stopped_uses_the_rounds_held() -> None:
    # Stopped in round 2 after [4, 1], n = 2: (1 + 0 * 0.6065306597) / 1.6065306597 * 100
    assert score([4, 1], mode="paper") == pytest.approx(62.2459331, abs=1e-6)


def test_score_edge_cases() -> None:
    assert score([]) is None and score([], mode="paper") is None
    for bad in ([5], [-1], [float("nan")], [True], ["3"]):
        with pytest.raises(ValueError):
            score(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        score([3], mode="other")  # type: ignore[arg-type]
    # Fractional round scores (mean voting) interpolate between the mapped points.
    assert reference_value(2.5) == pytest.approx(5.0)
    assert score([3.5]) == pytest.approx(85.0)


def test_voting() -> None:
    assert vote_scores([3, 3, 4], "majority") == 3
    assert vote_scores([2, 3], "majority") == 2  # a tie goes to the lower score
    assert vote_scores([2, 3, 4], "mean") == pytest.approx(3.0)
    assert vote_stop([(True, "off_topic"), (True, "repetition"), (False, "none")]) == (True, "off_topic")
    assert vote_stop([(True, "off_topic"), (False, "none")]) == (False, "none")  # half is not a majority
    with pytest.raises(ValueError):
        vote_scores([], "mean")


def test_contamination_flags_the_paper_example_and_needs_enough_candidates() -> None:
    # The paper's C-Eval table (5-shot accuracy %, KIEval): Yi-6B, which the authors single out as
    # possibly contaminated, is far below the line; GPT-3.5 is far above it (not flagged).
    names = ["GPT-3.5", "LLaMA2 70B", "LLaMA2 13B", "LLaMA2 7B", "Mistral 7B", "Yi 6B", "MPT 7B"]
    acc = [0.508, 0.420, 0.378, 0.334, 0.393, 0.715, 0.262]
    kv = [83.3, 61.0, 54.4, 49.3, 52.2, 55.6, 44.9]
    r = contamination(names, acc, kv)
    assert r["applicable"] and r["flagged"] == ["Yi 6B"]
    yi = next(p for p in r["points"] if p["candidate"] == "Yi 6B")
    assert yi["residual"] < 0 and yi["z"] < -1.5
    # A contaminated candidate at the highest static accuracy is not hidden by the line it pulls.
    r = contamination(list("abcde"), [0.5, 0.6, 0.7, 0.8, 0.9], [50, 60, 70, 80, 20])
    assert r["flagged"] == ["e"]
    # Residuals with 3 candidates, no flag possible; 2 candidates: not applicable.
    r3 = contamination(["a", "b", "c"], [0.5, 0.7, 0.9], [50, 75, 10])
    assert r3["applicable"] and r3["flagged"] == [] and r3["note"]
    assert all(p["z"] is None for p in r3["points"])
    r2 = contamination(["a", "b"], [0.5, 0.9], [50, 10])
    assert not r2["applicable"] and "at least 3" in r2["reason"]
    same = contamination(["a", "b", "c"], [0.5, 0.5, 0.5], [50, 60, 70])
    assert not same["applicable"] and "same static accuracy" in same["reason"]
