"""`proctor export`: a run's candidate answers, with their judgments and transcripts, in a peer's format.

The protocol says which items are candidate answers (`Protocol.samples`); a protocol that says nothing
gets them read off its store. The writers are the store's (`proctor.store.export`,
`proctor.store.inspect_log`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from proctor.errors import UserError
from proctor.export_format import ExportFormat
from proctor.kit.record import load_run
from proctor.kit.registry import get_protocol
from proctor.store.export import SampleSpec, guess_specs, write_jsonl
from proctor.store.inspect_log import require_inspect_ai, write_inspect_log
from proctor.store.record import RunRecord

# The file endings inspect_ai's log writer knows.
INSPECT_SUFFIXES = (".eval", ".json")


@dataclass(frozen=True)
class Exported:
    path: Path
    samples: int


def default_path(run_dir: Path, run_id: str, fmt: ExportFormat) -> Path:
    """Inside the run folder: `inspect/<run_id>.eval` (a folder `inspect view --log-dir` can list) or
    `transcripts.jsonl`."""
    if fmt is ExportFormat.inspect:
        return run_dir / "inspect" / f"{run_id}.eval"
    return run_dir / "transcripts.jsonl"


def sample_specs(record: RunRecord, protocol: str) -> list[SampleSpec]:
    """The item kinds of the run that are candidate answers: as the protocol declares them, else guessed."""
    try:
        declared = get_protocol(protocol).samples
    except (ValueError, TypeError):  # a protocol not installed here
        declared = ()
    return list(declared) or guess_specs(record)


def export_run(run_dir: Path, fmt: ExportFormat, out: Path | None = None) -> Exported:
    """Write the run in `run_dir` as `fmt` to `out` (default: `default_path`)."""
    if fmt is ExportFormat.inspect:
        require_inspect_ai()  # before reading anything: the error names the fix
        if out is not None and out.suffix not in INSPECT_SUFFIXES:
            raise UserError(
                f"--out {out}: an inspect_ai log is a `.eval` file (compressed) or a `.json` file; name the "
                "file with one of these endings."
            )
    with load_run(run_dir) as run:
        path = out or default_path(Path(run_dir), run.run_id, fmt)
        specs = sample_specs(run, run.protocol)
        if fmt is ExportFormat.inspect:
            n = write_inspect_log(run, specs, path)
        else:
            n = write_jsonl(run, specs, path)
    return Exported(path=path, samples=n)
