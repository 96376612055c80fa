"""The report's Jinja2 environment: autoescaping always on, strict undefined, number filters.

Every template (the page and each protocol section) is rendered through `render_template`, so all
text read from the store (model output, reasons, errors, config values) is HTML-escaped.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

from jinja2 import BaseLoader, ChoiceLoader, Environment, FileSystemLoader, StrictUndefined

TEMPLATES = Path(__file__).parent / "templates"
# A protocol's section template lives in its package: `<protocol>/report.html.j2` under this folder.
PROTOCOLS = Path(__file__).parent.parent / "protocols"
# The kit's own templates (the default section every protocol gets): `templates/<name>` under the kit.
KIT = Path(__file__).parent.parent / "kit"
DASH = "—"


def _ok(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def fmt_num(x: Any, digits: int = 3) -> str:
    """A number with `digits` decimals; integers stay integers; missing values become a dash."""
    if isinstance(x, bool):
        return str(x).lower()
    if isinstance(x, int):
        return f"{x:,}"
    if not _ok(x):
        return DASH if x is None else str(x)
    return f"{x:,.{digits}f}"


def fmt_pct(x: Any, digits: int = 1) -> str:
    """A share in [0, 1] as a percentage."""
    return f"{100 * x:.{digits}f}%" if _ok(x) else DASH


def fmt_interval(lo: Any, hi: Any, digits: int = 3, pct: bool = False) -> str:
    """`[lo, hi]`, or a dash when either bound is missing."""
    if not (_ok(lo) and _ok(hi)):
        return DASH
    if pct:
        return f"[{100 * lo:.1f}, {100 * hi:.1f}]"
    return f"[{lo:.{digits}f}, {hi:.{digits}f}]"


def fmt_usd(x: Any) -> str:
    """Dollars with enough decimals for per-call prices."""
    if not _ok(x):
        return DASH
    return f"${x:,.2f}" if abs(x) >= 100 else f"${x:,.4f}"


def fmt_time(ts: Any) -> str:
    """Epoch seconds as a UTC timestamp."""
    if not _ok(ts):
        return DASH
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def fmt_duration(seconds: Any) -> str:
    """Seconds as `1h 02m 03s` / `2m 03s` / `4.2s`."""
    if not _ok(seconds) or seconds < 0:
        return DASH
    if seconds < 60:
        return f"{seconds:.1f}s"
    m, s = divmod(round(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}h {m:02d}m {s:02d}s" if h else f"{m}m {s:02d}s"


def pretty_json(value: Any) -> str:
    """Indented JSON for display (escaped later by the template)."""
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)


def new_environment(loader: BaseLoader, **filters: Callable[..., Any]) -> Environment:
    """A Jinja2 environment as proctor's HTML needs it: autoescape unconditional (model text is untrusted,
    whatever the template's file name), strict undefined, the number and time filters, plus `filters`."""
    env = Environment(
        loader=loader,
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=False,
    )
    env.filters.update(
        num=fmt_num,
        pct=fmt_pct,
        interval=fmt_interval,
        usd=fmt_usd,
        time=fmt_time,
        duration=fmt_duration,
        pretty_json=pretty_json,
        **filters,
    )
    return env


@lru_cache(maxsize=1)
def environment() -> Environment:
    """The reports' shared environment (core templates and each protocol's)."""
    return new_environment(
        ChoiceLoader(
            [FileSystemLoader(str(TEMPLATES)), FileSystemLoader(str(PROTOCOLS)), FileSystemLoader(str(KIT))]
        )
    )


def render_template(name: str, **context: Any) -> str:
    """Render one template (`report/templates/<name>` or `protocols/<name>`) with autoescaping."""
    return environment().get_template(name).render(**context)
