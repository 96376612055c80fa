"""Seed questions for KIEval: the multiple-choice records of a benchmark question file (read by
`proctor.kit.shared.question_file`, which recognises ARC, MMLU, MedQA, QuALITY and the `exam`
protocol's JSONL without configuration; explicit field names in `kieval.questions` win)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, ClassVar

from proctor.constants import LETTERS
from proctor.kit.shared.question_file import QuestionsConfig, load_questions
from proctor.kit.steps import Payload
from proctor.protocols.kieval.result import SeedFileStats


@dataclass(frozen=True)
class SeedQuestion:
    """One multiple-choice question, normalised: options in file order, the key as a 0-based index."""

    question_id: str
    question: str
    choices: list[str]
    answer_index: int
    subject: str | None = None
    source: str = ""

    @property
    def answer_letter(self) -> str:
        return LETTERS[self.answer_index]

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "answer_letter": self.answer_letter}


def load_seed_questions(cfg: QuestionsConfig) -> tuple[list[SeedQuestion], SeedFileStats]:
    """Every usable multiple-choice question in file order, plus counts (read, usable, skipped by reason)."""
    questions, stats = load_questions(cfg, section="kieval.questions", multiple_choice_only=True)
    seeds = [
        SeedQuestion(
            question_id=q.question_id,
            question=q.question,
            choices=list(q.choices),
            answer_index=q.answer_index,
            subject=q.subject,
            source=q.source,
        )
        for q in questions
        if q.answer_index is not None  # always: the reader was asked for multiple choice only
    ]
    return seeds, SeedFileStats.model_validate(stats)


class QuestionItem(Payload):
    """A sampled seed question, whether the confident set kept it, and each checking model's confidence."""

    KIND: ClassVar[str] = "kieval_question"
    question_id: str
    question: str
    choices: list[str]
    answer_index: int
    answer_letter: str
    subject: str | None = None
    source: str = ""
    used: bool
    confidence: dict[str, float | None] | None = None
