"""Judge: grade an existing answers file against its references with proctor's judge stack.

Every row goes through deterministic equivalence rules, the LLM judge with the reference (only when no rule
is sure) and the guards; the verdict, P(correct), the deciding method and the reason are stored per row.
With human labels the run also reports the judge card (agreement, kappa, false "correct", per-rule
precision). `proctor judge ANSWERS_FILE` builds the config from the file; `proctor.judge` grades in code.
"""

from proctor.kit.registry import Protocol, Role
from proctor.protocols.judge.config import Config
from proctor.protocols.judge.result import JudgeResult
from proctor.protocols.judge.run import run

PROTOCOL = Protocol(
    name="judge",
    settings=Config,
    roles=(Role("judge", "judges each answer against its reference when no rule is sure"),),
    run=run,
    result=JudgeResult,
)
