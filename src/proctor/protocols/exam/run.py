"""The exam protocol's stages: generate -> filter and assemble -> label -> grade the grid -> metrics -> IRT.

Store layout (what the report reads): items `exam_draft` (one per examiner call), `exam_labels` (one per
label batch), `exam_guess` (closed-book answers), `exam_question` (the exam, in order), `exam_response`
(one per pipeline and question). `run` returns `ExamResult`; the kit stores its artifacts (`exam_stats`,
`exam_baselines`, `exam_pipelines`, `exam_breakdowns`, `exam_irt`) and metrics (`accuracy` and
`irt.ability` per pipeline, `exam.baseline.*`).
"""

from __future__ import annotations

import copy
import logging
import math
from collections import Counter

import numpy as np

from proctor.errors import UserError
from proctor.estimates import Estimate
from proctor.kit.context import RunContext, successes
from proctor.kit.steps import Outcome
from proctor.protocols.exam import generation
from proctor.protocols.exam.assemble import assemble_exam
from proctor.protocols.exam.beyond_guessing import beyond_guessing
from proctor.protocols.exam.config import Config
from proctor.protocols.exam.exam_file import ExamQuestion, load_exam, write_exam
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
from proctor.protocols.exam.repair import ExamRepair, repair_drafts
from proctor.protocols.exam.result import (
    Breakdowns,
    ExamIrt,
    ExamPipelines,
    ExamResult,
    ExamStats,
    ExamSummary,
    IrtSummary,
    LaterPasses,
    PipelineResult,
    Round,
)
from proctor.protocols.exam.stats import bias_baselines, distribution, max_baseline_gap

log = logging.getLogger("proctor")
BREAKDOWNS = ("bloom", "question_word", "topic")


async def build_exam(ctx: RunContext[Config], cfg: Config) -> tuple[list[ExamQuestion], ExamStats]:
    """Generate (or read) the exam; returns it with its statistics."""
    if cfg.exam_file is not None:
        exam = load_exam(cfg.exam_file)
        stats = ExamStats(source=str(cfg.exam_file), kept=len(exam))
        missing = [q for q in exam if not q.bloom or not q.question_word]
        if missing:
            stats.labels = await label_exam(
                ctx, missing, use_examiner=cfg.labels == "examiner", batch_size=cfg.label_batch_size
            )
        for q in exam:
            if "topic" not in q.model_fields_set:
                q.topic = q.source or "unknown"
        return exam, stats
    exam, stats = await generate_exam(ctx, cfg)
    stats.labels = await label_exam(
        ctx, exam, use_examiner=cfg.labels == "examiner", batch_size=cfg.label_batch_size
    )
    return exam, stats


async def generate_exam(ctx: RunContext[Config], cfg: Config) -> tuple[list[ExamQuestion], ExamStats]:
    """Generate, filter, repair and assemble, in rounds while fewer questions are kept than wanted
    (`target_questions`, or `num_questions` with `top_up`) and the cap allows (`Config.question_cap`)."""
    chunks = generation.chunk_order(ctx, cfg.chunk_sampling, cfg.topic_clusters)
    # Every assembly starts from the same generator state, so the exam of a round does not depend on
    # how many rounds came before it (and one round gives the same exam as before rounds existed).
    rng_state = copy.deepcopy(ctx.rng.bit_generator.state)
    emb = Embeddings(ctx.embedder) if ctx.config.embedder else None
    sources = {c.chunk_id: c.text for c in ctx.corpus.chunks}
    target = cfg.question_target()
    asked, cap = cfg.num_questions, cfg.question_cap(len(chunks))
    rounds: list[Round] = []
    while True:
        plan = generation.plan_generation(ctx, cfg, chunks, asked)
        label = "writing exam questions" + (f" (round {len(rounds) + 1})" if rounds else "")
        gen = await generation.run_generation(ctx, plan, label)
        drafts, counts = generation.drafts_from(gen.outcomes)
        repairs, repair_keys = await repair_drafts(ctx, drafts, emb, sources, generation.example_passage())
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
        rounds.append(Round(asked=asked, generated=counts.generated, kept=len(exam)))
        if target is not None and filters_guessable(ctx) and exam:
            # The target counts items that also pass the guessability filter, measured per round (each
            # item once: later rounds and the final step read the stored answers).
            guesses = await guess(ctx, exam)
            dropped = sum(
                1
                for q in exam
                if is_guessable(guesses[q.id], cfg.max_guessability or 0.0, cfg.guessability_rule)
            )
            rounds[-1].kept, rounds[-1].guessable = len(exam) - dropped, dropped
        nxt = _next_round_size(cfg, target, rounds, cap)
        if nxt is None:
            break
        log.info(
            "exam round %d: %d asked, %d kept, short of the %d wanted; asking %d in all",
            len(rounds),
            asked,
            len(exam),
            target,
            nxt,
        )
        asked = nxt
    ctx.supersede(generation.ExamDraft.KIND, {o.key for o in gen.outcomes})
    ctx.supersede(ExamRepair.KIND, repair_keys)
    stats = ExamStats(
        planned=counts.planned,
        calls=counts.calls,
        calls_failed=counts.calls_failed,
        generated=counts.generated,
        filtered=assembly.filtered,
        distractors_removed=assembly.distractors_removed,
        kept=assembly.kept,
        embedding_filters=assembly.embedding_filters,
        repairs=repairs if cfg.repair.attempts else None,
        later_passes=_later_passes(gen, exam),
    )
    if target is not None and (len(rounds) > 1 or cfg.target_questions is not None):
        stats.rounds = rounds
    if target is not None and len(exam) < target:
        wanted = (
            f"target_questions {target}" if cfg.target_questions is not None else f"num_questions {target}"
        )
        stats.target_missed = (
            f"{len(exam)} questions kept, short of {wanted}, after {asked} asked (at most {cap})"
        )
    return exam, stats


def _later_passes(gen: generation.Generation, exam: list[ExamQuestion]) -> LaterPasses | None:
    """What the chunks' later variants gave (None when every chunk was asked once)."""
    later = {o.key for o in gen.outcomes if o.unit.variant > 0}
    if not later and not gen.exhausted:
        return None
    kept = sum(1 for q in exam if q.draft_key is not None and q.draft_key.rsplit("#", 1)[0] in later)
    return LaterPasses(asked=len(later), exhausted=len(gen.exhausted), kept=kept)


def _next_round_size(cfg: Config, target: int | None, rounds: list[Round], cap: int) -> int | None:
    """Questions to ask in all in the next generation round, or None when generation is done: the
    target is met, the cap is reached, or the last round produced no new question (e.g. the examiner
    fails) or kept no more than the round before (the examiner only repeats itself). The shortfall
    is divided by the keep rate so far, plus 10 % headroom, in whole calls."""
    last = rounds[-1]
    if target is None or last.kept >= target or last.asked >= cap:
        return None
    if last.generated == 0:
        return None
    if len(rounds) > 1 and (last.generated <= rounds[-2].generated or last.kept <= rounds[-2].kept):
        return None
    rate = max(last.kept / last.asked, 0.02)
    more = math.ceil((target - last.kept) / rate * 1.1)
    per = cfg.questions_per_call
    return min(cap, math.ceil((last.asked + more) / per) * per)


async def _record_question(q: ExamQuestion) -> ExamQuestion:
    return q


async def record_exam(ctx: RunContext[Config], exam: list[ExamQuestion]) -> None:
    """Store the exam's questions as items (`exam_question`, each keyed by its content) and mark the
    questions of an earlier state of the run superseded."""
    stored = await ctx.map(
        "recording the exam",
        exam,
        _record_question,
        unit_id=lambda q: q.model_dump(mode="json"),
        role=None,
        output=ExamQuestion,
    )
    ctx.supersede(ExamQuestion.KIND, {o.key for o in stored})


def _pipeline_results(
    pipelines: list[Pipeline], exam: list[ExamQuestion], responses: list[Outcome[Sitting, ExamResponse]]
) -> tuple[dict[str, PipelineResult], Breakdowns]:
    """Accuracy per pipeline (Wilson 95%) and per Bloom level, question word and topic."""
    by_id = {q.id: q for q in exam}
    per: dict[str, PipelineResult] = {}
    breakdowns = Breakdowns()
    for p in pipelines:
        mine = [o for o in responses if o.unit.pipeline.name == p.name]
        scored = [o.value for o in mine if o.value is not None]
        per[p.name] = PipelineResult(
            **dict(p.spec()),
            accuracy=Estimate.proportion(sum(1 for r in scored if r.correct), len(scored)),
            answered=len(scored),
            errors=dict(Counter(o.failure.cause for o in mine if o.failure is not None)),
            methods=dict(Counter(str(r.method) for r in scored)),
        )
        for b in BREAKDOWNS:
            groups: dict[str, list[bool]] = {}
            for r in scored:
                level = str(getattr(by_id[r.question_id], b) or "unknown")
                groups.setdefault(level, []).append(bool(r.correct))
            breakdowns.table(b)[p.name] = {
                g: Estimate.proportion(sum(v), len(v)) for g, v in sorted(groups.items())
            }
    return per, breakdowns


def _with_abilities(per: dict[str, PipelineResult], irt: ExamIrt) -> None:
    """The IRT ability of each pipeline as its metric `irt.ability` (interval: ± 1.96 SE)."""
    for a in irt.abilities:
        if a.pipeline in per:
            se = a.se
            per[a.pipeline].irt_ability = Estimate(
                value=a.ability,
                lo=None if se is None or a.ability is None else a.ability - 1.96 * se,
                hi=None if se is None or a.ability is None else a.ability + 1.96 * se,
            )


def _gain_text(r: PipelineResult) -> str:
    g = r.beyond_guessing
    if g is None or g.corrected.value is None:
        return "—"
    return f"{g.corrected.text()} (closed-book {g.closed_book.value:.2f})"


def _table(per: dict[str, PipelineResult], irt: ExamIrt | None) -> list[dict[str, str]]:
    rows = []
    for name, r in per.items():
        a = r.accuracy
        acc = "—" if a.value is None else f"{a.value:.2f} [{a.lo:.2f}, {a.hi:.2f}] n={a.n}"
        ab = irt.ability_of(name) if irt is not None else None
        ability = "—" if not ab or ab.ability is None else f"{ab.ability:+.2f} ± {ab.se or 0:.2f}"
        model = irt.model if irt is not None and irt.model is not None else "IRT"
        rows.append(
            {
                "pipeline": name,
                "accuracy [95% CI]": acc,
                "beyond guessing": _gain_text(r),
                f"ability ({model})": ability,
                "selection": ", ".join(f"{k} {v}" for k, v in sorted(r.methods.items())) or "—",
                "errors": str(sum(r.errors.values())),
            }
        )
    return rows


async def run(ctx: RunContext[Config]) -> ExamResult:
    cfg = ctx.settings
    pipelines = build_pipelines(ctx, cfg)  # config mistakes surface before any model call
    if cfg.exam_file is None and cfg.chunk_sampling == "clusters" and not ctx.config.embedder:
        raise UserError(
            "exam.chunk_sampling: clusters groups chunks by their embeddings, but the config has no "
            "`embedder`. Add one (e.g. `embedder: local/all-minilm-l6-v2`) or use chunk_sampling: spread."
        )
    exam, stats = await build_exam(ctx, cfg)
    exam, guesses = await guessability_step(ctx, exam, stats)
    await record_exam(ctx, exam)
    write_exam(ctx.run_dir / "exam.jsonl", exam)
    baselines = bias_baselines(exam)
    if guesses and (cb := closed_book_accuracy(exam, guesses)).n:
        baselines.closed_book_examiner = cb
    stats.bloom = distribution(exam, "bloom")
    stats.question_word = distribution(exam, "question_word")
    stats.topic = distribution(exam, "topic")
    warnings: list[str] = []
    if not exam:
        warnings.append("no question survived generation and filtering; see exam statistics in the report")
    if stats.target_missed:
        warnings.append(f"exam: {stats.target_missed}")
    if not pipelines:
        warnings.append(
            "no pipeline to grade (exam.grid.llms and candidates are empty): only the exam was written"
        )
    responses = await grade(ctx, pipelines, exam) if exam and pipelines else []
    ctx.supersede(ExamResponse.KIND, {o.key for o in responses})
    per, breakdowns = _pipeline_results(pipelines, exam, responses)
    answers: dict[str, dict[str, ExamResponse]] = {}
    for r in successes(responses):
        if r.correct is not None:
            answers.setdefault(r.pipeline, {})[r.question_id] = r
    for name, gain in beyond_guessing(
        pipelines, exam, answers, guesses, np.random.default_rng(ctx.config.seed)
    ).items():
        per[name].beyond_guessing = gain
    irt: ExamIrt | None = None
    if cfg.irt.enabled and exam and pipelines:
        from proctor.protocols.exam.irt_step import analyse, response_matrix

        n_options = max(len(q.choices) for q in exam)
        irt = analyse(
            cfg.irt,
            pipelines,
            exam,
            response_matrix(pipelines, exam, successes(responses)),
            n_options,
            ctx.rng,
        )
        _with_abilities(per, irt)
        if irt.prune is not None and irt.prune.kept_ids:
            keep = set(irt.prune.kept_ids)
            write_exam(ctx.run_dir / "exam_pruned.jsonl", [q for q in exam if q.id in keep])
        warnings += [f"IRT: {w}" for w in irt.warnings]
        if irt.skipped:
            warnings.append(f"IRT skipped: {irt.skipped}")
    gap = max_baseline_gap(baselines)
    if gap is not None and len(exam) >= 40 and gap > 0.05:
        warnings.append(f"a bias baseline is {100 * gap:.1f} points from chance; see the exam statistics")
    return ExamResult(
        exam=ExamSummary(**dict(stats), questions=len(exam), file="exam.jsonl"),
        baselines=baselines,
        pipelines=per,
        irt=IrtSummary.of(irt),
        table=_table(per, irt),
        warnings=warnings,
        exam_stats=stats,
        exam_baselines=baselines,
        exam_pipelines=ExamPipelines([p.spec() for p in pipelines]),
        exam_breakdowns=breakdowns,
        exam_irt=irt,
    )
