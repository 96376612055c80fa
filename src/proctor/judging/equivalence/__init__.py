"""Deterministic equivalence before and after any LLM judge: rules that decide "correct" only when they
are sure, guards that turn an LLM "correct" into "incorrect" only when they are sure.

A small judge model is too strict when an answer holds the reference plus detail ("It opened in 1887
after a public vote." for "1887") and misses equivalent quantities ("roughly 25 percent" for "about one in
four"); it credits confident guesses and near misses. The rules (`decide`) catch the first cases and
nothing else: an answer they do not decide goes to the LLM judge, and no rule ever decides "incorrect".
The guards (`veto`) run after an LLM "correct" and catch the sure misses.

Every rule and guard is a named object in `registry` (`RULES`, `GUARDS`), keyed by language: its name
is the method a judgment records, its docstring says what it is sure of and its measured precision. The
rules read English only today; another language is another registry entry.

* `numbers` — how a number is written; `units` — the one unit table (adding a unit is one row: every
  pattern and conversion is generated from it); `quantities` — reading quantities and comparing them;
* `dates` — dates, times of day, ratios; `terms` — names, content words, negations, and whether a
  question states its reference (`states_reference`, used to drop questions that give their answer away);
* `versions` — version strings, which are not numbers; `identifiers` — code identifiers, compared exactly;
  `qualifiers` — contrastive qualifiers ("TCP"/"UDP", "oral"/"intravenous");
* `rates` — dose frequencies and counted rates, compared by value; `polar` — yes/no answers;
  `attached` — which words each of several quantities belongs to ("70% in the feces");
* `rules` — the English rules; `guards` — the English guards; `quantity_guard` — the guard on numbers;
  `exact_guards` — the guards for versions, identifiers and qualifiers; `registry` — `decide` and `veto`.
"""

from __future__ import annotations

from proctor.judging.equivalence.base import Guard, Rule, RuleDecision
from proctor.judging.equivalence.guards import (
    alternatives_listed,
    missing_part,
    missing_term,
    name_missing,
    nothing_beyond_question,
    other_name,
)
from proctor.judging.equivalence.numbers import number_mentions, stated_numbers
from proctor.judging.equivalence.quantities import Quantity, quantities
from proctor.judging.equivalence.quantity_guard import missing_quantities
from proctor.judging.equivalence.registry import (
    DEFAULT_LANGUAGE,
    EXTRA_GUARDS,
    GUARD_METHODS,
    GUARDS,
    RULE_METHODS,
    RULES,
    decide,
    veto,
)
from proctor.judging.equivalence.terms import NEGATIONS, only_question_overlap, states_reference
from proctor.judging.equivalence.units import UNITS, Unit, add_unit, table, units_added

__all__ = [
    "DEFAULT_LANGUAGE",
    "EXTRA_GUARDS",
    "GUARDS",
    "GUARD_METHODS",
    "NEGATIONS",
    "RULES",
    "RULE_METHODS",
    "UNITS",
    "Guard",
    "Quantity",
    "Rule",
    "RuleDecision",
    "Unit",
    "add_unit",
    "alternatives_listed",
    "decide",
    "missing_part",
    "missing_quantities",
    "missing_term",
    "name_missing",
    "nothing_beyond_question",
    "number_mentions",
    "only_question_overlap",
    "other_name",
    "quantities",
    "stated_numbers",
    "states_reference",
    "table",
    "units_added",
    "veto",
]
