"""Classic answer metrics: SQuAD/HotpotQA answer normalisation, exact match and token-overlap F1.

These follow the HotpotQA definition that R-Eval reports, so scores are comparable with it:

* normalise: lowercase, drop punctuation, drop the articles a/an/the, collapse whitespace;
* if either side normalises to ``yes``, ``no`` or ``noanswer`` and the two differ, F1 = 0;
* otherwise F1 is the harmonic mean of token precision and recall (tokens counted as a multiset).

Two deliberate differences, both only visible on unusual inputs:

* punctuation is every Unicode punctuation character (so a curly apostrophe is dropped like ``'``),
  not only ASCII ``string.punctuation`` (which is also still dropped);
* when both sides normalise to the empty string, precision = recall = F1 = 1 (they match exactly,
  so F1 agrees with exact match), where HotpotQA's code returns 0.

`gold` may be one string or a list of acceptable answers; the best-scoring gold is used.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections import Counter
from collections.abc import Sequence

Gold = str | Sequence[str]

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_SPECIAL = frozenset({"yes", "no", "noanswer"})
_ASCII_PUNCT = frozenset(string.punctuation)


def _is_punct(ch: str) -> bool:
    return ch in _ASCII_PUNCT or unicodedata.category(ch).startswith("P")


def normalize_answer(s: str) -> str:
    """Lowercase, remove punctuation, remove articles (a/an/the), collapse whitespace."""
    s = "".join(ch for ch in s.lower() if not _is_punct(ch))
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


def _golds(gold: Gold) -> list[str]:
    if isinstance(gold, str):
        return [gold]
    golds = list(gold)
    if not golds:
        raise ValueError("gold must be a string or a non-empty list of acceptable answers")
    return golds


def _prf_single(pred: str, gold: str) -> tuple[float, float, float]:
    p_norm, g_norm = normalize_answer(pred), normalize_answer(gold)
    if (p_norm in _SPECIAL or g_norm in _SPECIAL) and p_norm != g_norm:
        return 0.0, 0.0, 0.0
    p_toks, g_toks = p_norm.split(), g_norm.split()
    same = sum((Counter(p_toks) & Counter(g_toks)).values())
    if same == 0:
        return 0.0, 0.0, 0.0
    precision = same / len(p_toks)
    recall = same / len(g_toks)
    return precision, recall, 2 * precision * recall / (precision + recall)


def precision_recall_f1(pred: str, gold: Gold) -> tuple[float, float, float]:
    """(precision, recall, f1) of `pred` against the gold answer with the highest F1."""
    return max((_prf_single(pred, g) for g in _golds(gold)), key=lambda prf: prf[2])


def f1(pred: str, gold: Gold) -> float:
    """HotpotQA's token F1 in [0, 1]; the maximum over a list of golds. As in HotpotQA's official
    evaluation (whose numbers R-Eval reports), no common token means 0.0 — also when prediction and gold
    both normalise to nothing ("a an the" vs "the"), where SQuAD's script would give 1.0."""
    return precision_recall_f1(pred, gold)[2]


def exact_match(pred: str, gold: Gold) -> float:
    """1.0 if `pred` equals any gold after normalisation, else 0.0."""
    p_norm = normalize_answer(pred)
    return float(any(p_norm == normalize_answer(g) for g in _golds(gold)))
