"""proctor's pytest plugin (registered through the `pytest11` entry point, so installing proctor enables
it): the `proctor_run` fixture runs an evaluation inside a test and hands back the typed `Run` to assert on.

    def test_my_pipeline_knows_the_handbook(proctor_run):
        run = proctor_run("evals/handbook.yaml")          # a path, a dict or a RunConfig
        acc = next(m for m in run.metrics() if m.name == "accuracy.llm_with_reference")
        assert acc.lo >= 0.8

Runs go to the test's temporary folder, or under `--proctor-out DIR` to keep them (e.g. as CI artifacts);
progress is off. Model replies come from proctor's call cache as usual, so re-running a test whose config,
prompts and models have not changed makes no model calls. The runs a test opened are closed after it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import pytest

if TYPE_CHECKING:
    from proctor.config import RunConfig
    from proctor.kit.record import Run


class ProctorRun(Protocol):
    """The `proctor_run` fixture: `proctor_run(config, *, out=None, resume=False, progress=False) -> Run`."""

    def __call__(
        self,
        config: RunConfig | Mapping[str, Any] | str | os.PathLike[str],
        *,
        out: str | Path | None = None,
        resume: bool = False,
        progress: bool = False,
    ) -> Run: ...


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("proctor")
    group.addoption(
        "--proctor-out",
        default=None,
        metavar="DIR",
        help="keep the runs of the proctor_run fixture in DIR (default: each test's temporary folder)",
    )


@pytest.fixture
def proctor_run(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ProctorRun]:
    """Run an evaluation (`proctor.evaluate`) and get its typed `Run`: `run = proctor_run(config)`."""
    kept = request.config.getoption("proctor_out")
    default_out = Path(kept) if kept else tmp_path / "proctor-runs"
    opened: list[Run] = []

    def run(
        config: RunConfig | Mapping[str, Any] | str | os.PathLike[str],
        *,
        out: str | Path | None = None,
        resume: bool = False,
        progress: bool = False,
    ) -> Run:
        from proctor.api import evaluate

        result = evaluate(config, out=out or default_out, resume=resume, progress=progress)
        opened.append(result)
        return result

    yield run
    for r in opened:
        r.close()
