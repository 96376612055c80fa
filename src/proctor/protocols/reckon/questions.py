"""Step 3: one probing question per cluster, with the cluster's short name ("center") and question type.

The question ends with an invitation to say more, so an answer can cover units the question did not
name outright. Follow-up rounds ask about units an earlier answer left out, more directly.

The question must name each unit's subject: a unit is named when a content word of its keyword (or the
word's stem, its first five letters) occurs in the question. With `left_out: list` (the default) the
subjects a question leaves out are named in a sentence added before the invitation ("Also tell me about
the salt tax and the net loft."): every unit is asked, at no extra call, and the question records them in
`listed`. With `left_out: split` a question that leaves subjects out is re-asked once, naming them; the
units it still leaves out are listed in `missing`, and the rounds split them off into a cluster of their
own (`rounds.plan_questions`) — more questions, each entirely the examiner's, at the cost of more calls
(on the method papers a small examiner left a subject out of half its questions: bench/README.md).

The question must not give a unit's answer away: a number the unit states (digits or a number word) that
its keyword does not, found in the question ("Why is a dozen fourteen fish?"), is a leak — a closed-book
candidate would score by repeating it. So is a name the unit states that no keyword of the cluster has
("What did the Administrator, Ines Marlow, decide?" for the unit "the head of government is Ines Marlow"):
checked against every unit the question targets. The same re-ask names the leaked values; values still
in the question after it are blanked out ("…") in the question asked (`leaked`, `redacted`).
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from pydantic import Field

from proctor.ids import content_id
from proctor.judging.equivalence import number_mentions, stated_numbers
from proctor.kit.context import RunContext
from proctor.kit.steps import Outcome, Payload, current_key
from proctor.models.types import Message
from proctor.prompts import prompt_version, render_messages, render_text
from proctor.protocols.reckon.config import Config
from proctor.protocols.reckon.units import KnowledgeUnit

QUESTION_TYPES = ("who", "what", "where", "when", "how", "why", "other")
INVITATION = "Then tell me what else you know about these."
ROLE = "reckon:question"
PROMPT = "reckon/question"
REASK_PROMPT = "reckon/question_reask"
_STOPWORDS_TEXT = (
    "a an the of and or in on at to for from by with about into over under its it is are was were be "
    "been this that these those what which who how why when where their there as not no than then"
)
_STOPWORDS = frozenset(_STOPWORDS_TEXT.split())

QUESTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "center": {"type": "string", "description": "a short name for the cluster's common theme"},
        "question_type": {"type": "string", "enum": list(QUESTION_TYPES)},
        "question": {"type": "string", "minLength": 8},
    },
    "required": ["center", "question_type", "question"],
}


def with_invitation(question: str) -> str:
    """The question, ending with the invitation to say more (added when the examiner left it out)."""
    q = " ".join(question.split())
    if re.sub(r"\W+", " ", INVITATION.lower()).strip() in re.sub(r"\W+", " ", q.lower()):
        return q
    if q and q[-1] not in ".?!":
        q += "?"
    return f"{q} {INVITATION}"


def _stem(word: str) -> str:
    return word[:5]


def content_words(text: str) -> list[str]:
    """Lowercase words of `text` that carry meaning: not a stopword, at least three characters or a digit."""
    words = re.findall(r"\w+", text.lower())
    return [w for w in words if w not in _STOPWORDS and (len(w) >= 3 or w.isdigit())]


def names_subject(keyword: str, question: str) -> bool:
    """Whether the question names the keyword's subject: one of its content words (by stem) occurs in the
    question. A keyword with no content word counts as named (nothing to check)."""
    wanted = {_stem(w) for w in content_words(keyword)}
    if not wanted:
        return True
    have = {_stem(w) for w in content_words(question)}
    return bool(wanted & have)


def missing_subjects(units: list[KnowledgeUnit], question: str) -> list[KnowledgeUnit]:
    """The units whose subject the question does not name (the invitation at its end does not count)."""
    text = question.replace(INVITATION, " ")
    return [u for u in units if not names_subject(u.keyword, text)]


def name_left_out(question: str, units: list[KnowledgeUnit]) -> str:
    """The question with a sentence naming the units' subjects added before the invitation."""
    body = question.replace(INVITATION, " ").strip()
    if body and body[-1] not in ".?!":
        body += "?"
    names = [" ".join(u.keyword.split()).rstrip(".;:,") for u in units]
    listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    return f"{body} Also tell me about {listed}. {INVITATION}"


def leaked_values(units: list[KnowledgeUnit], question: str) -> dict[str, set[float]]:
    """unit id -> the numbers of the unit (not of its keyword) that the question states."""
    asked = stated_numbers(question.replace(INVITATION, " "))
    out = {}
    for u in units:
        leak = (stated_numbers(u.description) - stated_numbers(u.keyword)) & asked
        if leak:
            out[u.unit_id] = leak
    return out


_CAPITALISED = re.compile(r"\b[A-Z][\w-]{2,}")
_SENTENCE_START = re.compile(r"(?:^|[.!?:;]\s+|\n)$")


def names_in(text: str) -> set[str]:
    """Capitalised words of `text` (three letters or more) that do not open a sentence, and are not
    stopwords: the names a unit states."""
    out = set()
    for m in _CAPITALISED.finditer(text):
        if _SENTENCE_START.search(text[: m.start()]) or m.group(0).lower() in _STOPWORDS:
            continue
        out.add(m.group(0))
    return out


def leaked_names(units: list[KnowledgeUnit], question: str) -> dict[str, set[str]]:
    """unit id -> the names the unit states that the question states too, leaving out every name a keyword
    of the cluster has (those the question must name) and names two units of the cluster state (their
    common setting, such as the place they are all about, not one unit's answer)."""
    text = question.replace(INVITATION, " ")
    asked = {m.group(0) for m in _CAPITALISED.finditer(text)}
    named = {w.lower() for u in units for w in re.findall(r"[\w'-]+", u.keyword)}
    stated = [names_in(u.description) for u in units]
    shared = {n for i, a in enumerate(stated) for b in stated[i + 1 :] for n in a & b}
    out = {}
    for u, own in zip(units, stated, strict=True):
        leak = {n for n in own & asked if n.lower() not in named and n not in shared}
        if leak:
            out[u.unit_id] = leak
    return out


def redact_names(question: str, names: set[str]) -> str:
    """The question with every mention of `names` (whole words) blanked out as "…"."""
    for n in sorted(names, key=len, reverse=True):
        question = re.sub(rf"\b{re.escape(n)}\b", "…", question)
    return question


def leaked_text(question: str, values: set[float]) -> list[str]:
    """How the question writes the leaked values ("fourteen", "6"), in order, once each."""
    return list(dict.fromkeys(question[a:b] for a, b, v in number_mentions(question) if v in values))


def redact(question: str, values: set[float]) -> str:
    """The question with every mention of `values` blanked out as "…"."""
    out, end = [], 0
    for a, b, v in number_mentions(question):
        if v in values and a >= end:
            out += [question[end:a], "…"]
            end = b
    return "".join(out) + question[end:]


def cluster_id(round_no: int, unit_ids: list[str]) -> str:
    """A round's name for a cluster of units (the same units in any order: the same cluster); not a store
    key — the question written for it gets its key from the kit."""
    return content_id(round_no, sorted(unit_ids))


class ClusterQuestion(Payload):
    """The examiner's probing question for one cluster of units (`unit_ids`: the cluster it was written
    for; the units asked are those it names unless a split left some in: see `rounds.plan_questions`)."""

    KIND: ClassVar[str] = "reckon_question"
    question_id: str
    round: int
    center: str
    question_type: str
    question: str
    unit_ids: list[str]
    # Units of the cluster whose subject the question does not name (after the re-ask).
    missing: list[str] = Field(default_factory=list)
    # Units whose numbers or names the question gave away (after the re-ask; blanked out in `question`).
    leaked: list[str] = Field(default_factory=list)
    redacted: list[str] = Field(default_factory=list)  # the values blanked out, as the question wrote them
    # Units whose subject the examiner left out and `left_out: list` named in an added sentence.
    listed: list[str] = Field(default_factory=list)
    reasked: bool = False
    prompt_version: str
    generator: str


async def generate_questions(
    ctx: RunContext[Config], round_no: int, clusters: dict[str, list[KnowledgeUnit]]
) -> dict[str, Outcome[tuple[str, list[KnowledgeUnit]], ClusterQuestion]]:
    """`clusters` maps cluster id (`cluster_id`) -> the cluster's units; returns each cluster's outcome (its
    question, or the failure), by cluster id. A question's id is its store key."""
    examiner = ctx.role("examiner")
    version = prompt_version(PROMPT)

    async def write(cluster: tuple[str, list[KnowledgeUnit]]) -> ClusterQuestion:
        units = cluster[1]
        messages = render_messages(
            PROMPT,
            units=[{"keyword": u.keyword, "description": u.description} for u in units],
            followup=round_no > 1,
            invitation=INVITATION,
        )

        async def ask(
            msgs: list[Message],
        ) -> tuple[dict[str, Any], str, list[KnowledgeUnit], dict[str, set[float]], dict[str, set[str]]]:
            c = await examiner.generate(
                msgs,
                json_schema=QUESTION_SCHEMA,
                temperature=0.0,
                seed=ctx.config.seed + round_no,
                max_tokens=ctx.settings.question_max_tokens,
            )
            question = with_invitation(str(c.parsed["question"]))
            return (
                c.parsed,
                c.text,
                missing_subjects(units, question),
                leaked_values(units, question),
                leaked_names(units, question),
            )

        parsed, text, missing, leaks, name_leaks = await ask(messages)
        listing = ctx.settings.left_out == "list"
        reasked = bool(leaks or name_leaks or (missing and not listing))
        if reasked:  # re-ask once, naming what is wrong; keep the reply with fewer problems
            values = set().union(*leaks.values()) if leaks else set()
            first = with_invitation(str(parsed["question"]))
            feedback = render_text(
                f"{REASK_PROMPT}.user.j2",
                missing=[u.keyword for u in missing],
                leaked=leaked_text(first, values)
                + sorted(set().union(*name_leaks.values()) if name_leaks else ()),
            )
            retry = await ask(
                [*messages, {"role": "assistant", "content": text}, {"role": "user", "content": feedback}]
            )
            if len(retry[2]) + len(retry[3]) + len(retry[4]) < len(missing) + len(leaks) + len(name_leaks):
                parsed, _, missing, leaks, name_leaks = retry
        question = with_invitation(str(parsed["question"]))
        listed = missing if listing else []
        if listed:  # name the subjects left out; the added names may give another unit's answer away
            question = name_left_out(question, listed)
            missing, leaks = missing_subjects(units, question), leaked_values(units, question)
            name_leaks = leaked_names(units, question)
        values = set().union(*leaks.values()) if leaks else set()
        names: set[str] = set().union(*name_leaks.values()) if name_leaks else set()
        redacted = leaked_text(question, values) + sorted(names)
        asked = redact(question, values) if values else question
        return ClusterQuestion(
            question_id=current_key(),
            round=round_no,
            center=" ".join(str(parsed["center"]).split())[:120] or "(unnamed)",
            question_type=parsed["question_type"],
            question=redact_names(asked, names) if names else asked,
            unit_ids=[u.unit_id for u in units],
            missing=[u.unit_id for u in missing],
            leaked=list(dict.fromkeys([*leaks, *name_leaks])),
            redacted=redacted,
            listed=[u.unit_id for u in listed],
            reasked=reasked,
            prompt_version=version,
            generator=examiner.spec,
        )

    outcomes = await ctx.map(
        f"reckon round {round_no}: questions",
        list(clusters.items()),
        write,
        # The same units in any order are one question (the first order seen writes it).
        unit_id=lambda c: (round_no, sorted(c[1], key=lambda u: u.unit_id)),
        role=ROLE,
        output=ClusterQuestion,
        context=lambda c: {"round": round_no, "unit_ids": [u.unit_id for u in c[1]]},
    )
    return {o.unit[0]: o for o in outcomes}
