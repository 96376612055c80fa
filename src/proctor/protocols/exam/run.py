"""The exam protocol's stages: generate -> filter and assemble -> label -> grade the grid -> metrics -> IRT.

Store layout (what the report reads): items `exam_draft` (one per examiner call), `exam_labels` (one per
label batch), `exam_question` (the exam, in order), `exam_response` (one per pipeline and question);
artifacts `exam_stats`, `exam_baselines`, `exam_pipelines`, `exam_breakdowns`, `exam_irt`; metrics
`accuracy` and `irt.ability` per pipeline and `exam.baseline.*` per exam.
"""

from __future__ import annotations

import copy
import logging
import math
from collections import Counter
from typing import Any

from proctor.errors import UserError
from proctor.estimates import Estimate
from proctor.kit.context import RunContext, successes
from proctor.protocols.exam import generation
from proctor.protocols.exam.assemble import assemble_exam
from proctor.protocols.exam.config import Config
from proctor.protocols.exam.exam_file import read_exam, write_exam
from proctor.protocols.exam.filters import Embeddings
from proctor.protocols.exam.grading import ExamResponse, Pipeline, Sitting, build_pipelines, grade
from proctor.protocols.exam.guessability import (
    closed_book_accuracy,
    filters_guessable,
    guess,
    guessability_step,
    is_guessable,
)
from proctor.protocols.exam.labels import label_exam
from proctor.protocols.exam.stats import bias_baselines, distribution, max_baseline_gap
from proctor.kit.steps import Outcome

log = logging.getLogger("proctor")
BREAKDOWNS = ("bloom", "question_word", "topic")


async def build_exam(ctx: RunContext[Config], cfg: Config) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Generate (or read) the exam; returns it with its statistics."""
    if cfg.exam_file is not None:
        exam = read_exam(cfg.exam_file)
        stats: dict[str, Any] = {"source": str(cfg.exam_file), "kept": len(exam)}
        missing = [q for q in exam if not q.get("bloom") or not q.get("question_word")]
        if missing:
            stats["labels"] = await label_exam(
                ctx, missing, use_examiner=cfg.labels == "examiner", batch_size=cfg.label_batch_size
            )
        for q in exam:
            q.setdefault("topic", (q.get("source") or "unknown"))
        return exam, stats
    exam, stats = await generate_exam(ctx, cfg)
    stats["labels"] = await label_exam(
        ctx, exam, use_examiner=cfg.labels == "examiner", batch_size=cfg.label_batch_size
    )
    return exam, stats


async def generate_exam(ctx: RunContext[Config], cfg: Config) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Generate, filter and assemble, in rounds while `target_questions` is not met."""
    chunks = generation.chunk_order(ctx, cfg.chunk_sampling, cfg.topic_clusters)
    # Every assembly starts from the same generator state, so the exam of a round does not depend on
    # how many rounds came before it (and one round gives the same exam as before rounds existed).
    rng_state = copy.deepcopy(ctx.rng.bit_generator.state)
    emb = Embeddings(ctx.embedder) if ctx.config.embedder else None
    sources = {c.chunk_id: c.text for c in ctx.corpus.chunks}
    asked, cap = cfg.num_questions, cfg.question_cap()
    rounds: list[dict[str, int]] = []
    while True:
        plan = generation.plan_generation(ctx, cfg, chunks, asked)
        label = "writing exam questions" + (f" (round {len(rounds) + 1})" if rounds else "")
        drafts, stats = generation.drafts_from(await generation.run_generation(ctx, plan, label))
        ctx.rng.bit_generator.state = copy.deepcopy(rng_state)
        exam, assembly = assemble_exam(
            drafts,
            cfg,
            emb,
            sources,
            ctx.rng,
            generator=ctx.role("examiner").spec,
            prompt_version=generation.generation_prompt_version(),
            example_passage=generation.example_passage(),
        )
        rounds.append({"asked": asked, "generated": stats["generated"], "kept": len(exam)})
        if cfg.target_questions is not None and filters_guessable(ctx) and exam:
            # The target counts items that also pass the guessability filter, measured per round (each
            # item once: later rounds and the final step read the stored answers).
            guesses = await guess(ctx, exam)
            dropped = sum(1 for q in exam if is_guessable(guesses[q["id"]], cfg.max_guessability or 0.0))
            rounds[-1].update(kept=len(exam) - dropped, guessable=dropped)
        nxt = _next_round_size(cfg, rounds, cap)
        if nxt is None:
            break
        log.info(
            "exam round %d: %d asked, %d kept, short of target_questions %d; asking %d in all",
            len(rounds),
            asked,
            len(exam),
            cfg.target_questions,
            nxt,
        )
        asked = nxt
    _supersede(ctx, "exam_draft", {call.key for call in plan})
    stats.update(assembly)
    if cfg.target_questions is not None:
        stats["rounds"] = rounds
        if len(exam) < cfg.target_questions:
            stats["target_missed"] = (
                f"{len(exam)} questions kept, short of target_questions {cfg.target_questions}, after "
                f"{asked} asked (max_questions {cap})"
            )
    return exam, stats


def _next_round_size(cfg: Config, rounds: list[dict[str, int]], cap: int) -> int | None:
    """Questions to ask in all in the next generation round, or None when generation is done: the
    target is met, the cap is reached, or the last round produced no new question (e.g. the examiner
    fails). The shortfall is divided by the keep rate so far, plus 10 % headroom, in whole calls."""
    last = rounds[-1]
    if cfg.target_questions is None or last["kept"] >= cfg.target_questions or last["asked"] >= cap:
        return None
    if last["generated"] == 0 or (len(rounds) > 1 and last["generated"] <= rounds[-2]["generated"]):
        return None
    rate = max(last["kept"] / last["asked"], 0.02)
    more = math.ceil((cfg.target_questions - last["kept"]) / rate * 1.1)
    per = cfg.questions_per_call
    return min(cap, math.ceil((last["asked"] + more) / per) * per)


def _supersede(ctx: RunContext[Config], kind: str, current: set[str]) -> None:
    """Items of an earlier state of this run (e.g. the exam before a resume completed it) stay in the
    store for the record but are marked `superseded`, so the report and exports show the current exam."""
    for it in ctx.store.items(kind):
        if it["key"] not in current and it["status"] != "superseded":
            data = it["data"] if isinstance(it["data"], dict) else {}
            ctx.store.put_item(
                it["key"], kind, {**data, "superseded_status": it["status"]}, status="superseded"
            )


def _rate(k: int, n: int) -> dict[str, Any]:
    return Estimate.proportion(k, n).model_dump()


def _metrics(
    ctx: RunContext[Config],
    pipelines: list[Pipeline],
    exam: list[dict[str, Any]],
    responses: list[Outcome[Sitting, ExamResponse]],
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Accuracy per pipeline (Wilson 95%) and per Bloom level, question word and topic."""
    by_id = {q["id"]: q for q in exam}
    per: dict[str, dict[str, Any]] = {}
    breakdowns: dict[str, dict[str, dict[str, Any]]] = {b: {} for b in BREAKDOWNS}
    for p in pipelines:
        mine = [o for o in responses if o.unit.pipeline.name == p.name]
        scored = [o.value for o in mine if o.value is not None]
        acc = _rate(sum(1 for r in scored if r.correct), len(scored))
        ctx.store.put_metric("accuracy", p.name, acc["value"], lo=acc["lo"], hi=acc["hi"], n=acc["n"])
        per[p.name] = {
            **p.as_dict(),
            "accuracy": acc,
            "answered": len(scored),
            "errors": dict(Counter(o.failure.cause for o in mine if o.failure is not None)),
            "methods": dict(Counter(r.method for r in scored)),
        }
        for b in BREAKDOWNS:
            groups: dict[str, list[bool]] = {}
            for r in scored:
                level = str(by_id[r.question_id].get(b) or "unknown")
                groups.setdefault(level, []).append(bool(r.correct))
            breakdowns[b][p.name] = {g: _rate(sum(v), len(v)) for g, v in sorted(groups.items())}
    return per, breakdowns


def _table(per: dict[str, Any], irt: dict[str, Any]) -> list[dict[str, str]]:
    abil = {a["pipeline"]: a for a in irt.get("abilities", [])}
    rows = []
    for name, r in per.items():
        a = r["accuracy"]
        acc = "—" if a["value"] is None else f"{a['value']:.2f} [{a['lo']:.2f}, {a['hi']:.2f}] n={a['n']}"
        ab = abil.get(name)
        ability = "—" if not ab or ab["ability"] is None else f"{ab['ability']:+.2f} ± {ab['se'] or 0:.2f}"
        rows.append(
            {
                "pipeline": name,
                "accuracy [95% CI]": acc,
                f"ability ({irt.get('model', 'IRT')})": ability,
                "selection": ", ".join(f"{k} {v}" for k, v in sorted(r["methods"].items())) or "—",
                "errors": str(sum(r["errors"].values())),
            }
        )
    return rows


async def run(ctx: RunContext[Config]) -> dict[str, Any]:
    cfg = ctx.settings
    pipelines = build_pipelines(ctx, cfg)  # config mistakes surface before any model call
    if cfg.exam_file is None and cfg.chunk_sampling == "clusters" and not ctx.config.embedder:
        raise UserError(
            "exam.chunk_sampling: clusters groups chunks by their embeddings, but the config has no "
            "`embedder`. Add one (e.g. `embedder: local/all-minilm-l6-v2`) or use chunk_sampling: spread."
        )
    exam, stats = await build_exam(ctx, cfg)
    exam, guesses = await guessability_step(ctx, exam, stats)
    for q in exam:
        ctx.store.put_item(q["id"], "exam_question", q)
    _supersede(ctx, "exam_question", {q["id"] for q in exam})
    write_exam(ctx.run_dir / "exam.jsonl", exam)
    baselines = bias_baselines(exam)
    if guesses and (cb := closed_book_accuracy(exam, guesses))["n"]:
        baselines["closed_book_examiner"] = cb
    stats["bloom"] = distribution(exam, "bloom")
    stats["question_word"] = distribution(exam, "question_word")
    stats["topic"] = distribution(exam, "topic")
    ctx.store.put_artifact("exam_stats", stats)
    ctx.store.put_artifact("exam_baselines", baselines)
    ctx.store.put_artifact("exam_pipelines", [p.as_dict() for p in pipelines])
    for name in ("best_fixed_letter", "always_longest", "always_shortest", "closed_book_examiner"):
        b = baselines.get(name)
        if b:
            ctx.store.put_metric(
                f"exam.baseline.{name}", "exam", b["value"], lo=b["lo"], hi=b["hi"], n=b["n"]
            )
    warnings: list[str] = []
    if not exam:
        warnings.append("no question survived generation and filtering; see exam statistics in the report")
    if stats.get("target_missed"):
        warnings.append(f"exam: {stats['target_missed']}")
    if not pipelines:
        warnings.append(
            "no pipeline to grade (exam.grid.llms and candidates are empty): only the exam was written"
        )
    responses = await grade(ctx, pipelines, exam) if exam and pipelines else []
    _supersede(ctx, "exam_response", {o.key for o in responses})
    per, breakdowns = _metrics(ctx, pipelines, exam, responses)
    ctx.store.put_artifact("exam_breakdowns", breakdowns)
    irt: dict[str, Any] = {}
    if cfg.irt.enabled and exam and pipelines:
        from proctor.protocols.exam.irt_step import analyse, response_matrix

        n_options = max(len(q["choices"]) for q in exam)
        irt = analyse(
            cfg.irt,
            pipelines,
            exam,
            response_matrix(pipelines, exam, successes(responses)),
            n_options,
            ctx.rng,
        )
        for a in irt.get("abilities", []):
            ctx.store.put_metric(
                "irt.ability",
                a["pipeline"],
                a["ability"],
                lo=None if a["se"] is None else a["ability"] - 1.96 * a["se"],
                hi=None if a["se"] is None else a["ability"] + 1.96 * a["se"],
            )
        kept_ids = (irt.get("prune") or {}).get("kept_ids")
        if kept_ids:
            keep = set(kept_ids)
            write_exam(ctx.run_dir / "exam_pruned.jsonl", [q for q in exam if q["id"] in keep])
        warnings += [f"IRT: {w}" for w in irt.get("warnings", [])]
        if irt.get("skipped"):
            warnings.append(f"IRT skipped: {irt['skipped']}")
    ctx.store.put_artifact("exam_irt", irt)
    gap = max_baseline_gap(baselines)
    if gap is not None and len(exam) >= 40 and gap > 0.05:
        warnings.append(f"a bias baseline is {100 * gap:.1f} points from chance; see the exam statistics")
    summary: dict[str, Any] = {
        "protocol": "exam",
        "config_hash": ctx.config.config_hash(),
        "exam": {"questions": len(exam), "file": "exam.jsonl", **stats},
        "baselines": baselines,
        "pipelines": per,
        "irt": {
            k: irt.get(k)
            for k in (
                "model",
                "model_reason",
                "n_subjects",
                "n_items",
                "abilities",
                "hierarchical",
                "adaptive",
            )
            if k in irt
        },
    }
    if "prune" in irt:
        summary["irt"]["prune"] = {
            k: copy.deepcopy(v)
            for k, v in irt["prune"].items()
            if k not in ("information_initial", "information_final")
        }
        for s in summary["irt"]["prune"]["steps"]:
            s.pop("information_before", None)
            s.pop("information_after", None)
    summary["table"] = _table(per, irt)
    if warnings:
        summary["warnings"] = warnings
    return summary
