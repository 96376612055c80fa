"""KIEval (Yu et al., ACL 2024): knowledge-grounded interactive evaluation. A benchmark question opens a
conversation; an interactor probes the candidate's knowledge over several rounds; evaluators score every
round on five aspects and may stop early; a decaying-weight score summarises each conversation."""

from proctor.kit.registry import Protocol, Role
from proctor.protocols.kieval.config import Config
from proctor.protocols.kieval.result import KievalResult
from proctor.protocols.kieval.run import run
from proctor.protocols.kieval.scoring import contamination, score

__all__ = ["PROTOCOL", "contamination", "score"]

PROTOCOL = Protocol(
    name="kieval",
    settings=Config,
    roles=(
        Role("interactor", "asks the follow-up questions of each conversation"),
        Role(
            "evaluator",
            "scores every round on the five aspects (needed unless `kieval.evaluators` lists models)",
            required=False,
            needed=lambda s: not s.evaluators,
        ),
    ),
    run=run,
    result=KievalResult,
)
