"""Exam protocol (automated exam generation + item response theory, after auto-rag-eval).

The examiner writes multiple-choice questions from corpus chunks; a-priori filters remove flawed ones;
options are shuffled with the run's seed so no surface cue beats chance; a grid of RAG pipelines
(LLM x retriever x in-context examples) takes the exam; accuracy is reported with intervals and broken
down by Bloom level, question word and topic; item response theory (`proctor.psychometrics`) estimates
pipeline and component abilities, item quality and information, prunes uninformative items and replays
adaptive testing on the calibrated exam.
"""

from proctor.kit.registry import Protocol, Role
from proctor.protocols.exam.config import Config
from proctor.protocols.exam.result import ExamResult
from proctor.protocols.exam.run import run
from proctor.store.export import Lookup, SampleSpec

PROTOCOL = Protocol(
    name="exam",
    settings=Config,
    roles=(
        Role(
            "examiner",
            "writes the questions and Bloom labels (not needed when the exam comes from `exam.exam_file`)",
            required=False,
            needed=lambda s: s.exam_file is None,
        ),
    ),
    run=run,
    result=ExamResult,
    # A response names the option it selected; the question, its options and the key are on the exam
    # question it answers.
    samples=(
        SampleSpec(
            "exam_response",
            reference="answer",
            answer="selected",
            candidate="pipeline",
            lookup=Lookup("exam_question", by="question_id", id_field="id"),
            choices="choices",
            grades=("correct",),
        ),
    ),
)
