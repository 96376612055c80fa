"""Protocol sections of the report: protocol name -> renderer of an HTML fragment.

A protocol's section lives in its own package: `proctor.protocols.<protocol>.report` with a
`render(run: Run) -> str` function (the run read through `proctor.load_run`) and its autoescaping
template `protocols/<protocol>/report.html.j2`.
A protocol without one gets the kit's default section (headline estimates, item tables by kind,
errors by cause), so a new protocol has a useful report before it writes report code.
`register_section` overrides the lookup from outside the package (tests, plugins).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from proctor.kit.record import Run

SectionRenderer = Callable[[Run], str]

SECTIONS: dict[str, SectionRenderer] = {}


def register_section(protocol: str) -> Callable[[SectionRenderer], SectionRenderer]:
    """Decorator registering `fn` as the report section of `protocol` (replacing any previous one)."""

    def deco(fn: SectionRenderer) -> SectionRenderer:
        SECTIONS[protocol] = fn
        return fn

    return deco


def section_for(protocol: str) -> SectionRenderer:
    """The registered renderer, else `proctor.protocols.<protocol>.report.render`, else the default."""
    if protocol in SECTIONS:
        return SECTIONS[protocol]
    from proctor.kit.default_report import render_default_section

    if not protocol.isidentifier():
        return render_default_section
    name = f"proctor.protocols.{protocol}.report"
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name is not None and name.startswith(e.name):
            return render_default_section
        raise
    renderer: SectionRenderer = getattr(module, "render", render_default_section)
    SECTIONS[protocol] = renderer
    return renderer
