"""Comparing two runs of one protocol: items matched across the runs, per candidate and judge the metric
in each run, the paired difference with a bootstrap interval and McNemar's exact test on the discordant
pairs, and the items whose verdict flipped (with their answer in each run). The viewer compares from the
runs' side indexes (`compare_indexed`: one SQL join of per-run outcome tables, fast and memory-flat on big
runs); `compare` streams two loaded runs (what `proctor compare` and gates use, without writing an index).

Items are matched by `kind|candidate|question_id` when an item carries a candidate and a question id
(so a changed model behind the same candidate name still matches), else by their store key (content-
derived: the same work in two runs has the same key). Only binary outcomes are compared: a verdict
"correct"/"incorrect", or a score cut at 0.5 (the meta-evaluation's rule).

Humans can say which run's answer to a flipped item is better (A / B / tie, stored as labels keyed by the
pair, see `proctor.viewer.labels.PreferencePair`); `preference_summary` counts the current preferences and
tests A against B with a two-sided sign test (ties left out).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from scipy.stats import binomtest

from proctor.store.index import paired_outcomes
from proctor.store.record import ItemRecord, RunRecord
from proctor.viewer import items as items_q
from proctor.viewer.labels import Label, PreferencePair, swap_preference
from proctor.viewer.metaeval import THRESHOLD

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0
FLIPPED_SHOWN = 500


@dataclass(frozen=True)
class Outcome:
    key: str
    candidate: str
    judge: str
    correct: bool
    title: str


@dataclass
class PairedDelta:
    candidate: str
    judge: str
    n: int
    a: float
    b: float
    delta: float  # b - a
    lo: float
    hi: float
    gained: int  # incorrect in A, correct in B
    lost: int  # correct in A, incorrect in B
    p_mcnemar: float


@dataclass
class Flip:
    candidate: str
    judge: str
    key_a: str
    key_b: str
    title: str
    a: bool
    b: bool
    answer_a: str = ""  # the item's answer in each run (shortened), so a flip shows what changed
    answer_b: str = ""


@dataclass
class Comparison:
    run_a: str
    run_b: str
    matched: int  # matched (item, judge) outcomes
    only_a: int
    only_b: int
    deltas: list[PairedDelta] = field(default_factory=list)
    flips: list[Flip] = field(default_factory=list)
    flips_total: int = 0


def outcomes(run: RunRecord) -> Iterator[tuple[str, Outcome]]:
    """(match key, outcome) for every judged item with a binary outcome, streamed from the store."""
    for o in run.judged_outcomes():
        if o.verdict in ("correct", "incorrect"):
            ok = o.verdict == "correct"
        elif o.score is not None:
            ok = o.score >= THRESHOLD
        else:
            continue
        cand = o.candidate
        match = match_key(o.kind, cand, o.question_id, o.item_key)
        yield f"{match}|{o.judge}", Outcome(o.item_key, cand or "", o.judge, ok, o.title)


def match_key(kind: str, candidate: str | None, question_id: str | None, item_key: str) -> str:
    """What identifies an item across two runs: `kind|candidate|question_id` when the item names both
    (a changed model behind the same candidate name still matches), else its content-derived key."""
    if candidate is not None and question_id is not None:
        return f"{kind}|{candidate}|{question_id}"
    return item_key


def paired_delta(candidate: str, judge: str, va: np.ndarray, vb: np.ndarray) -> PairedDelta:
    """The paired comparison of one group's 0/1 outcomes in run A (`va`) and run B (`vb`, same order):
    the means, their difference with a bootstrap interval, and McNemar's exact test."""
    return paired_delta_of_counts(
        candidate,
        judge,
        n=len(va),
        correct_a=int(va.sum()),
        correct_b=int(vb.sum()),
        gained=int((~va & vb).sum()),
        lost=int((va & ~vb).sum()),
    )


def paired_delta_of_counts(
    candidate: str, judge: str, *, n: int, correct_a: int, correct_b: int, gained: int, lost: int
) -> PairedDelta:
    """`paired_delta` from the counts alone (all it depends on): n pairs, correct in A and in B, and the
    discordant pairs."""
    lo, hi = interval_of_counts(n, gained, lost)
    a = correct_a / n if n else float("nan")
    b = correct_b / n if n else float("nan")
    return PairedDelta(
        candidate=candidate,
        judge=judge,
        n=n,
        a=a,
        b=b,
        delta=b - a,
        lo=lo,
        hi=hi,
        gained=gained,
        lost=lost,
        p_mcnemar=mcnemar_exact(gained, lost),
    )


def paired_interval(a: np.ndarray, b: np.ndarray, *, seed: int = BOOTSTRAP_SEED) -> tuple[float, float]:
    """Percentile bootstrap 95% interval of mean(b - a) over paired 0/1 outcomes."""
    d = b.astype(np.int64) - a.astype(np.int64)
    return interval_of_counts(len(d), int((d == 1).sum()), int((d == -1).sum()), seed=seed)


def interval_of_counts(n: int, gained: int, lost: int, *, seed: int = BOOTSTRAP_SEED) -> tuple[float, float]:
    """`paired_interval` from the counts: resampling pairs only changes how many pairs are -1, 0, +1, so
    each resample is one multinomial draw (O(1) in n)."""
    if n == 0:
        return float("nan"), float("nan")
    p = np.array([lost, n - gained - lost, gained], dtype=float) / n
    rng = np.random.default_rng(seed)
    counts = rng.multinomial(n, p, size=BOOTSTRAP_RESAMPLES)
    means = (counts[:, 2] - counts[:, 0]) / n
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def sign_test(wins: int, losses: int) -> float:
    """Two-sided exact sign test: `wins` of `wins + losses` as a binomial with p = 1/2 (1.0 with none)."""
    m = wins + losses
    return 1.0 if m == 0 else float(binomtest(min(wins, losses), m, 0.5).pvalue)


def mcnemar_exact(gained: int, lost: int) -> float:
    """Two-sided exact McNemar p-value: the sign test on the discordant pairs."""
    return sign_test(gained, lost)


@dataclass
class PreferenceSummary:
    a: int = 0  # current preferences for run A's answer (one per pair and annotator)
    b: int = 0
    tie: int = 0
    p_sign: float = 1.0  # two-sided sign test of a against b, ties left out
    # pair key as shown (A = the page's run A) -> [(annotator, "a" | "b" | "tie", note)]
    by_pair: dict[tuple[str, str], list[tuple[str, str, str]]] = field(default_factory=dict)


def preference_summary(run_a: str, run_b: str, labels: list[Label]) -> PreferenceSummary:
    """The current preference labels between `run_a` and `run_b` (labels of the pair's canonical first run;
    each (pair, annotator)'s latest), in the page's orientation: "a" means run_a's answer."""
    out = PreferenceSummary()
    for lab in labels:
        pair = PreferencePair.parse(lab.item_key)
        if pair is None or {pair.run_a, pair.run_b} != {run_a, run_b}:
            continue
        shown = lab.label
        if pair.run_a != run_a:  # stored with the runs the other way round
            pair = PreferencePair(pair.run_b, pair.item_b, pair.run_a, pair.item_a)
            shown = swap_preference(lab.label)
        out.by_pair.setdefault((pair.item_a, pair.item_b), []).append((lab.annotator, shown, lab.note))
        if shown == "a":
            out.a += 1
        elif shown == "b":
            out.b += 1
        else:
            out.tie += 1
    out.p_sign = sign_test(out.a, out.b)
    return out


def compare(run_a: str, record_a: RunRecord, run_b: str, record_b: RunRecord) -> Comparison:
    a = dict(outcomes(record_a))
    b = dict(outcomes(record_b))
    shared = [k for k in a if k in b]
    cmp = Comparison(
        run_a, run_b, matched=len(shared), only_a=len(a) - len(shared), only_b=len(b) - len(shared)
    )
    groups: dict[tuple[str, str], list[str]] = {}
    for k in shared:
        groups.setdefault((a[k].candidate, a[k].judge), []).append(k)
    for (cand, judge), keys in sorted(groups.items()):
        va = np.array([a[k].correct for k in keys], dtype=bool)
        vb = np.array([b[k].correct for k in keys], dtype=bool)
        cmp.deltas.append(paired_delta(cand, judge, va, vb))
        for k in keys:
            if a[k].correct != b[k].correct:
                cmp.flips_total += 1
                if len(cmp.flips) < FLIPPED_SHOWN:
                    cmp.flips.append(
                        Flip(
                            cand,
                            judge,
                            a[k].key,
                            b[k].key,
                            a[k].title or b[k].title,
                            a[k].correct,
                            b[k].correct,
                        )
                    )
    answers_a = items_q.answers(record_a, sorted({fl.key_a for fl in cmp.flips}))
    answers_b = items_q.answers(record_b, sorted({fl.key_b for fl in cmp.flips}))
    for fl in cmp.flips:
        fl.answer_a, fl.answer_b = answers_a.get(fl.key_a, ""), answers_b.get(fl.key_b, "")
    return cmp


def compare_indexed(
    run_a: str, folder_a: Path, record_a: RunRecord, run_b: str, folder_b: Path, record_b: RunRecord
) -> Comparison:
    """`compare` for the viewer: the same comparison from the runs' side indexes (`ensure_index` built
    them), joined in SQL, so a request reads counts and the flipped items shown, never every judgment."""
    paired = paired_outcomes(folder_a, folder_b, FLIPPED_SHOWN)
    cmp = Comparison(run_a, run_b, matched=paired.matched, only_a=paired.only_a, only_b=paired.only_b)
    cmp.deltas = [
        paired_delta_of_counts(
            g.candidate,
            g.judge,
            n=g.n,
            correct_a=g.correct_a,
            correct_b=g.correct_b,
            gained=g.gained,
            lost=g.lost,
        )
        for g in paired.groups
    ]
    cmp.flips_total = paired.flips_total
    items_a = record_a.items_by_key({f.key_a for f in paired.flips})
    items_b = record_b.items_by_key({f.key_b for f in paired.flips})
    answers_a = items_q.answers(record_a, sorted(items_a))
    answers_b = items_q.answers(record_b, sorted(items_b))
    for f in paired.flips:
        title = _title(items_a.get(f.key_a)) or _title(items_b.get(f.key_b))
        cmp.flips.append(
            Flip(f.candidate, f.judge, f.key_a, f.key_b, title, f.a, f.b,
                 answers_a.get(f.key_a, ""), answers_b.get(f.key_b, ""))
        )  # fmt: skip
    return cmp


def _title(item: ItemRecord | None) -> str:
    """What `RunRecord.judged_outcomes` calls an item's title: its question, else its keyword."""
    data = item.data if item is not None else None
    if not isinstance(data, dict):
        return ""
    for name in ("question", "keyword"):
        if data.get(name) is not None:
            return str(data[name])
    return ""
