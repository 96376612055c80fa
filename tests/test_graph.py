"""The context graph: name folding and merging, edges, statistics, and a build through the kit that a
second run reuses without one extraction call."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import BaseModel, ConfigDict

from proctor.corpus.types import Chunk
from proctor.graph import (
    ContextGraph,
    Entity,
    GraphBuild,
    GraphStats,
    assemble,
    derive_edges,
    fold,
    merge_groups,
)
from proctor.kit.context import RunContext
from proctor.kit.registry import Protocol, Role, register_protocol
from proctor.kit.result import Result
from proctor.kit.shared.graph import build_context_graph
from proctor.models.scripted import register_script
from proctor.runner import run_config


def test_fold_ignores_case_spacing_edge_punctuation_and_a_leading_article() -> None:
    assert fold("  The Orrinsford   Institute, ") == fold("orrinsford institute") == "orrinsford institute"
    assert fold("Theodora") == "theodora"  # only a whole leading article goes


def test_merge_groups_joins_pairs_above_the_threshold_transitively() -> None:
    v = np.array([[1.0, 0.0], [0.99, 0.141], [0.0, 1.0], [0.97, 0.243]])
    v = v / np.linalg.norm(v, axis=1, keepdims=True)
    assert merge_groups(["a", "b", "c", "d"], v, threshold=0.95) == [0, 0, 2, 0]
    assert merge_groups(["a", "b"], None) == [0, 1]


def _entity(eid: str, *mentions: tuple[str, str]) -> Entity:
    return Entity(eid, eid.upper(), (eid.upper(),), tuple(mentions))


def test_edges_strong_for_a_shared_chunk_weak_for_a_shared_document_only() -> None:
    ents = [
        _entity("a", ("c1", "d1"), ("c2", "d1")),
        _entity("b", ("c1", "d1"), ("c2", "d1")),
        _entity("c", ("c3", "d1")),
        _entity("d", ("c4", "d2")),
    ]
    edges = {(e.a, e.b): (e.kind, e.weight) for e in derive_edges(ents)}
    assert edges == {("a", "b"): ("strong", 2), ("a", "c"): ("weak", 1), ("b", "c"): ("weak", 1)}
    g = ContextGraph("k", ents, derive_edges(ents))
    assert g.neighbours("a") == ["b", "c"] and g.neighbours("a", "strong") == ["b"]
    s = g.stats()
    assert (s.nodes, s.strong_edges, s.weak_edges, s.components, s.largest_component) == (4, 1, 2, 2, 3)
    assert s.degree_histogram == {0: 1, 2: 3} and s.hubs[0] == ("A", 2)
    assert g.find("the a") is ents[0] and g.find("zzz") is None


class _Embedder:
    """Unit vectors: both spellings of the institute point the same way, every other name its own way."""

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), len(texts) + 1))
        for i, t in enumerate(texts):
            out[i, 0 if "orrinsford" in t else i + 1] = 1.0
        return out


def test_assemble_drops_invented_names_and_merges_aliases() -> None:
    chunks = [
        Chunk("c1", "d1", "a.md", "The Orrinsford Institute stands in Teskavar.", 0, {}),
        Chunk("c2", "d1", "a.md", "Mira Holt directs the Orrinsford Inst. in the old town.", 1, {}),
    ]
    names = {"c1": ["Orrinsford Institute", "Teskavar", "Atlantis"], "c2": ["Mira Holt", "Orrinsford Inst"]}
    graph, info = assemble("k", chunks, names, _Embedder(), merge_threshold=0.9)
    assert info.names == 5 and info.names_not_in_chunk == 1 and info.merged_by_embedding == 1
    institute = graph.find("orrinsford inst")
    assert institute is not None and institute is graph.find("the Orrinsford Institute")
    assert institute.chunk_ids == ("c1", "c2") and set(institute.aliases) == {
        "Orrinsford Institute",
        "Orrinsford Inst",
    }
    assert graph.find("Atlantis") is None
    mira, tesk = graph.find("Mira Holt"), graph.find("Teskavar")
    assert mira is not None and tesk is not None
    assert graph.graph.edges[institute.entity_id, mira.entity_id]["kind"] == "strong"
    assert graph.graph.edges[mira.entity_id, tesk.entity_id]["kind"] == "weak"


# --- a build through the kit, reused by the next run ------------------------------------------------------

CALLS: list[str] = []


def _script(messages: list[dict[str, Any]], params: Any) -> str:
    text = messages[-1]["content"]
    CALLS.append(text)
    passages = re.findall(r"\[passage (\d+)\]\n(.*?)(?=\n\[passage |\Z)", text, re.S)
    out = [
        # Small models write the id as "1" or "passage2"; both are read.
        {
            "id": pid if int(pid) % 2 else f"passage{pid}",
            "entities": [*re.findall(r"[A-Z][a-z]+(?: [A-Z][a-z]+)+", body), "Atlantis"],
        }
        for pid, body in passages
    ]
    return json.dumps({"passages": out})


class _Settings(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _GraphResult(Result):
    build: GraphBuild
    stats: GraphStats


async def _run(ctx: RunContext[_Settings]) -> _GraphResult:
    graph, info = await build_context_graph(ctx, batch_size=2)
    return _GraphResult(build=info, stats=graph.stats())


@pytest.fixture
def graph_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PROCTOR_CACHE_DIR", str(tmp_path / "cache"))
    register_script("graph-entities", _script)
    register_protocol(
        Protocol("graphdemo", _Settings, (Role("examiner", "lists entities"),), _run, result=_GraphResult)
    )
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text(
        "The Orrinsford Institute stands in North Teskavar by the sea.\n\n"
        "Mira Holt directs the Orrinsford Institute and studies tidal glass.\n"
    )
    (docs / "b.md").write_text("Jon Tarn sails the Tarnvik Lines ferry from North Teskavar every day.\n")
    cfg = tmp_path / "graph.yaml"
    cfg.write_text(
        "protocol: graphdemo\n"
        "corpus: {path: docs, min_chunk_chars: 20, max_chunk_chars: 80}\n"
        "models: {m: scripted/graph-entities}\n"
        "roles: {examiner: m}\n"
    )
    return cfg


def test_build_through_the_kit_and_reuse_without_calls(graph_config: Path, tmp_path: Path) -> None:
    CALLS.clear()
    first = run_config(graph_config, out=tmp_path / "runs", show_progress=False)
    build = first.summary["build"]
    assert not build["reused"] and build["chunks"] == 3 and build["chunks_failed"] == 0
    assert build["names_not_in_chunk"] == 3  # "Atlantis", invented once per chunk
    assert (
        first.summary["stats"]["nodes"] == 5
    )  # Orrinsford Institute, North Teskavar, Mira Holt, Jon Tarn, Tarnvik Lines
    assert len(CALLS) == 2  # 3 chunks, 2 per call
    # A second run (a new run folder) on the same corpus and extraction model: the stored graph, no call.
    second = run_config(graph_config, out=tmp_path / "runs2", show_progress=False)
    assert second.summary["build"]["reused"] and second.summary["stats"] == first.summary["stats"]
    assert len(CALLS) == 2
    con = sqlite3.connect(second.run_dir / "run.sqlite")
    assert con.execute("SELECT COUNT(*) FROM model_calls").fetchone()[0] == 0


# --- knowledge paths on a hand-made graph ---------------------------------------------------------------


def _unit(*xs: float, dim: int = 16) -> np.ndarray:
    v = np.zeros(dim)
    v[: len(xs)] = xs
    return v / np.linalg.norm(v)


class _TableEmbedder:
    """Vectors from a table (text -> vector); unknown texts point nowhere in particular."""

    def __init__(self, table: dict[str, np.ndarray]) -> None:
        self.table = table

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.array([self.table.get(t, _unit(*([0.0] * 15), 1.0)) for t in texts])


def _hub_graph() -> tuple[ContextGraph, _TableEmbedder, dict[str, str]]:
    """H shares one chunk (h<i>) with each of N1..N7; N1 and N2 also share x12. Name similarity to H:
    N1 0.95, N2 0.9, N3 0.8, N4 0.7, N5 0.6, N6 and N7 0.1 (outside H's top 5)."""
    sims = {"N1": 0.95, "N2": 0.9, "N3": 0.8, "N4": 0.7, "N5": 0.6, "N6": 0.1, "N7": 0.1}
    ents = [Entity("H", "Hub", ("Hub", "The Hub"), tuple((f"h{i}", f"d{i}") for i in range(1, 8)))]
    for i, n in enumerate(sims, 1):
        extra = (("x12", "dx"),) if n in ("N1", "N2") else ()
        ents.append(Entity(n, f"Node {n}", (f"Node {n}",), ((f"h{i}", f"d{i}"), *extra)))
    table = {"Hub": _unit(1.0)}
    for i, (n, s) in enumerate(sims.items(), 2):
        table[f"Node {n}"] = _unit(s, *([0.0] * (i - 1)), float(np.sqrt(1 - s * s)))
    chunk_texts = {c: f"text of {c}" for c in [*(f"h{i}" for i in range(1, 8)), "x12"]}
    for i, c in enumerate(chunk_texts):
        table[chunk_texts[c]] = _unit(*([0.0] * (8 + i % 8)), 1.0)
    table["where is the hub?"] = table["text of h3"]  # the question is closest to chunk h3
    return ContextGraph("k", ents, derive_edges(ents)), _TableEmbedder(table), chunk_texts


def test_paths_follow_the_rules_and_reproduce_with_the_seed() -> None:
    from proctor.graph import PathSampler

    graph, emb, texts = _hub_graph()
    sampler = PathSampler(graph, emb, texts)
    hub = graph.entities["H"]
    first_hops: set[str] = set()
    for seed in range(40):
        path = sampler.sample(hub, "where is the hub?", hops=2, rng=np.random.default_rng(seed))
        ids = [s.entity_id for s in path.steps]
        assert ids[0] == "H" and path.steps[0].chunk_id == "h3"  # start: the chunk closest to the question
        assert len(ids) == len(set(ids))  # no revisits
        assert path.steps[1].drawn_from == ("N1", "N2", "N3", "N4", "N5")  # the top 5 by name similarity
        first_hops.add(ids[1])
        # The hop's chunk is the one it shares with the hub (its only chunk, or the one nearest h3 for N1/N2).
        assert path.steps[1].chunk_id.startswith("h")
        if ids[1] in ("N1", "N2"):
            assert path.stopped == "hops" and ids[2] == ("N2" if ids[1] == "N1" else "N1")
            assert path.steps[2].drawn_from == (ids[2],)
        else:
            assert path.stopped == "dead_end" and len(ids) == 2  # its only neighbour was visited
        again = sampler.sample(hub, "where is the hub?", hops=2, rng=np.random.default_rng(seed))
        assert again == path
    assert first_hops == {"N1", "N2", "N3", "N4", "N5"}  # every top-5 neighbour, never N6 or N7


def test_linking_by_alias_then_embedding_never_a_fallback() -> None:
    from proctor.graph import PathSampler

    graph, emb, texts = _hub_graph()
    emb.table["the hub building"] = _unit(0.95, 0.312)  # near "Hub"
    emb.table["a lighthouse"] = _unit(0.3, 0.954)  # far from every name
    sampler = PathSampler(graph, emb, texts)
    assert sampler.link("the hub") is graph.entities["H"]  # alias, folded
    assert sampler.link("the hub building") is graph.entities["H"]  # embedding, above the threshold
    assert sampler.link("a lighthouse") is None
