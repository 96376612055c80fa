"""The protocol kit: what every protocol stands on.

A protocol declares itself (`Protocol`, `Role`), runs its steps through the run context (`RunContext.map`
and `.judge`: keys, resume, error records and progress are the kit's), returns its own `Result` model
(metrics, artifacts, results.json and a first report section are derived from it), and builds on shared
steps (`proctor.kit.shared`: writing questions, answering, judging).
"""

from proctor.kit.context import RunContext, successes
from proctor.kit.registry import Protocol, Role, get_protocol, register_protocol
from proctor.kit.result import Artifact, Metric, Result
from proctor.kit.steps import Judgment, Outcome, Payload

__all__ = [
    "Artifact",
    "Judgment",
    "Metric",
    "Outcome",
    "Payload",
    "Protocol",
    "Result",
    "Role",
    "RunContext",
    "get_protocol",
    "register_protocol",
    "successes",
]
