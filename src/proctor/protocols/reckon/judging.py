"""Step 5: per-unit judging in two stages.

Stage 1 (extract, by selection): the answer is cut into numbered sentences, and the judge model returns,
per unit, the numbers of the sentences that speak about the unit's subject (a JSON schema of integer
arrays bounded by the answer's sentence count, which llama.cpp enforces), or an empty list. The excerpt is
then the answer's own sentences by construction: a judge cannot hand back the unit's reference as if the
answer had said it. A reply with numbers outside the answer, or text instead of numbers, fails the schema:
the model is re-asked (the core's bounded re-ask) and then the units are recorded as errors, never scored.
With `extract_mode: cluster` one call reads the answer once for all units of its cluster (one field per
unit); with `extract_mode: unit` there is one call per unit. A unit with no sentence selected is
*uncovered* without a stage-2 call. `extract_check` (default on) checks each selection with the embedder:
a small extractor can shift its picks by one across a cluster (unit B gets the sentence about C); where a
unit's picks are far from it and another sentence restates it (and no other unit of the cluster), that
sentence replaces the picks, recorded in `realigned` (`realign`). Then lexically: where the picks hold none
of the unit's own names and numbers and another sentence holds most of them (`relexicalise`) — a sentence
about a neighbouring subject can be as close by embedding as the right one.

Stage 2 (judge): the excerpt is judged against the unit's reference (keyword, description, source
sentence) -> correct / incorrect / uncovered, with a reason. The prompt makes the reference the ground
truth even where it contradicts the judge's world knowledge. With `judge_mode: cluster` one call judges
all of an answer's excerpts that need stage 2, each against its own reference (one JSON field per unit),
so the rules are sent once per cluster instead of once per unit; a unit missing from the reply or with an
invalid verdict is recorded as an error (cause "invalid_output") and the others are kept. Either way each
unit gets its own `reckon_verdict` item of the same shape. `judge_mode: unit` makes one call per unit.

One call (`judge_mode: with_extract`, with `extract_mode: cluster`): the stage-1 call also gives each unit's
verdict on the sentences it selects (`{"A": {"sentences": [...], "verdict": "..."}, ...}`, no reason; the
references and both stages' rules are sent once), kept on the `reckon_extract` item; a unit with no sentence
is uncovered (stage "extract") whatever verdict it was given. A unit the embedding check realigns has no
verdict on its new excerpt: it alone goes to a stage-2 cluster call. The reply is schema-checked as a whole
(sentence numbers and verdicts): a bad one is re-asked, then all its units are errors.

The stage-2 calls and the one-call mode ask for token logprobs: each unit's verdict records the judge's
P(correct) — its share of "correct" among the three verdict words at the unit's own verdict field
(`proctor.judging.llm.verdict_distributions`), None where the server gives no logprobs. It is recorded
beside the judge's own verdict, never used to change it; a guard's veto keeps it; a unit stage 1 settles as
uncovered has none. `stage` says which method decided: "rule", "judge", "guard" or "extract".

Rules first, as in qa: an excerpt that states the unit's description (or its source sentence) word for word
after normalisation, with no negation or alternative around it, is correct without a model call (stage
"rule"); with `judge_mode: with_extract` the rule stands over the call's verdict. The LLM judges the rest, and
the guards may overrule its "correct".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, Field

from proctor.errors import StepError
from proctor.judging.equivalence import RuleDecision, nothing_beyond_question, veto
from proctor.judging.llm import TOP_LOGPROBS, verdict_distributions
from proctor.judging.metrics import normalize_answer
from proctor.kit.context import RunContext
from proctor.kit.steps import Failure, Outcome, Payload
from proctor.prompts import render_messages
from proctor.protocols.reckon.config import Config
from proctor.protocols.reckon.units import KnowledgeUnit, normalise, split_sentences

VERDICTS = ("correct", "incorrect", "uncovered")
EXTRACT_ROLE = "reckon:extract"
JUDGE_ROLE = "reckon:judge"
EXTRACT_PROMPT = "reckon/extract"
EXTRACT_UNIT_PROMPT = "reckon/extract_unit"
JUDGE_PROMPT = "reckon/judge"
JUDGE_CLUSTER_PROMPT = "reckon/judge_cluster"
EXTRACT_JUDGE_PROMPT = "reckon/extract_judge"
VERDICT_TOKENS = 12  # reply budget added per unit when the stage-1 call also gives verdicts

JUDGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "reason": {"type": "string", "description": "one sentence comparing the excerpt with the reference"},
        "verdict": {"type": "string", "enum": list(VERDICTS)},
    },
    "required": ["reason", "verdict"],
}
MAX_ANSWER_SENTENCES = 60  # sentences shown to the extractor; the rest of a longer answer is not read
INVALID = "invalid_output"
NO_SENTENCE = "no sentence of the answer is about this subject"


def labels(n: int) -> list[str]:
    """Field names the extractor sees for a cluster's units: A, B, ..., Z, AA, AB, ... — letters, so that no
    subject's name reads like a sentence number (with U1, U2, ... a small extractor can take "U2" for
    sentence [2])."""
    out = []
    for i in range(n):
        name, k = "", i
        while True:
            name = chr(ord("A") + k % 26) + name
            k = k // 26 - 1
            if k < 0:
                break
        out.append(name)
    return out


def _ids_schema(n_sentences: int, max_ids: int) -> dict[str, Any]:
    return {
        "type": "array",
        "items": {"type": "integer", "minimum": 1, "maximum": n_sentences},
        "maxItems": max_ids,
    }


def extract_schema(n_units: int, n_sentences: int, max_ids: int) -> dict[str, Any]:
    """Cluster mode: one integer array per unit label, each number a sentence of the answer (1..n)."""
    names = labels(n_units)
    return {
        "type": "object",
        "properties": {k: _ids_schema(n_sentences, max_ids) for k in names},
        "required": names,
        "additionalProperties": False,
    }


def extract_judge_schema(n_units: int, n_sentences: int, max_ids: int) -> dict[str, Any]:
    """`judge_mode: with_extract`: per unit label, the sentence numbers (as `extract_schema`) and the verdict
    on them, sentences first."""
    names = labels(n_units)
    unit = {
        "type": "object",
        "properties": {
            "sentences": _ids_schema(n_sentences, max_ids),
            "verdict": {"type": "string", "enum": list(VERDICTS)},
        },
        "required": ["sentences", "verdict"],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {k: unit for k in names},
        "required": names,
        "additionalProperties": False,
    }


def unit_extract_schema(n_sentences: int, max_ids: int) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"sentences": _ids_schema(n_sentences, max_ids)},
        "required": ["sentences"],
        "additionalProperties": False,
    }


_LIST_MARKER = re.compile(r"^\s*(?:[-*+•]|\d+[.)]|#+)\s+")


def answer_sentences(answer: str) -> list[str]:
    """The answer cut into the sentences the extractor selects from: lines (list items, headings, table
    rows) and the sentences within them, list markers and emphasis dropped, whitespace collapsed. Repeated
    sentences are kept once (a degenerate answer that loops adds nothing), segments without a letter or
    digit are dropped, and at most MAX_ANSWER_SENTENCES are kept."""
    out: list[str] = []
    seen: set[str] = set()
    for line in answer.splitlines():
        line = _LIST_MARKER.sub("", line.replace("**", "").replace("__", "")).strip().strip("|").strip()
        for part in split_sentences(line):
            text = " ".join(part.split())
            key = normalise(text)
            if not key or key in seen:
                continue
            seen.add(key)
            out.append(text)
            if len(out) == MAX_ANSWER_SENTENCES:
                return out
    return out


def numbered(sentences: list[str]) -> list[dict[str, Any]]:
    return [{"id": i, "text": t} for i, t in enumerate(sentences, start=1)]


def select_ids(value: Any, n_sentences: int, max_ids: int) -> list[int]:
    """The sentence numbers a reply gives for one unit, checked: integers in 1..n, at most max_ids, no
    repeats (sorted). Raises StepError(invalid_output) otherwise — the schema should have caught it, but a
    provider that ignores schemas must not get a unit scored on sentences the answer does not have."""
    if not isinstance(value, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in value):
        raise StepError(f"extractor: expected a list of sentence numbers, got {value!r}", cause=INVALID)
    bad = [i for i in value if not 1 <= i <= n_sentences]
    if bad:
        raise StepError(
            f"extractor: sentence numbers {bad} are not in the answer (1 to {n_sentences})", cause=INVALID
        )
    ids = sorted(set(value))
    if len(ids) > max_ids:
        raise StepError(f"extractor: {len(ids)} sentences selected, at most {max_ids}", cause=INVALID)
    return ids


def judge_cluster_schema(n: int) -> dict[str, Any]:
    """One field per unit label. Deliberately lenient (no required labels, verdict checked by us): a missing
    or bad field costs only its own unit, not a re-ask or the whole call."""
    unit = {
        "type": "object",
        "properties": {"reason": {"type": "string"}, "verdict": {"type": "string"}},
    }
    return {"type": "object", "properties": {k: unit for k in labels(n)}}


class Extraction(Payload):
    """Stage 1 for one job: per unit, the numbers of the answer sentences about it (empty: none) and the
    excerpt they make (the answer's own sentences, joined); `realigned`: the units whose selection the
    embedding check replaced, with the extractor's own numbers. With `judge_mode: with_extract` also the
    call's verdict per unit and the judge's P(correct) at it, as the call gave them (a realigned unit's
    and an empty selection's verdict are not used)."""

    KIND: ClassVar[str] = "reckon_extract"
    answer_key: str
    round: int
    sentence_ids: dict[str, list[int]]
    excerpts: dict[str, str]
    realigned: dict[str, list[int]] = Field(default_factory=dict)
    verdicts: dict[str, str] = Field(default_factory=dict)
    p_correct: dict[str, float | None] = Field(default_factory=dict)

    def verdict_for(self, unit_id: str) -> tuple[str, float | None] | None:
        """The one-call verdict that stands for a unit (with its P(correct)): None when the call gave none,
        or judged other sentences than the unit's (realigned)."""
        if unit_id in self.realigned or unit_id not in self.verdicts:
            return None
        return self.verdicts[unit_id], self.p_correct.get(unit_id)


# The embedding check of a selection (`extract_check`): a unit's selection is replaced by the answer
# sentence closest to the unit when that sentence is close (cosine >= REALIGN_FLOOR), closer to this unit
# than to any other of the cluster, and clearly closer than every sentence selected (by REALIGN_MARGIN).
# Measured on the demo with all-MiniLM-L6-v2: a sentence restating a unit scores 0.9-1.0 against it, a
# sentence on a neighbouring unit of the cluster 0.1-0.55.
REALIGN_FLOOR = 0.6
REALIGN_MARGIN = 0.15


def realign(similarity: np.ndarray, ids: list[list[int]]) -> list[list[int] | None]:
    """Per unit (row of `similarity`, units x sentences, cosine), the selection that replaces the
    extractor's `ids` (1-based sentence numbers), or None where the extractor's selection stands."""
    out: list[list[int] | None] = []
    if similarity.size == 0:
        return [None] * len(ids)
    closest_unit = similarity.argmax(axis=0)
    for i, chosen in enumerate(ids):
        j = int(similarity[i].argmax())
        best = float(similarity[i, j])
        have = max((float(similarity[i, k - 1]) for k in chosen), default=0.0)
        if (
            (j + 1) not in chosen
            and closest_unit[j] == i
            and best >= REALIGN_FLOOR
            and best - have >= REALIGN_MARGIN
        ):
            out.append([j + 1])
        else:
            out.append(None)
    return out


# The lexical check (with the embedding check): a unit's distinctive terms are its names and numbers that
# no other unit of the cluster has. A pick that contains none of them while another sentence of the answer
# contains at least LEXICAL_FLOOR of them (and more than of any other unit's) is replaced by that sentence:
# a small extractor picks a sentence about a neighbouring subject (the head of state for the head of
# government) whose embedding is as close as the right one's.
LEXICAL_FLOOR = 0.5
_TERM = re.compile(r"\b(?:\d[\d,.]*\d|\d|[A-Z][\w'-]+)")


def distinctive_terms(units: list[KnowledgeUnit]) -> list[set[str]]:
    """Per unit, the lower-cased names (capitalised words not opening the sentence) and numbers of its
    keyword and description that no other unit of the list has."""
    terms: list[set[str]] = []
    for u in units:
        found: set[str] = set()
        for text in (u.keyword, *split_sentences(u.description)):
            for i, m in enumerate(_TERM.finditer(text)):
                word = m.group(0)
                if word[0].isupper() and m.start() == 0 and text is not u.keyword and i == 0:
                    continue  # the sentence's first word is capitalised anyway
                found.add(word.lower().rstrip(".,"))
        terms.append(found)
    counts: dict[str, int] = {}
    for t in terms:
        for w in t:
            counts[w] = counts.get(w, 0) + 1
    return [{w for w in t if counts[w] == 1} for t in terms]


def lexical_overlap(terms: list[set[str]], sentences: list[str]) -> np.ndarray:
    """units x sentences: the share of each unit's distinctive terms a sentence contains (0 without terms)."""
    out = np.zeros((len(terms), len(sentences)))
    words = [set(re.findall(r"[\w'-]+|\d[\d,.]*\d", s.lower())) for s in sentences]
    for i, t in enumerate(terms):
        if t:
            for j, w in enumerate(words):
                out[i, j] = len(t & w) / len(t)
    return out


def relexicalise(overlap: np.ndarray, ids: list[list[int]]) -> list[list[int] | None]:
    """Per unit, the sentence that replaces a pick holding none of its distinctive terms, or None."""
    out: list[list[int] | None] = []
    if overlap.size == 0:
        return [None] * len(ids)
    for i, chosen in enumerate(ids):
        j = int(overlap[i].argmax())
        best = float(overlap[i, j])
        have = max((float(overlap[i, k - 1]) for k in chosen), default=0.0)
        others = [float(overlap[o, j]) for o in range(len(ids)) if o != i]
        if chosen and have == 0.0 and best >= LEXICAL_FLOOR and best > max(others, default=0.0):
            out.append([j + 1])
        else:
            out.append(None)
    return out


class UnitVerdict(Payload):
    """Stage 2 (or the extraction rule) for one unit of one answer: correct / incorrect / uncovered."""

    KIND: ClassVar[str] = "reckon_verdict"
    candidate: str
    round: int
    question_id: str
    answer_key: str
    unit_id: str
    excerpt: str
    sentence_ids: list[int]
    verdict: str | None = None
    reason: str | None = None
    # The method that decided: "rule" (the excerpt states the unit), "judge", "guard" (overruled the judge's
    # "correct") or "extract" (stage 1: no sentence about the unit).
    stage: str = "judge"
    p_correct: float | None = None  # the judge's P(correct) from its logprobs (None: no logprobs, or no call)
    # A guard's "incorrect" because the excerpt states nothing of the kind the unit needs (no number, nothing
    # beyond the question: `RuleDecision.absent`): the answer did not address the unit, so a later round
    # asks it again (`rounds`); in a candidate's last round it stays incorrect.
    absent: bool = False


class UnitReply(BaseModel):
    """The cluster judge's verdict and reason on one unit, or why the reply has none for it."""

    verdict: str | None = None
    reason: str = ""
    error: str | None = None
    p_correct: float | None = None


class ClusterVerdicts(Payload):
    """One cluster-judge reply, per unit id."""

    KIND: ClassVar[str] = "reckon_verdict_batch"
    answer_key: str
    verdicts: dict[str, UnitReply]


@dataclass(frozen=True)
class ExtractJob:
    answer_key: str  # the key of the answer read (its `Outcome.key`)
    sentences: list[str]  # the answer's numbered sentences (1-based in prompts and replies)
    units: list[KnowledgeUnit]


def extract_jobs(
    ctx: RunContext[Config], answer_key: str, answer: str, units: list[KnowledgeUnit]
) -> list[ExtractJob]:
    """One job for the answer's units (`extract_mode: cluster`), or one per unit."""
    sents = answer_sentences(answer)
    if ctx.settings.extract_mode == "cluster":
        return [ExtractJob(answer_key, sents, units)]
    return [ExtractJob(answer_key, sents, [u]) for u in units]


async def run_extraction(
    ctx: RunContext[Config], round_no: int, jobs: list[ExtractJob]
) -> list[tuple[ExtractJob, Extraction]]:
    """Stage 1 for every job; returns the jobs whose extraction succeeded, with it. An answer without a
    sentence needs no call: none of its units is mentioned."""
    cfg = ctx.settings
    judge = ctx.role("judge")
    most = cfg.extract_max_sentences

    async def extract(job: ExtractJob) -> Extraction:
        n = len(job.sentences)
        ids: dict[str, list[int]] = {}
        verdicts: dict[str, str] = {}
        p_correct: dict[str, float | None] = {}
        if n == 0:
            ids = {u.unit_id: [] for u in job.units}
        elif cfg.judge_mode == "with_extract":
            names = labels(len(job.units))
            messages = render_messages(
                EXTRACT_JUDGE_PROMPT,
                sentences=numbered(job.sentences),
                units=unit_rows(names, job.units),
                max_ids=most,
            )
            c = await judge.generate(
                messages,
                json_schema=extract_judge_schema(len(job.units), n, most),
                temperature=0.0,
                max_tokens=cfg.extract_max_tokens + VERDICT_TOKENS * len(job.units),
                top_logprobs=TOP_LOGPROBS,
            )
            readings = verdict_distributions(c.logprobs, VERDICTS)
            for name, u in zip(names, job.units, strict=True):
                field = c.parsed.get(name) if isinstance(c.parsed, dict) else None
                if not isinstance(field, dict):
                    raise StepError(f"extractor: no object for {name}, got {field!r}", cause=INVALID)
                ids[u.unit_id] = select_ids(field.get("sentences"), n, most)
                verdict = str(field.get("verdict") or "").strip().lower()
                if verdict not in VERDICTS:
                    raise StepError(f"extractor: {name} has the invalid verdict {verdict!r}", cause=INVALID)
                verdicts[u.unit_id] = verdict
                p_correct[u.unit_id] = p_correct_of(readings, name)
        elif cfg.extract_mode == "cluster":
            names = labels(len(job.units))
            messages = render_messages(
                EXTRACT_PROMPT,
                sentences=numbered(job.sentences),
                units=unit_rows(names, job.units),
                max_ids=most,
            )
            c = await judge.generate(
                messages,
                json_schema=extract_schema(len(job.units), n, most),
                temperature=0.0,
                max_tokens=cfg.extract_max_tokens,
            )
            ids = {
                u.unit_id: select_ids(c.parsed[name], n, most)
                for name, u in zip(names, job.units, strict=True)
            }
        else:
            u = job.units[0]
            messages = render_messages(
                EXTRACT_UNIT_PROMPT,
                sentences=numbered(job.sentences),
                keyword=u.keyword,
                description=u.description,
                max_ids=most,
            )
            c = await judge.generate(
                messages,
                json_schema=unit_extract_schema(n, most),
                temperature=0.0,
                max_tokens=cfg.extract_max_tokens,
            )
            ids = {u.unit_id: select_ids(c.parsed["sentences"], n, most)}
        realigned: dict[str, list[int]] = {}
        if cfg.extract_check and n:
            units = job.units
            sim = ctx.embedder.embed([u.description for u in units]) @ ctx.embedder.embed(job.sentences).T
            for u, new in zip(units, realign(sim, [ids[u.unit_id] for u in units]), strict=True):
                if new is not None:
                    realigned[u.unit_id], ids[u.unit_id] = ids[u.unit_id], new
            overlap = lexical_overlap(distinctive_terms(units), job.sentences)
            for u, new in zip(units, relexicalise(overlap, [ids[u.unit_id] for u in units]), strict=True):
                if new is not None and u.unit_id not in realigned:
                    realigned[u.unit_id], ids[u.unit_id] = ids[u.unit_id], new
        excerpts = {uid: " ".join(job.sentences[i - 1] for i in chosen) for uid, chosen in ids.items()}
        return Extraction(
            answer_key=job.answer_key,
            round=round_no,
            sentence_ids=ids,
            excerpts=excerpts,
            realigned=realigned,
            verdicts=verdicts,
            p_correct=p_correct,
        )

    outcomes = await ctx.map(
        f"reckon round {round_no}: extracting",
        jobs,
        extract,
        unit_id=lambda j: (j.answer_key, j.sentences, j.units),
        role=EXTRACT_ROLE,
        output=Extraction,
        context=lambda j: {
            "answer_key": j.answer_key,
            "round": round_no,
            "unit_ids": [u.unit_id for u in j.units],
        },
    )
    return [(o.unit, o.value) for o in outcomes if o.value is not None]


@dataclass(frozen=True)
class JudgeJob:
    pending: UnitVerdict  # everything but the verdict and its reason
    unit: KnowledgeUnit
    uncovered: str | None = None  # why stage 1 already settles the unit as uncovered (no stage-2 call)
    question: str = ""  # the question the answer replies to: an excerpt that only echoes it is not credited
    # with_extract: the stage-1 call's verdict on this excerpt and its P(correct) (no stage-2 call)
    given: tuple[str, float | None] | None = None


# Words that turn a stated fact around or make it one option among others.
_NEGATION = re.compile(r"\b(?:not|no|never|neither|nor|nothing|none|false|incorrect|wrong|without)\b|n't\b")
_ALTERNATIVE = re.compile(r"\b(?:or|either|maybe|perhaps|possibly|probably|unclear|unsure|unknown)\b")
MIN_STATED_WORDS = 3  # a reference this short is a term, not a fact: the LLM judges it


def states_unit(excerpt: str, unit: KnowledgeUnit) -> RuleDecision | None:
    """Sure "correct": the excerpt contains the unit's description or its source sentence word for word
    (normalised: case, punctuation, articles) and says nothing around it that negates it or offers an
    alternative. A fact stated verbatim needs no judge; anything less (a paraphrase, a number in other
    units) is left to the LLM, since a unit's reference is a sentence and the short-answer rules of qa
    could match one of its numbers to the wrong fact."""
    said = f" {normalize_answer(excerpt)} "
    for ref in (unit.description, unit.evidence or ""):
        r = normalize_answer(ref)
        if len(r.split()) < MIN_STATED_WORDS or f" {r} " not in said:
            continue
        rest = said.replace(f" {r} ", " ")
        ref_has_neg = bool(_NEGATION.search(r))
        if (_NEGATION.search(rest) and not ref_has_neg) or _ALTERNATIVE.search(rest):
            continue
        return RuleDecision("states_unit", ref)
    return None


def _ruled(job: JudgeJob, rule: RuleDecision, p_correct: float | None) -> UnitVerdict:
    update = {
        "verdict": "correct",
        "reason": f"{rule.method}: the excerpt states the unit word for word",
        "stage": "rule",
        "p_correct": p_correct,
    }
    return job.pending.model_copy(update=update)


def rule_for(job: JudgeJob, rules: bool) -> RuleDecision | None:
    """The rule that settles a job without the judge (never one stage 1 settled as uncovered)."""
    if not rules or job.uncovered is not None:
        return None
    return states_unit(job.pending.excerpt, job.unit)


def _verdict(job: JudgeJob, verdict: str, reason: Any, guards: bool, p_correct: float | None) -> UnitVerdict:
    """The judge's verdict, unless a guard (`proctor.judging.equivalence.veto`, or the excerpt says nothing
    of the unit that its question did not: `nothing_beyond_question`) is sure a "correct" is not:
    then "incorrect", stage "guard", the guard's finding and the judge's reason kept, and `absent` when the
    guard found nothing of the unit's kind in the excerpt. Either way the judge's P(correct) is kept as it
    gave it. `veto` gets no question: its name guards are for a short reference,
    and a unit is a sentence whose names the cluster question may not have asked for."""
    why = " ".join(str(reason).split()) if reason is not None else None
    guard = None
    if guards and verdict == "correct":
        excerpt, fact = job.pending.excerpt, job.unit.description
        guard = veto(excerpt, fact) or nothing_beyond_question(excerpt, fact, job.question)
    if verdict == "correct" and guard is not None:
        update = {
            "verdict": "incorrect",
            "reason": f"{guard.method}: {guard.detail} (the judge said correct{f': {why}' if why else ''})",
            "stage": "guard",
            "p_correct": p_correct,
            "absent": guard.absent,
        }
        return job.pending.model_copy(update=update)
    return job.pending.model_copy(update={"verdict": verdict, "reason": why, "p_correct": p_correct})


def p_correct_of(readings: dict[str, dict[str, float]], field: str) -> float | None:
    """P(correct) at one field's verdict (`verdict_distributions`), rounded as the shared judge's is."""
    dist = readings.get(field)
    return None if dist is None else round(dist["correct"], 4)


def unit_rows(names: list[str], units: list[KnowledgeUnit]) -> list[dict[str, str]]:
    """The units as the stage-1 prompts list them, each under its label (the plain extraction prompt does
    not show the evidence)."""
    return [
        {"label": n, "keyword": u.keyword, "description": u.description, "evidence": new_evidence(u)}
        for n, u in zip(names, units, strict=True)
    ]


def new_evidence(unit: KnowledgeUnit) -> str:
    """The unit's source sentence, or "" when the description already contains it word for word (it would
    only repeat the fact in every cluster-judge prompt)."""
    evidence = unit.evidence or ""
    return "" if normalise(evidence) in normalise(unit.description) else evidence


Verdicts = dict[tuple[str, str], Outcome[JudgeJob, UnitVerdict]]  # (answer key, unit id) -> its outcome


def _unit_of(job: JudgeJob) -> tuple[str, str]:
    return job.pending.answer_key, job.pending.unit_id


async def run_judging(ctx: RunContext[Config], round_no: int, jobs: list[JudgeJob]) -> Verdicts:
    """Stage 2: one `reckon_verdict` item per job; a job stage 1 settled is uncovered without a call, and a
    job with the stage-1 call's verdict (`given`, with_extract) takes it (through the guards) without one.
    Returns every job's outcome by (answer key, unit id): stage 1's first, then the judge's, each in job
    order."""
    cfg = ctx.settings
    judge = ctx.role("judge")
    ruled = {_unit_of(j): r for j in jobs if (r := rule_for(j, cfg.rules)) is not None}
    settled = [j for j in jobs if j.uncovered is not None or j.given is not None or _unit_of(j) in ruled]
    to_judge = [j for j in jobs if j.uncovered is None and j.given is None and _unit_of(j) not in ruled]
    batched = cfg.judge_mode in ("cluster", "with_extract")  # with_extract: realigned units only
    replies: dict[tuple[str, str], UnitReply | Failure] = {}
    if batched:
        replies = await _judge_clusters(ctx, round_no, to_judge)

    async def judge_unit(job: JudgeJob) -> UnitVerdict:
        if job.uncovered is not None:
            update = {"verdict": "uncovered", "reason": job.uncovered, "stage": "extract"}
            return job.pending.model_copy(update=update)
        if (rule := ruled.get(_unit_of(job))) is not None:
            return _ruled(job, rule, job.given[1] if job.given is not None else None)
        if job.given is not None:
            return _verdict(job, job.given[0], None, cfg.guards, job.given[1])
        if batched:
            reply = replies[_unit_of(job)]
            if isinstance(reply, Failure):
                raise StepError(reply.message, cause=reply.cause)
            if reply.verdict is None:
                raise StepError(reply.error or "cluster judge: no verdict", cause="invalid_output")
            return _verdict(job, reply.verdict, reply.reason, cfg.guards, reply.p_correct)
        u = job.unit
        messages = render_messages(
            JUDGE_PROMPT,
            keyword=u.keyword,
            description=u.description,
            evidence=u.evidence or "",
            excerpt=job.pending.excerpt,
        )
        c = await judge.generate(
            messages,
            json_schema=JUDGE_SCHEMA,
            temperature=0.0,
            max_tokens=cfg.judge_max_tokens,
            top_logprobs=TOP_LOGPROBS,
        )
        p = p_correct_of(verdict_distributions(c.logprobs, VERDICTS), "")
        return _verdict(job, c.parsed["verdict"], c.parsed["reason"], cfg.guards, p)

    outcomes = await ctx.map(
        f"reckon round {round_no}: " + ("verdicts" if batched else "judging"),
        settled + to_judge,
        judge_unit,
        unit_id=lambda j: (j.pending, j.unit, j.question, j.uncovered, j.given, _unit_of(j) in ruled),
        role=JUDGE_ROLE,
        output=UnitVerdict,
        context=lambda j: j.pending.model_dump(mode="json"),
    )
    return {_unit_of(o.unit): o for o in outcomes}


async def _judge_clusters(
    ctx: RunContext[Config], round_no: int, jobs: list[JudgeJob]
) -> dict[tuple[str, str], UnitReply | Failure]:
    """One call per answer (= candidate and cluster question) for all its units that need stage 2, stored
    whole as a `reckon_verdict_batch` item. Returns, per job key, the reply on its unit (a verdict, or why
    there is none: missing from the reply or an invalid verdict), or the failure of its call."""
    cfg = ctx.settings
    judge = ctx.role("judge")
    groups: dict[str, list[JudgeJob]] = {}
    for j in jobs:
        groups.setdefault(j.pending.answer_key, []).append(j)
    batches = list(groups.items())  # (answer key, its units' jobs)

    async def judge_batch(batch: tuple[str, list[JudgeJob]]) -> ClusterVerdicts:
        group = batch[1]
        names = labels(len(group))
        items = [
            {
                "label": n,
                "keyword": j.unit.keyword,
                "description": j.unit.description,
                "evidence": new_evidence(j.unit),
                "excerpt": j.pending.excerpt,
            }
            for n, j in zip(names, group, strict=True)
        ]
        c = await judge.generate(
            render_messages(JUDGE_CLUSTER_PROMPT, items=items),
            json_schema=judge_cluster_schema(len(group)),
            temperature=0.0,
            max_tokens=cfg.judge_max_tokens * len(group),
            top_logprobs=TOP_LOGPROBS,
        )
        readings = verdict_distributions(c.logprobs, VERDICTS)
        verdicts = {}
        for n, j in zip(names, group, strict=True):
            field = c.parsed.get(n) or {}
            verdict = str(field.get("verdict") or "").strip().lower()
            if verdict in VERDICTS:
                verdicts[j.pending.unit_id] = UnitReply(
                    verdict=verdict,
                    reason=str(field.get("reason") or ""),
                    p_correct=p_correct_of(readings, n),
                )
            else:
                why = "missing from the reply" if n not in c.parsed else f"invalid verdict {verdict!r}"
                verdicts[j.pending.unit_id] = UnitReply(error=f"cluster judge: {n} {why}")
        return ClusterVerdicts(answer_key=group[0].pending.answer_key, verdicts=verdicts)

    outcomes = await ctx.map(
        f"reckon round {round_no}: judging",
        batches,
        judge_batch,
        unit_id=lambda b: (b[0], [(j.unit, j.pending.excerpt) for j in b[1]]),
        role=JUDGE_ROLE,
        output=ClusterVerdicts,
        context=lambda b: {
            "answer_key": b[1][0].pending.answer_key,
            "unit_ids": [j.pending.unit_id for j in b[1]],
        },
    )
    replies: dict[tuple[str, str], UnitReply | Failure] = {}
    for o in outcomes:
        for j in o.unit[1]:
            if o.value is not None:
                reply = o.value.verdicts.get(j.pending.unit_id)
                replies[_unit_of(j)] = reply or UnitReply(error="cluster judge: no reply")
            else:
                assert o.failure is not None
                replies[_unit_of(j)] = o.failure
    return replies
