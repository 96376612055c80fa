"""R-Eval: how well retrieval-augmented systems (workflow x LLM, or a user's own pipeline) use a domain's
knowledge — template questions with exact answers from a domain database, questions from the corpus and
HotpotQA at three levels (seek / understand / apply), F1 and EM, the error taxonomy, and matching,
error and deployment analyses.
"""

from proctor.kit.registry import Protocol, Role
from proctor.protocols.rageval.config import Config
from proctor.protocols.rageval.result import RagevalResult
from proctor.protocols.rageval.run import run
from proctor.store.export import SampleSpec

PROTOCOL = Protocol(
    name="rageval",
    settings=Config,
    roles=(
        Role(
            "examiner",
            "writes questions from the corpus (and proposes templates with `expansion`); needed for document "
            "questions",
            required=False,
            needed=lambda s: bool(s.expansion),
        ),
    ),
    run=run,
    result=RagevalResult,
    # An answer is scored on itself (EM and F1 against the gold answer), not by a judge.
    samples=(SampleSpec("rageval_answer", reference="gold", candidate="system", grades=("em", "f1")),),
)
