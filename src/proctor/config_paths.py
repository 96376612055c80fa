"""File paths inside a run config resolve against the config file's folder, wherever proctor is run
from — the corpus, a seed-question file, a label file, an exam file alike. `load_config` sets the
folder while it validates; configs built in code (no file) keep paths relative to the working folder."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator

_config_dir: contextvars.ContextVar[Path | None] = contextvars.ContextVar("proctor_config_dir", default=None)


@contextlib.contextmanager
def config_dir(folder: Path) -> Iterator[None]:
    token = _config_dir.set(folder)
    try:
        yield
    finally:
        _config_dir.reset(token)


def _resolve(value: Path | str) -> Path:
    path = Path(value).expanduser()
    base = _config_dir.get()
    if base is not None and not path.is_absolute():
        path = (base / path).resolve()
    return path


def _resolve_str(value: str) -> str:
    return str(_resolve(value))


ConfigPath = Annotated[Path, AfterValidator(_resolve)]
# The same for fields kept as text (they are written into JSON artifacts as given, resolved).
ConfigFile = Annotated[str, AfterValidator(_resolve_str)]
