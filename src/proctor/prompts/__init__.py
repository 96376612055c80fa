"""The one prompt loader: Jinja2 templates shipped as files.

A prompt named `qa/generate` is `generate.system.j2` (optional) plus `generate.user.j2`, found in the
protocol's own package (`proctor/protocols/qa/prompts/`) or, for prompts shared by several protocols
(`judging/`, `candidates/`, `common/`), in this folder. `prompt_version(name)` hashes the template text
so results record which wording produced them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from functools import cache
from pathlib import Path

import jinja2

from proctor.dependencies import note_prompt
from proctor.models.types import Message

PROMPT_DIR = Path(__file__).parent
PROTOCOLS_DIR = PROMPT_DIR.parent / "protocols"


def _template_name(name: str) -> str:
    """`qa/generate.user.j2` -> `qa/prompts/generate.user.j2` when the protocol package holds it."""
    head, _, rest = name.partition("/")
    if rest and (PROTOCOLS_DIR / head / "prompts" / rest).exists():
        return f"{head}/prompts/{rest}"
    return name


class _Loader(jinja2.BaseLoader):
    """Shared prompts from this folder, protocol prompts from `protocols/<protocol>/prompts/` (the folders
    are looked up at each load, so a test can point them elsewhere)."""

    def get_source(
        self, environment: jinja2.Environment, template: str
    ) -> tuple[str, str | None, Callable[[], bool] | None]:
        path = prompt_path(template)
        if not path.is_file():
            raise jinja2.TemplateNotFound(template)
        mtime = path.stat().st_mtime_ns

        def uptodate() -> bool:
            current = prompt_path(template)
            return current == path and current.is_file() and current.stat().st_mtime_ns == mtime

        return path.read_text(encoding="utf-8"), str(path), uptodate


_env = jinja2.Environment(
    loader=_Loader(),
    undefined=jinja2.StrictUndefined,
    keep_trailing_newline=False,
    trim_blocks=True,
    lstrip_blocks=True,
    autoescape=False,  # prompts are plain text; HTML escaping happens in the report
)


def prompt_path(template: str) -> Path:
    """The file a template name refers to (protocol package first, then the shared folder)."""
    resolved = _template_name(template)
    return (PROTOCOLS_DIR if resolved != template else PROMPT_DIR) / resolved


def file_version(template: str) -> str:
    """Hash of a template file's text as it is now (re-read when the file changes)."""
    path = prompt_path(template)
    st = path.stat()
    return _file_version(path, st.st_mtime_ns, st.st_size)


@cache
def _file_version(path: Path, mtime_ns: int, size: int) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:12]


def render_text(template: str, **variables: object) -> str:
    """Render one template; the step running it records the file's version (`proctor.dependencies`), so
    a changed prompt file re-runs exactly the steps that rendered it on `--resume`."""
    note_prompt(template, file_version(template))
    return _env.get_template(template).render(**variables).strip()


def render_messages(name: str, **variables: object) -> list[Message]:
    """Render `name.system.j2` (if present) and `name.user.j2` into chat messages."""
    messages: list[Message] = []
    if prompt_path(f"{name}.system.j2").exists():
        messages.append({"role": "system", "content": render_text(f"{name}.system.j2", **variables)})
    messages.append({"role": "user", "content": render_text(f"{name}.user.j2", **variables)})
    return messages


@cache
def prompt_version(name: str) -> str:
    h = hashlib.sha256()
    for part in ("system", "user"):
        p = prompt_path(f"{name}.{part}.j2")
        if p.exists():
            h.update(p.read_bytes())
    return h.hexdigest()[:12]
