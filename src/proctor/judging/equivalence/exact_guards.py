"""The English guards for technical and clinical answers, where a near miss is a different fact: a version,
an identifier, a contrastive qualifier. Each reads the question when it is known (what the question
already states is not required of the answer) and runs without it."""

from __future__ import annotations

import re

from proctor.judging.equivalence.base import RuleDecision
from proctor.judging.equivalence.identifiers import (
    aside,
    dotted_tail,
    expanded,
    identifiers,
    states_identifier,
    substituted,
)
from proctor.judging.equivalence.qualifiers import asked_and_dropped, contradicted
from proctor.judging.equivalence.terms import content_words
from proctor.judging.equivalence.versions import states_version, versions

# Words of a reference from which an identifier in it may be side detail.
_MAX_REFERENCE_WORDS = 6


def version_missing(answer: str, reference: str, question: str = "") -> RuleDecision | None:
    """`reference_version_missing`: sure when the reference writes a version string ("2.10.3",
    "v2.1.0", "2.1.x"; a bare "5.4" where the question asks for a version) that the question does not
    state and the answer does not write exactly ("2.1.3" for "2.10.3", "5.14" for "5.4"). A "v" is no
    difference; neither are trailing ".0" parts ("2.1.0" for "2.1": left to the LLM).

    Measured precision (`bench/rule_precision.py`, twelve sets): 15/15 alone, all on the technical
    development sets.
    """
    given = set(versions(question)) if question else set()
    for version in versions(reference, question):
        if version not in given and not states_version(answer, version):
            return RuleDecision("reference_version_missing", f"the answer does not write version {version}")
    return None


def identifier_missing(answer: str, reference: str, question: str = "") -> RuleDecision | None:
    """`reference_identifier_missing`: sure when the reference writes a code identifier (a flag, an
    environment variable, a snake_case or dotted key, a path, a camelCase word, a code such as "CYP2C19",
    a one-token kebab-case reference; `identifiers`) that the question does not state and the answer does
    not write exactly, case, hyphens, underscores and dots included ("TBCACHE_CONF" or "tbcache_config"
    for "TBCACHE_CONFIG", "-N" for "-n"), in an answer-like reference of a few words (in a sentence an
    identifier may be side detail the answer need not repeat). Where the question names an identifier, a
    one-word reference is one too: the answer may not write it with other punctuation ("max-memory" for
    "maxmemory"). Not an identifier: a unit symbol ("KiB", "8 vCPU"; `identifiers.is_unit`). Written
    out is written ("activated partial thromboplastin time" for "aPTT", "Cytochrome P450 3A4" for
    "CYP3A4": `identifiers.expanded`), and so is the last segment of a dotted identifier whose prefix the
    question names ("AT_LEAST_ONCE" for "DeliveryMode.AT_LEAST_ONCE": `identifiers.dotted_tail`), and so
    is the other name the reference gives it in parentheses ("UDP-3-O-acyl-N-acetylglucosamine
    deacetylase" for "LpxC (UDP-3-O-acyl-N-acetylglucosamine deacetylase)").

    Measured precision (`bench/rule_precision.py`, twelve sets): 53/53 alone (3 on the prose sets, 50
    on the technical and clinical development sets).
    """
    if dotted_tail(answer, reference, question):
        return None
    if (other := substituted(answer, reference, question)) is not None:
        return RuleDecision("reference_identifier_missing", f"the answer writes {other[1]}, not {other[0]}")
    if len(reference.split()) > _MAX_REFERENCE_WORDS:
        return None
    for identifier in identifiers(reference):
        if (question and states_identifier(question, identifier)) or aside(reference, identifier):
            continue
        if not states_identifier(answer, identifier) and not expanded(answer, identifier):
            if _named_beside(answer, reference, identifier):
                continue
            return RuleDecision("reference_identifier_missing", f"the answer does not write {identifier}")
    # Asked about identifiers, a one-word reference is one: "max-memory" is not the old key "maxmemory".
    word = reference.strip().rstrip(".")
    if question and identifiers(question) and re.fullmatch(r"[A-Za-z][\w.-]*", word):
        squashed = {re.sub(r"\W|_", "", w): w for w in re.findall(r"[\w.-]+", answer)}
        if word not in squashed.values() and re.sub(r"\W|_", "", word) in squashed:
            written = squashed[re.sub(r"\W|_", "", word)]
            return RuleDecision("reference_identifier_missing", f"the answer writes {written}, not {word}")
    return None


def _named_beside(answer: str, reference: str, identifier: str) -> bool:
    """The reference gives the identifier another name after "i.e." ("$TIDEWELL_HOME/conf/broker.toml,
    i.e. /opt/tidewell/conf/broker.toml") or in parentheses, or the identifier in parentheses after a
    name ("LpxC (UDP-3-O-acyl-N-acetylglucosamine deacetylase)"), and the answer writes every
    word of that name: it names the same thing by its other name."""
    ident = re.escape(identifier)
    # "X, i.e. Y": the answer that writes Y names X by its other name.
    said = re.split(r",?\s*\b(?:i\.e\.|that is,?|or equivalently)\s*", reference, maxsplit=1)
    if len(said) == 2:
        other_side = said[1] if identifier in identifiers(said[0]) else said[0]
        ids = identifiers(other_side)
        if ids and all(states_identifier(answer, i) for i in ids):
            return True
    found = re.search(rf"(?<![\w-]){ident}\s*\(([^()]+)\)", reference) or re.search(
        rf"([^()]+?)\s*\(\s*{ident}\s*\)", reference
    )
    if found is None:
        return False
    other = content_words(found[1])
    return bool(other) and set(other) <= set(content_words(answer))


def qualifier_contradicted(answer: str, reference: str, question: str = "") -> RuleDecision | None:
    """`reference_qualifier_contradicted`: sure when the reference names one member of a contrast
    (`qualifiers.CONTRASTS`: TCP/UDP, oral/intravenous, per day/per dose, minimum/maximum, before/after …)
    and the answer names another member of it and not the reference's ("TCP 7420" for "UDP port 7420");
    where the reference names none, the question's member counts ("It increases AUC by 45%" for "45%"
    to "By how much does X reduce AUC?"). Rates are compared by value (`rates`): "twice daily" for
    "every 8 hours" is vetoed, "10 per second" for "600 per minute" is not. Also sure where the question
    asks for a member by the contrast's name (`qualifiers.ASKED_AS`: "Which protocol and port …?"), the
    reference names one and the answer none ("Port 7411" for "UDP 7411").

    Measured precision (`bench/rule_precision.py`, fifteen sets): 42/42 alone (the technical and
    clinical development sets).
    """
    found = contradicted(answer, reference, question)
    if found is None:
        if question and (member := asked_and_dropped(answer, reference, question)) is not None:
            return RuleDecision(
                "reference_qualifier_contradicted",
                f"the question asks for the {member} of the reference; the answer names none",
            )
        return None
    ref_member, other = found
    return RuleDecision(
        "reference_qualifier_contradicted", f"the reference says {ref_member}; the answer {other}"
    )
