"""Reference-QA: the simplest end-to-end protocol and the baseline for the others.

The examiner writes open questions with reference answers from corpus chunks; each candidate (plain LLM
or RAG) answers; answers are scored by EM/F1 and by LLM judges with and without the reference.
"""

from proctor.kit.registry import Protocol, Role
from proctor.protocols.qa.config import Config
from proctor.protocols.qa.result import QaResult
from proctor.protocols.qa.run import run
from proctor.store.export import SampleSpec

PROTOCOL = Protocol(
    name="qa",
    settings=Config,
    roles=(
        Role(
            "examiner",
            "writes a question and reference answer per chunk (not needed with `qa.questions`)",
            required=False,
            needed=lambda s: s.questions is None,
        ),
        Role(
            "judge",
            "judges answers with and without the reference (needed when `qa.judges` is not empty)",
            required=False,
            needed=lambda s: bool(s.judges),
        ),
    ),
    run=run,
    result=QaResult,
    samples=(SampleSpec("answer"),),
)
