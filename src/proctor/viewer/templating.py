"""The viewer's Jinja2 environment: autoescaping always on (model text is untrusted and never marked
safe), strict undefined, the report's number and time filters. The report's shared templates are
reachable as `report/<name>` (an agent trajectory is rendered by `report/_traces.html.j2` in both)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from jinja2 import ChoiceLoader, Environment, FileSystemLoader, PrefixLoader

from proctor.report._env import TEMPLATES as REPORT_TEMPLATES
from proctor.report._env import new_environment

TEMPLATES = Path(__file__).parent / "templates"


def _qs(params: dict[str, Any]) -> str:
    return urlencode({k: v for k, v in params.items() if v not in (None, "")})


@lru_cache(maxsize=1)
def environment() -> Environment:
    loader = ChoiceLoader(
        [FileSystemLoader(str(TEMPLATES)), PrefixLoader({"report": FileSystemLoader(str(REPORT_TEMPLATES))})]
    )
    return new_environment(loader, qs=_qs)


def render(template: str, /, **context: Any) -> str:
    return environment().get_template(template).render(**context)
