"""Which words a quantity belongs to: "About 70% in the feces and 25% in the urine" attaches "feces" to
70 % and "urine" to 25 %. An answer that states the same quantities attached the other way round ("70%
in the urine and 25% in the feces") states another fact however equal its numbers."""

from __future__ import annotations

import re

from proctor.judging.equivalence.numbers import number
from proctor.judging.equivalence.quantities import Quantity, quantities, same
from proctor.judging.equivalence.terms import content_words
from proctor.judging.equivalence.units import table

# Where one quantity's clause ends and the next one's begins.
_CLAUSE = re.compile(r"[;,]\s|\band\b|\bwhile\b|\bwhereas\b|\bbut\b|\bversus\b|\bvs\.?", re.IGNORECASE)


def attached(text: str) -> dict[str, Quantity]:
    """Each content word of a clause that states exactly one quantity → that quantity; a word found in
    several such clauses, a number or a unit belongs to none."""
    aliases = table().aliases
    out: dict[str, Quantity] = {}
    shared: set[str] = set()
    for clause in _CLAUSE.split(text):
        found = quantities(clause)
        if len(found) != 1:
            continue
        for word in set(content_words(clause)):
            if re.search(r"\d", word) or number(word) is not None or word in aliases:
                continue
            if word in out:
                shared.add(word)
            out[word] = found[0]
    return {w: q for w, q in out.items() if w not in shared}


def swapped(answer: str, reference: str) -> tuple[str, Quantity, Quantity] | None:
    """(word, the reference's quantity for it, the answer's) when the answer states every quantity of a
    several-quantity reference but attaches one of the reference's words to another of them; else
    None. Sure: the same word with another of the same numbers is the numbers exchanged."""
    wanted, stated = quantities(reference), quantities(answer)
    if len(wanted) < 2 or not all(any(same(q, r) for q in stated) for r in wanted):
        return None
    mine = attached(answer)
    for word, theirs in attached(reference).items():
        other = mine.get(word)
        if other is not None and not same(other, theirs) and any(same(other, r) for r in wanted):
            return word, theirs, other
    return None
