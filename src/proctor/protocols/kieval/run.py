"""The KIEval protocol's steps: seed questions -> (confident set) -> multiple-choice answers ->
multi-round conversations (interactor asks, candidate replies, evaluators score) -> scores, contamination.

Every round is a keyed item (`kieval_round`, key from the conversation key and the round index) written
after each of its steps, so a killed run resumes every conversation at its first unfinished step and
never repeats a call whose result was stored.

An evaluator reply that still does not parse after the model path's re-asks makes its round an error
(cause `unparseable`, not scored) and ends the conversation there: the stop decision for that round is
unknown, and later rounds would be judged against a context whose evaluation is missing. The rounds
before it keep their scores. With several evaluators, a round is scored by those whose reply parsed; it
is an error only if none did. Transient failures (after retries) also end the conversation, but the
conversation is retried from that round when the run is resumed.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from proctor.candidates import Candidate
from proctor.candidates.multiple_choice import letter_probs, parse_letter
from proctor.config import CandidateConfig
from proctor.errors import ModelCallError, StructuredOutputError, UserError
from proctor.judging.stats import mean_ci, wilson_interval
from proctor.models.base import Model
from proctor.models.recording import call_scope
from proctor.models.types import Completion, Message
from proctor.prompts import prompt_version, render_messages
from proctor.protocols.base import RunContext, work_key
from proctor.protocols.kieval.config import Config
from proctor.protocols.kieval.scoring import (
    ASPECTS,
    STOP_REASONS,
    contamination,
    score,
    vote_scores,
    vote_stop,
)
from proctor.protocols.kieval.seeds import LETTERS, SeedQuestion, load_seed_questions

Q_KIND = "kieval_question"
CONF_KIND = "kieval_confidence"
MC_KIND = "kieval_mc_answer"
ROUND_KIND = "kieval_round"
CONV_KIND = "kieval_conversation"
PROMPTS = (
    "kieval/candidate",
    "kieval/candidate_followup",
    "kieval/interactor",
    "kieval/interactor_next",
    "kieval/evaluator",
    "kieval/mc_check",
)


def evaluation_schema(comment_max_chars: int) -> dict[str, Any]:
    """The evaluator's reply: five aspects (comment, then a 1-4 score), overall, stop flag and reason."""
    aspect = {
        "type": "object",
        "properties": {
            "comment": {"type": "string", "maxLength": comment_max_chars},
            "score": {"type": "integer", "minimum": 1, "maximum": 4},
        },
        "required": ["comment", "score"],
    }
    return {
        "type": "object",
        "properties": {
            **{a: aspect for a in ASPECTS},
            "overall_comment": {"type": "string", "maxLength": comment_max_chars},
            "overall_score": {"type": "integer", "minimum": 1, "maximum": 4},
            "stop_conversation": {"type": "boolean"},
            "stop_reason": {"type": "string", "enum": ["none", *STOP_REASONS]},
        },
        "required": [*ASPECTS, "overall_comment", "overall_score", "stop_conversation", "stop_reason"],
    }


def _settings(ctx: RunContext) -> Config:
    return ctx.config.settings  # type: ignore[return-value]


def _finite(v: float | None) -> float | None:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)


def _mean_entry(values: list[float], lo_bound: float, hi_bound: float) -> dict[str, Any]:
    """Mean with a 95% t-interval, clipped to the scale (a t-interval on few items can spill over)."""
    if not values:
        return {"value": None, "lo": None, "hi": None, "n": 0}
    mean, lo, hi = (_finite(v) for v in mean_ci(values))
    lo = None if lo is None else max(lo_bound, lo)
    hi = None if hi is None else min(hi_bound, hi)
    return {"value": mean, "lo": lo, "hi": hi, "n": len(values)}


# --- candidates and evaluators --------------------------------------------------------------------


@dataclass
class _Cand:
    cfg: CandidateConfig
    candidate: Candidate
    identity: dict[str, Any]
    chunks: dict[str, str]  # chunk id -> text, to rebuild a RAG candidate's earlier turns on resume

    def texts(self, ids: list[str]) -> list[str]:
        return [self.chunks[i] for i in ids if i in self.chunks]


def _candidates(ctx: RunContext, cfg: Config) -> list[_Cand]:
    if not ctx.config.candidates:
        raise UserError(
            "candidates: the kieval protocol needs at least one candidate (the system under test). Add "
            "`candidates: [{name: my-model, model: <a key of models>}]` to the config."
        )
    out = []
    chunks: dict[str, str] = {}
    for i, c in enumerate(ctx.config.candidates):
        if c.retriever == "oracle":
            raise UserError(
                f"candidates[{i}].retriever: 'oracle' needs gold passages, which benchmark questions do not "
                f"have. Use closed_book, bm25, dense or hybrid."
            )
        cand = ctx.candidate(c, max_tokens=cfg.candidate_max_tokens)
        if cand.retriever is not None and not chunks:
            chunks.update((ch.chunk_id, ch.text) for ch in ctx.corpus.chunks)
        out.append(_Cand(c, cand, ctx.models[c.model].provider.identity(), chunks))
    return out


def _evaluator_names(ctx: RunContext, cfg: Config) -> list[str]:
    if cfg.evaluators is None:
        return [ctx.role_model_name("evaluator")]
    for i, name in enumerate(cfg.evaluators):
        if name not in ctx.models:
            raise UserError(
                f"kieval.evaluators[{i}] refers to model '{name}', which is not a key of `models` "
                f"{sorted(ctx.models)}. Use the names under `models:`."
            )
    return list(cfg.evaluators)


# --- seed questions and the confident set ---------------------------------------------------------


def _sample(ctx: RunContext, questions: list[SeedQuestion], n: int | None) -> list[SeedQuestion]:
    """KIEval's Q_S: a seeded sample, kept in file order."""
    if n is None or n >= len(questions):
        return list(questions)
    picked = sorted(int(i) for i in ctx.rng.choice(len(questions), size=n, replace=False))
    return [questions[i] for i in picked]


def _letter_probability(completion: Completion, n_choices: int, letter: str) -> float | None:
    """P(letter) among the option letters at the first generated token (top logprobs), if returned."""
    found = letter_probs(completion.logprobs, n_choices)
    return None if found is None else found[0].get(letter, 0.0)


def _distinct_orders(ctx: RunContext, n: int, k: int) -> list[list[int]]:
    """`k` different option orders (all n! if there are fewer), drawn from the run's RNG."""
    want = min(k, math.factorial(n))
    orders: list[list[int]] = []
    while len(orders) < want:
        order = [int(i) for i in ctx.rng.permutation(n)]
        if order not in orders:
            orders.append(order)
    return orders


async def _confident_set(
    ctx: RunContext, cfg: Config, questions: list[SeedQuestion], evaluators: list[str]
) -> tuple[list[SeedQuestion], dict[str, dict[str, float | None]], dict[str, Any]]:
    """KIEval's Q_V: questions the interactor and every evaluator answer right with confidence >= θ."""
    cs = cfg.confident_set
    checkers = list(dict.fromkeys([ctx.role_model_name("interactor"), *evaluators]))
    version = prompt_version("kieval/mc_check")
    # All shuffles drawn up front, in question order, so the run's RNG sequence never depends on timing.
    perms = {q.question_id: _distinct_orders(ctx, len(q.choices), cs.shuffles) for q in questions}
    plan = []
    for name in checkers:
        model = ctx.models[name]
        for q in questions:
            for perm in perms[q.question_id]:
                key = work_key(
                    "kvf",
                    name,
                    model.provider.identity(),
                    q.to_dict(),
                    perm,
                    version,
                    cs.method,
                    ctx.config.seed,
                )
                plan.append((key, name, model, q, perm))

    def make(key: str, name: str, model: Model, q: SeedQuestion, perm: list[int]) -> Any:
        async def fn() -> None:
            shuffled = [q.choices[j] for j in perm]
            messages = render_messages(
                "kieval/mc_check", question=q.question, choices=shuffled, letters=LETTERS
            )
            c = await model.generate(
                messages,
                temperature=0.0,
                max_tokens=8,
                seed=ctx.config.seed,
                top_logprobs=0 if cs.method == "shuffles" else 10,
            )
            right = LETTERS[perm.index(q.answer_index)]
            letter = parse_letter(c.text, shuffled)
            p = None if cs.method == "shuffles" else _letter_probability(c, len(shuffled), right)
            ctx.store.put_item(
                key,
                CONF_KIND,
                {
                    "model": name,
                    "question_id": q.question_id,
                    "order": perm,
                    "reply": c.text.strip(),
                    "letter": letter,
                    "correct_letter": right,
                    "correct": letter == right,
                    "p_correct": p,
                },
            )

        return fn

    info = {key: (name, q, perm) for key, name, _, q, perm in plan}

    def on_error(key: str, e: ModelCallError) -> None:
        name, q, perm = info[key]
        ctx.store.put_failed(key, CONF_KIND, {"model": name, "question_id": q.question_id, "order": perm}, e)

    await ctx.run_items(
        "kieval: confident set",
        (
            (key, "evaluator" if name in evaluators else "interactor", make(key, name, model, q, perm))
            for key, name, model, q, perm in plan
        ),
        is_done=ctx.store.is_done,
        on_error=on_error,
    )
    conf: dict[str, dict[str, float | None]] = {q.question_id: {} for q in questions}
    errors: dict[str, int] = Counter()
    per_model: dict[tuple[str, str], list[float]] = {}
    methods: Counter[str] = Counter()
    for key, name, _, q, _ in plan:
        it = ctx.store.get_item(key)
        if it is None or it["status"] != "done":
            errors[q.question_id] += 1
            continue
        d = it["data"]
        if d["p_correct"] is not None and cs.method != "shuffles":
            per_model.setdefault((q.question_id, name), []).append(float(d["p_correct"]))
            methods["logprobs"] += 1
        else:
            if cs.method == "logprobs":
                methods["logprobs unavailable: shuffles"] += 1
            else:
                methods["shuffles"] += 1
            per_model.setdefault((q.question_id, name), []).append(1.0 if d["correct"] else 0.0)
    kept, low = [], 0
    for q in questions:
        for name in checkers:
            vals = per_model.get((q.question_id, name), [])
            conf[q.question_id][name] = sum(vals) / len(vals) if vals else None
        if errors[q.question_id]:
            continue
        if all((v is not None and v >= cs.threshold) for v in conf[q.question_id].values()):
            kept.append(q)
        else:
            low += 1
    stats = {
        "enabled": True,
        "checked": len(questions),
        "kept": len(kept),
        "dropped_low_confidence": low,
        "dropped_errors": sum(1 for q in questions if errors[q.question_id]),
        "threshold": cs.threshold,
        "shuffles": cs.shuffles,
        "method": cs.method,
        "confidence_from": dict(sorted(methods.items())),
        "models": checkers,
    }
    return kept, conf, stats


# --- multiple-choice answers ----------------------------------------------------------------------


def _context_texts(cand: _Cand, query: str) -> tuple[list[str], list[str]]:
    chunks = cand.candidate.context_for(query)
    return [c.text for c in chunks], [c.chunk_id for c in chunks]


def _mc_messages(q: SeedQuestion, context: list[str]) -> list[Message]:
    return render_messages(
        "kieval/candidate", question=q.question, choices=q.choices, letters=LETTERS, context=context
    )


def _mc_key(ctx: RunContext, cand: _Cand, q: SeedQuestion) -> str:
    return work_key(
        "kvm",
        cand.cfg.model_dump(),
        cand.identity,
        cand.candidate.max_tokens,
        q.to_dict(),
        prompt_version("kieval/candidate"),
        ctx.config.seed,
    )


async def _mc_answers(
    ctx: RunContext, cands: list[_Cand], questions: list[SeedQuestion]
) -> dict[tuple[str, str], str]:
    plan = [(_mc_key(ctx, c, q), c, q) for c in cands for q in questions]

    def make(key: str, cand: _Cand, q: SeedQuestion) -> Any:
        async def fn() -> None:
            texts, ids = _context_texts(cand, q.question)
            reply = await cand.candidate.reply(_mc_messages(q, texts))
            letter = parse_letter(reply["content"], q.choices)
            ctx.store.put_item(
                key,
                MC_KIND,
                {
                    "candidate": cand.cfg.name,
                    "question_id": q.question_id,
                    "answer": reply["content"],
                    "choice": letter,
                    "correct_letter": q.answer_letter,
                    "correct": letter == q.answer_letter,
                    "context_ids": ids,
                },
            )

        return fn

    info = {key: (c, q) for key, c, q in plan}

    def on_error(key: str, e: ModelCallError) -> None:
        c, q = info[key]
        ctx.store.put_failed(
            key,
            MC_KIND,
            {"candidate": c.cfg.name, "question_id": q.question_id, "correct_letter": q.answer_letter},
            e,
        )

    await ctx.run_items(
        "kieval: multiple-choice answers",
        ((key, "candidate", make(key, c, q)) for key, c, q in plan),
        is_done=ctx.store.is_done,
        on_error=on_error,
    )
    return {(c.cfg.name, q.question_id): key for key, c, q in plan}


# --- conversations --------------------------------------------------------------------------------


@dataclass
class _Conv:
    key: str
    cand: _Cand
    q: SeedQuestion
    mc_key: str


def _conv_key(ctx: RunContext, cfg: Config, cand: _Cand, q: SeedQuestion, evaluators: list[str]) -> str:
    return work_key(
        "kvc",
        cand.cfg.model_dump(),
        cand.identity,
        cand.candidate.max_tokens,
        q.to_dict(),
        ctx.models[ctx.role_model_name("interactor")].provider.identity(),
        [ctx.models[e].provider.identity() for e in evaluators],
        cfg.voting,
        [prompt_version(p) for p in PROMPTS[:5]],
        cfg.interactor_max_tokens,
        cfg.evaluator_max_tokens,
        cfg.comment_max_chars,
        cfg.evaluator_sees_history,
        cfg.temperature,
        ctx.config.seed,
    )


def round_key(conversation_key: str, index: int) -> str:
    """Key of round `index` (0-based) of a conversation."""
    return work_key("kvr", conversation_key, index)


def _normalise_evaluation(parsed: dict[str, Any]) -> dict[str, Any]:
    stop = bool(parsed["stop_conversation"])
    reason = str(parsed.get("stop_reason") or "none")
    if not stop:
        reason = "none"
    elif reason == "none":
        reason = "unspecified"
    return {
        **{a: {"comment": str(parsed[a]["comment"]), "score": int(parsed[a]["score"])} for a in ASPECTS},
        "overall_comment": str(parsed["overall_comment"]),
        "overall_score": int(parsed["overall_score"]),
        "stop_conversation": stop,
        "stop_reason": reason,
    }


def _vote(evals: dict[str, dict[str, Any]], method: str) -> dict[str, Any]:
    """One round's combined evaluation from the evaluators whose reply parsed (config order)."""
    names = list(evals)
    out: dict[str, Any] = {
        a: {"score": vote_scores([evals[n][a]["score"] for n in names], method)}  # type: ignore[arg-type]
        for a in ASPECTS
    }
    out["overall_score"] = vote_scores([evals[n]["overall_score"] for n in names], method)  # type: ignore[arg-type]
    stop, reason = vote_stop([(evals[n]["stop_conversation"], evals[n]["stop_reason"]) for n in names])
    out["stop_conversation"] = stop
    out["stop_reason"] = reason
    out["evaluators"] = names
    return out


class _EndConversation(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


async def _converse(ctx: RunContext, cfg: Config, conv: _Conv, evaluators: list[str]) -> None:
    store = ctx.store
    q = conv.q
    mc = store.get_item(conv.mc_key)
    base = {
        "conversation": conv.key,
        "candidate": conv.cand.cfg.name,
        "question_id": q.question_id,
        "mc_key": conv.mc_key,
    }
    if mc is None or mc["status"] != "done":
        store.put_item(
            conv.key,
            CONV_KIND,
            {**base, "rounds": 0, "end": "error"},
            status="error",
            error="the candidate's multiple-choice answer failed; see its item",
            error_cause=(mc or {}).get("error_cause") or "mc_answer_failed",
        )
        return
    mc_answer = mc["data"]["answer"]
    history: list[Message] = [
        *_mc_messages(q, conv.cand.texts(mc["data"].get("context_ids") or [])),
        {"role": "assistant", "content": mc_answer},
    ]
    interactor = ctx.role("interactor")
    correct = {"correct_letter": q.answer_letter, "correct_text": q.choices[q.answer_index]}
    common = {
        "question": q.question,
        "choices": q.choices,
        "letters": LETTERS,
        "candidate_choice": mc["data"].get("choice"),
        **correct,
    }
    schema = evaluation_schema(cfg.comment_max_chars)
    transcript: list[dict[str, Any]] = []
    end = "completed"
    error: tuple[str, str] | None = None
    for i in range(cfg.max_rounds):
        rk = round_key(conv.key, i)
        it = store.get_item(rk)
        data: dict[str, Any] = dict(it["data"]) if it else {**base, "round": i}
        if it is not None and it["status"] == "done":
            transcript.append(data)
            history += _turn(conv.cand, data)
            if data["stop_conversation"]:
                end = data["stop_reason"]
                break
            continue
        if it is not None and it["status"] == "error" and it["error_cause"] == "unparseable":
            end = "evaluator_error"
            break
        try:
            if data.get("interactor_question") is None:
                with call_scope(role="interactor", item_key=rk):
                    messages = _interactor_messages(mc_answer, transcript, common)
                    c = await interactor.generate(
                        messages,
                        temperature=cfg.temperature,
                        max_tokens=cfg.interactor_max_tokens,
                        seed=ctx.config.seed,
                    )
                data["interactor_question"] = clean_question(c.text)
                store.put_item(rk, ROUND_KIND, data, status="pending")
            if data.get("candidate_reply") is None:
                # The follow-up alone ("why?") often retrieves nothing: query with the topic as well.
                texts, ids = _context_texts(conv.cand, f"{q.question}\n{data['interactor_question']}")
                data["context_ids"] = ids
                turn = render_messages(
                    "kieval/candidate_followup", question=data["interactor_question"], context=texts
                )
                with call_scope(role="candidate", item_key=rk):
                    reply = await conv.cand.candidate.reply([*history, *turn])
                data["candidate_reply"] = reply["content"]
                store.put_item(rk, ROUND_KIND, data, status="pending")
            await _evaluate(ctx, cfg, evaluators, data, rk, common, mc_answer, transcript, schema)
        except _EndConversation as e:
            end = e.reason
            break
        except ModelCallError as e:
            store.put_failed(rk, ROUND_KIND, data, e)
            end, error = "error", (str(e), e.cause)
            break
        transcript.append(data)
        history += _turn(conv.cand, data)
        if data["stop_conversation"]:
            end = data["stop_reason"]
            break
    _put_conversation(ctx, conv, base, transcript, end, error)


def _interactor_messages(
    mc_answer: str, transcript: list[dict[str, Any]], common: dict[str, Any]
) -> list[Message]:
    """The interactor's view as a chat: its own questions are its turns, the candidate's replies the
    user's (small models continue a pasted transcript instead of asking)."""
    messages = render_messages("kieval/interactor", candidate_answer=mc_answer, **common)
    for t in transcript:
        messages += [
            {"role": "assistant", "content": t["interactor_question"]},
            *render_messages("kieval/interactor_next", reply=t["candidate_reply"]),
        ]
    return messages


_LABEL = re.compile(
    r"^\s*(?:\[(?:YOU|INTERVIEWER)\]|(?:interviewer|question|follow-up question)\s*:)\s*", re.I
)


def clean_question(text: str) -> str:
    """The interactor's question without a leading role label, cut before any invented reply."""
    q = _LABEL.sub("", text.strip())
    for marker in ("[INTERVIEWEE]", "[CANDIDATE]", "\nInterviewee:", "\nCandidate:"):
        q = q.split(marker, 1)[0]
    return q.strip()


def _turn(cand: _Cand, data: dict[str, Any]) -> list[Message]:
    texts = cand.texts(data.get("context_ids") or [])
    return [
        *render_messages("kieval/candidate_followup", question=data["interactor_question"], context=texts),
        {"role": "assistant", "content": data["candidate_reply"]},
    ]


async def _evaluate(
    ctx: RunContext,
    cfg: Config,
    evaluators: list[str],
    data: dict[str, Any],
    rk: str,
    common: dict[str, Any],
    mc_answer: str,
    transcript: list[dict[str, Any]],
    schema: dict[str, Any],
) -> None:
    """Ask every evaluator that has not yet answered this round; vote; record the round (or its error)."""
    store = ctx.store
    evals: dict[str, Any] = dict(data.get("evaluations") or {})
    todo = [name for name in evaluators if name not in evals]

    async def one(name: str) -> None:
        previous = []
        if cfg.evaluator_sees_history:
            for t in transcript:
                mine = (t.get("evaluations") or {}).get(name)
                if mine and "error" not in mine:
                    previous.append(
                        {
                            "round": t["round"] + 1,
                            "overall_score": mine["overall_score"],
                            "overall_comment": mine["overall_comment"],
                        }
                    )
        messages = render_messages(
            "kieval/evaluator",
            candidate_answer=mc_answer,
            transcript=[*transcript, data],
            previous=previous,
            round=data["round"] + 1,
            **common,
        )
        with call_scope(role="evaluator", item_key=rk):
            try:
                c = await ctx.models[name].generate(
                    messages,
                    temperature=cfg.temperature,
                    max_tokens=cfg.evaluator_max_tokens,
                    seed=ctx.config.seed,
                    json_schema=schema,
                )
                evals[name] = _normalise_evaluation(c.parsed)
            except StructuredOutputError as e:  # final: a re-run would read the same reply
                evals[name] = {"error": str(e), "cause": e.cause, "raw": e.raw[:4000]}
        # Stored at once, in this task: a kill between two evaluators' replies loses neither.
        data["evaluations"] = {n: evals[n] for n in evaluators if n in evals}
        store.put_item(rk, ROUND_KIND, data, status="pending")

    results = await asyncio.gather(*(one(n) for n in todo), return_exceptions=True)
    transient: list[ModelCallError] = []
    for r in results:
        if isinstance(r, ModelCallError):
            transient.append(r)
        elif isinstance(r, BaseException):
            raise r
    data["evaluations"] = {n: evals[n] for n in evaluators if n in evals}
    if transient:
        raise transient[0]
    valid = {n: evals[n] for n in evaluators if n in evals and "error" not in evals[n]}
    if not valid:
        errs = [evals[n]["error"] for n in evaluators]
        store.put_item(rk, ROUND_KIND, data, status="error", error="; ".join(errs), error_cause="unparseable")
        raise _EndConversation("evaluator_error")
    data.update(_vote(valid, cfg.voting))
    data["evaluator_errors"] = sorted(set(evals) - set(valid))
    store.put_item(rk, ROUND_KIND, data)


def conversation_scores(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Scores of one conversation from its scored rounds (in order, up to the stopping round)."""
    overall = [r["overall_score"] for r in rounds]
    return {
        "rounds": len(rounds),
        "kieval": score(overall, "reference"),
        "kieval_paper": score(overall, "paper"),
        "aspects": {a: score([r[a]["score"] for r in rounds], "reference") for a in ASPECTS},
        "round_overall": overall,
    }


def _put_conversation(
    ctx: RunContext,
    conv: _Conv,
    base: dict[str, Any],
    scored: list[dict[str, Any]],
    end: str,
    error: tuple[str, str] | None,
) -> None:
    data = {**base, **conversation_scores(scored), "end": end}
    if error is None:
        ctx.store.put_item(conv.key, CONV_KIND, data)
    else:
        ctx.store.put_item(conv.key, CONV_KIND, data, status="error", error=error[0], error_cause=error[1])


async def _conversations(ctx: RunContext, cfg: Config, convs: list[_Conv], evaluators: list[str]) -> None:
    info = {c.key: c for c in convs}

    def make(conv: _Conv) -> Any:
        async def fn() -> None:
            await _converse(ctx, cfg, conv, evaluators)

        return fn

    def on_error(key: str, e: ModelCallError) -> None:  # _converse records its own errors; a safety net
        conv = info[key]
        ctx.store.put_failed(
            key,
            CONV_KIND,
            {"conversation": key, "candidate": conv.cand.cfg.name, "question_id": conv.q.question_id},
            e,
        )

    await ctx.run_items(
        "kieval: conversations",
        ((c.key, "candidate", make(c)) for c in convs),
        is_done=ctx.store.is_done,
        on_error=on_error,
    )


# --- metrics --------------------------------------------------------------------------------------


def _metrics(
    ctx: RunContext,
    cfg: Config,
    cands: list[_Cand],
    questions: list[SeedQuestion],
    mc_keys: dict[tuple[str, str], str],
    convs: list[_Conv],
    question_stats: dict[str, Any],
    evaluators: list[str],
) -> dict[str, Any]:
    store = ctx.store
    summary: dict[str, Any] = {
        "protocol": "kieval",
        "config_hash": ctx.config.config_hash(),
        "questions": question_stats,
        "interactor": ctx.role_model_name("interactor"),
        "evaluators": evaluators,
        "voting": cfg.voting,
        "max_rounds": cfg.max_rounds,
        "candidates": {},
    }
    warnings: list[str] = []
    for cand in cands:
        name = cand.cfg.name
        mc_items = [store.get_item(mc_keys[(name, q.question_id)]) for q in questions]
        mc_done = [it for it in mc_items if it is not None and it["status"] == "done"]
        k = sum(1 for it in mc_done if it["data"]["correct"])
        lo, hi = wilson_interval(k, len(mc_done))
        static = {
            "value": k / len(mc_done) if mc_done else None,
            "lo": lo if mc_done else None,
            "hi": hi if mc_done else None,
            "n": len(mc_done),
            "no_letter": sum(1 for it in mc_done if it["data"]["choice"] is None),
            "errors": len(mc_items) - len(mc_done),
        }
        store.put_metric(
            "accuracy.static_mc", name, static["value"], lo=static["lo"], hi=static["hi"], n=static["n"]
        )
        conv_items = [store.get_item(c.key) for c in convs if c.cand is cand]
        finished = [it for it in conv_items if it is not None and it["status"] == "done"]
        scored = [it["data"] for it in finished if it["data"]["rounds"] > 0]
        overall = _mean_entry([d["kieval"] for d in scored], 0.0, 100.0)
        paper = _mean_entry([d["kieval_paper"] for d in scored], 0.0, 100.0)
        rounds = _mean_entry([float(it["data"]["rounds"]) for it in finished], 0.0, float(cfg.max_rounds))
        aspects = {a: _mean_entry([d["aspects"][a] for d in scored], 0.0, 100.0) for a in ASPECTS}
        store.put_metric(
            "kieval.overall", name, overall["value"], lo=overall["lo"], hi=overall["hi"], n=overall["n"]
        )
        store.put_metric(
            "kieval.overall_paper", name, paper["value"], lo=paper["lo"], hi=paper["hi"], n=paper["n"]
        )
        store.put_metric(
            "kieval.rounds", name, rounds["value"], lo=rounds["lo"], hi=rounds["hi"], n=rounds["n"]
        )
        for a, m in aspects.items():
            store.put_metric(f"kieval.{a}", name, m["value"], lo=m["lo"], hi=m["hi"], n=m["n"])
        ends = Counter(it["data"].get("end", "error") if it else "not_run" for it in conv_items)
        summary["candidates"][name] = {
            "model": ctx.config.models[cand.cfg.model].spec,
            "retriever": cand.cfg.retriever,
            "conversations": len(convs) // max(1, len(cands)),
            "finished": len(finished),
            "scored": len(scored),
            "conversation_errors": len(conv_items) - len(finished),
            "kieval": overall,
            "kieval_paper": paper,
            "aspects": aspects,
            "rounds": rounds,
            "stop_reasons": dict(sorted(ends.items())),
            "static_accuracy": static,
        }
    pts = [
        (n, r["static_accuracy"]["value"], r["kieval"]["value"])
        for n, r in summary["candidates"].items()
        if r["static_accuracy"]["value"] is not None and r["kieval"]["value"] is not None
    ]
    contam = contamination(
        [p[0] for p in pts], [p[1] for p in pts], [p[2] for p in pts], z=cfg.contamination_z
    )
    summary["contamination"] = contam
    store.put_artifact("kieval_contamination", contam)
    summary["table"] = [_table_row(n, r) for n, r in summary["candidates"].items()]
    if not convs:
        warnings.append("no conversation was run: no seed question survived loading and the confident set")
    evaluator_errors = sum(
        r["stop_reasons"].get("evaluator_error", 0) for r in summary["candidates"].values()
    )
    if evaluator_errors:
        warnings.append(
            f"{evaluator_errors} conversation(s) ended at a round whose evaluator reply could not be parsed; "
            "those rounds are recorded as errors and not scored"
        )
    failed = sum(r["conversation_errors"] for r in summary["candidates"].values())
    if failed:
        warnings.append(f"{failed} conversation(s) failed on a model error; run again with --resume to retry")
    if contam.get("flagged"):
        warnings.append(
            "possible contamination (KIEval score far below what static accuracy predicts): "
            + ", ".join(contam["flagged"])
        )
    if warnings:
        summary["warnings"] = warnings
    return summary


def _table_row(name: str, r: dict[str, Any]) -> dict[str, str]:
    def fmt(m: dict[str, Any], scale: float = 1.0, digits: int = 1) -> str:
        if m.get("value") is None:
            return "—"
        v = f"{scale * m['value']:.{digits}f}"
        if m.get("lo") is not None and m.get("hi") is not None:
            v += f" [{scale * m['lo']:.{digits}f}, {scale * m['hi']:.{digits}f}]"
        return v + f" n={m['n']}"

    stops = {k: v for k, v in r["stop_reasons"].items() if k != "completed"}
    return {
        "candidate": name,
        "KIEval (ref)": fmt(r["kieval"]),
        "KIEval (paper)": fmt(r["kieval_paper"]),
        "static acc %": fmt(r["static_accuracy"], 100.0),
        "rounds": fmt(r["rounds"], digits=2),
        "early ends": ", ".join(f"{k} {v}" for k, v in stops.items()) or "—",
    }


async def run(ctx: RunContext) -> dict[str, Any]:
    cfg = _settings(ctx)
    ctx.role("interactor")
    evaluators = _evaluator_names(ctx, cfg)
    cands = _candidates(ctx, cfg)
    loaded, stats = load_seed_questions(cfg.questions)
    sampled = _sample(ctx, loaded, cfg.num_questions)
    stats["sampled"] = len(sampled)
    confidence: dict[str, dict[str, float | None]] = {}
    if cfg.confident_set.enabled:
        questions, confidence, stats["confident_set"] = await _confident_set(ctx, cfg, sampled, evaluators)
    else:
        questions = sampled
        stats["confident_set"] = {"enabled": False}
    stats["used"] = len(questions)
    used = {q.question_id for q in questions}
    for q in sampled:
        ctx.store.put_item(
            work_key("kvq", q.to_dict()),
            Q_KIND,
            {**q.to_dict(), "used": q.question_id in used, "confidence": confidence.get(q.question_id)},
        )
    ctx.store.put_artifact("kieval_questions", stats)
    mc_keys = await _mc_answers(ctx, cands, questions)
    convs = [
        _Conv(_conv_key(ctx, cfg, c, q, evaluators), c, q, mc_keys[(c.cfg.name, q.question_id)])
        for c in cands
        for q in questions
    ]
    await _conversations(ctx, cfg, convs, evaluators)
    return _metrics(ctx, cfg, cands, questions, mc_keys, convs, stats, evaluators)
