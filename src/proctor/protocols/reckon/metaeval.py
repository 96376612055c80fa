"""Meta-evaluation: how well each method agrees with human labels.

Label file (JSONL, UTF-8; blank lines and lines starting with '#' are ignored), one label per line:

    {"item_id": "ku_0123456789abcdef0123@my-candidate", "label": "correct"}
    {"candidate": "my-candidate", "unit_id": "ku_0123456789abcdef0123", "label": "incorrect"}
    {"candidate": "my-candidate", "source": "notes.md", "sentence": "The bell is bronze.", "label": "correct"}

An item is one (candidate, knowledge unit) pair; its id is `<unit_id>@<candidate>` (listed in the report,
in items.jsonl as kind `reckon_item`, and in reckon_uncovered_units.jsonl). `label` is "correct" when the
candidate states the unit in agreement with the reference, else "incorrect". An optional "note" field is
kept for the annotator and ignored. Labels for ids the run does not have are counted as unmatched.

Unit ids hash model-written text, so they differ between machines (llama.cpp output differs across CPUs)
and between examiners. A *sentence label* names a sentence of the corpus instead (optionally its file's
name, `source`): it labels every unit of the candidate whose evidence sentence — the corpus sentence the
unit was traced to — is that sentence (compared as lowercase words). Sentence labels that no unit of a run
was traced to are counted as unused, not as errors: they are how one label file serves every run on the
same corpus. A label by item id wins over a sentence label on the same item.

Per method (RECKON, the two LLM judges, BLEU, ROUGE-L, embedding similarity) on the labelled items the
method scored: accuracy against the human labels, Cohen's kappa with its bootstrap 95% interval and the
confusion matrix (continuous scores are cut at `reckon.thresholds`), item-level Pearson / Spearman /
Kendall between the method's score and the label, and Pearson / Spearman / Kendall between per-candidate
scores (mean method score vs. share of items the humans labelled correct; needs at least three
candidates). RECKON's uncovered units have no verdict and are left out of its n. The statistics are
`proctor.metaeval.agreement`'s, the implementation `proctor view` and `proctor metaeval` use; this module
adds reckon's label file, sentence labels and item ids.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from proctor.errors import UserError
from proctor.metaeval.agreement import agreement, correlations
from proctor.protocols.reckon.result import (
    CandidateScore,
    Correlations,
    HumanScore,
    LabelStats,
    MetaEvaluation,
    MethodAgreement,
    ReckonItem,
)
from proctor.protocols.reckon.units import KnowledgeUnit, normalise
from proctor.records import read_records

LABELS = {"correct": 1, "incorrect": 0}
CATEGORIES = list(LABELS)  # row / column order of a method's confusion matrix
_CATEGORY = {v: k for k, v in LABELS.items()}


def item_id(candidate: str, unit_id: str) -> str:
    return f"{unit_id}@{candidate}"


@dataclass(frozen=True)
class SentenceLabel:
    candidate: str
    sentence: str  # normalised (lowercase words)
    source: str | None
    label: int


@dataclass
class Labels:
    """A label file: labels by item id (1 correct, 0 incorrect) and labels by corpus sentence."""

    items: dict[str, int] = field(default_factory=dict)
    sentences: list[SentenceLabel] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.items) + len(self.sentences)


def load_labels(path_str: str) -> Labels:
    """Labels by item id and by sentence. Raises UserError naming the file and line on bad input."""
    path = Path(path_str).expanduser()
    if not path.is_file():
        raise UserError(
            f"reckon.human_labels: file '{path}' not found. Give the path (absolute, or relative to the "
            f"config file's folder) of a JSONL label file; see docs/protocols/reckon.md for "
            f"its format."
        )
    out = Labels()
    by_sentence: dict[tuple[str, str, str | None], int] = {}
    for rec in read_records(path, field="reckon.human_labels", format="jsonl", comments=True):
        where = f"reckon.human_labels: {path}, {rec.where}"
        raw = rec.data
        if not isinstance(raw, dict):
            raise UserError(f'{where}: expected a JSON object like {{"item_id": "...", "label": "correct"}}.')
        label = str(raw.get("label", "")).strip().lower()
        if label not in LABELS:
            raise UserError(f'{where}: "label" must be "correct" or "incorrect", not {raw.get("label")!r}.')
        if raw.get("candidate") and raw.get("sentence") and not raw.get("unit_id"):
            source = str(raw["source"]) if raw.get("source") else None
            key = (str(raw["candidate"]), normalise(str(raw["sentence"])), source)
            if not key[1]:
                raise UserError(f'{where}: "sentence" has no words.')
            if key in by_sentence and by_sentence[key] != LABELS[label]:
                raise UserError(f"{where}: this sentence is labelled twice for {key[0]}; keep one label.")
            if key not in by_sentence:
                by_sentence[key] = LABELS[label]
                out.sentences.append(SentenceLabel(key[0], key[1], source, LABELS[label]))
            continue
        if raw.get("item_id"):
            iid = str(raw["item_id"])
        elif raw.get("candidate") and raw.get("unit_id"):
            iid = item_id(str(raw["candidate"]), str(raw["unit_id"]))
        else:
            raise UserError(
                f'{where}: give "item_id", both "candidate" and "unit_id", or both "candidate" and '
                f'"sentence".'
            )
        if iid in out.items and out.items[iid] != LABELS[label]:
            raise UserError(f"{where}: item {iid} is labelled twice with different labels; keep one.")
        out.items[iid] = LABELS[label]
    return out


def resolve_labels(
    labels: Labels, units: Sequence[KnowledgeUnit], candidates: Sequence[str]
) -> tuple[dict[str, int], LabelStats]:
    """Item id -> label for the run: the id labels as given, plus each sentence label applied to every unit
    of its candidate traced to that sentence (and file, when the label names one). Returns the labels and
    counts: sentence labels used / unused and the items they labelled."""
    out = dict(labels.items)
    by_evidence: dict[str, list[KnowledgeUnit]] = {}
    for u in units:
        if u.evidence:
            by_evidence.setdefault(normalise(u.evidence), []).append(u)
    used = 0
    from_sentences = 0
    names = set(candidates)
    for sl in labels.sentences:
        hits = [
            u
            for u in by_evidence.get(sl.sentence, [])
            if sl.source is None or (u.source is not None and Path(u.source).name == sl.source)
        ]
        if sl.candidate not in names or not hits:
            continue
        used += 1
        for u in hits:
            iid = item_id(sl.candidate, u.unit_id)
            if iid not in out:
                out[iid] = sl.label
                from_sentences += 1
    stats = LabelStats(
        sentence_labels=len(labels.sentences),
        sentence_labels_used=used,
        sentence_labels_unused=len(labels.sentences) - used,
        items_from_sentences=from_sentences,
        item_labels=len(labels.items),
    )
    return out, stats


def _num(x: Any) -> float | None:
    return None if x is None or not math.isfinite(float(x)) else round(float(x), 4)


def _corr(x: list[float], y: list[float]) -> Correlations:
    c = correlations(x, y)
    return Correlations(pearson=_num(c.pearson), spearman=_num(c.spearman), kendall=_num(c.kendall))


def meta_evaluate(
    items: Sequence[ReckonItem], labels: dict[str, int], methods: dict[str, float | None]
) -> MetaEvaluation:
    """`items` are the run's (candidate, unit) items; of each, its `item_id`, `candidate` and `scores`
    ({method: score or None}) are read. `methods` maps each method to its threshold (None for methods that
    already give 0/1). Per method: n, accuracy, kappa with `kappa_lo` / `kappa_hi` (bootstrap 95%), the
    `confusion` matrix (rows the human label, columns the method's, both in CATEGORIES order), and the
    item-level and per-candidate correlations."""
    by_id = {it.item_id: it for it in items}
    matched = [i for i in labels if i in by_id]
    candidates = list(dict.fromkeys(it.candidate for it in items))
    human_by_cand: dict[str, list[int]] = {}
    for i in matched:
        human_by_cand.setdefault(by_id[i].candidate, []).append(labels[i])
    result = MetaEvaluation(
        n_labels=len(labels),
        matched=len(matched),
        unmatched=len(labels) - len(matched),
        human=[
            HumanScore(candidate=c, n=len(human_by_cand.get(c, [])), score=_mean(human_by_cand.get(c, [])))
            for c in candidates
        ],
        methods=[],
    )
    for method, threshold in methods.items():
        pairs = [
            (labels[i], float(s), by_id[i].candidate)
            for i in matched
            if (s := by_id[i].scores.get(method)) is not None
        ]
        human = [h for h, _, _ in pairs]
        cont = [s for _, s, _ in pairs]
        binary = [int(s >= threshold) if threshold is not None else int(s >= 0.5) for s in cont]
        ag = agreement([_CATEGORY[h] for h in human], [_CATEGORY[b] for b in binary], CATEGORIES)
        per_c: dict[str, list[tuple[int, float]]] = {}
        for h, s, c in pairs:
            per_c.setdefault(c, []).append((h, s))
        cands = [c for c in candidates if c in per_c]
        hx = [float(np.mean([h for h, _ in per_c[c]])) for c in cands]
        mx = [float(np.mean([s for _, s in per_c[c]])) for c in cands]
        result.methods.append(
            MethodAgreement(
                method=method,
                threshold=threshold,
                n=len(pairs),
                accuracy=_num(ag.accuracy),
                kappa=_num(ag.kappa),
                kappa_lo=_num(ag.kappa_lo),
                kappa_hi=_num(ag.kappa_hi),
                confusion=ag.confusion,
                item=_corr(cont, [float(h) for h in human]),
                per_candidate_scores=[
                    CandidateScore(
                        candidate=c,
                        method=_mean([s for _, s in per_c[c]]),
                        human=_mean([h for h, _ in per_c[c]]),
                    )
                    for c in cands
                ],
                candidate=_corr(mx, hx),
                n_candidates=len(cands),
            )
        )
    return result


def _mean(values: list[float] | list[int]) -> float | None:
    return round(float(np.mean(values)), 4) if values else None
