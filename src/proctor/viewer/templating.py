"""The viewer's Jinja2 environment: autoescaping always on (model text is untrusted and never marked
safe), strict undefined, the report's number and time filters."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from proctor.report._env import fmt_duration, fmt_interval, fmt_num, fmt_pct, fmt_time, fmt_usd, pretty_json

TEMPLATES = Path(__file__).parent / "templates"


def _qs(params: dict[str, Any]) -> str:
    return urlencode({k: v for k, v in params.items() if v not in (None, "")})


@lru_cache(maxsize=1)
def environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(str(TEMPLATES)),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        num=fmt_num,
        pct=fmt_pct,
        interval=fmt_interval,
        usd=fmt_usd,
        time=fmt_time,
        duration=fmt_duration,
        pretty_json=pretty_json,
        qs=_qs,
    )
    return env


def render(template: str, /, **context: Any) -> str:
    return environment().get_template(template).render(**context)
