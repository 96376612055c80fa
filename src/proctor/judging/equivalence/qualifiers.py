"""Contrastive qualifiers: words of a closed set whose members exclude each other ("UDP" or "TCP",
"intravenous" or "oral", "per day" or "per dose", "per second" or "per minute", "once" or "twice" daily,
"before" or "after", the same dose or a lower one, below or above a bound, whichever is lower or
higher). A reference that names one
member and an answer that names another of its set instead ("TCP 7420" for "UDP port 7420") state
different facts however equal their numbers: `numeric_equivalent` does not credit such an answer and the
guard `reference_qualifier_contradicted` vetoes it. An answer that names both members ("UDP, not TCP") is
left alone. Adding a contrast is one entry of `CONTRASTS`: a set's members, each with its spellings.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from proctor.judging.equivalence.rates import agreeing, daily_differs, disagreeing, per_day

# "per day", "each day", "every day", "once a day", "3 times a day", "/day" — not "in a day", "an hour".
_EVERY = r"(?:per|each|every|(?:once|twice|thrice|times)\s+an?|/)"
_WEEKDAY = r"(?:mon|tues|wednes|thurs|fri|satur|sun)day"  # "every Sunday" is weekly
# "per node", "for each host".
_EACH = r"(?:per|each|every)"
# A period after a count of doses ("twice daily", "3 times a day", "once per week").
_A_PERIOD = r"(?=\s+(?:an?|per|each|every|daily|nightly|weekly|monthly|yearly|hourly)\b)"
# A period that recurs: a treatment cycle, a day, a week.
_PERIOD = r"(?:cycle|day|week|month|year|period|session|course)s?"
# A number after "under" or "over" ("under six hours"), which makes them bounds, not places.
_A_NUMBER = (
    r"\s+(?:\d|a\s+(?:half|quarter|third|dozen|hundred|thousand)\b|half\b|one\b|two\b|three\b|four\b|five\b|six\b|"
    r"seven\b|eight\b|nine\b|ten\b|eleven\b|twelve\b|fifteen\b|twenty\b|thirty\b|forty\b|fifty\b|hundred\b)"
)
# Each contrast: member → its spellings (regular expressions, lower case, read as whole words).
CONTRASTS: tuple[Mapping[str, tuple[str, ...]], ...] = (
    {"tcp": ("tcp",), "udp": ("udp",)},
    {"ipv4": ("ipv4", r"ip\s+v4"), "ipv6": ("ipv6", r"ip\s+v6")},
    # "HTTP 503" names a status code, not the protocol as against HTTPS.
    {"http": (r"http(?!\s+[1-5]\d\d\b)",), "https": ("https",)},
    {"read": ("read", "reads", "read-only"), "write": ("write", "writes", "write-only")},
    {"inbound": ("inbound", "ingress"), "outbound": ("outbound", "egress")},
    {
        "oral": ("oral", "orally", "by mouth", "per os", "p\\.o\\."),
        "intravenous": ("intravenous", "intravenously", "iv", "i\\.v\\."),
        "subcutaneous": ("subcutaneous", "subcutaneously", "sc", "s\\.c\\.", "subq"),
        "intramuscular": ("intramuscular", "intramuscularly", "im", "i\\.m\\."),
        "topical": ("topical", "topically"),
        "inhaled": ("inhaled", "inhalation"),
    },
    {
        # Rate denominators: "per second", "/s", "a minute" ("msg/s" is per second, not "/min").
        "per second": (rf"{_EVERY}\s*second", r"/\s*s", r"/\s*sec", r"[kmgt]?bps"),
        "per minute": (rf"{_EVERY}\s*minute", r"/\s*min"),
        "hourly": ("hourly", rf"{_EVERY}\s*hour", r"/\s*h", r"/\s*hr"),
        "daily": ("daily", rf"{_EVERY}\s*day", "nightly", r"/\s*d"),
        "weekly": ("weekly", rf"{_EVERY}\s*week", rf"every\s+{_WEEKDAY}"),
        "monthly": ("monthly", rf"{_EVERY}\s*month"),
        "yearly": ("yearly", "annually", rf"{_EVERY}\s*year"),
        "per dose": (r"per\s+dose", r"each\s+dose", r"a\s+dose"),
    },
    # How many doses in each period: "once daily" is not "twice daily" (the period is the set above).
    {
        "once": (rf"once{_A_PERIOD}", "one time(?:s)?" + _A_PERIOD, "qd", "q\\.d\\."),
        "twice": (rf"twice{_A_PERIOD}", rf"(?:two|2)\s*(?:times|x){_A_PERIOD}", "bid", "b\\.i\\.d\\."),
        "three times": (
            rf"(?:three|3)\s*(?:times|x){_A_PERIOD}", rf"thrice{_A_PERIOD}", "tid", "t\\.i\\.d\\."
        ),
        "four times": (rf"(?:four|4)\s*(?:times|x){_A_PERIOD}", "qid", "q\\.i\\.d\\."),
    },
    {"minimum": ("minimum", "at least", "lowest", r"no\s+(?:less|fewer|earlier|sooner)\s+than"),
     "maximum": ("maximum", "at most", "highest", r"(?:no|not)\s+more\s+than")},
    # Which side of a bound: under it or over it ("not less than" is a minimum, not "below").
    {"below": ("below", "beneath", rf"under(?={_A_NUMBER})", r"<\s*\d+(?:\.\d+)?",
               r"(?<!no\s)(?<!not\s)(?:less|lower|fewer|smaller|weaker|slower|lighter)\s+than"),
     "above": ("above", rf"over(?={_A_NUMBER})", "exceeds?", "exceeding", r"in\s+excess\s+of",
               r">\s*\d+(?:\.\d+)?",
               r"(?<!no\s)(?<!not\s)(?:more|greater|higher|larger|stronger|faster|heavier)\s+than")},
    # Which of two limits applies ("2 mg/kg or 160 mg, whichever is lower").
    {"the lower": (r"whichever\s+is\s+(?:lower|less|smaller|lesser|earlier|sooner|shorter)",
                   r"the\s+(?:lower|lesser|smaller)\s+of"),
     "the higher": (r"whichever\s+is\s+(?:higher|greater|larger|more|later|longer)",
                    r"the\s+(?:higher|greater|larger)\s+of")},
    {"before": ("before", "prior to"), "after": ("after", rf"following(?!\s+{_PERIOD})")},
    # Which period: the same one, the one after it or the one before ("day 3 of the following cycle").
    {"same period": (rf"(?:same|current|this)\s+{_PERIOD}",),
     "next period": (rf"(?:next|following|subsequent|later)\s+{_PERIOD}",),
     "previous period": (rf"(?:previous|preceding|prior)\s+{_PERIOD}",)},
    {"systolic": ("systolic",), "diastolic": ("diastolic",)},
    # When a concentration is measured: before the next dose (its lowest) or after one (its highest).
    {"trough": ("trough", "pre-dose", "predose", r"c\s?min"),
     "peak": ("peak", "post-dose", "postdose", r"c\s?max")},
    {"increase": ("increase", "increases", "increased", "raises", "raised", "rises", "boosts", "boosted"),
     "decrease": ("decrease", "decreases", "decreased", "lowers", "lowered", "reduce", "reduces", "reduced",
                  "reduction", "cuts")},
    # The dose a treatment resumes at: the same, one level lower or higher.
    {"same dose": (r"(?:the\s+)?same\s+dose", r"unchanged\s+dose", r"full\s+dose",
                   r"same\s+(?:dose\s+)?level"),
     "lower dose": (r"(?:next|one)\s+lower", r"lower\s+dose", r"reduced\s+dose", r"dose\s+reduction",
                    r"(?:dose\s+)?level\s+lower"),
     "higher dose": (r"(?:next|one)\s+higher", r"higher\s+dose", r"increased\s+dose",
                     r"(?:dose\s+)?level\s+higher")},
    # The scope a limit holds for: one node's or the whole cluster's.
    {"per node": (rf"{_EACH}\s+(?:node|host|server|instance|broker|replica)",),
     "per cluster": (rf"{_EACH}\s+cluster", "cluster-wide",
                     r"across\s+(?:the|a|all)\s+(?:whole\s+)?cluster")},
)  # fmt: skip

# A spelling that opens with "/" may follow a word ("msg/s", "mg/day"); the others stand alone.
_PATTERNS = tuple(
    {
        member: re.compile(rf"(?:(?<![\w-])|(?=/))(?:{'|'.join(ways)})(?![\w-])")
        for member, ways in contrast.items()
    }
    for contrast in CONTRASTS
)
# A multiple before a frequency is part of it ("twice daily"): still the member "daily".
_HALF_AN_HOUR = re.compile(r"\b(?:half|quarter|third)\s+an?\s+hour\b")


def named(text: str) -> list[set[str]]:
    """For each contrast, the members a text names."""
    t = _HALF_AN_HOUR.sub(" ", text.lower())
    return [{m for m, p in patterns.items() if p.search(t)} for patterns in _PATTERNS]


def said_as_member(reference: str, answer: str) -> set[str]:
    """The reference's words that spell a member of a contrast the answer names too, perhaps in other
    words ("next" of "the next day" where the answer says "the following day"): the same qualifier, not
    a missing word."""
    t, out = _HALF_AN_HOUR.sub(" ", reference.lower()), set[str]()
    for patterns, members in zip(_PATTERNS, named(answer), strict=True):
        for member, pattern in patterns.items():
            if member in members:
                out |= {w for found in pattern.finditer(t) for w in re.findall(r"[a-z]+", found[0])}
    return out


def dropped(answer: str, reference: str) -> str | None:
    """The member of a contrast the reference names and the answer names none of ("UDP 7411" for "Port
    7411", "Weekly, Sunday at 02:00" for "at 02:00"), else None. Such an answer may state the same
    number for another protocol or period: the rules leave it to the LLM (no guard vetoes it: the
    answer may simply be shorter). Rates that agree ("10 per second" for "600 per minute") are blanked
    first."""
    if (blanked := agreeing(answer, reference)) is not None:
        answer, reference = blanked
    for ref_members, ans_members in zip(named(reference), named(answer), strict=True):
        if ref_members and not ans_members:
            return sorted(ref_members)[0]
    return None


# What a question calls a contrast when it asks for one of its members: a member of the contrast → the
# question's words ("Which protocol and port …?" asks for TCP or UDP).
ASKED_AS: Mapping[str, str] = {
    "tcp": r"\bprotocols?\b",
    "oral": r"\broutes?\b",
    "daily": r"\bhow often\b|\bfrequency\b",
}
_ASKED = tuple(
    (next(i for i, c in enumerate(CONTRASTS) if member in c), re.compile(words, re.IGNORECASE))
    for member, words in ASKED_AS.items()
)


def asked_and_dropped(answer: str, reference: str, question: str) -> str | None:
    """The member of a contrast the question asks for by its name ("Which protocol …?"), the reference
    names, and the answer names none of ("Port 7411" for "UDP 7411"); else None."""
    if (blanked := agreeing(answer, reference)) is not None:
        answer, reference = blanked
    ref_named, ans_named = named(reference), named(answer)
    for index, words in _ASKED:
        if words.search(question) and ref_named[index] and not ans_named[index]:
            return sorted(ref_named[index])[0]
    return None


def contradicted(answer: str, reference: str, question: str = "") -> tuple[str, str] | None:
    """(the reference's member, the answer's other member) when the reference names exactly one member
    of a contrast and the answer names another member of it and not the reference's; else None. Where
    the reference names no member of a contrast, the question's one member is the reference's: "45%"
    answers "By how much does X reduce AUC?", so "It increases AUC by 45%" states another fact.

    Rates (`rates`): both texts state rates and none agree ("twice daily" for "every 8 hours") is a
    contradiction; rates that agree ("10 per second" for "600 per minute") are blanked first, so their
    denominators are no contrast. Daily amounts (`rates.daily_amounts`) that differ are a contradiction
    too ("400 mg twice daily" for "400 mg/day")."""
    if (other := disagreeing(answer, reference)) is not None:
        return per_day(other[0]), per_day(other[1])
    if (amounts := daily_differs(answer, reference)) is not None:
        return f"{amounts[0]} a day", f"{amounts[1]} a day"
    if (blanked := agreeing(answer, reference)) is not None:
        answer, reference = blanked
    asked = named(question) if question else [set[str]() for _ in _PATTERNS]
    for ref_members, ans_members, q_members in zip(named(reference), named(answer), asked, strict=True):
        members = ref_members or q_members
        if len(members) == 1 and ans_members and not members & ans_members:
            return next(iter(members)), sorted(ans_members)[0]
    return None
