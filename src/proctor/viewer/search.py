"""Full-text search in the item browser: the user's words as an FTS5 query over the run's side index
(`proctor.store.index`, which builds and refreshes `viewer.sqlite`; `RunRecord.attach_index` reads it).
"""

from __future__ import annotations

import re

from proctor.store.index import INDEX_FILE, ensure_index, store_stamp

__all__ = ["INDEX_FILE", "ensure_index", "fts_query", "store_stamp"]

_TOKEN = re.compile(r"\w+", re.UNICODE)


def fts_query(text: str) -> str | None:
    """The user's words as an FTS5 query: every word must occur (a prefix match for the last one); FTS
    syntax in the input is never interpreted."""
    words = _TOKEN.findall(text)
    if not words:
        return None
    quoted = [f'"{w}"' for w in words]
    quoted[-1] += "*"
    return " ".join(quoted)
