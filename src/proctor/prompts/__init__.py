"""The one prompt loader: Jinja2 templates shipped as files, one folder per protocol.

A prompt named `qa/generate` is `qa/generate.system.j2` (optional) plus `qa/generate.user.j2`.
`prompt_version(name)` hashes the template text so results record which wording produced them.
"""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path

import jinja2

from proctor.models.types import Message

PROMPT_DIR = Path(__file__).parent

_env = jinja2.Environment(
    loader=jinja2.FileSystemLoader(str(PROMPT_DIR)),
    undefined=jinja2.StrictUndefined,
    keep_trailing_newline=False,
    trim_blocks=True,
    lstrip_blocks=True,
    autoescape=False,  # prompts are plain text; HTML escaping happens in the report
)


def render_text(template: str, **variables: object) -> str:
    return _env.get_template(template).render(**variables).strip()


def render_messages(name: str, **variables: object) -> list[Message]:
    """Render `name.system.j2` (if present) and `name.user.j2` into chat messages."""
    messages: list[Message] = []
    if (PROMPT_DIR / f"{name}.system.j2").exists():
        messages.append({"role": "system", "content": render_text(f"{name}.system.j2", **variables)})
    messages.append({"role": "user", "content": render_text(f"{name}.user.j2", **variables)})
    return messages


@cache
def prompt_version(name: str) -> str:
    h = hashlib.sha256()
    for part in ("system", "user"):
        p = PROMPT_DIR / f"{name}.{part}.j2"
        if p.exists():
            h.update(p.read_bytes())
    return h.hexdigest()[:12]
