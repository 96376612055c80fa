"""The document environment over the run's corpus, as in ReAct and R-Eval (Wikipedia-style), offline and
deterministic: `search(entity)` returns the first passage of the document whose title names the entity
(the title itself, a title holding the entity, or a title the entity holds with qualifiers around it:
"VIVA Media AG" finds "VIVA Media"), else refuses with "Could not find [x]. Similar: [titles]" (BM25
over titles and text); `lookup(keyword)` returns the next passage of the current document that contains
the keyword, with "(Result i/n)". A document's passages are its paragraphs, in order.

Calls that give no information — no document found, Lookup before any Search, no (more) passage with the
keyword — raise `ToolRefusal`: the model reads the same words, but the call has an error, not a result
(a PAL program sees a failed call instead of taking the hint for data; the hint is not retrieved text).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from proctor.agents.tools import Tool, Toolbox, ToolRefusal, tool
from proctor.corpus.types import Chunk
from proctor.retrieval.bm25 import BM25Retriever

SIMILAR = 5


@dataclass(frozen=True)
class Page:
    doc_id: str
    title: str
    passages: tuple[str, ...]


def _fold(s: str) -> str:
    return " ".join(re.findall(r"\w+", s.casefold()))


def pages(chunks: Sequence[Chunk]) -> list[Page]:
    """One page per document: its title (the document's, else its file name) and its paragraphs."""
    by_doc: dict[str, list[Chunk]] = {}
    for c in chunks:
        by_doc.setdefault(c.doc_id, []).append(c)
    out = []
    for doc_id, cs in by_doc.items():
        cs.sort(key=lambda c: c.index)
        title = next((str(c.metadata["title"]) for c in cs if c.metadata.get("title")), None)
        title = title or re.sub(r"[_-]+", " ", cs[0].source.rsplit("/", 1)[-1].rsplit(".", 1)[0])
        paras = [p.strip() for c in cs for p in re.split(r"\n\s*\n", c.text) if p.strip()]
        # A heading alone is not a passage: Search returns the first paragraph with content.
        paras = [p for p in paras if not (p.startswith("#") and "\n" not in p)] or paras
        out.append(Page(doc_id, title, tuple(paras)))
    return out


class DocumentEnvironment:
    name = "documents"

    def __init__(self, chunks: Sequence[Chunk], *, max_result_chars: int = 1500) -> None:
        self.pages = pages(chunks)
        self.max_result_chars = max_result_chars
        # BM25 over "title + text" of each page, for "Similar:" suggestions.
        docs = [Chunk(p.doc_id, p.doc_id, p.title, f"{p.title}\n{' '.join(p.passages)}") for p in self.pages]
        self._bm25 = BM25Retriever(docs)

    def find(self, entity: str) -> Page | None:
        """The page titled `entity` (case, punctuation ignored), else one whose title contains it whole."""
        want = _fold(entity)
        if not want:
            return None
        for p in self.pages:
            if _fold(p.title) == want:
                return p
        hits = [p for p in self.pages if re.search(rf"\b{re.escape(want)}\b", _fold(p.title))]
        if hits:
            return min(hits, key=lambda p: len(p.title))
        # The entity holds a title whole with qualifiers around it ("VIVA Media AG", "the band Muse"): the
        # longest such title covering at least half of the entity's words.
        words = len(want.split())
        held = [
            p
            for p in self.pages
            if (t := _fold(p.title))
            and 2 * len(t.split()) >= words
            and re.search(rf"\b{re.escape(t)}\b", want)
        ]
        return max(held, key=lambda p: len(_fold(p.title))) if held else None

    def similar(self, entity: str) -> list[str]:
        scores = self._bm25.scores(entity)
        order = np.argsort(-scores, kind="stable")[:SIMILAR]
        return [self.pages[int(i)].title for i in order if scores[int(i)] > 0]

    def session(self) -> Toolbox:
        """Fresh tools for one question (Lookup's state starts empty)."""
        state: dict[str, object] = {"page": None, "keyword": None, "hits": [], "next": 0}

        def search(entity: str) -> str:
            """Search for a document by the entity it is about; returns its first passage.

            Args:
                entity: the name of the entity (a title)
            """
            page = self.find(entity)
            if page is None:
                similar = self.similar(entity)
                state.update(page=None, keyword=None, hits=[], next=0)
                if similar:
                    raise ToolRefusal(
                        f"Could not find [{entity}]. Similar: {similar}. Search one of these titles."
                    )
                raise ToolRefusal(f"Could not find [{entity}]. Search another name.")
            state.update(page=page, keyword=None, hits=[], next=0)
            return page.passages[0] if page.passages else "(empty document)"

        def lookup(keyword: str) -> str:
            """Return the next passage containing the keyword in the document the last Search found.

            Args:
                keyword: a word or phrase to find in the current document
            """
            page = state["page"]
            if not isinstance(page, Page):
                raise ToolRefusal(
                    "No current document: Search for an entity first; Lookup reads in the document found."
                )
            if state["keyword"] != _fold(keyword):
                want = _fold(keyword)
                state.update(
                    keyword=want, hits=[p for p in page.passages if want and want in _fold(p)], next=0
                )
            hits = state["hits"]
            assert isinstance(hits, list)
            i = int(state["next"])  # type: ignore[call-overload]
            if not hits:
                raise ToolRefusal(f"No passage of [{page.title}] contains [{keyword}].")
            if i >= len(hits):
                raise ToolRefusal("No more results.")
            state["next"] = i + 1
            return f"(Result {i + 1} / {len(hits)}) {hits[i]}"

        tools: list[Tool] = [tool(search, name="Search"), tool(lookup, name="Lookup")]
        return Toolbox(tools, max_result_chars=self.max_result_chars)
