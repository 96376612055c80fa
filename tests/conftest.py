"""Shared fixtures: an isolated call cache per test and the in-process mock OpenAI-compatible server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from proctor.models.local import models_dir
from proctor.testing.mock_server import MockServer

# The embedded weights are assembled once into the user's model folder and shared by all tests (they are
# verified by hash, read-only in use); the call cache stays per test.
_SHARED_MODELS_DIR = models_dir()


@pytest.fixture(autouse=True)
def _isolated_cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own $PROCTOR_CACHE_DIR, so no test reads another's (or the user's) cache."""
    cache_dir = tmp_path / "proctor-cache"
    monkeypatch.setenv("PROCTOR_CACHE_DIR", str(cache_dir))
    monkeypatch.setenv("PROCTOR_MODELS_DIR", str(_SHARED_MODELS_DIR))
    return cache_dir


@pytest.fixture
def mock_server() -> Iterator[MockServer]:
    """A started mock server (no latency, no faults); change it with `mock_server.configure(...)`."""
    with MockServer() as server:
        yield server


# The KIEval check on the embedded model (a whole conversation round with the 0.5B in every role: 265 s
# measured next to another embedded job on 2 cores) runs when PROCTOR_PROTOCOL_EMBEDDED_TESTS=1; the
# `kieval` demo exercises the same path. The always-on embedded paths are tests/test_embedded_e2e.py,
# tests/test_local_model.py and the exam/reckon embedded checks.
_OPT_IN_EMBEDDED = ("test_kieval_embedded.py",)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    import os

    if os.environ.get("PROCTOR_PROTOCOL_EMBEDDED_TESTS") == "1":
        return
    skip = pytest.mark.skip(reason="set PROCTOR_PROTOCOL_EMBEDDED_TESTS=1 to run this embedded-model test")
    for item in items:
        if item.path.name in _OPT_IN_EMBEDDED:
            item.add_marker(skip)
