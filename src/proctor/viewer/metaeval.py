"""Meta-evaluation: how well each automatic method in a run agrees with the human labels.

A method is every judge with a judgment on a labelled item (LLM judges, RECKON's verdicts, classic metrics,
KIEval's evaluators) plus the per-method `scores` an item carries (reckon's baselines). Its output on an
item becomes a category: a verdict "correct"/"incorrect" as is; otherwise a score at or above the
threshold (0.5) is "correct"; on a conversation round, the evaluator's overall score 1-4. Per method:
accuracy against the labels, Cohen's kappa with a bootstrap interval, the confusion matrix, n. Between
annotators: Cohen's kappa per pair on the items both labelled. "unsure" labels are left out.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

from proctor.viewer.agreement import Agreement, agreement
from proctor.viewer.labels import BINARY, RATING, Label, LabelStore, Scale, scale_for

THRESHOLD = 0.5
CATEGORIES: dict[Scale, list[str]] = {"binary": list(BINARY[:2]), "rating": list(RATING)}
_CHUNK = 500


@dataclass
class MethodAgreement:
    method: str
    scale: Scale
    agreement: Agreement


@dataclass
class AnnotatorPair:
    a: str
    b: str
    scale: Scale
    agreement: Agreement


@dataclass
class MetaEvaluation:
    annotator: str | None
    annotators: list[str]
    labels: int  # current labels considered (one per item, or per item and annotator for pairs)
    unsure: int
    unmatched: int  # labels on keys the run does not have
    methods: list[MethodAgreement] = field(default_factory=list)
    pairs: list[AnnotatorPair] = field(default_factory=list)


def _chunks(keys: list[str]) -> Iterator[list[str]]:
    for i in range(0, len(keys), _CHUNK):
        yield keys[i : i + _CHUNK]


def _category(scale: Scale, verdict: Any, score: Any, data: Any) -> str | None:
    if scale == "rating":
        value = data.get("overall_score") if isinstance(data, dict) else None
        if value is None:
            value = score
        try:
            v = round(float(value))
        except (TypeError, ValueError):
            return None
        return str(v) if 1 <= v <= 4 else None
    if verdict in CATEGORIES["binary"]:
        return str(verdict)
    if isinstance(score, int | float) and not isinstance(score, bool):
        return "correct" if score >= THRESHOLD else "incorrect"
    return None


def method_outputs(conn: sqlite3.Connection, keys: list[str]) -> dict[str, tuple[Scale, dict[str, str]]]:
    """item key -> (its scale, {method: category}) for the items among `keys` the run has."""
    out: dict[str, tuple[Scale, dict[str, str]]] = {}
    for chunk in _chunks(keys):
        marks = ",".join("?" * len(chunk))
        for r in conn.execute(f"SELECT key, kind, data FROM items WHERE key IN ({marks})", chunk):
            scale = scale_for(r["kind"])
            methods: dict[str, str] = {}
            data = json.loads(r["data"]) if r["data"] else None
            scores = data.get("scores") if isinstance(data, dict) else None
            if isinstance(scores, dict) and scale == "binary":
                for name, s in scores.items():
                    if (cat := _category(scale, None, s, None)) is not None:
                        methods[str(name)] = cat
            out[r["key"]] = (scale, methods)
        for j in conn.execute(
            f"SELECT item_key, judge, verdict, score, data, error FROM judgments WHERE item_key IN ({marks})",
            chunk,
        ):
            if j["error"] or j["item_key"] not in out:
                continue
            scale, methods = out[j["item_key"]]
            jd = json.loads(j["data"]) if j["data"] else None
            if (cat := _category(scale, j["verdict"], j["score"], jd)) is not None:
                methods[j["judge"]] = cat
    return out


def _latest_per_item(labels: list[Label]) -> dict[str, Label]:
    out: dict[str, Label] = {}
    for lab in labels:  # ordered by id: later rows win
        out[lab.item_key] = lab
    return out


def meta_evaluate(
    conn: sqlite3.Connection, store: LabelStore, annotator: str | None = None
) -> MetaEvaluation:
    """Agreement of every method with the labels of `annotator` (or, without one, each item's latest label
    by anyone), and between every pair of annotators."""
    current = store.current(annotator=annotator)
    by_item = _latest_per_item(current)
    outputs = method_outputs(conn, list(by_item))
    result = MetaEvaluation(
        annotator=annotator,
        annotators=store.annotators(),
        labels=len(by_item),
        unsure=sum(1 for lab in by_item.values() if lab.label == "unsure"),
        unmatched=sum(1 for k in by_item if k not in outputs),
    )
    pairs: dict[tuple[str, Scale], tuple[list[str], list[str]]] = {}
    for key, lab in by_item.items():
        if key not in outputs:
            continue
        scale, methods = outputs[key]
        if lab.label not in CATEGORIES[scale]:
            continue
        for method, cat in methods.items():
            human, auto = pairs.setdefault((method, scale), ([], []))
            human.append(lab.label)
            auto.append(cat)
    for (method, scale), (human, auto) in sorted(pairs.items()):
        result.methods.append(MethodAgreement(method, scale, agreement(human, auto, CATEGORIES[scale])))
    if annotator is None:
        result.pairs = _annotator_pairs(store.current(), outputs)
    return result


def _annotator_pairs(
    labels: list[Label], outputs: dict[str, tuple[Scale, dict[str, str]]]
) -> list[AnnotatorPair]:
    per: dict[str, dict[str, str]] = {}
    for lab in labels:
        per.setdefault(lab.annotator, {})[lab.item_key] = lab.label
    out = []
    scales: tuple[Scale, ...] = ("binary", "rating")
    for a, b in combinations(sorted(per), 2):
        for scale in scales:
            cats = CATEGORIES[scale]
            shared = [
                k
                for k in per[a]
                if k in per[b]
                and k in outputs
                and outputs[k][0] == scale
                and per[a][k] in cats
                and per[b][k] in cats
            ]
            if shared:
                both = agreement([per[a][k] for k in shared], [per[b][k] for k in shared], cats)
                out.append(AnnotatorPair(a, b, scale, both))
    return out
