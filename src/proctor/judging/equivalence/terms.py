"""Names and terms: the words of a text that say which fact it states, its names, negations, and
whether a question already states a reference."""

from __future__ import annotations

import difflib
import re

from proctor.judging.equivalence.numbers import number, stated_numbers
from proctor.judging.metrics import normalize_answer

NEGATIONS = frozenset({"not", "no", "never", "nor", "neither", "without", "isnt", "wasnt", "arent", "werent",
                       "doesnt", "didnt", "dont", "cannot", "cant", "wont", "hardly"})  # fmt: skip
NEGATION_WINDOW = 3  # words before the phrase that may negate it
ALTERNATIVES = re.compile(r"\b(or|either)\b|/", re.IGNORECASE)
OFFERS = re.compile(r"\b(?:or|either)\b", re.IGNORECASE)
# Comparisons that are not negations ("no less than half a day").
NOT_NEGATIONS = re.compile(r"\b(?:no|not)\s+(?:less|more|fewer|later|earlier|sooner)\s+than\b", re.IGNORECASE)
_STOPWORD_TEXT = "a an the of and or in on at to for from by with is are was"
STOPWORDS = frozenset(_STOPWORD_TEXT.split())
NEAR_SPELLING = 0.7  # difflib ratio from which a word of the answer is a near miss of a reference word
# Words that say little about which fact a sentence states ("is also known", "used in", "which gives").
_GENERIC_TEXT = (
    "also known called used uses using make made makes have has had give gives given which their there "
    "them they this that these those such some many most more other than into onto over only very well "
    "being been were will would could should about what when where while"
)
GENERIC_WORDS = frozenset(_GENERIC_TEXT.split())
_FUNCTION_TEXT = (
    "its who whom whose how why she her hers his him they out all any not but yet one ones each every own "
    "into onto upon near also just even"
)
FUNCTION_WORDS = frozenset(_FUNCTION_TEXT.split())
# Capitalised words that are not names: articles, pronouns and the like that open a sentence.
_NOT_NAMES_TEXT = (
    "a an the it its this that these those they he she we you i there here in on at of to by for from with "
    "yes no not each every about around roughly approximately maybe perhaps probably possibly whenever "
    "when if as and but or "
    # Verbs that state a number ("Halve all doses."), read by `quantities`.
    "halve halves halved halving"
)
_NOT_NAMES = frozenset(_NOT_NAMES_TEXT.split())
_SENTENCE_START = re.compile(r"(?:^|[.!?:;\n(•*\-–—]\s*|\"\s*)$")
_MAX_FRAGMENT_WORDS = 3  # an answer this short is a bare name: its first word counts too ("Tashkent.")
# Where a clause ends: sentence and clause punctuation, a comma before a space (not "41,300"), a dash.
_CLAUSE_END = re.compile(r"[;:!?()—–]|\.(?!\d)|,\s|\s-\s")
_MIN_ROOT = 4  # letters a word must share as a root with a derived form ("west" in "westerly")


def content_words(text: str) -> list[str]:
    """The normalised words of a text without stop words; hyphenated words split."""
    return [w for w in normalize_answer(text.replace("-", " ")).split() if w not in STOPWORDS]


def stem(word: str) -> str:
    """A crude stem: the first five letters ("Varslandic" and "Varsland" share "varsl")."""
    return word[:5]


def near_spelling(word: str, other: str) -> bool:
    return difflib.SequenceMatcher(None, word, other).ratio() >= NEAR_SPELLING


def same_root(word: str, other: str) -> bool:
    """The same word inflected or derived: without a plural "s", the shorter (of at least `_MIN_ROOT`
    letters) begins or ends the longer ("monday"/"mondays", "cooker"/"cooks", "floats"/"afloat"); a near
    spelling such as "harlsby"/"harlsbury" is not."""
    short, long = sorted((word.removesuffix("s"), other.removesuffix("s")), key=len)
    return len(short) >= _MIN_ROOT and (long.startswith(short) or long.endswith(short))


def could_name(word: str) -> bool:
    """A word that can stand for a name or a term, not a function word ("where", "that", "it")."""
    return len(word) >= 3 and word not in GENERIC_WORDS and word not in FUNCTION_WORDS


def informative(text: str) -> set[str]:
    """Stems of the words of a text that say which fact it states: content words of four letters or more,
    not generic ones."""
    return {stem(w) for w in content_words(text) if len(w) >= 4 and w not in GENERIC_WORDS}


def names(text: str, *, all_capitalised: bool = False) -> set[str]:
    """Stems of the names a text uses: capitalised words that do not open a sentence (every capitalised
    word with `all_capitalised`, or in a bare fragment), and quoted phrases."""
    fragment = all_capitalised or len(text.split()) <= _MAX_FRAGMENT_WORDS
    out: set[str] = set()
    for m in re.finditer(r"\b[A-Z][\w'’-]*", text):
        word = m[0].lower().split("'")[0].split("’")[0]
        if word in _NOT_NAMES or len(word) < 2:
            continue
        if fragment or not _SENTENCE_START.search(text[: m.start()]):
            out |= {stem(w) for w in word.split("-") if w}
    for m in re.finditer(r"[\"“]([^\"”]{2,40})[\"”]", text):
        out |= {stem(w) for w in content_words(m[1])}
    return out


def asked(question: str) -> set[str]:
    """Stems the question already gives: its names and its content words."""
    return names(question, all_capitalised=True) | {stem(w) for w in content_words(question)}


# Irregular past forms of common verbs → the verb (the crude stems cannot see "left" in "leaves").
IRREGULAR_VERBS = {
    "left": "leave", "kept": "keep", "made": "make", "held": "hold", "built": "build", "sent": "send",
    "found": "find", "brought": "bring", "taught": "teach", "bought": "buy", "thought": "think",
    "told": "tell", "sold": "sell", "went": "go", "gone": "go", "ran": "run", "began": "begin",
    "begun": "begin", "wrote": "write", "written": "write", "gave": "give", "given": "give",
    "took": "take", "taken": "take", "rose": "rise", "risen": "rise", "fell": "fall", "fallen": "fall",
    "led": "lead", "paid": "pay", "laid": "lay", "said": "say", "met": "meet", "won": "win",
    "lost": "lose", "chose": "choose", "chosen": "choose", "drove": "drive", "driven": "drive",
    "grew": "grow", "grown": "grow", "knew": "know", "known": "know", "spoke": "speak",
    "spoken": "speak", "stood": "stand", "threw": "throw", "thrown": "throw", "wore": "wear",
    "worn": "wear", "became": "become", "came": "come", "felt": "feel", "fed": "feed", "fled": "flee",
    "fought": "fight", "heard": "hear", "hid": "hide", "hidden": "hide", "meant": "mean",
    "slept": "sleep", "spent": "spend", "stole": "steal", "stolen": "steal", "understood": "understand",
}  # fmt: skip


def said_otherwise(word: str, have: list[str]) -> bool:
    """Whether the answer says a reference word in other words: the word is a compound of answer words
    ("seawater": "water from the sea"), derives from one of at least `_MIN_ROOT` letters ("westerly":
    "from the west") or shares its root with one (`same_root`: "Mondays", "afloat"), or is an irregular
    form of the same verb ("left" for "leaves": `IRREGULAR_VERBS`). Not a near spelling:
    "Oakhill" neither composes nor derives "Oakhalt"."""
    roots = [w for w in have if len(w) >= _MIN_ROOT and word.startswith(w) and word != w]
    if roots or any(same_root(word, w) for w in have):
        return True
    # An irregular verb form says its verb ("left" and "leaves").
    base = IRREGULAR_VERBS.get(word, word)
    verbs = [IRREGULAR_VERBS.get(w, w) for w in have if word in IRREGULAR_VERBS or w in IRREGULAR_VERBS]
    if any(v == base or same_root(base, v) for v in verbs):
        return True
    words = set(have)

    def composed(rest: str, parts: int) -> bool:
        if not rest:
            return parts >= 2
        return any(rest[:i] in words and composed(rest[i:], parts + 1) for i in range(3, len(rest) + 1))

    return composed(word, 0)


def contains_phrase(words: list[str], phrase: list[str]) -> bool:
    """The phrase stands in the words, not negated in the `NEGATION_WINDOW` words before it."""
    n = len(phrase)
    for i in range(len(words) - n + 1):
        if words[i : i + n] == phrase:
            before = words[max(0, i - NEGATION_WINDOW) : i]
            if not any(w.replace("'", "") in NEGATIONS for w in before):
                return True
    return False


def negated_in_clause(answer: str, phrase: list[str]) -> bool:
    """Whether a negation stands before the phrase anywhere in its clause ("It definitely didn't start as
    early as 1874"), beyond the few words `contains_phrase` looks at; "It was 1923 — not 1936" is not."""
    n = len(phrase)
    for clause in _CLAUSE_END.split(answer):
        words = normalize_answer(NOT_NEGATIONS.sub(" ", clause)).split()
        starts = [i for i in range(len(words) - n + 1) if words[i : i + n] == phrase]
        if starts and any(w.replace("'", "") in NEGATIONS for w in words[: starts[0]]):
            return True
    return False


def negated_anywhere(normalised: str) -> bool:
    return any(w in NEGATIONS for w in normalised.split())


def _distinctive(text: str) -> set[str]:
    """Stems of a reference's content words that could say which fact it is (not "the", "which", "it"); its
    numbers, in digits or words, are compared as numbers (`stated_numbers`)."""
    return {
        stem(w)
        for w in content_words(text)
        if w not in GENERIC_WORDS and w not in FUNCTION_WORDS and number(w.replace(",", "")) is None
    }


def states_reference(question: str, reference: str) -> bool:
    """Whether the question already states its reference answer: every distinctive word of the reference
    (by stem: "the Varslandic economy" states "Varsland") and every number it states stand in the question,
    and the reference has at least one of either. A shared common word is not enough ("Which hall…?" does
    not state "the Copper Hall"); a multi-word reference is stated only when all of its words are."""
    words = _distinctive(reference)
    numbers = stated_numbers(reference)
    if not words and not numbers:
        return False
    q_stems = {stem(w) for w in content_words(question)} | names(question, all_capitalised=True)
    return words <= q_stems and numbers <= stated_numbers(question)


def only_question_overlap(answer: str, reference: str, question: str, *, numeric: bool = False) -> bool:
    """Whether everything the answer shares with the reference is text the question already contains
    ("the X economy" for the reference "X" to "... where the X economy is based?"): such an answer may only
    be repeating the question. With `numeric` (a rule found the reference's quantity, date or time in the
    answer, in whatever form) what they share is the reference's numbers: only the question's when it
    states them all. Otherwise the distinctive words (by stem) and numbers both hold; False when they
    share nothing."""
    if numeric:
        numbers = stated_numbers(reference)
        return bool(numbers) and numbers <= stated_numbers(question)
    shared_words = _distinctive(reference) & {stem(w) for w in content_words(answer)}
    shared_numbers = stated_numbers(reference) & stated_numbers(answer)
    if not shared_words and not shared_numbers:
        return False
    q_stems = {stem(w) for w in content_words(question)} | names(question, all_capitalised=True)
    return shared_words <= q_stems and shared_numbers <= stated_numbers(question)
