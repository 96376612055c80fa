"""Yes/no questions: a reference that opens with "Yes" or "No" answers it, and what follows is its
justification ("Yes; in-place upgrades are supported from 3.6.x and 3.7.x"). An answer that opens with the
same word and gives no justification of its own (no number, version or identifier beyond the question's)
has answered; the guards that look for the reference's parts (versions, identifiers, numbers, terms) do
not ask it to repeat the reference's justification (`registry.veto`). An answer that opens with the other
word contradicts the reference (`polarity_contradicted`).

What it is sure of: the question opens with an auxiliary verb ("Is", "Can", "Does" …), so "yes" or "no"
answers it, and both texts open with "yes" or "no" as a word.
"""

from __future__ import annotations

import re

from proctor.judging.equivalence.base import RuleDecision
from proctor.judging.equivalence.identifiers import identifiers, states_identifier
from proctor.judging.equivalence.quantities import all_numbers
from proctor.judging.equivalence.versions import versions

_POLAR_QUESTION = re.compile(
    r"\s*(?:is|are|was|were|can|could|does|do|did|will|would|should|must|may|has|have|had)\b", re.IGNORECASE
)
_OPENS = re.compile(r"\s*(?P<word>yes|no)\b(?!\s+(?:longer|more|later|earlier|fewer|less)\b)", re.IGNORECASE)


def polarity(text: str, question: str) -> str | None:
    """ "yes" or "no" when the question is a yes/no question and the text opens with that word."""
    if not _POLAR_QUESTION.match(question) or (m := _OPENS.match(text)) is None:
        return None
    return m["word"].lower()


def same_polarity(answer: str, reference: str, question: str) -> bool:
    """The answer opens with the reference's "yes" or "no" to a yes/no question and gives no
    justification of its own that the guards could check: no number, version or identifier beyond the
    question's ("Yes, from 3.5.x" is checked)."""
    said = polarity(reference, question)
    if said is None or polarity(answer, question) != said:
        return False
    new_numbers = all_numbers(answer) - all_numbers(question)
    new_versions = set(versions(answer)) - set(versions(question))
    new_ids = [i for i in identifiers(answer) if not states_identifier(question, i)]
    return not (new_numbers or new_versions or new_ids)


def polarity_contradicted(answer: str, reference: str, question: str) -> RuleDecision | None:
    """`polarity_contradicted`: sure when the question is a yes/no question, the reference opens with
    "Yes" or "No" and the answer opens with the other ("No." for "Yes; from 3.6.x and 3.7.x").

    Measured precision (`bench/rule_precision.py`, twelve sets): 8/8.
    """
    said, other = polarity(reference, question), polarity(answer, question)
    if said is None or other is None or said == other:
        return None
    return RuleDecision("polarity_contradicted", f"the reference says {said}; the answer {other}")
