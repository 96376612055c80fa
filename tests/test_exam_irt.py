"""The exam protocol's IRT step on simulated grids (the psychometrics themselves are tested elsewhere):
model choice, hierarchical components in the right order, pruning, adaptive replay, degenerate data."""

from __future__ import annotations

import itertools
import json
from typing import Any

import numpy as np
import pytest

from proctor.protocols.exam.config import IRTConfig
from proctor.protocols.exam.exam_file import ExamQuestion
from proctor.protocols.exam.grading import Pipeline
from proctor.protocols.exam.irt_step import analyse, choose_model
from proctor.psychometrics import simulate_responses

LLM = {"small": -0.8, "large": 0.8}
RETRIEVER = {"closed_book": -1.0, "bm25": 0.3, "oracle": 0.7}
ICL = {"icl@0": -0.2, "icl@1": 0.0, "icl@2": 0.2}


def _grid() -> list[Pipeline]:
    out = []
    for (llm, _), (ret, _), (icl, _) in itertools.product(LLM.items(), RETRIEVER.items(), ICL.items()):
        out.append(
            Pipeline(
                f"{llm}/{ret}/{icl}", llm, ret, 3, int(icl[-1]), {"llm": llm, "retriever": ret, "icl": icl}
            )
        )
    return out


def _exam(n: int) -> list[ExamQuestion]:
    blooms = ["remember", "understand", "analyze"]
    words = ["what", "which", "why", "when"]
    return [
        ExamQuestion(
            id=f"q{i}",
            question=f"Question {i}?",
            choices=["a", "b", "c", "d"],
            answer="A",
            answer_index=0,
            bloom=blooms[i % 3],
            question_word=words[i % 4],
            topic=f"doc{i % 5}.md",
        )
        for i in range(n)
    ]


def _analyse(*args: Any) -> dict[str, Any]:
    """The fit as stored (the artifact `exam_irt`)."""
    return analyse(*args).model_dump(mode="json")


def test_choose_model() -> None:
    cfg = IRTConfig()
    assert choose_model(cfg, 6)[0] == "1pl"
    assert choose_model(cfg, 40)[0] == "3pl"
    assert choose_model(IRTConfig(model="2pl"), 6)[0] == "2pl"


def test_analyse_simulated_grid() -> None:
    rng = np.random.default_rng(0)
    pipes = _grid()
    theta = np.array(
        [LLM[p.factors["llm"]] + RETRIEVER[p.factors["retriever"]] + ICL[p.factors["icl"]] for p in pipes]
    )
    n_items = 120
    a = rng.lognormal(0, 0.3, n_items)
    b = rng.normal(0, 1, n_items)
    m = simulate_responses(theta, a, b, 0.25, missing=0.05, rng=rng)
    cfg = IRTConfig(min_subjects_2pl=12, prune_fraction=0.1, prune_steps=2, adaptive_target_se=0.4)
    out = _analyse(cfg, pipes, _exam(n_items), m, 4, np.random.default_rng(1))
    json.dumps(out)  # JSON-ready for the store
    assert out["model"] == "3pl" and out["n_subjects"] == 18 and out["n_items"] == n_items
    est = {r["pipeline"]: r["ability"] for r in out["abilities"]}
    assert np.corrcoef([est[p.name] for p in pipes], theta)[0, 1] > 0.9
    comps = out["hierarchical"]["components"]
    assert comps["llm"]["large"] > comps["llm"]["small"]
    assert comps["retriever"]["oracle"] > comps["retriever"]["bm25"] > comps["retriever"]["closed_book"]
    assert len(out["icc"]) == 8 and len(out["icc"][0]["p"]) == len(out["theta"])
    assert set(out["information_by_bloom"]) == {"remember", "understand", "analyze"}
    steps = out["prune"]["steps"]
    assert [s["n_items"] for s in steps] == [120, 108] and steps[-1]["n_after"] == 98
    assert len(out["prune"]["kept_ids"]) == 98
    ad = out["adaptive"]
    assert len(ad["rows"]) == 18 and ad["mean_fraction"] < 0.6
    assert ad["share_within_se"] >= 0.7


@pytest.mark.parametrize("fill", [1.0, 0.0])
def test_analyse_degenerate_matrices(fill: float) -> None:
    pipes = _grid()[:6]
    m = np.full((6, 12), fill)
    m[0, 0] = np.nan
    out = _analyse(IRTConfig(prune_min_items=4), pipes, _exam(12), m, 4, np.random.default_rng(0))
    json.dumps(out)
    assert out["model"] == "1pl"
    key = "items_all_correct" if fill == 1.0 else "items_all_wrong"
    assert out[key] == 12


def test_analyse_too_little_data() -> None:
    pipes = _grid()[:3]
    m = np.full((3, 5), np.nan)
    m[0, :] = 1.0
    out = _analyse(IRTConfig(), pipes, _exam(5), m, 4, np.random.default_rng(0))
    assert "skipped" in out and "model" not in out


def test_pruning_never_goes_below_min_items() -> None:
    pipes = _grid()
    rng = np.random.default_rng(3)
    m = (rng.random((len(pipes), 8)) < 0.6).astype(float)
    out = _analyse(IRTConfig(prune_min_items=8), pipes, _exam(8), m, 4, np.random.default_rng(0))
    assert "prune" not in out
    assert any("pruning skipped" in w for w in out["warnings"])
