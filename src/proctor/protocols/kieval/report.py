"""Report section of the KIEval protocol (`kieval`).

Reads the run (`proctor.load_run`): its typed result (question statistics, per-candidate scores,
contamination) and its items — `kieval_question`, `kieval_mc_answer`, `kieval_round` (with the
evaluators' judgments), `kieval_conversation` — as their payload models. Everything a model wrote is
rendered through the autoescaping template.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from proctor.constants import LETTERS
from proctor.estimates import Estimate
from proctor.kit.record import Run
from proctor.protocols.kieval import plots as plots_kieval
from proctor.protocols.kieval.conversations import EVALUATOR_JUDGE, ConversationItem, RoundRecord
from proctor.protocols.kieval.result import Contamination, KievalCandidate, KievalResult, QuestionStats
from proctor.protocols.kieval.scoring import ASPECTS
from proctor.protocols.kieval.seeds import QuestionItem
from proctor.protocols.kieval.static_mc import MCAnswer
from proctor.report._env import render_template
from proctor.report.plots import safe_plot
from proctor.store.record import ItemRecord, JudgmentRecord

MAX_CONVERSATIONS = 400
END_ORDER = (
    "completed",
    "off_topic",
    "empty_response",
    "rule_violation",
    "repetition",
    "unpermitted_role_shift",
    "unspecified",
    "evaluator_error",
    "error",
)


def score_class(s: Any) -> str:
    """Chip colour of a 1-4 score."""
    if not isinstance(s, int | float):
        return "neutral"
    return "good" if s >= 3.5 else "partial" if s >= 2.5 else "bad"


def kieval_class(v: Any) -> str:
    """Chip colour of a 0-100 KIEval score."""
    if not isinstance(v, int | float):
        return "neutral"
    return "good" if v >= 70 else "partial" if v >= 40 else "bad"


def _question_stats(stats: QuestionStats | None) -> list[tuple[str, Any]]:
    if stats is None:
        return []
    rows: list[tuple[str, Any]] = [
        ("file", stats.file),
        ("read", stats.read),
        ("usable", stats.usable),
        ("sampled", stats.sampled),
    ]
    rows += [(f"skipped: {reason}", n) for reason, n in stats.skipped.items()]
    cs = stats.confident_set
    if cs.enabled:
        for k in (
            "checked",
            "kept",
            "dropped_low_confidence",
            "dropped_errors",
            "threshold",
            "shuffles",
            "method",
        ):
            value = getattr(cs, k)
            if value is not None:
                rows.append((f"confident set: {k.replace('_', ' ')}", value))
    else:
        rows.append(("confident set", "off"))
    rows.append(("used in conversations", stats.used))
    return rows


def _tidy(s: Any) -> Any:
    """3.0 -> 3 (majority votes are stored as floats); fractional mean votes stay as they are."""
    return int(s) if isinstance(s, float) and s.is_integer() else s


@dataclass
class Comment:
    """One evaluator's score and comment on an aspect (or overall)."""

    evaluator: str
    score: int
    comment: str


@dataclass
class FailedEvaluator:
    evaluator: str
    error: str
    raw: str | None


@dataclass
class AspectView:
    aspect: str
    score: Any
    cls: str
    per: list[Comment]


@dataclass
class RoundView:
    n: int
    status: str
    error: str | None
    cause: str | None
    question: str | None
    reply: str | None
    context_ids: list[str]
    aspects: list[AspectView]
    overall_score: Any
    overall_cls: str
    overall: list[Comment]
    failed: list[FailedEvaluator]
    multi: bool
    stop: bool | None
    stop_reason: str | None


@dataclass
class ConversationView:
    key: str
    status: str
    error: str | None
    cause: str | None
    candidate: str
    question_id: str | None
    question: str | None
    choices: list[tuple[str, str]]
    correct_letter: str | None
    mc_answer: str | None
    mc_choice: str | None
    mc_correct: bool | None
    mc_error: str | None
    kieval: float | None
    kieval_cls: str
    kieval_paper: float | None
    aspect_scores: dict[str, float | None]
    n_rounds: int | None
    end: str
    rounds: list[RoundView] = field(default_factory=list)


@dataclass
class CandidateRow:
    candidate: str
    model: str | None
    retriever: str | None
    overall: Estimate | None
    paper: Estimate | None
    aspects: list[Estimate | None]
    static: Estimate | None
    rounds: Estimate | None
    ends: list[tuple[str, int]]
    errors: int


def _round_view(it: ItemRecord, failures: list[JudgmentRecord]) -> RoundView:
    """One round for display; `failures` are its evaluators' failed judgments."""
    r = it.payload(RoundRecord)
    evaluations = r.evaluations or {}
    names = list(evaluations)
    aspects = []
    for a in ASPECTS:
        vote = r.aspect(a)
        voted = _tidy(vote.score if vote else None)
        per = [Comment(n, e.aspect(a).score, e.aspect(a).comment) for n, e in evaluations.items()]
        aspects.append(AspectView(a, voted, score_class(voted), per))
    overall = [Comment(n, e.overall_score, e.overall_comment) for n, e in evaluations.items()]
    failed = [
        FailedEvaluator(
            j.judge.split(":", 1)[-1],
            f"{j.error_cause}: {j.error}",
            j.data.get("raw") if isinstance(j.data, dict) else None,
        )
        for j in failures
    ]
    return RoundView(
        n=r.round + 1,
        status=it.status,
        error=it.error,
        cause=it.error_cause,
        question=r.interactor_question,
        reply=r.candidate_reply,
        context_ids=r.context_ids,
        aspects=aspects if r.overall_score is not None else [],
        overall_score=_tidy(r.overall_score),
        overall_cls=score_class(r.overall_score),
        overall=overall,
        failed=failed,
        multi=len(names) > 1,
        stop=r.stop_conversation,
        stop_reason=r.stop_reason,
    )


def _conversations(run: Run) -> tuple[list[ConversationView], int]:
    questions = {q.question_id: q for _, q in run.payloads(QuestionItem)}
    mc = {it.key: it for it in run.items(MCAnswer.KIND)}
    rounds: dict[str, list[ItemRecord]] = {}
    for it in run.items(RoundRecord.KIND):
        rounds.setdefault(it.payload(RoundRecord).conversation, []).append(it)
    convs = {(it.payload(ConversationItem)).conversation: it for it in run.items(ConversationItem.KIND)}
    evaluator_failures: dict[str, list[JudgmentRecord]] = {}
    for j in run.judgments():
        if j.error and j.judge.startswith(f"{EVALUATOR_JUDGE}:"):
            evaluator_failures.setdefault(j.item_key, []).append(j)
    ids = list(convs) + [k for k in rounds if k not in convs]
    out = []
    for cid in ids[:MAX_CONVERSATIONS]:
        conv = convs.get(cid)
        c = conv.payload(ConversationItem) if conv else None
        rs = sorted(rounds.get(cid, []), key=lambda r: r.payload(RoundRecord).round)
        first = rs[0].payload(RoundRecord) if rs else None
        about = c or first
        assert about is not None
        q = questions.get(about.question_id)
        m = mc.get(about.mc_key)
        answer = m.payload(MCAnswer) if m is not None and m.status == "done" else None
        out.append(
            ConversationView(
                key=conv.key if conv else cid,
                status=conv.status if conv else "unfinished",
                error=conv.error if conv else None,
                cause=conv.error_cause if conv else None,
                candidate=about.candidate,
                question_id=about.question_id,
                question=q.question if q else None,
                choices=[(LETTERS[i], text) for i, text in enumerate(q.choices if q else [])],
                correct_letter=q.answer_letter if q else answer.correct_letter if answer else None,
                mc_answer=answer.answer if answer else None,
                mc_choice=answer.choice if answer else None,
                mc_correct=answer.correct if answer else None,
                mc_error=m.error if m else None,
                kieval=c.kieval if c else None,
                kieval_cls=kieval_class(c.kieval if c else None),
                kieval_paper=c.kieval_paper if c else None,
                aspect_scores=c.aspects if c else {},
                n_rounds=c.rounds if c else None,
                end=c.end if c else "unfinished",
                rounds=[_round_view(r, evaluator_failures.get(r.key, [])) for r in rs],
            )
        )
    return out, len(ids)


def kieval_context(run: Run) -> dict[str, Any]:
    """Everything the KIEval template shows, read from the run."""
    result = run.result if isinstance(run.result, KievalResult) else None
    scores: dict[str, KievalCandidate] = dict(result.candidates) if result else {}
    conversations, n_total = _conversations(run)
    cand_names = list(scores)
    for c in conversations:
        if c.candidate not in cand_names:
            cand_names.append(c.candidate)
    ends: dict[str, Counter[str]] = {c: Counter() for c in cand_names}
    for c in conversations:
        ends[c.candidate][c.end or "unfinished"] += 1
    reasons = [r for r in END_ORDER if any(e[r] for e in ends.values())]
    reasons += sorted({r for e in ends.values() for r in e} - set(reasons))
    rows = []
    for name in cand_names:
        s = scores.get(name)
        rows.append(
            CandidateRow(
                candidate=name,
                model=s.model if s else None,
                retriever=s.retriever if s else None,
                overall=s.kieval if s else None,
                paper=s.kieval_paper if s else None,
                aspects=[getattr(s.aspects, a) if s else None for a in ASPECTS],
                static=s.static_accuracy if s else None,
                rounds=s.rounds if s else None,
                ends=[(r, ends[name][r]) for r in reasons if ends[name][r]],
                errors=s.conversation_errors if s else 0,
            )
        )
    aspect_plot = None
    plotted = [r for r in rows if r.overall is not None and r.overall.value is not None]
    if plotted:
        values = {
            r.candidate: [(m.value, m.lo, m.hi) if m else (None, None, None) for m in [*r.aspects, r.overall]]
            for r in plotted
        }
        aspect_plot = safe_plot(
            plots_kieval.aspect_bars, [r.candidate for r in plotted], [*ASPECTS, "overall"], values
        )
    stop_plot = None
    if any(ends.values()):
        stop_plot = safe_plot(
            plots_kieval.stop_reason_bars, cand_names, reasons, {c: dict(e) for c, e in ends.items()}
        )
    contam = (
        result.contamination
        if result
        else Contamination(
            applicable=False, n=0, rule="", z=0.0, reason="not computed (the run has not finished)"
        )
    )
    pts = [
        (r.candidate, r.static.value, r.overall.value)
        for r in rows
        if r.static is not None
        and r.static.value is not None
        and r.overall is not None
        and r.overall.value is not None
    ]
    scatter = None
    if pts:
        scatter = safe_plot(
            plots_kieval.contamination_scatter,
            [p[0] for p in pts],
            [p[1] for p in pts],
            [p[2] for p in pts],
            slope=contam.slope,
            intercept=contam.intercept,
            flagged=contam.flagged,
        )
    return {
        "question_stats": _question_stats(result.questions if result else None),
        "rows": rows,
        "aspects": ASPECTS,
        "aspect_plot": aspect_plot,
        "stop_plot": stop_plot,
        "contamination": contam,
        "scatter": scatter,
        "conversations": conversations,
        "n_conversations": n_total,
        "max_conversations": MAX_CONVERSATIONS,
    }


def render(run: Run) -> str:
    """HTML fragment of the KIEval section."""
    return render_template("kieval/report.html.j2", **kieval_context(run))
