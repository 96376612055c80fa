"""Environments an agent acts in: the run's documents (Search / Lookup / Finish), a domain database, or a
user's own tools. Each gives a fresh `Toolbox` per question (`session()`), so per-question state (the
current document of Lookup) never leaks between questions."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from proctor.agents.tools import Tool, Toolbox, tool
from proctor.corpus.types import Chunk
from proctor.errors import UserError


def make_environment(spec: str, chunks: Callable[[], Sequence[Chunk]], where: str) -> Callable[[], Toolbox]:
    """`documents` (the run's corpus: `chunks()` gives its chunks, read only for this kind), a database
    (`database:<schema.yaml>`), or a user's tools (`mypkg.tools:TOOLS` or `path/to/tools.py:TOOLS`, a list
    of typed functions) -> a factory of fresh tool sessions."""
    if spec == "documents":
        from proctor.agents.environments.documents import DocumentEnvironment

        return DocumentEnvironment(list(chunks())).session
    if spec.startswith("database:"):
        from proctor.agents.environments.database import DatabaseEnvironment

        db = DatabaseEnvironment.from_schema(spec.removeprefix("database:"))
        return lambda: Toolbox(db.tools())
    from proctor.candidates.kinds import load_callable

    found = load_callable(spec, where)
    items = list(found) if isinstance(found, list | tuple) else [found]
    tools = [t if isinstance(t, Tool) else tool(t) for t in items]
    if not tools or not all(callable(t.fn) for t in tools):
        raise UserError(f"{where}: '{spec}' must be a list of typed functions (or Tool objects).")
    return lambda: Toolbox(tools)
