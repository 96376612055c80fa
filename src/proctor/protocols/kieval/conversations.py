"""KIEval's conversations on the kit's conversation engine: each round the interactor asks a follow-up,
the candidate replies, and the evaluators score the round on five aspects (1-4), vote, and may stop.

An evaluator reply that still does not parse after the model path's re-asks is recorded as that
evaluator's failed judgment on the round (cause `unparseable`); the round is scored by the evaluators whose
reply parsed, and is an error — ending the conversation, the rounds before it keeping their scores —
only if none did. Transient failures end the conversation too, and `--resume` retries from that round.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from proctor.constants import LETTERS
from proctor.errors import StepError
from proctor.models.types import Message
from proctor.prompts import prompt_version, render_messages
from proctor.kit.context import RunContext, work_key
from proctor.kit.conversation import Panel, RoundData, Transcript, Turn, converse
from proctor.protocols.kieval.candidates import KCandidate
from proctor.protocols.kieval.config import Config
from proctor.protocols.kieval.scoring import ASPECTS, STOP_REASONS, score, vote_scores, vote_stop
from proctor.protocols.kieval.seeds import SeedQuestion
from proctor.protocols.kieval.static_mc import MCAnswer, mc_messages
from proctor.kit.steps import Failure, Outcome, Payload

ROUND_KIND = "kieval_round"
EVALUATOR_JUDGE = "kieval_evaluator"
PROMPTS = (
    "kieval/candidate",
    "kieval/candidate_followup",
    "kieval/interactor",
    "kieval/interactor_next",
    "kieval/evaluator",
)


class ConversationItem(Payload):
    KIND: ClassVar[str] = "kieval_conversation"
    conversation: str
    candidate: str
    question_id: str
    mc_key: str
    rounds: int
    kieval: float | None
    kieval_paper: float | None
    aspects: dict[str, float | None]
    round_overall: list[int]
    end: str


@dataclass
class KConversation:
    key: str
    cand: KCandidate
    q: SeedQuestion
    mc_key: str
    mc: MCAnswer | None
    mc_failure: Failure | None


def conversation_key(
    ctx: RunContext[Config], cand: KCandidate, q: SeedQuestion, evaluators: list[str]
) -> str:
    cfg = ctx.settings
    return work_key(
        "kvc",
        cand.cfg.model_dump(),
        cand.identity,
        getattr(cand.candidate, "max_tokens", None),
        q.to_dict(),
        ctx.models[ctx.role_model_name("interactor")].provider.identity(),
        [ctx.models[e].provider.identity() for e in evaluators],
        cfg.voting,
        [prompt_version(p) for p in PROMPTS],
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


def normalise_evaluation(parsed: dict[str, Any]) -> dict[str, Any]:
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


def vote(
    evals: dict[str, dict[str, Any]], failed: list[str], method: Literal["majority", "mean"]
) -> dict[str, Any]:
    """One round's combined evaluation from the evaluators whose reply parsed (config order); `failed` are
    the evaluators whose reply could not be parsed."""
    names = list(evals)
    out: dict[str, Any] = {
        a: {"score": vote_scores([int(evals[n][a]["score"]) for n in names], method)} for a in ASPECTS
    }
    out["overall_score"] = vote_scores([int(evals[n]["overall_score"]) for n in names], method)
    stop, reason = vote_stop([(evals[n]["stop_conversation"], evals[n]["stop_reason"]) for n in names])
    out["stop_conversation"] = stop
    out["stop_reason"] = reason
    out["evaluators"] = names
    out["evaluations"] = evals
    out["evaluator_errors"] = failed
    return out


_LABEL = re.compile(
    r"^\s*(?:\[(?:YOU|INTERVIEWER)\]|(?:interviewer|question|follow-up question)\s*:)\s*", re.I
)


def clean_question(text: str) -> str:
    """The interactor's question without a leading role label, cut before any invented reply."""
    q = _LABEL.sub("", text.strip())
    for marker in ("[INTERVIEWEE]", "[CANDIDATE]", "\nInterviewee:", "\nCandidate:"):
        q = q.split(marker, 1)[0]
    return q.strip()


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


def _interactor_messages(mc_answer: str, transcript: Transcript, common: dict[str, Any]) -> list[Message]:
    """The interactor's view as a chat: its own questions are its turns, the candidate's replies the
    user's (small models continue a pasted transcript instead of asking)."""
    messages = render_messages("kieval/interactor", candidate_answer=mc_answer, **common)
    for t in transcript:
        messages += [
            {"role": "assistant", "content": t["interactor_question"]},
            *render_messages("kieval/interactor_next", reply=t["candidate_reply"]),
        ]
    return messages


def _turn(cand: KCandidate, data: RoundData) -> list[Message]:
    texts = cand.texts(data.get("context_ids") or [])
    return [
        *render_messages("kieval/candidate_followup", question=data["interactor_question"], context=texts),
        {"role": "assistant", "content": data["candidate_reply"]},
    ]


async def _talk(ctx: RunContext[Config], conv: KConversation, evaluators: list[str]) -> ConversationItem:
    """One conversation, resumed where it stopped; its rounds are `kieval_round` items."""
    cfg = ctx.settings
    q = conv.q
    base = {
        "conversation": conv.key,
        "candidate": conv.cand.cfg.name,
        "question_id": q.question_id,
        "mc_key": conv.mc_key,
    }
    if conv.mc is None:
        cause = conv.mc_failure.cause if conv.mc_failure else "mc_answer_failed"
        raise StepError(
            "the candidate's multiple-choice answer failed; see its item",
            cause=cause,
            partial={**base, "rounds": 0, "end": "error"},
        )
    mc = conv.mc
    history: list[Message] = [
        *mc_messages(q, conv.cand.texts(mc.context_ids)),
        {"role": "assistant", "content": mc.answer},
    ]
    interactor = ctx.role("interactor")
    common = {
        "question": q.question,
        "choices": q.choices,
        "letters": LETTERS,
        "candidate_choice": mc.choice,
        "correct_letter": q.answer_letter,
        "correct_text": q.choices[q.answer_index],
    }
    schema = evaluation_schema(cfg.comment_max_chars)

    async def ask(data: RoundData, transcript: Transcript) -> str:
        c = await interactor.generate(
            _interactor_messages(mc.answer, transcript, common),
            temperature=cfg.temperature,
            max_tokens=cfg.interactor_max_tokens,
            seed=ctx.config.seed,
        )
        return clean_question(c.text)

    async def reply(data: RoundData, transcript: Transcript) -> str:
        # The follow-up alone ("why?") often retrieves nothing: query with the topic as well.
        texts, ids = conv.cand.context(f"{q.question}\n{data['interactor_question']}")
        data["context_ids"] = ids
        turn = render_messages(
            "kieval/candidate_followup", question=data["interactor_question"], context=texts
        )
        return str((await conv.cand.candidate.reply([*history, *turn]))["content"])

    async def evaluate(name: str, data: RoundData, transcript: Transcript) -> dict[str, Any]:
        previous = []
        if cfg.evaluator_sees_history:
            for t in transcript:
                mine = (t.get("evaluations") or {}).get(name)
                if mine:
                    previous.append(
                        {
                            "round": t["round"] + 1,
                            "overall_score": mine["overall_score"],
                            "overall_comment": mine["overall_comment"],
                        }
                    )
        messages = render_messages(
            "kieval/evaluator",
            candidate_answer=mc.answer,
            transcript=[*transcript, data],
            previous=previous,
            round=data["round"] + 1,
            **common,
        )
        c = await ctx.models[name].generate(
            messages,
            temperature=cfg.temperature,
            max_tokens=cfg.evaluator_max_tokens,
            seed=ctx.config.seed,
            json_schema=schema,
        )
        return normalise_evaluation(c.parsed)

    result = await converse(
        ctx,
        base=base,
        round_key=lambda i: round_key(conv.key, i),
        kind=ROUND_KIND,
        max_rounds=cfg.max_rounds,
        turns=[Turn("interactor_question", "interactor", ask), Turn("candidate_reply", "candidate", reply)],
        panel=Panel(
            EVALUATOR_JUDGE,
            "evaluator",
            evaluators,
            evaluate,
            lambda valid, failed: vote(valid, failed, cfg.voting),
        ),
        stop=lambda r: str(r["stop_reason"]) if r["stop_conversation"] else None,
        on_round=lambda r: history.extend(_turn(conv.cand, r)),
    )
    data = {**base, **conversation_scores(result.rounds), "end": result.end}
    if result.failure is not None:
        raise StepError(result.failure.message, cause=result.failure.cause, partial=data)
    return ConversationItem.model_validate(data)


async def run_conversations(
    ctx: RunContext[Config], convs: list[KConversation], evaluators: list[str]
) -> list[Outcome[KConversation, ConversationItem]]:
    async def talk(conv: KConversation) -> ConversationItem:
        return await _talk(ctx, conv, evaluators)

    return await ctx.map(
        "kieval: conversations",
        convs,
        talk,
        key=lambda c: c.key,
        role="candidate",
        output=ConversationItem,
        context=lambda c: {
            "conversation": c.key,
            "candidate": c.cand.cfg.name,
            "question_id": c.q.question_id,
        },
    )
