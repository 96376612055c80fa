"""The rules and guards in use, keyed by language: `decide` (rules, before any LLM) and `veto` (guards,
after an LLM "correct"). Only English exists today; another language is another entry in `RULES` and
`GUARDS`, with its own modules, without touching the English ones."""

from __future__ import annotations

from proctor.judging.equivalence.base import Guard, Rule, RuleDecision
from proctor.judging.equivalence.exact_guards import (
    identifier_missing,
    qualifier_contradicted,
    version_missing,
)
from proctor.judging.equivalence.guards import (
    alternatives_listed,
    answer_within_question,
    missing_part,
    missing_term,
    name_missing,
    nothing_beyond_question,
    other_name,
)
from proctor.judging.equivalence.polar import polarity_contradicted, same_polarity
from proctor.judging.equivalence.quantity_guard import missing_quantities, order_changed
from proctor.judging.equivalence.rules import ENGLISH_RULES, read_pair
from proctor.judging.equivalence.terms import only_question_overlap

DEFAULT_LANGUAGE = "en"

RULES: dict[str, tuple[Rule, ...]] = {"en": ENGLISH_RULES}
# In the order `veto` asks them; the first that is sure decides.
GUARDS: dict[str, tuple[Guard, ...]] = {
    "en": (
        Guard("alternatives_listed", "en", alternatives_listed),
        Guard("polarity_contradicted", "en", polarity_contradicted, needs_question=True),
        Guard("reference_version_missing", "en", version_missing, reads_question=True, wants_parts=True),
        Guard(
            "reference_identifier_missing", "en", identifier_missing, reads_question=True, wants_parts=True
        ),
        Guard("reference_qualifier_contradicted", "en", qualifier_contradicted, reads_question=True),
        Guard("reference_order_changed", "en", order_changed),
        Guard("reference_quantity_missing", "en", missing_quantities, reads_question=True, wants_parts=True),
        Guard("reference_term_missing", "en", missing_term, wants_parts=True),
        Guard("reference_part_missing", "en", missing_part, wants_parts=True),
        Guard("reference_name_missing", "en", name_missing, needs_question=True, wants_parts=True),
        Guard("other_name", "en", other_name, needs_question=True, wants_parts=True),
        Guard("answer_within_question", "en", answer_within_question, needs_question=True),
    )
}
# Guards a protocol calls itself, outside `veto` (RECKON's unit judging, where the question is known).
EXTRA_GUARDS: dict[str, tuple[Guard, ...]] = {
    "en": (Guard("nothing_beyond_question", "en", nothing_beyond_question, needs_question=True),)
}
# The methods a guard records when it overrules an LLM "correct".
GUARD_METHODS = tuple(dict.fromkeys(g.name for gs in (GUARDS, EXTRA_GUARDS) for g in gs[DEFAULT_LANGUAGE]))
RULE_METHODS = tuple(r.name for r in RULES[DEFAULT_LANGUAGE])


def _language(table: dict[str, tuple[Rule, ...]] | dict[str, tuple[Guard, ...]], language: str) -> None:
    if language not in table:
        raise ValueError(f"no equivalence rules for language {language!r}; known: {', '.join(sorted(table))}")


def decide(
    answer: str, reference: str, question: str = "", language: str = DEFAULT_LANGUAGE
) -> RuleDecision | None:
    """ "correct" when a rule is sure, else None: the LLM judges. The rules for the reference's kind run
    in order; the first sure one decides. With the question, no rule credits an answer whose only overlap
    with the reference is text the question already contains (it may be repeating the question)."""
    _language(RULES, language)
    pair = read_pair(answer, reference, question)
    if pair is None:
        return None
    for rule in RULES[language]:
        if pair.kind in rule.kinds and (decision := rule.check(pair)) is not None:
            if question and only_question_overlap(answer, reference, question, numeric=pair.kind != "text"):
                return None
            return decision
    return None


def veto(
    answer: str, reference: str, question: str = "", language: str = DEFAULT_LANGUAGE
) -> RuleDecision | None:
    """The guards after an LLM "correct": the first that is sure, meaning "incorrect"; None when the LLM's
    verdict stands. The guards that need the question run only with it; those that look for parts of the
    reference not where the answer gives the reference's "yes" or "no" to a yes/no question (`polar`)."""
    _language(GUARDS, language)
    answered = bool(question) and same_polarity(answer, reference, question)
    for guard in GUARDS[language]:
        if (guard.needs_question and not question) or (guard.wants_parts and answered):
            continue
        reads = guard.needs_question or guard.reads_question
        args = (answer, reference, question) if reads else (answer, reference)
        if (decision := guard.check(*args)) is not None:
            return decision
    return None
