"""Shared fixtures: an isolated call cache per test and the in-process mock OpenAI-compatible server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from proctor.testing.mock_server import MockServer


@pytest.fixture(autouse=True)
def _isolated_cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own $PROCTOR_CACHE_DIR, so no test reads another's (or the user's) cache."""
    cache_dir = tmp_path / "proctor-cache"
    monkeypatch.setenv("PROCTOR_CACHE_DIR", str(cache_dir))
    return cache_dir


@pytest.fixture
def mock_server() -> Iterator[MockServer]:
    """A started mock server (no latency, no faults); change it with `mock_server.configure(...)`."""
    with MockServer() as server:
        yield server
