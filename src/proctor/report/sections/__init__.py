"""Protocol sections of the report: protocol name -> renderer of an HTML fragment.

A renderer takes the run store and returns HTML produced by its own autoescaping template
(`proctor.report._env.render_template`), never by string concatenation of store text. To add a
protocol, write `sections/<protocol>.py` with a renderer and its template
`templates/section_<protocol>.html.j2`; `section_for` finds it by name (module
`proctor.report.sections.<protocol>` with a `render(store) -> str` function), or call
`register_section` from outside the package.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from proctor.report.sections.qa import render_qa_section
from proctor.store import RunStore

SectionRenderer = Callable[[RunStore], str]

SECTIONS: dict[str, SectionRenderer] = {
    "qa": render_qa_section,
}


def register_section(protocol: str) -> Callable[[SectionRenderer], SectionRenderer]:
    """Decorator registering `fn` as the report section of `protocol` (replacing any previous one)."""

    def deco(fn: SectionRenderer) -> SectionRenderer:
        SECTIONS[protocol] = fn
        return fn

    return deco


def section_for(protocol: str) -> SectionRenderer | None:
    """The registered renderer, else `proctor.report.sections.<protocol>.render` if that module exists."""
    if protocol in SECTIONS:
        return SECTIONS[protocol]
    if not protocol.isidentifier():
        return None
    try:
        module = importlib.import_module(f"proctor.report.sections.{protocol}")
    except ModuleNotFoundError as e:
        if e.name == f"proctor.report.sections.{protocol}":
            return None
        raise
    renderer: SectionRenderer | None = getattr(module, "render", None)
    if renderer is not None:
        SECTIONS[protocol] = renderer
    return renderer
