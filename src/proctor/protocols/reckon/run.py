"""The reckon protocol: units -> dedup -> clusters -> questions -> answers -> per-unit judging, in rounds;
then the per-unit baselines on the same units, cost accounting, metrics and meta-evaluation."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import numpy as np

from proctor.clustering import map_2d
from proctor.errors import UserError
from proctor.estimates import Estimate
from proctor.protocols.context import RunContext
from proctor.protocols.reckon.baselines import JW_OR, JW_R, run_baselines
from proctor.protocols.reckon.candidates import build_candidates
from proctor.protocols.reckon.config import Config
from proctor.protocols.reckon.cost import cost_summary
from proctor.protocols.reckon.metaeval import item_id, load_labels, meta_evaluate
from proctor.protocols.reckon.rounds import STOP_REASONS, RoundsResult, run_rounds
from proctor.protocols.reckon.units import (
    attach_evidence,
    extract_units,
    load_carry_over,
    merge_duplicates,
    select_chunks,
    unit_text,
)

UNCOVERED_FILE = "reckon_uncovered_units.jsonl"
# Baseline score names (as stored in the judgments table) -> names used in summaries and metrics.
BASELINE_NAMES = {
    JW_R: "judge_with_reference",
    JW_OR: "judge_without_reference",
    "bleu": "bleu",
    "rouge_l": "rouge_l",
    "embedding": "embedding",
}
CONTINUOUS = ("bleu", "rouge_l", "embedding")


def _rate(k: int, n: int) -> dict[str, Any]:
    return Estimate.proportion(k, n).model_dump()


def _mean(values: list[float]) -> dict[str, Any]:
    return Estimate.mean(values).model_dump()


async def run(ctx: RunContext[Config]) -> dict[str, Any]:
    cfg = ctx.settings
    if not ctx.config.candidates:
        raise UserError("candidates: the reckon protocol needs at least one candidate to evaluate; add one.")
    ctx.role("examiner")
    ctx.role("judge")
    base_seed = int(ctx.rng.integers(0, 2**31 - 1))
    warnings: list[str] = []

    # 1. Knowledge units (+ carried-over units), merged duplicates, evidence sentences.
    chunks = select_chunks(ctx, cfg)
    raw_units, unit_stats = await extract_units(ctx, chunks)
    if cfg.carry_over:
        carried = load_carry_over(cfg.carry_over)
        unit_stats["carried_over"] = len(carried)
        raw_units += carried
    if unit_stats["chunks_failed"]:
        warnings.append(
            f"unit extraction failed on {unit_stats['chunks_failed']} chunk(s); see the report's errors"
        )
    if not raw_units:
        warnings.append("no knowledge unit was extracted; nothing to evaluate")
        summary = {"protocol": "reckon", "config_hash": ctx.config.config_hash(), "units": unit_stats,
                   "candidates": {}, "table": [], "warnings": warnings}  # fmt: skip
        ctx.store.put_artifact("reckon", {"units": unit_stats, "empty": True})
        return summary
    vectors = ctx.embedder.embed([unit_text(u) for u in raw_units])
    kept = merge_duplicates(raw_units, vectors, cfg.dedup_threshold)
    units = [raw_units[i] for i in kept]
    vecs = vectors[kept]
    attach_evidence(units, vecs, {c.chunk_id: c for c in ctx.corpus.chunks}, ctx.embedder)
    unit_stats["merged_duplicates"] = len(raw_units) - len(units)
    unit_stats["units"] = len(units)
    unit_stats["by_type"] = dict(sorted(Counter(u["type"] for u in units).items()))
    for u in units:
        ctx.store.put_item(u["unit_id"], "reckon_unit", u)

    # 2-6. Rounds.
    rounds = await run_rounds(ctx, units, vecs, build_candidates(ctx, cfg.answer_max_tokens), base_seed)

    # Baselines on the same units and candidates.
    chunk_map = {c.chunk_id: c for c in ctx.corpus.chunks}
    baseline = await run_baselines(ctx, units, build_candidates(ctx), chunk_map) if cfg.baselines else {}
    return _finish(ctx, cfg, units, vecs, unit_stats, rounds, baseline, warnings)


def _round1_clusters(rounds: RoundsResult) -> list[dict[str, Any]]:
    """Round-1 clusters (every candidate's first round) with the names the examiner gave them."""
    out = []
    for qk, unit_ids in rounds.round1:
        q = rounds.questions.get(qk)
        out.append(
            {
                "question_id": qk,
                "center": q.center if q is not None else "(question failed)",
                "question": q.question if q is not None else None,
                "question_type": q.question_type if q is not None else None,
                "unit_ids": unit_ids,
            }
        )
    return out


def _finish(
    ctx: RunContext[Config],
    cfg: Config,
    units: list[dict[str, Any]],
    vecs: np.ndarray,
    unit_stats: dict[str, Any],
    rounds_result: RoundsResult,
    baseline: dict[str, dict[str, dict[str, Any]]],
    warnings: list[str],
) -> dict[str, Any]:
    store = ctx.store
    n_units = len(units)
    rounds = rounds_result.candidates
    clusters = _round1_clusters(rounds_result)
    cluster_of = {uid: i for i, c in enumerate(clusters) for uid in c["unit_ids"]}
    questions = {k: q.model_dump() for k, q in rounds_result.questions.items()}
    answers = {k: a.model_dump() for k, a in rounds_result.answers.items()}
    verdicts = {k: v.model_dump() for k, v in rounds_result.verdicts.items()}

    # Per (candidate, unit) items: the joined view every table and the meta-evaluation read.
    items: list[dict[str, Any]] = []
    for name, cr in rounds.items():
        for u in units:
            st = cr.states[u["unit_id"]]
            vd = verdicts.get(st.verdict_key or "", {})
            q = questions.get(vd.get("question_id") or "", {})
            b = baseline.get(name, {}).get(u["unit_id"], {})
            scores: dict[str, float | None] = {
                "reckon": 1.0 if st.status == "correct" else 0.0 if st.status == "incorrect" else None
            }
            for stored, label in BASELINE_NAMES.items():
                if stored in b:
                    scores[label] = b[stored]
            iid = item_id(name, u["unit_id"])
            item = {
                "item_id": iid,
                "candidate": name,
                "unit_id": u["unit_id"],
                "keyword": u["keyword"],
                "unit_type": u["type"],
                "cluster": clusters[cluster_of[u["unit_id"]]]["center"]
                if u["unit_id"] in cluster_of
                else None,
                "status": st.status,
                "round": st.round,
                "times_asked": st.asked,
                "history": st.history,
                "question_id": vd.get("question_id"),
                "question_type": q.get("question_type"),
                "excerpt": vd.get("excerpt"),
                "reason": vd.get("reason"),
                "baseline_answer_key": b.get("answer_key"),
                "scores": scores,
            }
            items.append(item)
            store.put_item(iid, "reckon_item", item)
            store.put_judgment(
                iid, "reckon", verdict=st.status, score=scores["reckon"], reason=vd.get("reason")
            )

    cand_summary: dict[str, Any] = {}
    for ccfg in ctx.config.candidates:
        name = ccfg.name
        mine = [it for it in items if it["candidate"] == name]
        counts = Counter(it["status"] or "not_asked" for it in mine)
        judged = counts["correct"] + counts["incorrect"]
        cr = rounds[name]
        acc = _rate(counts["correct"], judged)
        cov = _rate(judged, n_units)
        store.put_metric("accuracy.reckon", name, acc["value"], lo=acc["lo"], hi=acc["hi"], n=judged)
        store.put_metric("coverage.reckon", name, cov["value"], lo=cov["lo"], hi=cov["hi"], n=n_units)
        curve = [n_units] + [r.remaining_after for r in cr.rounds]
        res: dict[str, Any] = {
            "model": ctx.config.models[ccfg.model].spec,
            "retriever": ccfg.retriever,
            "accuracy": acc,
            "coverage": cov,
            "correct": counts["correct"],
            "incorrect": counts["incorrect"],
            "uncovered": counts["uncovered"],
            "errors": counts["error"],
            "rounds": len(cr.rounds),
            "stop_reason": cr.stop_reason,
            "remaining_per_round": curve,
            "round_log": [r.model_dump() for r in cr.rounds],
            "ask_frequency": dict(
                sorted(Counter(str(it["times_asked"]) for it in mine).items(), key=lambda kv: int(kv[0]))
            ),
            "by_cluster": _breakdown(mine, "cluster"),
            "by_unit_type": _breakdown(mine, "unit_type"),
            "by_question_type": _breakdown(mine, "question_type"),
            "baselines": {},
        }
        for label in BASELINE_NAMES.values():
            if label in ("judge_with_reference", "judge_without_reference"):
                vals = [it["scores"][label] for it in mine if it["scores"].get(label) is not None]
                if label in cfg.baselines:
                    m = _rate(int(sum(vals)), len(vals))
                    res["baselines"][label] = m
                    store.put_metric(
                        f"accuracy.baseline_{label}", name, m["value"], lo=m["lo"], hi=m["hi"], n=m["n"]
                    )
            elif label in cfg.baselines:
                vals = [float(it["scores"][label]) for it in mine if it["scores"].get(label) is not None]
                m = _mean(vals)
                res["baselines"][label] = m
                metric = "embedding_similarity" if label == "embedding" else label
                store.put_metric(f"{metric}.mean", name, m["value"], lo=m["lo"], hi=m["hi"], n=m["n"])
        cand_summary[name] = res

    cost = cost_summary(store)
    if cost["token_ratio"] is not None:
        store.put_metric("cost.token_ratio", "reckon_vs_baseline", cost["token_ratio"])
        if cost["token_ratio"] >= 1.0:
            warnings.append(
                f"RECKON used {cost['token_ratio']:.2f}x the tokens of the per-unit baseline on this run "
                f"(usually when clusters are small or most units need re-asking)"
            )

    meta = None
    if cfg.human_labels:
        labels = load_labels(cfg.human_labels)
        methods: dict[str, float | None] = {"reckon": None}
        for label in BASELINE_NAMES.values():
            if label in cfg.baselines:
                methods[label] = getattr(cfg.thresholds, label) if label in CONTINUOUS else None
        meta = meta_evaluate(items, labels, methods)
        meta["file"] = cfg.human_labels
        if meta["unmatched"]:
            warnings.append(
                f"{meta['unmatched']} of {meta['n_labels']} human labels name items this run does not have"
            )
        for row in meta["methods"]:
            store.put_metric("metaeval.accuracy", row["method"], row["accuracy"], n=row["n"])
            store.put_metric("metaeval.kappa", row["method"], row["kappa"], n=row["n"])

    # Units left uncovered (for a later run's `reckon.carry_over`), as a file and an artifact.
    uncovered_for: dict[str, list[str]] = {}
    for it in items:
        if it["status"] == "uncovered":
            uncovered_for.setdefault(it["unit_id"], []).append(it["candidate"])
    fields = ("unit_id", "type", "keyword", "description", "evidence", "chunk_ids", "source")
    uncovered = [
        {**{k: u[k] for k in fields}, "uncovered_for": uncovered_for[u["unit_id"]]}
        for u in units
        if u["unit_id"] in uncovered_for
    ]
    with open(ctx.run_dir / UNCOVERED_FILE, "w", encoding="utf-8") as f:
        for row in uncovered:
            f.write(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n")

    xy = map_2d(vecs)
    artifact = {
        "units": unit_stats,
        "n_units": n_units,
        "config": cfg.model_dump(mode="json"),
        "candidates": cand_summary,
        "clusters": clusters,
        "map": [
            {
                "unit_id": u["unit_id"],
                "keyword": u["keyword"],
                "x": round(float(xy[i, 0]), 5),
                "y": round(float(xy[i, 1]), 5),
                "cluster": cluster_of.get(u["unit_id"]),
            }
            for i, u in enumerate(units)
        ],
        "cost": cost,
        "meta_evaluation": meta,
        "uncovered": uncovered,
        "examples": _examples(list(verdicts.values()), units, answers, questions, cfg.examples),
        "stop_reasons": STOP_REASONS,
    }
    store.put_artifact("reckon", artifact)
    summary = {
        "protocol": "reckon",
        "config_hash": ctx.config.config_hash(),
        "units": unit_stats,
        "candidates": {
            k: {kk: vv for kk, vv in v.items() if kk not in ("round_log", "by_cluster")}
            for k, v in cand_summary.items()
        },
        "cost": {k: v for k, v in cost.items() if k != "rows"},
        "meta_evaluation": meta,
        "uncovered_units": len(uncovered),
        "table": [_table_row(name, r, cfg) for name, r in cand_summary.items()],
        "warnings": warnings,
    }
    return summary


def _breakdown(items: list[dict[str, Any]], field: str) -> list[dict[str, Any]]:
    groups: dict[str, Counter[str]] = {}
    for it in items:
        groups.setdefault(str(it[field] or "—"), Counter())[it["status"] or "not_asked"] += 1
    out = []
    for key, c in groups.items():
        judged = c["correct"] + c["incorrect"]
        total = sum(c.values())
        out.append(
            {
                "group": key,
                "units": total,
                "correct": c["correct"],
                "incorrect": c["incorrect"],
                "uncovered": c["uncovered"],
                "errors": c["error"],
                "accuracy": _rate(c["correct"], judged),
                "coverage": round(judged / total, 6) if total else None,
            }
        )
    return sorted(out, key=lambda r: (-r["units"], r["group"]))


def _examples(
    verdicts: list[dict[str, Any]],
    units: list[dict[str, Any]],
    answers: dict[str, dict[str, Any]],
    questions: dict[str, dict[str, Any]],
    n: int,
) -> list[dict[str, Any]]:
    """Up to n judgments, taken round-robin over verdicts (incorrect, correct, uncovered) in run order."""
    by_unit = {u["unit_id"]: u for u in units}
    pools: dict[str, list[dict[str, Any]]] = {"incorrect": [], "correct": [], "uncovered": []}
    for d in verdicts:
        if d.get("verdict") in pools and d.get("unit_id") in by_unit:
            pools[d["verdict"]].append(d)
    out: list[dict[str, Any]] = []
    while len(out) < n and any(pools.values()):
        for verdict in ("incorrect", "correct", "uncovered"):
            if pools[verdict] and len(out) < n:
                d = pools[verdict].pop(0)
                u = by_unit[d["unit_id"]]
                a = answers.get(d["answer_key"], {})
                out.append(
                    {
                        "candidate": d["candidate"],
                        "round": d["round"],
                        "question": questions.get(d["question_id"], {}).get("question"),
                        "answer": a.get("answer"),
                        "excerpt": d.get("excerpt"),
                        "keyword": u["keyword"],
                        "description": u["description"],
                        "evidence": u.get("evidence"),
                        "verdict": d["verdict"],
                        "reason": d.get("reason"),
                        "stage": d.get("stage"),
                    }
                )
    return out


def _table_row(name: str, r: dict[str, Any], cfg: Config) -> dict[str, str]:
    def rate(m: dict[str, Any] | None) -> str:
        if not m or m.get("value") is None:
            return "—"
        return f"{m['value']:.2f} [{m['lo']:.2f}, {m['hi']:.2f}] n={m['n']}"

    b = r["baselines"]
    row = {
        "candidate": name,
        "RECKON acc": rate(r["accuracy"]),
        "covered": f"{r['coverage']['k']}/{r['coverage']['n']}",
        "rounds (stop)": f"{r['rounds']} ({r['stop_reason']})",
    }
    if "judge_with_reference" in cfg.baselines:
        row["J w/R acc"] = rate(b.get("judge_with_reference"))
    if "judge_without_reference" in cfg.baselines:
        row["J w/oR acc"] = rate(b.get("judge_without_reference"))
    for label, title in (("bleu", "BLEU"), ("rouge_l", "ROUGE-L"), ("embedding", "emb sim")):
        if label in cfg.baselines:
            v = (b.get(label) or {}).get("value")
            row[title] = "—" if v is None else f"{v:.2f}"
    return row
