"""JudgeAgent's difficulty controller: a difficulty-weighted score per answer and the tier it implies.

A correct answer scores easy 1, medium 1.5, hard 2; a wrong one easy 0, medium 0, hard -0.2. The running
mean over every scored question of a batch (base and extension) picks the next tier: <= 0.5 easy,
<= 1.0 medium, else hard. Unscored questions (a failed answer or judgment) change nothing.
"""

from __future__ import annotations

from collections.abc import Iterable

from proctor.kit.shared.question_file import Difficulty

CORRECT: dict[Difficulty, float] = {"easy": 1.0, "medium": 1.5, "hard": 2.0}
WRONG: dict[Difficulty, float] = {"easy": 0.0, "medium": 0.0, "hard": -0.2}
EASY_MAX = 0.5
MEDIUM_MAX = 1.0


def score(difficulty: Difficulty, correct: bool) -> float:
    return (CORRECT if correct else WRONG)[difficulty]


def tier(mean: float) -> Difficulty:
    if mean <= EASY_MAX:
        return "easy"
    if mean <= MEDIUM_MAX:
        return "medium"
    return "hard"


def next_tier(graded: Iterable[tuple[Difficulty, bool]], *, default: Difficulty = "medium") -> Difficulty:
    """The tier after these (difficulty, correct) answers; `default` when none is scored yet."""
    scores = [score(d, c) for d, c in graded]
    return tier(sum(scores) / len(scores)) if scores else default
