"""KIEval (Yu et al., ACL 2024): knowledge-grounded interactive evaluation. A benchmark question opens a
conversation; an interactor probes the candidate's knowledge over several rounds; evaluators score every
round on five aspects and may stop early; a decaying-weight score summarises each conversation."""

from proctor.protocols.kieval.scoring import contamination, score

__all__ = ["contamination", "score"]
