"""RECKON: reference-based efficient knowledge evaluation (Zhang et al., 2025).

Corpus -> knowledge units (examiner) -> merged duplicates -> embedding clusters -> one probing question per
cluster -> candidates answer -> per-unit two-stage judging (extract, then judge against the unit's
reference: correct / incorrect / uncovered) -> uncovered units re-clustered and re-asked in later rounds.
The per-unit reference-QA baseline runs on the same units and candidates, with its own call accounting.

Modules: `config` (the `reckon:` section), `units`, `clustering`, `questions`, `candidates`, `judging`,
`rounds`, `baselines`, `cost`, `metaeval`, `result` (the typed result), `report`, `run`
(`async run(ctx) -> ReckonResult`).
"""

from proctor.kit.registry import Protocol, Role
from proctor.protocols.reckon.config import Config
from proctor.protocols.reckon.result import ReckonResult
from proctor.protocols.reckon.run import run

PROTOCOL = Protocol(
    name="reckon",
    settings=Config,
    roles=(
        Role("examiner", "extracts knowledge units, writes cluster questions and the baseline questions"),
        Role("judge", "extracts excerpts and judges each unit against its reference"),
    ),
    run=run,
    result=ReckonResult,
)
