"""Meta-evaluation: how well each automatic method in a run agrees with the human labels.

A method is every judge with a judgment on a labelled item (LLM judges, RECKON's verdicts, classic metrics,
KIEval's evaluators) plus the per-method `scores` an item carries (reckon's baselines). Its output on an
item becomes a category: a verdict "correct"/"incorrect" as is; otherwise a score at or above the
threshold (0.5) is "correct"; on a conversation round, the evaluator's overall score 1-4. Per method:
accuracy against the labels, Cohen's kappa with a bootstrap interval, the confusion matrix, n, and — when
the method gives numeric scores — Spearman's rho between the score and the label as a number (correct 1,
incorrect 0; a rating 1-4). Between annotators: Cohen's kappa per pair on the items both labelled, and
Fleiss' kappa and Krippendorff's alpha (nominal) over all annotators on the items two or more labelled.
"unsure" labels are left out.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

from proctor.metaeval.agreement import (
    Agreement,
    Correlation,
    GroupAgreement,
    agreement,
    group_agreement,
    spearman,
)
from proctor.store.index import SCORE_THRESHOLD
from proctor.store.record import RunRecord
from proctor.viewer.labels import BINARY, RATING, Label, LabelStore, Scale, scale_for

THRESHOLD = SCORE_THRESHOLD  # a numeric score counts as correct from here (the side index cuts there too)
CATEGORIES: dict[Scale, list[str]] = {"binary": list(BINARY[:2]), "rating": list(RATING)}
_CHUNK = 500


@dataclass
class MethodAgreement:
    method: str
    scale: Scale
    agreement: Agreement
    # Spearman between the method's numeric score and the label; None when the method gives no scores
    correlation: Correlation | None = None


@dataclass
class AnnotatorGroup:
    scale: Scale
    agreement: GroupAgreement


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
    groups: list[AnnotatorGroup] = field(default_factory=list)  # all annotators together, per scale


@dataclass(frozen=True)
class Output:
    """A method's output on an item: its category, and its numeric score when it has one."""

    category: str
    score: float | None


def _chunks(keys: list[str]) -> Iterator[list[str]]:
    for i in range(0, len(keys), _CHUNK):
        yield keys[i : i + _CHUNK]


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        v = float(value)
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def _output(scale: Scale, verdict: Any, score: Any, data: Any) -> Output | None:
    if scale == "rating":
        value = data.get("overall_score") if isinstance(data, dict) else None
        v = _number(score if value is None else value)
        if v is None or not 1 <= round(v) <= 4:
            return None
        return Output(str(round(v)), v)
    s = None if isinstance(score, str) else _number(score)
    if verdict in CATEGORIES["binary"]:
        return Output(str(verdict), s)
    if s is not None:
        return Output("correct" if s >= THRESHOLD else "incorrect", s)
    return None


def label_value(label: str) -> float:
    """A label as a number for correlations: correct 1, incorrect 0, a rating its value."""
    binary = {"correct": 1.0, "incorrect": 0.0}
    return binary[label] if label in binary else float(label)


def method_outputs(run: RunRecord, keys: list[str]) -> dict[str, tuple[Scale, dict[str, Output]]]:
    """item key -> (its scale, {method: output}) for the items among `keys` the run has."""
    out: dict[str, tuple[Scale, dict[str, Output]]] = {}
    for chunk in _chunks(keys):
        for key, it in run.items_by_key(chunk).items():
            scale = scale_for(it.kind)
            methods: dict[str, Output] = {}
            scores = it.data.get("scores") if isinstance(it.data, dict) else None
            if isinstance(scores, dict) and scale == "binary":
                for name, s in scores.items():
                    if (o := _output(scale, None, s, None)) is not None:
                        methods[str(name)] = o
            out[key] = (scale, methods)
        for key, judgments in run.judgments_of(chunk).items():
            if key not in out:
                continue
            scale, methods = out[key]
            for j in judgments:
                if j.error:
                    continue
                if (o := _output(scale, j.verdict, j.score, j.data)) is not None:
                    methods[j.judge] = o
    return out


def _latest_per_item(labels: list[Label]) -> dict[str, Label]:
    out: dict[str, Label] = {}
    for lab in labels:  # ordered by id: later rows win
        out[lab.item_key] = lab
    return out


def meta_evaluate(run: RunRecord, store: LabelStore, annotator: str | None = None) -> MetaEvaluation:
    """Agreement of every method with the labels of `annotator` (or, without one, each item's latest label
    by anyone), and among the annotators (every pair, and all together)."""
    current = store.current(annotator=annotator)
    by_item = _latest_per_item(current)
    outputs = method_outputs(run, list(by_item))
    result = MetaEvaluation(
        annotator=annotator,
        annotators=store.annotators(),
        labels=len(by_item),
        unsure=sum(1 for lab in by_item.values() if lab.label == "unsure"),
        unmatched=sum(1 for k in by_item if k not in outputs),
    )
    pairs: dict[tuple[str, Scale], tuple[list[str], list[Output]]] = {}
    for key, lab in by_item.items():
        if key not in outputs:
            continue
        scale, methods = outputs[key]
        if lab.label not in CATEGORIES[scale]:
            continue
        for method, o in methods.items():
            human, auto = pairs.setdefault((method, scale), ([], []))
            human.append(lab.label)
            auto.append(o)
    for (method, scale), (human, auto) in sorted(pairs.items()):
        ag = agreement(human, [o.category for o in auto], CATEGORIES[scale])
        scored = [(o.score, label_value(h)) for h, o in zip(human, auto, strict=True) if o.score is not None]
        corr = spearman([s for s, _ in scored], [v for _, v in scored]) if scored else None
        result.methods.append(MethodAgreement(method, scale, ag, corr))
    everyone = store.current()
    if annotator is None:
        result.pairs = _annotator_pairs(everyone, outputs)
    result.groups = _annotator_groups(everyone, outputs)
    return result


def _annotator_groups(
    labels: list[Label], outputs: dict[str, tuple[Scale, dict[str, Output]]]
) -> list[AnnotatorGroup]:
    """Fleiss' kappa and Krippendorff's alpha per scale, when two or more annotators labelled an item."""
    out = []
    scales: tuple[Scale, ...] = ("binary", "rating")
    for scale in scales:
        per: dict[str, dict[str, str]] = {}
        for lab in labels:
            if lab.item_key in outputs and outputs[lab.item_key][0] == scale:
                per.setdefault(lab.annotator, {})[lab.item_key] = lab.label
        if len(per) < 2:
            continue
        group = group_agreement(per, CATEGORIES[scale])
        if group.items:
            out.append(AnnotatorGroup(scale, group))
    return out


def _annotator_pairs(
    labels: list[Label], outputs: dict[str, tuple[Scale, dict[str, Output]]]
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
