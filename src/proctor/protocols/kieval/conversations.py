"""KIEval's conversations on the kit's conversation engine: each round the interactor asks a follow-up,
the candidate replies, and the evaluators score the round on five aspects (1-4), vote, and may stop.

An evaluator reply that still does not parse after the model path's re-asks is recorded as that
evaluator's failed judgment on the round (cause `unparseable`); the round is scored by the evaluators whose
reply parsed, and ends the conversation (`evaluator_error`, the rounds before it keeping their scores)
only if none did. Transient failures end the conversation too, and `--resume` retries from that round.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, Field

from proctor.constants import LETTERS
from proctor.errors import StepError
from proctor.ids import content_id
from proctor.kit.context import RunContext
from proctor.kit.conversation import Conversation, Panel, RoundData, Turn, converse
from proctor.kit.steps import Failure, Outcome, Payload
from proctor.models.types import Message
from proctor.prompts import render_messages
from proctor.protocols.kieval.candidates import KCandidate
from proctor.protocols.kieval.config import Config
from proctor.protocols.kieval.scoring import ASPECTS, STOP_REASONS, score, vote_scores, vote_stop
from proctor.protocols.kieval.seeds import SeedQuestion
from proctor.protocols.kieval.static_mc import MCAnswer, mc_messages

EVALUATOR_JUDGE = "kieval_evaluator"


class AspectEvaluation(BaseModel):
    comment: str
    score: int


class Evaluation(BaseModel):
    """One evaluator's reply on one round, normalised (the data of its judgment)."""

    accuracy: AspectEvaluation
    logic: AspectEvaluation
    relevance: AspectEvaluation
    coherence: AspectEvaluation
    conciseness: AspectEvaluation
    overall_comment: str
    overall_score: int
    stop_conversation: bool
    stop_reason: str

    def aspect(self, name: str) -> AspectEvaluation:
        value = getattr(self, name)
        assert isinstance(value, AspectEvaluation)
        return value


class Vote(BaseModel):
    """The evaluators' combined score of one aspect (a fraction under mean voting)."""

    score: float


class RoundRecord(Payload):
    """A round as stored, finished or not: the interactor's question, the candidate's reply (with the
    passages it was given) and, once the evaluators scored it, the voted scores, the stop decision and
    every evaluator's reply. A round that failed half-way holds the fields its turns filled."""

    KIND: ClassVar[str] = "kieval_round"
    conversation: str
    candidate: str
    question_id: str
    mc_key: str
    round: int
    interactor_question: str | None = None
    context_ids: list[str] = Field(default_factory=list)
    candidate_reply: str | None = None
    accuracy: Vote | None = None
    logic: Vote | None = None
    relevance: Vote | None = None
    coherence: Vote | None = None
    conciseness: Vote | None = None
    overall_score: float | None = None
    stop_conversation: bool | None = None
    stop_reason: str | None = None
    evaluators: list[str] | None = None
    evaluations: dict[str, Evaluation] | None = None
    evaluator_errors: list[str] | None = None

    def aspect(self, name: str) -> Vote | None:
        value = getattr(self, name)
        assert value is None or isinstance(value, Vote)
        return value


class Round(RoundRecord):
    """A played round: both turns are there."""

    interactor_question: str
    candidate_reply: str


class ConversationItem(Payload):
    KIND: ClassVar[str] = "kieval_conversation"
    conversation: str
    candidate: str
    question_id: str
    mc_key: str
    rounds: int
    kieval: float | None = None
    kieval_paper: float | None = None
    aspects: dict[str, float | None] = Field(default_factory=dict)
    round_overall: list[float] = Field(default_factory=list)
    end: str


@dataclass(frozen=True)
class KConversation:
    """One conversation: a candidate, its seed question and its multiple-choice answer (or its failure)."""

    cand: KCandidate
    q: SeedQuestion
    mc_key: str
    mc: MCAnswer | None
    mc_failure: Failure | None

    @property
    def unit_id(self) -> tuple[str, SeedQuestion]:
        """What the conversation is about: the candidate and the question (the multiple-choice answer it
        opens with is the unit of the same id, so it is covered)."""
        return (self.cand.cfg.name, self.q)

    @property
    def id(self) -> str:
        """The `conversation` field of its rounds and its item (content-derived, not a store key)."""
        return content_id(*self.unit_id)

    def base(self) -> dict[str, str]:
        return {
            "conversation": self.id,
            "candidate": self.cand.cfg.name,
            "question_id": self.q.question_id,
            "mc_key": self.mc_key,
        }


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


def normalise_evaluation(parsed: dict[str, Any]) -> Evaluation:
    stop = bool(parsed["stop_conversation"])
    reason = str(parsed.get("stop_reason") or "none")
    if not stop:
        reason = "none"
    elif reason == "none":
        reason = "unspecified"
    return Evaluation.model_validate(
        {
            **{a: {"comment": str(parsed[a]["comment"]), "score": int(parsed[a]["score"])} for a in ASPECTS},
            "overall_comment": str(parsed["overall_comment"]),
            "overall_score": int(parsed["overall_score"]),
            "stop_conversation": stop,
            "stop_reason": reason,
        }
    )


def vote(
    played: Round, evals: dict[str, Evaluation], failed: list[str], method: Literal["majority", "mean"]
) -> Round:
    """The round scored by the evaluators whose reply parsed (config order); `failed` are the evaluators
    whose reply could not be parsed."""
    names = list(evals)
    stop, reason = vote_stop([(evals[n].stop_conversation, evals[n].stop_reason) for n in names])
    return played.model_copy(
        update={
            **{
                a: Vote(score=vote_scores([evals[n].aspect(a).score for n in names], method)) for a in ASPECTS
            },
            "overall_score": vote_scores([evals[n].overall_score for n in names], method),
            "stop_conversation": stop,
            "stop_reason": reason,
            "evaluators": names,
            "evaluations": evals,
            "evaluator_errors": failed,
        }
    )


_LABEL = re.compile(
    r"^\s*(?:\[(?:YOU|INTERVIEWER)\]|(?:interviewer|question|follow-up question)\s*:)\s*", re.I
)


def clean_question(text: str) -> str:
    """The interactor's question without a leading role label, cut before any invented reply."""
    q = _LABEL.sub("", text.strip())
    for marker in ("[INTERVIEWEE]", "[CANDIDATE]", "\nInterviewee:", "\nCandidate:"):
        q = q.split(marker, 1)[0]
    return q.strip()


def conversation_item(conv: KConversation, rounds: Sequence[Round], end: str) -> ConversationItem:
    """One conversation's record and scores from its scored rounds (in order, up to the stopping round)."""
    overall = [r.overall_score for r in rounds if r.overall_score is not None]
    aspects: dict[str, float | None] = {}
    for a in ASPECTS:
        votes = [r.aspect(a) for r in rounds]
        aspects[a] = score([v.score for v in votes if v is not None], "reference")
    return ConversationItem(
        **conv.base(),
        rounds=len(rounds),
        kieval=score(overall, "reference"),
        kieval_paper=score(overall, "paper"),
        aspects=aspects,
        round_overall=overall,
        end=end,
    )


def _interactor_messages(
    mc_answer: str, transcript: Sequence[Round], common: dict[str, Any]
) -> list[Message]:
    """The interactor's view as a chat: its own questions are its turns, the candidate's replies the
    user's (small models continue a pasted transcript instead of asking)."""
    messages = render_messages("kieval/interactor", candidate_answer=mc_answer, **common)
    for t in transcript:
        messages += [
            {"role": "assistant", "content": t.interactor_question},
            *render_messages("kieval/interactor_next", reply=t.candidate_reply),
        ]
    return messages


def _history(conv: KConversation, mc: MCAnswer, transcript: Sequence[Round]) -> list[Message]:
    """The candidate's side of the conversation so far: the multiple-choice exchange, then every round."""
    history: list[Message] = [
        *mc_messages(conv.q, conv.cand.texts(mc.context_ids)),
        {"role": "assistant", "content": mc.answer},
    ]
    for t in transcript:
        history += [
            *render_messages(
                "kieval/candidate_followup",
                question=t.interactor_question,
                context=conv.cand.texts(t.context_ids),
            ),
            {"role": "assistant", "content": t.candidate_reply},
        ]
    return history


def _common(conv: KConversation, mc: MCAnswer) -> dict[str, Any]:
    q = conv.q
    return {
        "question": q.question,
        "choices": q.choices,
        "letters": LETTERS,
        "candidate_choice": mc.choice,
        "correct_letter": q.answer_letter,
        "correct_text": q.choices[q.answer_index],
    }


def _mc(conv: KConversation) -> MCAnswer:
    assert conv.mc is not None  # only conversations whose multiple-choice answer exists are played
    return conv.mc


async def run_conversations(
    ctx: RunContext[Config], convs: list[KConversation], evaluators: list[str]
) -> list[Outcome[KConversation, ConversationItem]]:
    """Every conversation played (or resumed) round by round, then recorded as a `kieval_conversation`
    item with its scores — an error with its cause when the conversation ended on a failure."""
    cfg = ctx.settings
    interactor = ctx.role("interactor")
    schema = evaluation_schema(cfg.comment_max_chars)

    async def ask(conv: KConversation, data: RoundData, transcript: Sequence[Round]) -> str:
        mc = _mc(conv)
        c = await interactor.generate(
            _interactor_messages(mc.answer, transcript, _common(conv, mc)),
            temperature=cfg.temperature,
            max_tokens=cfg.interactor_max_tokens,
            seed=ctx.config.seed,
        )
        return clean_question(c.text)

    async def reply(conv: KConversation, data: RoundData, transcript: Sequence[Round]) -> str:
        # The follow-up alone ("why?") often retrieves nothing: query with the topic as well.
        texts, ids = conv.cand.context(f"{conv.q.question}\n{data['interactor_question']}")
        data["context_ids"] = ids
        turn = render_messages(
            "kieval/candidate_followup", question=data["interactor_question"], context=texts
        )
        history = _history(conv, _mc(conv), transcript)
        return str((await conv.cand.candidate.reply([*history, *turn]))["content"])

    async def evaluate(
        conv: KConversation, name: str, played: Round, transcript: Sequence[Round]
    ) -> Evaluation:
        mc = _mc(conv)
        previous = []
        if cfg.evaluator_sees_history:
            for t in transcript:
                mine = (t.evaluations or {}).get(name)
                if mine:
                    previous.append(
                        {
                            "round": t.round + 1,
                            "overall_score": mine.overall_score,
                            "overall_comment": mine.overall_comment,
                        }
                    )
        messages = render_messages(
            "kieval/evaluator",
            candidate_answer=mc.answer,
            transcript=[*transcript, played],
            previous=previous,
            round=played.round + 1,
            **_common(conv, mc),
        )
        c = await ctx.models[name].generate(
            messages,
            temperature=cfg.temperature,
            max_tokens=cfg.evaluator_max_tokens,
            seed=ctx.config.seed,
            json_schema=schema,
        )
        return normalise_evaluation(c.parsed)

    talks = await converse(
        ctx,
        "kieval: conversations",
        [c for c in convs if c.mc is not None],
        conversation_id=lambda c: c.unit_id,
        start=lambda c, i: {**c.base(), "round": i},
        output=Round,
        max_rounds=cfg.max_rounds,
        turns=[
            Turn[KConversation, Round]("interactor_question", "interactor", ask),
            Turn[KConversation, Round]("candidate_reply", "candidate", reply),
        ],
        panel=Panel[KConversation, Round, Evaluation](
            EVALUATOR_JUDGE,
            "evaluator",
            evaluators,
            Evaluation,
            evaluate,
            lambda played, valid, failed: vote(played, valid, failed, cfg.voting),
        ),
        stop=lambda r: str(r.stop_reason) if r.stop_conversation else None,
    )
    return await _record(ctx, convs, {t.conversation.id: t for t in talks})


async def _record(
    ctx: RunContext[Config],
    convs: list[KConversation],
    talks: dict[str, Conversation[KConversation, Round]],
) -> list[Outcome[KConversation, ConversationItem]]:
    """Each conversation's item: its scores, or an error with the cause that ended it."""

    def item(conv: KConversation) -> ConversationItem:
        talk = talks.get(conv.id)
        if talk is None:  # no multiple-choice answer: no conversation
            return ConversationItem(**conv.base(), rounds=0, end="error")
        return conversation_item(conv, talk.rounds, talk.end or "completed")

    async def record(conv: KConversation) -> ConversationItem:
        talk = talks.get(conv.id)
        if talk is None:
            cause = conv.mc_failure.cause if conv.mc_failure else "mc_answer_failed"
            raise StepError(
                "the candidate's multiple-choice answer failed; see its item",
                cause=cause,
                partial={**conv.base(), "rounds": 0, "end": "error"},
            )
        if talk.failure is not None:  # what the conversation got done is kept on its error record
            data = item(conv).model_dump(mode="json")
            raise StepError(talk.failure.message, cause=talk.failure.cause, partial=data)
        return item(conv)

    outcomes = await ctx.map(
        "kieval: conversation scores",
        convs,
        record,
        unit_id=lambda c: c.unit_id,
        role=None,
        output=ConversationItem,
    )
    # A conversation stored by an earlier run is handed back as it was; its rounds are re-scored when an
    # evaluator changed since, so store it as it is now (its scores are derived from its rounds).
    fresh = {o.key: item(o.unit) for o in outcomes if o.value is not None}
    changed = [o for o in outcomes if o.key in fresh and fresh[o.key] != o.value]
    await ctx.revise(changed, lambda o: fresh[o.key])
    return [Outcome(o.unit, o.key, fresh[o.key], None) if o.key in fresh else o for o in outcomes]
