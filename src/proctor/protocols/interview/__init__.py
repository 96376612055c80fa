"""The interview (JudgeAgent): benchmark grading in batches, difficulty-adaptive extension questions from
knowledge paths on the corpus's context graph, structured feedback per batch, and validation of the
feedback by re-answering (ACC1 / ACC2 / CR / CtE), with the paper's ablations side by side.
"""

from proctor.kit.registry import Protocol, Role
from proctor.protocols.interview.config import Config
from proctor.protocols.interview.result import InterviewResult
from proctor.protocols.interview.run import run

PROTOCOL = Protocol(
    name="interview",
    settings=Config,
    roles=(
        Role(
            "examiner",
            "labels difficulty, extracts entities (graph, seed entities), writes extension questions "
            "and feedback",
        ),
        Role("judge", "judges short answers against the reference (default: the examiner)", required=False),
    ),
    run=run,
    result=InterviewResult,
)
