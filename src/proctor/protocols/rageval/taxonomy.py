"""R-Eval's error taxonomy of one answer (threshold F1 0.05 by default; "gold in scratchpad" = the
normalised gold answer occurs in the normalised text of everything the system wrote and saw):

* F1 >= threshold and gold in the scratchpad -> EM ("exact match": found and used);
* F1 >= threshold otherwise -> AM (answer match without the gold in the trace);
* F1 < threshold and gold in the scratchpad -> GE (generation error: found, then answered wrong);
* otherwise, halted with an error -> ME, halted without an error -> TE, not halted -> RE.

Halted = the system gave a final answer (an agent's `finished`; a non-agent candidate that answered).
"""

from __future__ import annotations

from typing import Literal

from proctor.judging.metrics import normalize_answer

Category = Literal["EM", "AM", "GE", "ME", "TE", "RE"]
CATEGORIES: dict[str, str] = {
    "EM": "correct, gold answer seen in the trace",
    "AM": "correct, gold answer not seen in the trace",
    "GE": "gold seen in the trace but answered wrong (generation error)",
    "ME": "halted with an error along the way",
    "TE": "halted without error, wrong answer",
    "RE": "did not halt (steps, loop, budget, time or context limit)",
}


def gold_in(scratchpad: str, gold: str) -> bool:
    g = normalize_answer(gold)
    return bool(g) and f" {g} " in f" {normalize_answer(scratchpad)} "


def classify(f1: float, gold_seen: bool, halted: bool, had_error: bool, threshold: float = 0.05) -> Category:
    if f1 >= threshold:
        return "EM" if gold_seen else "AM"
    if gold_seen:
        return "GE"
    if halted:
        return "ME" if had_error else "TE"
    return "RE"
