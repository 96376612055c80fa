"""Step 1: knowledge units. The examiner extracts units from each chunk; exact and near duplicates are
merged by embedding similarity; units carried over from an earlier run (its uncovered list) are added.
A unit is a `KnowledgeUnit` (stored as a `reckon_unit` item).

Unit form is enforced in code, not only asked for in the prompt: a unit is one sentence of at most
`reckon.unit_max_words` words. A description of several sentences is split into its sentences (each one that
carries a fact — at least `MIN_UNIT_WORDS` words — and fits the limit becomes a unit of its own); a single
sentence over the limit, or a description with no sentence that fits, is dropped. Every outcome is counted
(`unit_form`) and shown in the report.
"""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from pydantic import BaseModel, Field

from proctor.corpus.types import Chunk
from proctor.errors import UserError
from proctor.ids import content_id
from proctor.kit.context import RunContext
from proctor.kit.steps import Payload
from proctor.prompts import prompt_version, render_messages
from proctor.protocols.reckon.config import Config
from proctor.protocols.reckon.result import FormStats, UnitStats
from proctor.records import read_records

if TYPE_CHECKING:
    from proctor.embeddings.base import Embedder

UNIT_TYPES = ("factual", "conceptual", "procedural", "other")
ROLE = "reckon:units"
PROMPT = "reckon/units"
EVIDENCE_MIN_SIMILARITY = 0.3
MIN_UNIT_WORDS = 3  # a sentence shorter than this carries no fact of its own ("See below.")
_DESCRIPTION_MAX_CHARS = 600  # carried-over units (not re-formed) are cut here
FORM_OUTCOMES = ("kept", "split", "dropped_too_long", "dropped_no_fact")


def units_schema(max_units: int) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "units": {
                "type": "array",
                "maxItems": max_units,
                "items": {
                    "type": "object",
                    "properties": {
                        "type": {"type": "string", "enum": list(UNIT_TYPES)},
                        "keyword": {"type": "string"},
                        "description": {"type": "string"},
                    },
                    "required": ["type", "keyword", "description"],
                },
            }
        },
        "required": ["units"],
    }


def normalise(text: str) -> str:
    """Lowercase words only: the identity used for exact duplicates and unit ids."""
    return " ".join(re.findall(r"\w+", text.lower()))


class MergedUnit(BaseModel):
    """A duplicate folded into a kept unit."""

    unit_id: str
    keyword: str
    description: str


class KnowledgeUnit(Payload):
    """One knowledge unit: its first source chunk and all chunks that state it, the chunk sentence closest
    to it (`evidence`, for traceability and as judging context), where it came from (`origin`: corpus or
    carry_over) and the duplicates folded into it."""

    KIND: ClassVar[str] = "reckon_unit"
    unit_id: str
    type: str
    keyword: str
    description: str
    chunk_id: str | None
    chunk_ids: list[str]
    source: str | None = None
    evidence: str | None = None
    origin: str = "corpus"
    form: str = "kept"  # kept as the examiner wrote it, or "split": one sentence of a longer description
    merged: list[MergedUnit] = Field(default_factory=list)

    @property
    def text(self) -> str:
        """What is embedded for clustering and deduplication."""
        return f"{self.keyword}: {self.description}"


def make_unit_id(chunk_id: str | None, keyword: str, description: str) -> str:
    """A unit's id (not a store key): its chunk and its normalised text."""
    return f"ku_{content_id(chunk_id, normalise(keyword), normalise(description))}"


def select_chunks(ctx: RunContext[Config]) -> list[Chunk]:
    """Chunks named by `reckon.sources` (all if empty), then a seeded sample of `reckon.max_chunks`."""
    cfg = ctx.settings
    chunks: list[Chunk] = list(ctx.corpus.chunks)
    if cfg.sources:

        def wanted(c: Chunk) -> bool:
            names = (Path(c.source).name, c.source, f"{Path(c.source).name}#{c.index}")
            return any(fnmatch.fnmatch(n, p) for p in cfg.sources for n in names)

        chunks = [c for c in chunks if wanted(c)]
        if not chunks:
            names = sorted({Path(c.source).name for c in ctx.corpus.chunks})
            raise UserError(
                f"reckon.sources: the patterns {cfg.sources} match no file of the corpus "
                f"({', '.join(names[:20])}). Fix the patterns or remove `sources` to use every chunk."
            )
    if cfg.max_chunks is not None and len(chunks) > cfg.max_chunks:
        order = ctx.rng.permutation(len(chunks))[: cfg.max_chunks]
        chunks = [chunks[i] for i in sorted(int(i) for i in order)]
    return chunks


def _clean(raw: dict[str, Any], max_chars: int | None = None) -> dict[str, str] | None:
    keyword = " ".join(str(raw.get("keyword", "")).split())
    description = " ".join(str(raw.get("description", "")).split())[:max_chars]
    if not keyword or not description:
        return None
    utype = str(raw.get("type", "other")).strip().lower()
    return {"type": utype if utype in UNIT_TYPES else "other", "keyword": keyword, "description": description}


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(“*])")
_ABBREVIATION = re.compile(r"(?:^|\s)(?:[A-Z][a-z]{0,2}|[a-z]|(?:[A-Za-z]\.){2,})\.$")  # "St." "e.g." "J."


def split_sentences(text: str) -> list[str]:
    """The sentences of one line of prose (a unit description, a paragraph, a line of an answer): split
    after . ! ? before a capital, a digit, a quote or emphasis, except after an abbreviation such as "St."
    or "e.g.". The one sentence splitter of reckon (units, evidence, answers)."""
    out: list[str] = []
    for part in _SENTENCE_END.split(" ".join(text.split())):
        if out and _ABBREVIATION.search(out[-1]):
            out[-1] = f"{out[-1]} {part}"
        elif part:
            out.append(part)
    return out


def unit_form(description: str, max_words: int) -> tuple[str, list[str]]:
    """Enforce one fact per unit: (outcome, descriptions). Outcomes: "kept" (one sentence within the limit),
    "split" (several sentences: those that carry a fact and fit the limit, each a unit), "dropped_too_long"
    (nothing fits the limit), "dropped_no_fact" (no sentence of at least MIN_UNIT_WORDS words)."""
    sents = split_sentences(description)
    facts = [x for x in sents if len(x.split()) >= MIN_UNIT_WORDS]
    fitting = [x for x in facts if len(x.split()) <= max_words]
    if not facts:
        return "dropped_no_fact", []
    if not fitting:
        return "dropped_too_long", []
    if len(sents) == 1:
        return "kept", fitting
    return "split", fitting


def form_text(f: FormStats) -> str:
    """The unit-form line of the report and the summary: "units: 9 kept, 3 split (into 7), 1 dropped: too
    long"."""
    parts = [f"{f.kept} kept", f"{f.split} split (into {f.split_units})"]
    for reason, n in (("too long", f.dropped_too_long), ("no fact", f.dropped_no_fact)):
        if n:
            parts.append(f"{n} dropped: {reason}")
    return "units: " + ", ".join(parts)


class ChunkUnits(Payload):
    """The examiner's raw units for one chunk, as it wrote them (cleaned when read)."""

    KIND: ClassVar[str] = "reckon_chunk"
    chunk_id: str
    source: str
    units: list[dict[str, Any]]
    prompt_version: str


async def extract_units(
    ctx: RunContext[Config], chunks: list[Chunk]
) -> tuple[list[KnowledgeUnit], UnitStats]:
    """Examiner call per chunk (stored as `reckon_chunk` items); returns units in chunk order and stats."""
    cfg = ctx.settings
    examiner = ctx.role("examiner")
    version = prompt_version(PROMPT)
    schema = units_schema(cfg.max_units_per_chunk)

    async def extract(chunk: Chunk) -> ChunkUnits:
        messages = render_messages(PROMPT, passage=chunk.text, max_units=cfg.max_units_per_chunk)
        c = await examiner.generate(
            messages,
            json_schema=schema,
            temperature=0.0,
            seed=ctx.config.seed,
            max_tokens=cfg.unit_max_tokens,
        )
        return ChunkUnits(
            chunk_id=chunk.chunk_id, source=chunk.source, units=c.parsed["units"], prompt_version=version
        )

    outcomes = await ctx.map(
        "reckon: extracting knowledge units",
        chunks,
        extract,
        unit_id=lambda c: (c.chunk_id, c.text),
        role=ROLE,
        output=ChunkUnits,
        context=lambda c: {"chunk_id": c.chunk_id, "source": c.source},
    )
    units: list[KnowledgeUnit] = []
    form = FormStats()
    stats = UnitStats(chunks=len(chunks), max_words=cfg.unit_max_words, form=form)
    for o in outcomes:
        if o.value is None:
            stats.chunks_failed += 1
            continue
        chunk = o.unit
        for raw in o.value.units:
            u = _clean(raw) if isinstance(raw, dict) else None
            if u is None:
                stats.dropped_empty += 1
                continue
            stats.extracted += 1
            outcome, descriptions = unit_form(u["description"], cfg.unit_max_words)
            setattr(form, outcome, getattr(form, outcome) + 1)
            if outcome == "split":
                form.split_units += len(descriptions)
                form.split_sentences_dropped += len(split_sentences(u["description"])) - len(descriptions)
            for description in descriptions:
                units.append(
                    KnowledgeUnit(
                        unit_id=make_unit_id(chunk.chunk_id, u["keyword"], description),
                        type=u["type"],
                        keyword=u["keyword"],
                        description=description,
                        chunk_id=chunk.chunk_id,
                        chunk_ids=[chunk.chunk_id],
                        source=chunk.source,
                        form=outcome,
                    )
                )
    stats.formed = len(units)
    stats.form_text = form_text(form)
    return units, stats


def load_carry_over(path_str: str) -> list[KnowledgeUnit]:
    """Units from a JSONL file (one object per line: keyword, description; optional unit_id, type,
    evidence, chunk_ids, source). Blank lines and lines starting with '#' are skipped."""
    path = Path(path_str).expanduser()
    if not path.is_file():
        raise UserError(
            f"reckon.carry_over: file '{path}' not found. Give the path (absolute, or relative to the "
            f"config file's folder) of a JSONL file of units, e.g. an earlier run's "
            f"reckon_uncovered_units.jsonl."
        )
    units = []
    for rec in read_records(path, field="reckon.carry_over", format="jsonl", comments=True):
        raw = rec.data
        u = _clean(raw, _DESCRIPTION_MAX_CHARS) if isinstance(raw, dict) else None
        if u is None:
            raise UserError(
                f"reckon.carry_over: {path}, {rec.where}: each line must be a JSON object with non-empty "
                f'"keyword" and "description" fields.'
            )
        chunk_ids = raw.get("chunk_ids") or ([raw["chunk_id"]] if raw.get("chunk_id") else [])
        chunk_ids = [str(c) for c in chunk_ids]
        unit_id = str(
            raw.get("unit_id")
            or make_unit_id(chunk_ids[0] if chunk_ids else None, u["keyword"], u["description"])
        )
        units.append(
            KnowledgeUnit(
                unit_id=unit_id,
                type=u["type"],
                keyword=u["keyword"],
                description=u["description"],
                chunk_id=chunk_ids[0] if chunk_ids else None,
                chunk_ids=chunk_ids,
                source=_text_or_none(raw.get("source")),
                evidence=_text_or_none(raw.get("evidence")),
                origin="carry_over",
            )
        )
    return units


def _text_or_none(x: Any) -> str | None:
    return None if x is None else str(x)


def merge_duplicates(units: list[KnowledgeUnit], vectors: np.ndarray, threshold: float) -> list[int]:
    """Fold exact and near duplicates into the first unit they repeat; return the kept indices.

    Exact duplicates share normalised keyword and description. Near duplicates have cosine similarity
    >= `threshold` with an earlier kept unit (the most similar one wins). Similarities are computed in
    blocks so memory stays bounded on large inputs.
    """
    n = len(units)
    kept_mask = np.zeros(n, dtype=bool)
    kept: list[int] = []
    by_text: dict[str, int] = {}
    target = np.full(n, -1)
    block = 256
    for start in range(0, n, block):
        stop = min(n, start + block)
        sims = vectors[start:stop] @ vectors[:stop].T if n else np.zeros((0, 0))
        for j in range(start, stop):
            u = units[j]
            text = normalise(u.keyword) + "|" + normalise(u.description)
            if text in by_text:
                target[j] = by_text[text]
            else:
                row = np.where(kept_mask[:j], sims[j - start, :j], -np.inf)
                if j and row.size and float(row.max()) >= threshold:
                    target[j] = int(row.argmax())
            if target[j] < 0:
                kept_mask[j] = True
                kept.append(j)
                by_text[text] = j
            else:
                root = units[int(target[j])]
                root.merged.append(
                    MergedUnit(unit_id=u.unit_id, keyword=u.keyword, description=u.description)
                )
                for cid in u.chunk_ids:
                    if cid not in root.chunk_ids:
                        root.chunk_ids.append(cid)
    return kept


_STRUCTURAL = re.compile(r"^\s*(#|[-*+] |\||\d+[.)] )")


def sentences(text: str) -> list[str]:
    """Prose sentences, list items and table rows of a chunk, whitespace collapsed, emphasis dropped."""
    segments: list[str] = []
    para: list[str] = []
    for line in [*text.splitlines(), ""]:
        if not line.strip() or _STRUCTURAL.match(line):
            if para:
                segments.append(" ".join(para))
                para = []
            if line.strip() and not line.lstrip().startswith("#"):
                segments.append(line.strip())
        else:
            para.append(line.strip())
    out = []
    for seg in segments:
        for s in split_sentences(seg):
            s = " ".join(s.replace("**", "").replace("__", "").split()).strip("|- ").strip()
            if len(s.split()) >= 4:
                out.append(s)
    return out


def attach_evidence(
    units: list[KnowledgeUnit], vectors: np.ndarray, chunks: dict[str, Chunk], embedder: Embedder
) -> None:
    """Give each corpus unit the sentence of its chunk that is closest to it (cosine >= 0.3)."""
    wanted = sorted(
        {c for u in units if u.evidence is None and (c := u.chunk_id) is not None and c in chunks}
    )
    if not wanted:
        return
    sents = {cid: sentences(chunks[cid].text) for cid in wanted}
    flat = [s for cid in wanted for s in sents[cid]]
    if not flat:
        return
    sv = embedder.embed(flat)
    offset, ranges = 0, {}
    for cid in wanted:
        ranges[cid] = (offset, offset + len(sents[cid]))
        offset += len(sents[cid])
    for u, v in zip(units, vectors, strict=True):
        if u.evidence is not None or u.chunk_id is None or u.chunk_id not in ranges:
            continue
        a, b = ranges[u.chunk_id]
        if a == b:
            continue
        sims = sv[a:b] @ v
        best = int(sims.argmax())
        if float(sims[best]) >= EVIDENCE_MIN_SIMILARITY:
            u.evidence = flat[a + best]
