"""RECKON next to the per-unit baseline with controlled candidates (issue 33, acceptance 1).

`bench/reckon_controlled.yaml` holds the run: a corpus of ten documents, the embedded 1.5B as examiner and
judge, the default one-call judging and the per-unit judge-with-reference baseline on the same units. Three
candidates, the 1.5B each, differ only in the documents in their context:

* ``closed-book`` — no documents (the config's plain LLM candidate);
* ``half``        — documents 1-5 (sorted file names);
* ``full``        — all ten documents.

As in `bench/exam_guessability.py`, the documents are given whole, as passages of the protocol's own answer
prompts: here through the core `Candidate` with a retriever that hands over the fixed documents, wrapped as
a Python candidate (`proctor.evaluate` takes the object). RECKON's cluster answers go through RECKON's own
answer step (`answer_cluster_question`, its prompt and reply budget) and the baseline's answers through
`Candidate.answer`, exactly as for the closed-book candidate, so only the passages differ. Every call goes
through the one model-call path and is recorded in the run's store.

For each candidate: RECKON's accuracy (correct / judged) and the baseline's on all units and on the units
both judged, Wilson intervals; and by document half (units from documents 1-5 vs 6-10). Writes
bench/results/reckon_controlled.json and prints the table. From the repository root:

    nice -n 10 .venv/bin/python bench/reckon_controlled.py
    nice -n 10 .venv/bin/python bench/reckon_controlled.py --set reckon.max_chunks=6   # smaller

Everything goes through the call cache, so a second run costs no model calls.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from proctor import evaluate
from proctor.candidates import Candidate
from proctor.config import CandidateConfig, RunConfig, load_config
from proctor.corpus.types import Chunk, ScoredChunk
from proctor.estimates import Estimate
from proctor.models.base import Model
from proctor.prompts import render_messages
from proctor.protocols.reckon.candidates import PROMPT as CLUSTER_PROMPT
from proctor.protocols.reckon.candidates import answer_cluster_question
from proctor.protocols.reckon.result import ReckonItem
from proctor.protocols.reckon.units import KnowledgeUnit
from proctor.runner import build_models

HERE = Path(__file__).resolve().parent
CONFIG = HERE / "reckon_controlled.yaml"
CANDIDATE_MODEL = "qwen-1.5b-long"  # the config's model for the candidates (room for all documents)


@dataclass(frozen=True)
class FixedPassages:
    """A retriever that always hands over the same whole documents (a candidate's context)."""

    chunks: tuple[Chunk, ...]
    kind: str = "fixed"

    def retrieve(self, query: str, k: int, *, gold_ids: Any = None) -> list[ScoredChunk]:
        return [ScoredChunk(c, 1.0) for c in self.chunks[:k]]


class DocumentsInContext:
    """The 1.5B with fixed documents in its context, as a Python candidate: a RECKON cluster question (the
    protocol hands a Python candidate its rendered closed-book prompt as `conversation`) is answered by
    RECKON's own answer step with the documents as passages; a baseline question (no conversation) by the
    core `Candidate.answer` with them."""

    def __init__(
        self, model: Model, docs: list[Path], *, max_tokens: int, cluster_max_tokens: int, seed: int
    ) -> None:
        chunks = tuple(
            Chunk(chunk_id=f"doc:{p.name}", doc_id=p.name, source=str(p), text=f"[{p.name}]\n{p.read_text()}")
            for p in docs
        )
        passages = FixedPassages(chunks)
        self.names = [p.name for p in docs]
        self.single = Candidate(
            "docs", model, retriever=passages, k=len(chunks), max_tokens=max_tokens, seed=seed
        )
        self.cluster = Candidate(
            "docs", model, retriever=passages, k=len(chunks), max_tokens=cluster_max_tokens, seed=seed
        )

    async def answer(self, question: str, conversation: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        if conversation:
            asked = question.removeprefix("Question: ")
            if render_messages(CLUSTER_PROMPT, question=asked, context=[]) != conversation:
                raise ValueError("not RECKON's closed-book cluster prompt; cannot put the documents in it")
            text, _ = await answer_cluster_question(self.cluster, asked, [])
        else:
            text = (await self.single.answer(question)).text
        return {"text": text, "contexts": self.names}


def with_candidates(cfg: RunConfig, docs: list[Path]) -> RunConfig:
    """The config plus the half and full candidates (same model, reply budgets and seed as closed-book)."""
    closed = cfg.candidates[0]
    model = build_models(cfg)[CANDIDATE_MODEL]
    budget = {
        "max_tokens": closed.max_tokens,
        "cluster_max_tokens": cfg.settings.answer_max_tokens,  # type: ignore[union-attr]
        "seed": cfg.seed,
    }
    extra = [
        CandidateConfig(name="half", python=DocumentsInContext(model, docs[:5], **budget)),
        CandidateConfig(name="full", python=DocumentsInContext(model, docs, **budget)),
    ]
    return cfg.model_copy(update={"candidates": [closed, *extra]})


def summary(items: list[ReckonItem]) -> dict[str, Any]:
    """RECKON's accuracy (correct / judged), the baseline's (on every unit it scored) and both on the units
    both judged."""
    judged = [it for it in items if it.status in ("correct", "incorrect")]
    base = [s for it in items if (s := it.scores.get("judge_with_reference")) is not None]
    both = [it for it in judged if it.scores.get("judge_with_reference") is not None]
    return {
        "units": len(items),
        "uncovered": sum(it.status == "uncovered" for it in items),
        "errors": sum(it.status == "error" for it in items),
        "reckon": Estimate.proportion(sum(it.status == "correct" for it in judged), len(judged)).model_dump(),
        "baseline": Estimate.proportion(int(sum(base)), len(base)).model_dump(),
        "both_judged": {
            "reckon": Estimate.proportion(sum(it.status == "correct" for it in both), len(both)).model_dump(),
            "baseline": Estimate.proportion(
                int(sum(it.scores["judge_with_reference"] or 0 for it in both)), len(both)
            ).model_dump(),
        },
    }


def fmt(e: dict[str, Any]) -> str:
    if e["value"] is None:
        return "—"
    return f"{e['value']:.2f} [{e['lo']:.2f}, {e['hi']:.2f}] ({e['k']}/{e['n']})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", type=Path, default=CONFIG)
    ap.add_argument("--set", dest="overrides", action="append", default=[], help="KEY=VALUE, as proctor run")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "reckon_controlled.json")
    ap.add_argument("--runs", type=Path, default=HERE / "runs")
    ap.add_argument("--resume", action="store_true", help="continue the latest run of this config")
    args = ap.parse_args()

    cfg = load_config(args.config, args.overrides)
    assert cfg.corpus.path is not None, "the config names its corpus folder"
    corpus = Path(cfg.corpus.path)
    docs = sorted((p for p in corpus.iterdir() if p.is_file()), key=lambda p: p.name)
    first_half = {p.name for p in docs[:5]}
    t0 = time.monotonic()
    run = evaluate(with_candidates(cfg, docs), out=args.runs, resume=args.resume)
    seconds = time.monotonic() - t0

    units = {u.unit_id: u for _, u in run.payloads(KnowledgeUnit)}
    items = [it for _, it in run.payloads(ReckonItem)]

    def half_of(it: ReckonItem) -> str:
        source = units[it.unit_id].source or ""
        return "docs_1_5" if Path(source).name in first_half else "docs_6_10"

    names = [c.name for c in cfg.candidates] + ["half", "full"]
    table = {
        name: {
            "all": summary(mine := [it for it in items if it.candidate == name]),
            "docs_1_5": summary([it for it in mine if half_of(it) == "docs_1_5"]),
            "docs_6_10": summary([it for it in mine if half_of(it) == "docs_6_10"]),
        }
        for name in names
    }
    results = json.loads((run.folder / "results.json").read_text())
    report = {
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "load_average_at_end": os.getloadavg(),
        },
        "config": str(args.config.relative_to(HERE.parent))
        if args.config.is_relative_to(HERE.parent)
        else str(args.config),
        "overrides": args.overrides,
        "run_dir": str(run.folder),
        "seconds": round(seconds),
        "units": len(units),
        "units_by_half": {
            h: sum(
                1 for u in units.values() if (Path(u.source or "").name in first_half) == (h == "docs_1_5")
            )
            for h in ("docs_1_5", "docs_6_10")
        },
        "documents_seen_by_half": sorted(first_half),
        "candidates": table,
        "cost": results.get("reckon", {}).get("cost"),
        "items": [
            {
                "candidate": it.candidate,
                "unit_id": it.unit_id,
                "half": half_of(it),
                "keyword": it.keyword,
                "status": it.status,
                "stage": it.stage,
                "round": it.round,
                "baseline": it.scores.get("judge_with_reference"),
            }
            for it in items
        ],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1))
    print(f"\n{len(units)} units ({report['units_by_half']}), {seconds / 60:.0f} min; run {run.folder}\n")
    print("| candidate | units | RECKON accuracy | baseline accuracy | both judged: RECKON / baseline |")
    print("|---|---|---|---|---|")
    for name in names:
        for part in ("all", "docs_1_5", "docs_6_10"):
            s = table[name][part]
            print(
                f"| {name}, {part.replace('_', ' ')} | {s['units']} ({s['uncovered']} uncovered) | "
                f"{fmt(s['reckon'])} | {fmt(s['baseline'])} | {fmt(s['both_judged']['reckon'])} / "
                f"{fmt(s['both_judged']['baseline'])} |"
            )
    print(f"\nwritten {args.out}")


if __name__ == "__main__":
    main()
