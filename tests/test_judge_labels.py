"""The judge-agreement sets (bench/data/judge_labels.jsonl and the held-out judge_labels_heldout*.jsonl,
issue 17): well-formed, balanced, grounded in the sample corpus."""

from __future__ import annotations

import html
import json
import re
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LABELS = ROOT / "bench" / "data" / "judge_labels.jsonl"
HELDOUT = ROOT / "bench" / "data" / "judge_labels_heldout.jsonl"
# Per file: id prefix, fewest items, fewest items per case.
SETS = {
    LABELS: ("j", 110, 6),
    HELDOUT: ("h", 80, 4),
    **{
        ROOT / "bench" / "data" / f"judge_labels_heldout{n}.jsonl": (p, 80, 3)
        for n, p in ((2, "k"), (3, "m"), (4, "n"), (5, "p"))
    },
}
CORPUS = ROOT / "src" / "proctor" / "data" / "sample_corpus"

FIELDS = {"id", "question", "reference", "answer", "label", "case", "note"}
OPTIONAL_FIELDS = {"reference_paraphrased"}
LABEL_VALUES = {"correct", "incorrect"}
# The label each case must carry; None = the case mixes both labels.
CASE_LABEL: dict[str, str | None] = {
    "exact": "correct",
    "extra_detail": "correct",
    "paraphrase": "correct",
    "units": "correct",
    "near_miss_name": "incorrect",
    "near_miss_number": "incorrect",
    "wrong_confident": "incorrect",
    "world_knowledge": None,
    "hedge": None,
    "refusal": "incorrect",
    "negation": None,
    "partial": "incorrect",
    "list_alternatives": "incorrect",
}
MAX_PARAPHRASED_REFERENCES = 10
# Capitalised words that say nothing about where a reference comes from.
STOPWORDS = {"the", "a", "an", "it", "in", "on", "at", "of", "and", "or", "from", "since", "about", "dr"}


def _normalise(text: str) -> str:
    """Lower case, no markup or quotes, no thousands separators, single spaces."""
    text = html.unescape(re.sub(r"<[^>]+>", " ", text))
    text = text.replace("**", "").replace("\u2019", "'").replace("\u2013", "-").replace("\u00a0", " ")
    text = re.sub(r"(?<=\d),(?=\d{3}\b)", "", text)
    text = re.sub(r"[\"*_]", "", text)
    return re.sub(r"\s+", " ", text).strip().lower()


def _key_tokens(reference: str) -> list[str]:
    """Numbers and capitalised words of a reference, normalised."""
    plain = re.sub(r"(?<=\d),(?=\d{3}\b)", "", reference)
    numbers = re.findall(r"\d+(?:\.\d+)?", plain)
    names = [w.lower() for w in re.findall(r"\b[A-Z][\w'-]*", plain) if w.lower() not in STOPWORDS]
    return numbers + names


@pytest.fixture(scope="module", params=list(SETS), ids=lambda p: p.stem)
def labelled(request: pytest.FixtureRequest) -> Path:
    return request.param


@pytest.fixture(scope="module")
def items(labelled: Path) -> list[dict]:
    lines = labelled.read_text(encoding="utf-8").splitlines()
    rows = []
    for number, line in enumerate(lines, start=1):
        assert line.strip(), f"line {number} is blank"
        row = json.loads(line)
        assert isinstance(row, dict), f"line {number} is not a JSON object"
        rows.append(row)
    return rows


@pytest.fixture(scope="module")
def corpus_text() -> str:
    files = sorted(p for p in CORPUS.iterdir() if p.is_file())
    assert len(files) == 10
    return _normalise("\n".join(p.read_text(encoding="utf-8") for p in files))


def test_fields_and_values(items: list[dict], labelled: Path) -> None:
    prefix = SETS[labelled][0]
    for row in items:
        keys = set(row)
        assert keys >= FIELDS, f"{row.get('id')}: missing {FIELDS - keys}"
        assert keys <= FIELDS | OPTIONAL_FIELDS, f"{row['id']}: unknown {keys - FIELDS - OPTIONAL_FIELDS}"
        assert re.fullmatch(rf"{prefix}\d{{3}}", row["id"]), row["id"]
        assert row["label"] in LABEL_VALUES, row["id"]
        assert row["case"] in CASE_LABEL, row["id"]
        for field in FIELDS:
            assert isinstance(row[field], str) and row[field].strip(), f"{row['id']}: empty {field}"
        assert row.get("reference_paraphrased", True) is True, row["id"]


def test_ids_unique_and_size(items: list[dict], labelled: Path) -> None:
    ids = [row["id"] for row in items]
    assert len(ids) == len(set(ids))
    assert len(items) >= SETS[labelled][1]
    pairs = [(row["question"], row["answer"]) for row in items]
    assert len(pairs) == len(set(pairs)), "a question-answer pair occurs twice"


def test_balance(items: list[dict]) -> None:
    share = sum(row["label"] == "correct" for row in items) / len(items)
    assert 0.40 <= share <= 0.60, share


def test_cases(items: list[dict], labelled: Path) -> None:
    counts = Counter(row["case"] for row in items)
    for case in CASE_LABEL:
        assert counts[case] >= SETS[labelled][2], f"{case}: {counts[case]} items"
    for row in items:
        expected = CASE_LABEL[row["case"]]
        assert expected is None or row["label"] == expected, f"{row['id']}: {row['case']} is {expected}"
    for case, expected in CASE_LABEL.items():
        if expected is None:
            labels = {row["label"] for row in items if row["case"] == case}
            assert labels == LABEL_VALUES, f"{case} should mix both labels"


def test_case_shapes(items: list[dict]) -> None:
    """`exact` answers are the reference; `extra_detail` answers contain it."""

    def bare(text: str) -> str:
        return re.sub(r"^the ", "", _normalise(text).rstrip("."))

    for row in items:
        if row["case"] == "exact":
            assert bare(row["answer"]) == bare(row["reference"]), row["id"]
        elif row["case"] == "extra_detail":
            assert bare(row["reference"]) in _normalise(row["answer"]), row["id"]
            assert bare(row["answer"]) != bare(row["reference"]), row["id"]


def test_references_grounded_in_corpus(items: list[dict], corpus_text: str) -> None:
    corpus_words = set(re.findall(r"[\w'-]+|\d+(?:\.\d+)?", corpus_text))
    paraphrased = [row["id"] for row in items if row.get("reference_paraphrased")]
    assert len(paraphrased) <= MAX_PARAPHRASED_REFERENCES, paraphrased
    for row in items:
        if row.get("reference_paraphrased"):
            continue
        reference = row["reference"]
        if _normalise(reference).rstrip(".") in corpus_text:
            continue
        keys = _key_tokens(reference)
        assert keys, f"{row['id']}: {reference!r} is not in the corpus and has no number or name to check"
        missing = [k for k in keys if k not in corpus_words]
        assert not missing, f"{row['id']}: {missing} of {reference!r} not in the corpus"
