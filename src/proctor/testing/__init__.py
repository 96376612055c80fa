"""Test helpers shipped with proctor: a mock OpenAI-compatible server (`proctor.testing.mock_server`).

Names are loaded lazily so that `python -m proctor.testing.mock_server` runs the module only once.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["MockConfig", "MockServer", "RecordedRequest", "serve_mock"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("proctor.testing.mock_server"), name)
    raise AttributeError(f"module 'proctor.testing' has no attribute {name!r}")
