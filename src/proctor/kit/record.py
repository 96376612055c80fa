"""`load_run(path) -> Run`: a run folder as one typed record.

The store's typed rows (`proctor.store.record.RunRecord`: items, judgments, calls, metrics, artifacts)
plus what only the kit knows: the resolved config as a `RunConfig` and results.json read back into the
protocol's own result model. Reports, the viewer, suites, the interview's `from_run` and users' code all
read runs through this.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from proctor.config import RunConfig
from proctor.errors import UserError
from proctor.kit.registry import get_protocol
from proctor.kit.result import OpenResult, Result
from proctor.store.record import RUN_FILE, RunRecord


class Run(RunRecord):
    """A run: its folder, info, config, the protocol's result (None while the run has not finished), and
    the typed rows of its store (`items`, `payloads(Model)`, `judgments`, `calls`, `metrics`, `artifact`),
    and every model call's transcript (`transcripts(item_key=None)`: messages, parameters, reply)."""

    def __init__(self, folder: str | Path) -> None:
        super().__init__(folder)
        info = self.info()
        if info is None:
            raise UserError(f"{self.folder / RUN_FILE}: the run store holds no run (was it started?).")
        self.run_info = info
        self._config: RunConfig | None = None
        self._result: Result | None = None
        self._result_read = False

    @property
    def run_id(self) -> str:
        return self.run_info.run_id

    @property
    def protocol(self) -> str:
        return self.run_info.protocol

    @property
    def config(self) -> RunConfig:
        """The resolved config the run was started with."""
        if self._config is None:
            data = self.config_data() or {}
            try:
                self._config = RunConfig.model_validate(_unsettled(data))
            except ValidationError as e:
                raise UserError(
                    f"{self.folder / RUN_FILE}: its stored config no longer validates: {e}"
                ) from None
        return self._config

    @property
    def result(self) -> Result | None:
        """results.json as the protocol's result model; None while the run has not finished."""
        if not self._result_read:
            self._result_read = True
            data = self.artifact_data("summary")
            if data is not None:
                self._result = result_type(self.protocol).model_validate(data)
        return self._result


def result_type(protocol: str) -> type[Result]:
    """The result model of a protocol by name (`OpenResult` for one not installed here)."""
    try:
        return get_protocol(protocol).result
    except (ValueError, TypeError):
        return OpenResult


def _unsettled(data: dict[str, Any]) -> dict[str, Any]:
    """The stored config holds the protocol's section as `settings`; reading it back wants `<protocol>:`."""
    out = dict(data)
    settings = out.pop("settings", None)
    if settings is not None and isinstance(out.get("protocol"), str):
        out[out["protocol"]] = settings
    return out


def load_run(path: str | Path) -> Run:
    """The run in folder `path` (a folder holding `run.sqlite`), as a typed record."""
    folder = Path(path)
    if not (folder / RUN_FILE).is_file():
        raise UserError(
            f"{folder}: not a run folder (it holds no {RUN_FILE}). Pass a folder under runs/ that "
            "`proctor run` wrote."
        )
    return Run(folder)
