"""How far can a small local judge be trusted? Judge configurations against human labels (issue 17).

The labelled set is `bench/data/judge_labels.jsonl` (hand-written from the fictional sample corpus: question,
reference, a candidate answer, the human label, the hard case it exercises — see bench/data/README.md).
Every configuration judges every item through proctor's one judging path (`judge_answer`: deterministic
rules, the LLM judge with the reference, the quantity guard) and the one model-call path (with its cache):

* ``1.5b``              — the embedded 1.5B as plain LLM judge with the reference;
* ``1.5b+rules``        — deterministic equivalence first (`proctor.judging.equivalence.decide`);
* ``1.5b+rules+guard``  — plus the quantity guard after an LLM "correct";
* ``0.5b`` / ``0.5b+rules+guard`` — the same with the embedded 0.5B.

For each: accuracy against the humans, Cohen's kappa (with its bootstrap interval, `proctor.metaeval`),
the confusion matrix, false "correct" verdicts, the share decided without a model call, seconds per
judgment (uncached calls only), and accuracy per hard case. Writes bench/results/judge_agreement.json and
prints a markdown table. From the repository root:

    .venv/bin/python bench/judge_agreement.py                 # all configurations
    .venv/bin/python bench/judge_agreement.py --only 1.5b+rules+guard --threads 1
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from proctor.metaeval.agreement import agreement
from proctor.models import get_model
from proctor.models.base import Model
from proctor.protocols.shared.answers import AnswerItem
from proctor.protocols.shared.judges import judge_answer

HERE = Path(__file__).resolve().parent
LABELS = HERE / "data" / "judge_labels.jsonl"
# Verdicts that took a model call: the LLM, and the guards that overrule its "correct".
LLM_METHODS = ("llm", "reference_quantity_missing", "reference_term_missing", "alternatives_listed")
CACHE_HIT_S = 0.3


@dataclass(frozen=True)
class JudgeConfig:
    name: str
    model: str
    rules: bool
    guard: bool


CONFIGS = [
    JudgeConfig("1.5b", "local/qwen2.5-coder-1.5b", rules=False, guard=False),
    JudgeConfig("1.5b+rules", "local/qwen2.5-coder-1.5b", rules=True, guard=False),
    JudgeConfig("1.5b+rules+guard", "local/qwen2.5-coder-1.5b", rules=True, guard=True),
    JudgeConfig("0.5b", "local/qwen2.5-coder-0.5b", rules=False, guard=False),
    JudgeConfig("0.5b+rules+guard", "local/qwen2.5-coder-0.5b", rules=True, guard=True),
]


def load_items() -> list[dict[str, Any]]:
    return [json.loads(line) for line in LABELS.read_text(encoding="utf-8").splitlines() if line.strip()]


def as_answer(item: dict[str, Any]) -> AnswerItem:
    return AnswerItem(
        candidate="labelled",
        question_id=item["id"],
        question=item["question"],
        reference_answer=item["reference"],
        answer=item["answer"],
        em=0.0,
        f1=0.0,
    )


async def run_config(model: Model, cfg: JudgeConfig, items: list[dict[str, Any]]) -> dict[str, Any]:
    verdicts: dict[str, str | None] = {}
    methods: Counter[str] = Counter()
    seconds: list[float] = []
    failures: dict[str, str] = {}
    for it in items:
        t0 = time.monotonic()
        try:
            j = await judge_answer(
                as_answer(it), kind="with_reference", model=model, rules=cfg.rules, guards=cfg.guard
            )
        except Exception as e:  # recorded per item with its cause, never scored
            failures[it["id"]] = f"{type(e).__name__}: {e}"
            verdicts[it["id"]] = None
            continue
        elapsed = time.monotonic() - t0
        method = (j.data or {}).get("method", "llm")
        methods[method] += 1
        if method in LLM_METHODS and elapsed > CACHE_HIT_S:  # a cache hit takes milliseconds
            seconds.append(elapsed)
        verdicts[it["id"]] = j.verdict
    judged = [it for it in items if verdicts.get(it["id"]) is not None]
    human = [it["label"] for it in judged]
    method_v = [str(verdicts[it["id"]]) for it in judged]
    ag = agreement(human, method_v, categories=["correct", "incorrect"])
    false_correct = sum(
        1 for h, m in zip(human, method_v, strict=True) if m == "correct" and h == "incorrect"
    )
    false_incorrect = sum(
        1 for h, m in zip(human, method_v, strict=True) if m == "incorrect" and h == "correct"
    )
    by_case: dict[str, list[bool]] = defaultdict(list)
    for it in judged:
        by_case[it["case"]].append(verdicts[it["id"]] == it["label"])
    no_call = sum(n for m, n in methods.items() if m not in LLM_METHODS)
    return {
        "config": cfg.__dict__,
        "n": len(judged),
        "failed": failures,
        "accuracy": ag.accuracy,
        "kappa": ag.kappa,
        "kappa_interval": [ag.kappa_lo, ag.kappa_hi],
        "confusion": ag.confusion,
        "false_correct": false_correct,
        "false_incorrect": false_incorrect,
        "methods": dict(methods),
        "decided_without_call": round(no_call / max(len(judged), 1), 4),
        "seconds_per_llm_judgment": round(sum(seconds) / len(seconds), 2) if seconds else None,
        "llm_judgments_timed": len(seconds),
        "by_case": {c: round(sum(v) / len(v), 3) for c, v in sorted(by_case.items())},
        "verdicts": verdicts,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", action="append", help="configuration name (repeatable)")
    ap.add_argument("--threads", type=int, default=0, help="llama.cpp threads (0: all cores)")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "judge_agreement.json")
    args = ap.parse_args()
    items = load_items()
    configs = [c for c in CONFIGS if not args.only or c.name in args.only]
    opts: dict[str, Any] = {"timeout_s": 900}
    if args.threads:
        opts["threads"] = args.threads
    models: dict[str, Model] = {}
    results = []
    for cfg in configs:
        model = models.setdefault(cfg.model, get_model(cfg.model, **opts))
        t0 = time.monotonic()
        r = asyncio.run(run_config(model, cfg, items))
        r["wall_seconds"] = round(time.monotonic() - t0, 1)
        results.append(r)
        print(f"{cfg.name}: accuracy {r['accuracy']:.3f}, kappa {r['kappa']}, {r['wall_seconds']} s")
    report = {
        "labels": str(LABELS.relative_to(HERE.parent)),
        "items": len(items),
        "human_correct": sum(it["label"] == "correct" for it in items),
        "cpus": os.cpu_count(),
        "threads": args.threads or None,
        "results": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1))
    cols = ["judge", "n", "accuracy", "κ [95 %]", "false correct", "false incorrect", "no call", "s / call"]
    print("\n| " + " | ".join(cols) + " |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        lo, hi = r["kappa_interval"]
        kappa = "—" if r["kappa"] is None else f"{r['kappa']:.2f} [{lo:.2f}, {hi:.2f}]"
        print(
            f"| {r['config']['name']} | {r['n']} | {r['accuracy']:.3f} | {kappa} | {r['false_correct']} | "
            f"{r['false_incorrect']} | {r['decided_without_call']:.0%} | {r['seconds_per_llm_judgment']} |"
        )
    print(f"\nwritten {args.out}")


if __name__ == "__main__":
    main()
