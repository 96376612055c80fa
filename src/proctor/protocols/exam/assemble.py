"""From filtered drafts to the exam: pick three distractors, balance surface cues, shuffle the options.

Two cues let a test-taker score above chance without knowing anything: the position of the correct
letter and the length of the correct option. Both are made uninformative here, with the run's seeded
generator:

* letters — the correct letters of the kept questions are a shuffled, balanced sequence (each letter
  equally often, up to one for the remainder); the distractors fill the other positions in random
  order. Plain per-question shuffling leaves the best fixed letter at about 30% on a 100-question exam
  by chance alone.
* lengths — when the examiner wrote spare distractors, the three kept are chosen jointly across the
  exam so that the correct option is the longest in about a quarter of the questions and the shortest
  in about a quarter (`choose_distractors`). If the always-longest or always-shortest baseline still
  exceeds chance + tolerance, the questions with the strongest length cue are dropped (filter
  ``length_cue``) until it does not. A baseline *below* chance cannot be fixed by dropping questions
  cheaply; it is reported (the examiner prompt asks for distractors both shorter and longer than the
  correct answer to make that rare).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import numpy as np

from proctor.constants import LETTERS
from proctor.ids import content_id
from proctor.protocols.exam.exam_file import ExamQuestion
from proctor.protocols.exam.filters import MIN_DISTRACTORS, Draft

N_OPTIONS = MIN_DISTRACTORS + 1


def balanced_sequence(n: int, k: int, rng: np.random.Generator) -> list[int]:
    """n values in 0..k-1, each used n // k times plus distinct random extras, in random order."""
    base = [i for i in range(k) for _ in range(n // k)]
    extra = [int(x) for x in rng.permutation(k)[: n % k]]
    seq = np.array(base + extra, dtype=int)
    return [int(x) for x in rng.permutation(seq)]


def _combos(d: Draft) -> list[tuple[int, ...]]:
    """3-subsets of the surviving distractors, in the examiner's order (first three first)."""
    return list(itertools.combinations(range(len(d.distractors)), MIN_DISTRACTORS))


def choose_distractors(
    drafts: list[Draft], rng: np.random.Generator, *, balance: bool = True
) -> list[list[str]]:
    """Three distractors per draft. Without balancing: the examiner's first three. With balancing: the
    subsets are chosen jointly (coordinate descent over the drafts, in seeded random order) so that the
    correct option is the longest of its question in a quarter of the exam and the shortest in another
    quarter; among equally good subsets the one closest to the examiner's order wins."""
    combos = [_combos(d) for d in drafts]
    pick = [0] * len(drafts)
    if not balance or not drafts:
        return [[d.distractors[i] for i in c[0]] for d, c in zip(drafts, combos, strict=True)]
    credit: list[list[tuple[float, float]]] = []
    for d, cs in zip(drafts, combos, strict=True):
        row = []
        for c in cs:
            choices = [d.correct, *(d.distractors[i] for i in c)]
            row.append((length_credit(choices, 0, "longest"), length_credit(choices, 0, "shortest")))
        credit.append(row)
    target = len(drafts) / N_OPTIONS
    total_l = sum(credit[i][0][0] for i in range(len(drafts)))
    total_s = sum(credit[i][0][1] for i in range(len(drafts)))

    def cost(lv: float, sv: float) -> float:
        return (lv - target) ** 2 + (sv - target) ** 2

    for _ in range(20):
        improved = False
        for i in (int(x) for x in rng.permutation(len(drafts))):
            cur_l, cur_s = credit[i][pick[i]]
            base_l, base_s = total_l - cur_l, total_s - cur_s
            costs = [cost(base_l + lv, base_s + sv) for lv, sv in credit[i]]
            best = min(range(len(costs)), key=costs.__getitem__)  # ties: the examiner's order
            if best != pick[i] and costs[best] < costs[pick[i]] - 1e-12:
                pick[i] = best
                total_l, total_s = base_l + credit[i][best][0], base_s + credit[i][best][1]
                improved = True
        if not improved:
            break
    return [[d.distractors[j] for j in cs[p]] for d, cs, p in zip(drafts, combos, pick, strict=True)]


def length_credit(choices: list[str], answer_index: int, pick: str) -> float:
    """Expected score of always picking the longest (or shortest) option, ties split evenly."""
    lengths = [len(c.strip()) for c in choices]
    target = max(lengths) if pick == "longest" else min(lengths)
    tied = [i for i, x in enumerate(lengths) if x == target]
    return 1.0 / len(tied) if answer_index in tied else 0.0


def length_cue_strength(choices: list[str], answer_index: int) -> float:
    """How much the correct option stands out by length (relative gap to the nearest other option in
    the direction it sticks out); 0 when it is neither the unique longest nor the unique shortest."""
    lengths = [len(c.strip()) for c in choices]
    lc = lengths[answer_index]
    others = [x for i, x in enumerate(lengths) if i != answer_index]
    if lc > max(others):
        return (lc - max(others)) / lc
    if lc < min(others):
        return (min(others) - lc) / min(others)
    return 0.0


class Options(Protocol):
    """Anything with options and the index of the correct one (a question, a question being assembled)."""

    @property
    def choices(self) -> list[str]: ...
    @property
    def answer_index(self) -> int: ...


OptionsT = TypeVar("OptionsT", bound=Options)


@dataclass(frozen=True)
class Assembling:
    """A draft with the distractors chosen for it, the correct option first."""

    draft: Draft
    choices: list[str]
    answer_index: int = 0


def _share(items: Sequence[Options], pick: str) -> float:
    return sum(length_credit(q.choices, q.answer_index, pick) for q in items) / len(items)


def drop_length_cues(items: list[OptionsT], tolerance: float) -> tuple[list[OptionsT], int]:
    """Drop the strongest length cues while either length baseline exceeds chance + tolerance."""
    kept = list(items)
    dropped = 0
    limit = 1.0 / N_OPTIONS + tolerance
    while len(kept) > N_OPTIONS:
        pick = next((p for p in ("longest", "shortest") if _share(kept, p) > limit), None)
        if pick is None:
            break
        cued = [i for i, q in enumerate(kept) if length_credit(q.choices, q.answer_index, pick) == 1.0]
        if not cued:
            break
        worst = max(cued, key=lambda i: (length_cue_strength(kept[i].choices, kept[i].answer_index), -i))
        kept.pop(worst)
        dropped += 1
    return kept, dropped


def shuffle_options(
    correct: str, distractors: list[str], letter: int, rng: np.random.Generator
) -> tuple[list[str], int]:
    """Options with the correct one at position `letter` and the distractors in random order."""
    order = [distractors[int(i)] for i in rng.permutation(len(distractors))]
    return [*order[:letter], correct, *order[letter:]], letter


def filter_drafts(
    drafts: list[Draft], cfg: Any, emb: Any, source_texts: dict[str, str], example_passage: str | None
) -> None:
    """Run the per-question filters on every draft not checked yet (in place; see `filter_draft`)."""
    from proctor.protocols.exam.filters import ExampleTerms, compile_patterns, filter_draft

    todo = [d for d in drafts if not d.checked]
    if not todo:
        return
    patterns = compile_patterns(cfg.filters.not_self_contained)
    example = ExampleTerms.of(example_passage) if example_passage else None
    if emb is not None:
        texts = [t for d in todo for t in (d.question, d.correct, *d.distractors)]
        emb.prime(texts + [source_texts[d.chunk_id] for d in todo if d.chunk_id in source_texts])
    for d in todo:
        filter_draft(d, cfg.filters, patterns, emb, source_texts.get(d.chunk_id), example)


def assemble_exam(
    drafts: list[Draft],
    cfg: Any,
    emb: Any,
    source_texts: dict[str, str],
    rng: np.random.Generator,
    *,
    generator: str,
    prompt_version: str,
    example_passage: str | None = None,
) -> tuple[list[ExamQuestion], AssemblyStats]:
    """Filter the drafts, choose distractors, balance cues and shuffle: (exam in plan order, counts).

    `cfg` is the protocol `Config`; `emb` an `Embeddings` or None (embedding filters skipped);
    `example_passage` the examiner prompt's worked example (for the `copies_example` filter)."""
    from proctor.protocols.exam.filters import near_duplicates

    filter_drafts(drafts, cfg, emb, source_texts, example_passage)
    filtered: dict[str, int] = {}
    removed: dict[str, int] = {}
    survivors: list[Draft] = []
    for d in drafts:
        for reason, n in d.removed.items():
            removed[reason] = removed.get(reason, 0) + n
        if d.reason:
            filtered[d.reason] = filtered.get(d.reason, 0) + 1
        else:
            survivors.append(d)
    dup = near_duplicates(
        [d.question for d in survivors],
        emb,
        cfg.filters.duplicate_cosine,
        answers=[d.correct for d in survivors],
        cfg=cfg.filters,
    )
    if any(dup):
        filtered["near_duplicate"] = sum(dup)
    survivors = [d for d, is_dup in zip(survivors, dup, strict=True) if not is_dup]
    # Distractors chosen jointly to balance the length cue, then the strongest remaining cues dropped.
    chosen = choose_distractors(survivors, rng, balance=cfg.balance.option_lengths)
    items = [Assembling(d, [d.correct, *c]) for d, c in zip(survivors, chosen, strict=True)]
    if cfg.balance.drop_length_cues:
        items, n_dropped = drop_length_cues(items, cfg.balance.length_cue_tolerance)
        if n_dropped:
            filtered["length_cue"] = n_dropped
    # Balanced correct letters, distractors shuffled around them.
    letters = balanced_sequence(len(items), N_OPTIONS, rng)
    exam: list[ExamQuestion] = []
    for it, letter in zip(items, letters, strict=True):
        d = it.draft
        choices, idx = shuffle_options(d.correct, it.choices[1:], letter, rng)
        exam.append(
            ExamQuestion(
                id=f"exq_{content_id(d.question, choices, idx, d.chunk_id)}",
                question=d.question,
                choices=choices,
                answer=LETTERS[idx],
                answer_index=idx,
                rationale=d.rationale,
                source_chunk_ids=[d.chunk_id],
                generator=generator,
                prompt_version=prompt_version,
                topic=d.source,
                source=d.source,
                draft_key=d.key,
            )
        )
    stats = AssemblyStats(
        filtered=dict(sorted(filtered.items())),
        distractors_removed=dict(sorted(removed.items())),
        kept=len(exam),
        embedding_filters=emb is not None,
    )
    return exam, stats


@dataclass
class AssemblyStats:
    """What assembling removed: questions by filter, spare distractors by reason; questions kept."""

    filtered: dict[str, int]
    distractors_removed: dict[str, int]
    kept: int
    embedding_filters: bool
