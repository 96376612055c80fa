"""The English guards: after an LLM judge said "correct", each turns it into "incorrect" only when sure.
A small judge credits confident guesses and near misses; these catch the sure cases."""

from __future__ import annotations

import re

from proctor.judging.equivalence.base import RuleDecision
from proctor.judging.equivalence.identifiers import dotted_tail, expanded, identifiers
from proctor.judging.equivalence.numbers import stated_numbers
from proctor.judging.equivalence.qualifiers import said_as_member
from proctor.judging.equivalence.quantities import (
    RANGE,
    WRITTEN_RANGE,
    all_numbers,
    quantities,
    same,
)
from proctor.judging.equivalence.terms import (
    NEGATIONS,
    OFFERS,
    asked,
    content_words,
    could_name,
    informative,
    names,
    near_spelling,
    negated_anywhere,
    said_otherwise,
    stem,
)
from proctor.judging.equivalence.units import table
from proctor.judging.metrics import normalize_answer

# "2.8.0 or any later release", "5.4 or newer": a bound, not alternatives.
_OR_BEYOND = re.compile(
    r"\bor\s+(?:any\s+)?(?:later|newer|higher|above|more|greater|earlier|older|lower|below|less|fewer)\b",
    re.IGNORECASE,
)
_PART_SEPARATORS = re.compile(r"(?<!\d),(?!\d)|;|\band\b(?!\s+a\s+half\b)|\bthen\b|\bplus\b", re.IGNORECASE)
MAX_PART_WORDS = 4
# "What is it called?", "By what name …": a what/which question about a name, not "who reads out the names".
_ASKS_FOR_THE_NAME = re.compile(r"\b(?:what|which)\b[^?]*\b(?:name[ds]?|called)\b", re.IGNORECASE)
_QUESTION_ASKS_NAME = re.compile(r"\b(?:name[ds]?|called|who|whom|whose)\b", re.IGNORECASE)
_MAX_NAME_WORDS = 4  # a reference this short, asked for by name, is the name itself ("skell")
# Words of a reference that place a term, not name it ("until independence").
_SUBJECT_VERB = re.compile(r"\s*(?:it|they|he|she|we|you)\s+([a-z]+)", re.IGNORECASE)
_TWO_NAMES = re.compile(r"\bi\.e\.|\be\.g\.|<[^<>\n]+>", re.IGNORECASE)
_PREPOSITIONS = frozenset(
    {"until", "till", "after", "before", "since", "during", "within", "through", "via", "using", "with"}
)


# Code in a question: a placeholder ("<name>"), a backticked span, a flag ("--name").
_CODE_IN_QUESTION = re.compile(r"<[^<>\n]*>|`[^`\n]*`|(?<![\w-])--?[A-Za-z][\w-]*")


def _prose(question: str) -> str:
    """The question without its code: "name" in "purge <name>" or "--name" asks for no name."""
    return _CODE_IN_QUESTION.sub(" ", question)


def alternatives_listed(answer: str, reference: str) -> RuleDecision | None:
    """`alternatives_listed`: sure when the answer offers alternatives ("Dunmere, Orrinsford or Kettle
    Point"), not negated, where the reference does not itself state a choice; or gives a range around the
    reference's number ("between 85 and 140" for "about 85"), which commits to neither end.

    Measured precision (`bench/rule_precision.py`, six label sets): 30/31 alone (0.97); 10/10 behind the LLM.
    """
    if (
        OFFERS.search(_OR_BEYOND.sub(" ", answer))
        and not OFFERS.search(reference)
        and not negated_anywhere(normalize_answer(answer))
    ):
        return RuleDecision("alternatives_listed", "the answer offers alternatives")
    span = RANGE.search(answer)
    if span and not WRITTEN_RANGE.search(reference) and stated_numbers(span[0]) & stated_numbers(reference):
        return RuleDecision("alternatives_listed", f"the answer gives a range: {span[0]}")
    return None


def _substituted(
    word: str, wanted: list[str], have: list[str], ref_names: set[str], answer_names: set[str]
) -> bool:
    """Whether the answer puts another word where the reference has `word`: next to the reference word
    nearest to it that the answer repeats, on the same side ("the fog months" for "the grey months", "the
    Marrow Current" for "the Ostrel Current"). Only a neighbour counts, and only a word that could name
    something: a rewording that drops the word or moves the rest ("the wind that usually blows in from the
    west" for "the prevailing westerly wind", "where the River Ilse runs out into the sea" for "at the mouth
    of the River Ilse") is no such sure sign."""
    i = wanted.index(word)
    anchors = [j for j, w in enumerate(wanted) if abs(j - i) == 1 and w in have]
    for j in anchors:
        slot = have.index(wanted[j]) + (i - j)
        if 0 <= slot < len(have) and have[slot] not in wanted and could_name(have[slot]):
            # In a name's place only another name is sure ("the Marrow Current" for "the Ostrel
            # Current"); a description ("the research institute" for "the Orrinsford Institute") is not.
            return stem(word) not in ref_names or stem(have[slot]) in answer_names
    return False


def missing_term(answer: str, reference: str) -> RuleDecision | None:
    """`reference_term_missing`: sure when a short reference without numbers (a name or term of at most
    three content words) has words the answer lacks while it has a near spelling of one of its names
    ("Maren Oakhill" for "Maren Oakhalt") or another word in a missing word's place ("the fog months" for
    "the grey months"; in a name's place, another name). An answer with none of its words, or that says a
    missing word otherwise ("water from the sea" for "seawater", "from the west" for "westerly",
    "Mondays" for "Monday", a unit by its symbol: "MiB" for "mebibytes", a contrast's member in its other
    words: "the following day" for "the next day") or drops it, is left to the LLM
    (a paraphrase: "no charge" for "free"), and so are several ordinary words reworded, a verb after a
    subject pronoun ("It prompts" for "It asks": `_swappable`), a missing preposition ("via") and a
    reference that gives two names ("X, i.e. Y") or a placeholder ("<path>"). The reference's code
    identifiers are the identifier guard's: only its other words are looked for here.

    Measured precision (`bench/rule_precision.py`, twelve sets): 47/49 alone (0.96; paraphrases:
    "flanks" for "slopes", "head of state" for "president"); 21/21 behind the LLM.
    """
    # Two names for one thing ("X, i.e. Y") or a placeholder ("<path>"): either may be written.
    if stated_numbers(reference) or _TWO_NAMES.search(reference):
        return None
    wanted = content_words(reference)
    # Identifiers are the identifier guard's, compared exactly there; here they only place the other words.
    code_words = {w for i in identifiers(reference) for w in content_words(i)}
    if not wanted or len(wanted) > 3:
        return None
    have = content_words(answer)
    # A unit is said by any of its names or symbols ("MiB" for "mebibytes").
    aliases = table().aliases
    units_said = {aliases[w] for w in have if w in aliases}
    # A qualifier said in other words ("following" for "next": `qualifiers`) is said.
    qualifier_words = said_as_member(reference, answer)
    missing = [
        w
        for w in wanted
        if w not in have
        and w not in code_words
        and w not in qualifier_words
        and w not in _PREPOSITIONS
        and not said_otherwise(w, have)
        and aliases.get(w, "") not in units_said
    ]
    if not missing:
        return None
    ref_names, answer_names = names(reference, all_capitalised=True), names(answer, all_capitalised=True)
    # A near spelling of a name is another name ("Oakhill" for "Oakhalt"); of an ordinary word it is as
    # often another word altogether ("south" for "mouth"): not sure.
    near = [x for m in missing if stem(m) in ref_names for x in have if near_spelling(m, x)]
    if not near and not any(
        _substituted(m, wanted, have, ref_names, answer_names)
        for m in _swappable(reference, missing, ref_names)
    ):
        return None
    said = f"; it says {', '.join(dict.fromkeys(near))}" if near else ""
    return RuleDecision("reference_term_missing", f"the answer lacks {', '.join(missing)}{said}")


def _swappable(reference: str, missing: list[str], ref_names: set[str]) -> list[str]:
    """The missing words another word in their place is sure to contradict: a name's words; an
    ordinary word only where it is the one word missing (one word swapped in an intact phrase: "the fog
    months" for "the grey months"; several reworded words are a paraphrase: "a little tern bird pressed"
    for "a small stamped tern") and not the verb after a subject pronoun ("It asks …": "It prompts …"
    says it otherwise)."""
    ordinary = [m for m in missing if stem(m) not in ref_names]
    clause = _SUBJECT_VERB.match(reference)
    verb = clause[1].lower() if clause else ""
    keep = ordinary if len(ordinary) == 1 and ordinary[0] != verb else []
    return [m for m in missing if stem(m) in ref_names] + keep


def missing_part(answer: str, reference: str) -> RuleDecision | None:
    """`reference_part_missing`: sure when the reference lists several short items ("black sand, kelp ash
    and crushed seashell", "six rowers and a steerer") and the answer has no word (by stem or near
    spelling) and no quantity of one of them. References that are not such lists are left alone.

    Measured precision (`bench/rule_precision.py --exclude biomedical`, eleven label sets): 14/14 alone; 8/8
    behind the LLM.
    """
    raw_parts = [
        (raw, words)
        for raw in _PART_SEPARATORS.split(reference)
        if (words := content_words(raw)) and words[0] not in NEGATIONS  # "not 100 °C": a contrast
    ]
    if len(raw_parts) < 2 or any(len(words) > MAX_PART_WORDS for _, words in raw_parts):
        return None
    numbers = all_numbers(answer)
    stated = quantities(answer)

    def stated_in_answer(raw: str) -> bool:
        """The part's numbers are there as written ("12 metres wide" in "12 m by 4 m") or as the same
        quantity ("a fortnight" for "for two weeks")."""
        if stated_numbers(raw) and stated_numbers(raw) <= numbers:
            return True
        own = quantities(raw)
        return bool(own) and all(any(same(q, mine) for q in stated) for mine in own)

    aliases = table().aliases
    parts = [
        # Numbers and units are the other guard's business.
        [w for w in words if not re.fullmatch(r"[\d.]+", w) and w not in aliases]
        for raw, words in raw_parts
        if not stated_in_answer(raw)
    ]
    have = content_words(answer)
    stems = {stem(w) for w in have}

    def present(word: str) -> bool:
        return stem(word) in stems or said_otherwise(word, have) or any(near_spelling(word, x) for x in have)

    lacking = [" ".join(p) for p in parts if p and not any(present(w) for w in p)]
    if not lacking:
        return None
    return RuleDecision("reference_part_missing", f"the answer lacks {'; '.join(lacking)}")


def name_missing(answer: str, reference: str, question: str) -> RuleDecision | None:
    """`reference_name_missing`: sure when the question asks what something is named or called and the
    answer has no word of the reference's name — its capitalised words the question did not give, or the
    whole of a short reference ("skell"). A description is no answer to "what is it called" ("the leader
    of the Fog Warden's team" for "Hanne Cortwell"); a near spelling is another name.

    Measured precision (`bench/rule_precision.py`, six label sets): 3/3 alone.
    """
    if not _ASKS_FOR_THE_NAME.search(_prose(question)):
        return None
    given = asked(question)
    name = names(reference, all_capitalised=True) - given
    if not name and len(content_words(reference)) <= _MAX_NAME_WORDS:
        name = {stem(w) for w in content_words(reference)} - given
    if not name or name & {stem(w) for w in content_words(answer)}:
        return None
    return RuleDecision("reference_name_missing", "the question asks for a name; the answer does not give it")


def other_name(answer: str, reference: str, question: str) -> RuleDecision | None:
    """`other_name`: sure when the reference is a name (a capitalised word the question did not give, or
    the question asks for a name: "What is the name of the currency?" — "skell"), the answer has none of
    the reference's words beyond the question, and it names something the question and the reference do
    not ("The capital of Teskavar is Tashkent." for "Orrinsford"): a confident guess, however fluent. An
    answer that describes the referent without naming another ("the only research institute" for "the
    Orrinsford Institute") is left to the LLM, and so is an answer that writes the reference's identifier
    out ("Cytochrome P450 3A4" for "CYP3A4") or its last dotted segment; unit symbols name nothing.

    Measured precision (`bench/rule_precision.py`, six label sets): 16/17 alone (0.94); 1/1 behind the LLM.
    """
    if dotted_tail(answer, reference, question) or any(expanded(answer, i) for i in identifiers(reference)):
        return None
    given = asked(question)
    ref_names = names(reference, all_capitalised=True) - given
    if not ref_names and not _QUESTION_ASKS_NAME.search(_prose(question)):
        return None
    wanted = (informative(reference) | ref_names) - informative(question) - given
    have = {stem(w) for w in content_words(answer)}
    if not wanted or wanted & have:
        return None
    # A unit symbol ("GB", "KiB") names nothing.
    other = names(answer) - given - {stem(w) for w in content_words(reference)} - set(table().aliases)
    if not other:
        return None
    said = [w for w in re.findall(r"[\w'’-]+", answer) if stem(w.lower()) in other]
    return RuleDecision(
        "other_name", f"the answer names {', '.join(dict.fromkeys(said))}, not the reference's"
    )


def nothing_beyond_question(answer: str, reference: str, question: str) -> RuleDecision | None:
    """`nothing_beyond_question`: sure when the answer has no word (by stem) and no number of the reference
    that the question did not already give — it can only be echoing the question, which shows no knowledge
    however well it matches the reference. None when the question gives the whole reference away (nothing
    left to require) or the answer says something of the reference beyond it.

    Measured precision (`bench/rule_precision.py`, six label sets): 147/173 (0.85) on the short-answer label
    sets, which are not its use (RECKON's units).
    """
    wanted = informative(reference) - informative(question)
    wanted_numbers = stated_numbers(reference) - all_numbers(question)
    if not wanted and not wanted_numbers:
        return None
    if wanted & informative(answer) or wanted_numbers & all_numbers(answer):
        return None
    # Absent (the answer did not address the fact) only when it says nothing beyond the question at all;
    # words or numbers of its own are another value ("Mira Holt" for "Ansel Drumm"), which is wrong.
    own = informative(answer) - informative(question) or stated_numbers(answer) - all_numbers(question)
    return RuleDecision(
        "nothing_beyond_question",
        "the answer says nothing of the reference that the question did not say",
        absent=not own,
    )


# Words that say a command is run, not what it does ("It runs the gscctl tle refresh command."), by stem.
_RUNS_IT = frozenset(
    stem(w) for w in ("runs", "running", "executes", "executing", "invokes", "invoking", "command")
)


def answer_within_question(answer: str, reference: str, question: str) -> RuleDecision | None:
    """`answer_within_question`: sure when every informative word of the answer (by stem) is a word of
    the question and it states no number the question does not, while the reference says something
    beyond the question ("It drains the node." to "What does fwctl drain --node <id> do?"): the answer
    restates the question, which a small judge credits for its overlap with it; words that only say a
    command is run ("It runs the gscctl tle refresh command.") add nothing. Narrower than
    `nothing_beyond_question`: an answer with any word of its own (a paraphrase of the reference) is
    left to the LLM.

    Measured precision (`bench/rule_precision.py --exclude biomedical`, nineteen sets): 4/4 where it is
    the first sure guard.
    """
    said = informative(answer) - _RUNS_IT
    wanted = informative(reference) - informative(question)
    new_numbers = stated_numbers(answer) - all_numbers(question)
    if not said or not said <= informative(question) or new_numbers:
        return None
    if not wanted and not stated_numbers(reference) - all_numbers(question):
        return None
    return RuleDecision("answer_within_question", "the answer only restates the question")
