"""Closed-book answerability (issue 18): the numbers from letter logprobs and from sampled answers on
hand-made replies, and the filter end to end with controlled scripted candidates — a closed-book one
that answers exactly the items guessable from their options, and one that reads the source passage."""

from __future__ import annotations

import json
import math
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from proctor.config import CorpusConfig
from proctor.constants import LETTERS
from proctor.corpus import load_corpus
from proctor.errors import StepError
from proctor.models import get_model
from proctor.models.scripted import register_script
from proctor.models.types import GenerationParams, Message, RawReply, TokenLogprob, Usage
from proctor.protocols.exam.exam_file import ExamQuestion
from proctor.protocols.exam.guessability import (
    ItemGuessability,
    answer_closed_book,
    closed_book_accuracy,
    is_guessable,
    p_from_probs,
    p_from_samples,
    rule_used,
)
from proctor.runner import run_config

# --- hand-made replies ------------------------------------------------------------------------------
ITEM = ExamQuestion(
    id="q1",
    question="Which colour is the lantern of Velmora harbour?",
    choices=["red", "green", "white", "amber"],
    answer="B",
    answer_index=1,
)


def _first_token(top: dict[str, float]) -> RawReply:
    """A one-token reply whose logprobs list the given alternatives (probabilities)."""
    lps = {k: math.log(v) for k, v in top.items()}
    best = max(lps, key=lambda k: lps[k])
    return RawReply(best, Usage(10, 1), logprobs=[TokenLogprob(best, lps[best], lps)], finish_reason="length")


def letter_logprob_model(messages: list[Message], params: GenerationParams) -> RawReply | str:
    # 0.1 of the mass is on a token that is no option letter: letters are renormalised over 0.9.
    return _first_token({"A": 0.4, "B": 0.3, "The": 0.1, "C": 0.1, "D": 0.1})


SAMPLED: list[GenerationParams] = []
# seed offset -> reply: B, B, C, B, (none) => p(B) = 3/5, the unparseable sample counted as not naming B.
SAMPLE_REPLIES = ["B", "Answer: B", "C. white", "(B)", "I cannot tell from the question alone."]


def sampling_model(messages: list[Message], params: GenerationParams) -> str:
    if params.temperature == 0.0:
        return "Probably (A)." if params.max_tokens > 1 else "Probably"  # greedy: no logprobs, a letter
    SAMPLED.append(params)
    return SAMPLE_REPLIES[(params.seed or 0) - 100]


def clueless_model(messages: list[Message], params: GenerationParams) -> str:
    return "No idea."


register_script("guess-letters", letter_logprob_model)
register_script("guess-sampling", sampling_model)
register_script("guess-clueless", clueless_model)


async def test_guessability_from_letter_logprobs_is_the_renormalised_probability_of_the_answer() -> None:
    g = await answer_closed_book(
        get_model("scripted/guess-letters", cache=False), ITEM, samples=5, seed=0, max_tokens=24
    )
    assert g.method == "letter_logprobs"
    assert g.p_correct == pytest.approx(0.3 / 0.9, abs=1e-6)
    assert g.picked == "A" and g.probs is not None and sum(g.probs.values()) == pytest.approx(1.0)
    assert p_from_probs({"A": 0.25, "B": 0.75}, "B") == 0.75 and p_from_probs({"A": 1.0}, "C") == 0.0


async def test_guessability_from_sampled_answers_counts_the_share_naming_the_answer() -> None:
    SAMPLED.clear()
    g = await answer_closed_book(
        get_model("scripted/guess-sampling", cache=False), ITEM, samples=5, seed=100, max_tokens=24
    )
    # The greedy reply "(A)" carries no probabilities, so it is not used: five samples at temperature > 0
    # with distinct seeds are.
    assert g.method == "sampling" and g.p_correct == 0.6 and g.picked == "B"
    assert g.samples == {"A": 0, "B": 3, "C": 1, "D": 0, "none": 1}
    assert [p.seed for p in SAMPLED] == [100, 101, 102, 103, 104]
    assert all(p.temperature > 0 for p in SAMPLED)
    assert p_from_samples(["A", None, "A", "C"], "A") == 0.5
    with pytest.raises(ValueError):
        p_from_samples([], "A")


async def test_no_answer_naming_an_option_is_a_failure_with_a_cause() -> None:
    with pytest.raises(StepError) as err:
        await answer_closed_book(
            get_model("scripted/guess-clueless", cache=False), ITEM, samples=3, seed=0, max_tokens=24
        )
    assert err.value.cause == "unparseable"


def test_threshold_is_inclusive_and_unmeasured_items_are_never_guessable() -> None:
    assert is_guessable(ItemGuessability(guessability=0.75), 0.75)
    assert not is_guessable(ItemGuessability(guessability=0.7499), 0.75)
    assert not is_guessable(ItemGuessability(guessability=None), 0.0)
    exam = [ITEM.model_copy(update={"id": i}) for i in ("a", "b", "c")]
    picks = {"a": ItemGuessability(picked="B"), "b": ItemGuessability(picked="C"), "c": ItemGuessability()}
    acc = closed_book_accuracy(exam, picks)
    assert (acc.value, acc.n) == (0.5, 2)


# --- the filter end to end with controlled candidates -----------------------------------------------
# Subject -> (correct answer, plausible distractors, implausible distractors). An item is written either
# with plausible distractors (it needs the corpus) or with implausible ones (answerable from the options
# alone: the correct option is the only one of the right kind).
FACTS = {
    "harbour": [
        ("the lantern colour of Velmora harbour", "green", ["red", "white", "amber"]),
        ("the opening year of Velmora harbour", "1742", ["1790", "1688", "1815"]),
        ("the founder of Velmora harbour", "Ostrid Kael", ["Mara Dune", "Ilse Varn", "Tobias Fenwright"]),
    ],
    "canal": [
        ("the length of the Tarn canal", "9 kilometres", ["4 kilometres", "12 kilometres", "30 kilometres"]),
        ("the chief engineer of the Tarn canal", "Petra Lund", ["Aldo Ferris", "Nina Holt", "Eda Moss"]),
        ("the main cargo of the Tarn canal", "tidal glass", ["salt fish", "timber", "wool bales"]),
    ],
    "festival": [
        ("the month of the Lantern Tide festival", "October", ["March", "July", "May"]),
        ("the venue of the Lantern Tide festival", "Kettle Point", ["Dunmere", "Gull Rock", "Ashby"]),
        ("the lantern count of the Lantern Tide festival", "1,500", ["300", "12,000", "750"]),
    ],
    "moot": [
        ("the quorum of the Moot of Forty", "twenty-one", ["twelve", "thirty", "nine"]),
        ("the meeting hall of the Moot of Forty", "Cistern House", ["Glass Hall", "Tide Court", "Fog Tower"]),
        ("the speaker title of the Moot of Forty", "the Warden", ["the Reeve", "the Steward", "Elder"]),
    ],
}
IMPLAUSIBLE = ["a small brown dog", "the smell of rain", "nineteen spoons"]
GUESSABLE = {"harbour": {0, 1}, "canal": {0, 2}, "festival": {2}, "moot": {1}}  # 6 of 12 items
UNANSWERABLE = "the speaker title of the Moot of Forty"  # the examiner names no option for it
TRUTH = {f"What is {s}?": a for facts in FACTS.values() for s, a, _ in facts}


def _options(text: str) -> dict[str, str]:
    block = text.rsplit("Question:", 1)[1]
    return dict(re.findall(r"^([A-J])\. (.*)$", block, re.M))


def _question(text: str) -> str:
    return text.rsplit("Question:", 1)[1].split("\n", 1)[0].strip()


def _wrong(opts: dict[str, str], truth: str) -> str:
    return next(k for k, v in opts.items() if v != truth)


def closed_book_examiner(messages: list[Message], params: GenerationParams) -> RawReply | str:
    """Answers from the options alone: when three options are implausible it puts 0.9 on the fourth;
    otherwise its favourite is a wrong option (it cannot know; 0.4 there, 0.2 elsewhere)."""
    text = messages[-1]["content"]
    assert "Passage" not in text  # closed-book: no context is ever shown
    opts, q = _options(text), _question(text)
    if UNANSWERABLE in q:
        return "I would need the documents for that."
    plausible = [k for k, v in opts.items() if v not in IMPLAUSIBLE]
    if len(plausible) == 1:
        return _first_token({k: 0.9 if k == plausible[0] else 0.1 / 3 for k in opts})
    wrong = _wrong(opts, TRUTH[q])
    return _first_token({k: 0.4 if k == wrong else 0.2 for k in opts})


def reference_sampler(messages: list[Message], params: GenerationParams) -> str:
    """A reference model without logprobs: on a guessable item 4 of 5 samples name the odd option out;
    otherwise it cycles through the letters by seed."""
    text = messages[-1]["content"]
    opts, q = _options(text), _question(text)
    if UNANSWERABLE in q:
        return "Unknown."
    plausible = [k for k, v in opts.items() if v not in IMPLAUSIBLE]
    seed = params.seed or 0
    if params.temperature == 0.0:
        return "Hmm."  # the greedy reply names no option: sampling decides
    if len(plausible) == 1:
        return plausible[0] if seed % 5 != 4 else _wrong(opts, TRUTH[q])
    return LETTERS[seed % len(opts)]


def candidate(messages: list[Message], params: GenerationParams) -> RawReply:
    """A candidate that answers from a passage when it is given one (full), and otherwise like the
    closed-book examiner (closed-book): right exactly on the guessable items."""
    text = messages[-1]["content"]
    opts, q = _options(text), _question(text)
    truth = TRUTH[q]
    context = text.split("Question:", 1)[0]
    if f"is {truth}." in context:
        right = next(k for k, v in opts.items() if v == truth)
        return _first_token({k: 0.85 if k == right else 0.05 for k in opts})
    plausible = [k for k, v in opts.items() if v not in IMPLAUSIBLE]
    pick = plausible[0] if len(plausible) == 1 else _wrong(opts, truth)
    return _first_token({k: 0.7 if k == pick else 0.1 for k in opts})


register_script("guess-examiner", closed_book_examiner)
register_script("guess-reference", reference_sampler)
register_script("guess-candidate", candidate)


def _exam_setup(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """The corpus (one chunk per topic) and an exam file of 12 items, 6 of them guessable."""
    docs = tmp_path / "docs"
    docs.mkdir()
    for topic, facts in FACTS.items():
        (docs / f"{topic}.md").write_text(
            f"# {topic.title()}\n\n" + "\n".join(f"Records say that {s} is {a}." for s, a, _ in facts) + "\n"
        )
    corpus = load_corpus(CorpusConfig(path=docs, min_chunk_chars=10, max_chunk_chars=4000))
    chunk_of = {c.source.rsplit("/", 1)[-1].removesuffix(".md"): c.chunk_id for c in corpus.chunks}
    exam: list[dict[str, Any]] = []
    kinds: dict[str, str] = {}
    for topic, facts in FACTS.items():
        for i, (subject, answer, plausible) in enumerate(facts):
            guessable = i in GUESSABLE[topic]
            distractors = IMPLAUSIBLE if guessable else plausible
            at = len(exam) % 4
            choices = [*distractors[:at], answer, *distractors[at:]]
            qid = f"{topic}-{i}"
            kinds[qid] = "guessable" if guessable else "needs corpus"
            exam.append(
                {
                    "id": qid,
                    "question": f"What is {subject}?",
                    "choices": choices,
                    "answer": LETTERS[at],
                    "answer_index": at,
                    "rationale": "stated",
                    "source_chunk_ids": [chunk_of[topic]],
                    "bloom": "remember",
                    "question_word": "what",
                    "generator": "hand",
                    "prompt_version": "hand",
                    "topic": f"{topic}.md",
                }
            )
    path = tmp_path / "exam.jsonl"
    path.write_text("".join(json.dumps(q) + "\n" for q in exam))
    return path, kinds


def _config(tmp_path: Path, exam_file: Path, name: str, max_guessability: str) -> Path:
    cfg = tmp_path / f"{name}.yaml"
    cfg.write_text(
        f"""
protocol: exam
name: {name}
seed: 0
corpus: {{path: docs, min_chunk_chars: 10, max_chunk_chars: 4000}}
models:
  examiner: scripted/guess-examiner
  reference: scripted/guess-reference
  cand: scripted/guess-candidate
roles: {{examiner: examiner}}
exam:
  exam_file: {exam_file}
  guessability_models: [reference]
  guessability_samples: 5
  max_guessability: {max_guessability}
  grid: {{llms: [cand], retrievers: [closed_book, oracle]}}
  irt: {{enabled: false}}
"""
    )
    return cfg


def _artifact(run_dir: Path, name: str) -> Any:
    con = sqlite3.connect(run_dir / "run.sqlite")
    return json.loads(con.execute("SELECT data FROM artifacts WHERE name = ?", (name,)).fetchone()[0])


def test_filter_drops_the_items_answerable_closed_book_and_keeps_the_rest(tmp_path: Path) -> None:
    exam_file, kinds = _exam_setup(tmp_path)
    before = run_config(
        _config(tmp_path, exam_file, "filter-off", "null"), out=tmp_path / "runs", show_progress=False
    )
    after = run_config(
        _config(tmp_path, exam_file, "filter-on", "0.75"), out=tmp_path / "runs", show_progress=False
    )

    # Guessability per item: the mean of the examiner's letter probability and the reference's samples.
    g = before.summary["exam"]["guessability"]
    per = g["per_item"]
    for qid, kind in kinds.items():
        rec = per[qid]
        if qid == "moot-2":  # neither model named an option: unmeasured, recorded with its cause, kept
            assert rec["guessability"] is None and rec["failed"] == {
                "examiner": "unparseable",
                "reference": "unparseable",
            }
        elif kind == "guessable":
            assert rec["per_model"]["examiner"] == pytest.approx(0.9)
            assert rec["per_model"]["reference"] == 0.8
            assert rec["guessability"] == pytest.approx(0.85)
            assert rec["methods"] == {"examiner": "letter_logprobs", "reference": "sampling"}
        else:
            assert rec["per_model"]["examiner"] == pytest.approx(0.2)
            assert rec["guessability"] < 0.5
    assert g["measured"] == 11 and g["failed"] == {"unparseable": 2} and g["filter"] is False
    assert g["guessable"] == 6 and g["guessable_by_topic"]["harbour.md"] == pytest.approx(2 / 3, abs=1e-4)
    assert g["topics"]["moot.md"] == {
        "n": 2,
        "guessable": 1,
        "mean": pytest.approx((0.85 + per["moot-0"]["guessability"]) / 2, abs=1e-4),
    }
    # The closed-book examiner answers exactly the guessable items: 6 of the 11 it answered.
    assert (g["closed_book_examiner"]["k"], g["closed_book_examiner"]["n"]) == (6, 11)
    # Filter off: every item kept, each with its guessability in exam.jsonl; nothing counted as filtered.
    kept_off = [json.loads(x) for x in (before.run_dir / "exam.jsonl").read_text().splitlines()]
    assert len(kept_off) == 12 and "guessable" not in (before.summary["exam"].get("filtered") or {})
    assert {q["id"]: q["guessability"] for q in kept_off} == {k: v["guessability"] for k, v in per.items()}

    # Filter on: the 6 guessable items are dropped and counted; the others (and the unmeasured one) kept.
    ex = after.summary["exam"]
    assert ex["filtered"] == {"guessable": 6} and ex["kept"] == ex["questions"] == 6
    kept = {json.loads(x)["id"] for x in (after.run_dir / "exam.jsonl").read_text().splitlines()}
    assert kept == {q for q, k in kinds.items() if k == "needs corpus"}
    assert {i["id"] for i in ex["guessability"]["guessable_items"]} == {
        q for q, k in kinds.items() if k == "guessable"
    }
    # The closed-book examiner baseline on the kept exam: at chance or below (it got none of them).
    baselines = _artifact(after.run_dir, "exam_baselines")
    assert baselines["closed_book_examiner"]["value"] == 0.0 and baselines["closed_book_examiner"]["n"] == 5
    assert before.summary["baselines"]["closed_book_examiner"]["value"] == pytest.approx(6 / 11, abs=1e-3)

    # Controlled candidates: the closed-book one drops from 0.5 to 0 (chance-level knowledge), the one that
    # reads the source passage stays at 1.0.
    def acc(result: Any, pipeline: str) -> float:
        return float(result.summary["pipelines"][pipeline]["accuracy"]["value"])

    assert acc(before, "cand/closed_book/icl0") == 0.5 and acc(after, "cand/closed_book/icl0") == 0.0
    assert acc(before, "cand/oracle/icl0") == acc(after, "cand/oracle/icl0") == 1.0

    # The report: the section, the counts, the dropped items, the new baseline row.
    html = (after.run_dir / "report.html").read_text()
    assert "Closed-book answerability" in html and "6 dropped" in html
    assert "the examiner, closed-book (question and options only)" in html
    assert "What is the lantern colour of Velmora harbour?" in html  # listed among the dropped items
    assert "closed-book guessability" in html
    assert "reference models (reference)" in html
    html_off = (before.run_dir / "report.html").read_text()
    assert "The filter is off" in html_off and "6 at or above the threshold, kept" in html_off


def test_guessability_is_resumable_from_the_cache(tmp_path: Path) -> None:
    exam_file, _ = _exam_setup(tmp_path)
    cfg = _config(tmp_path, exam_file, "again", "0.75")
    first = run_config(cfg, out=tmp_path / "runs", show_progress=False)
    second = run_config(cfg, out=tmp_path / "runs2", show_progress=False)
    con = sqlite3.connect(second.run_dir / "run.sqlite")
    fresh = con.execute(
        "SELECT COUNT(*) FROM model_calls WHERE role = 'examiner' AND error IS NULL AND NOT cached"
    ).fetchone()[0]
    assert fresh == 0
    assert (
        second.summary["exam"]["guessability"]["per_item"]
        == first.summary["exam"]["guessability"]["per_item"]
    )


def generating_examiner(messages: list[Message], params: GenerationParams) -> RawReply | str:
    """Writes the passage's facts as questions (the harbour ones with implausible distractors) and
    answers closed-book like `closed_book_examiner`."""
    text = messages[-1]["content"]
    if "new wrong answers" in text:  # a repair: this examiner has nothing better to offer
        return json.dumps({"distractors": IMPLAUSIBLE})
    if "Reference text" not in text:
        return closed_book_examiner(messages, params)
    out = []
    for topic, facts in FACTS.items():
        for subject, answer, plausible in facts:
            if f"that {subject} is {answer}." in text:
                guessable = topic == "harbour"
                out.append(
                    {
                        "question": f"What is {subject}?",
                        "correct_answer": answer,
                        "distractors": IMPLAUSIBLE if guessable else plausible,
                        "rationale": "stated",
                    }
                )
    n = int(re.search(r"Write (\d+) multiple-choice", text).group(1))  # type: ignore[union-attr]
    return json.dumps({"questions": out[:n]})


register_script("guess-generator", generating_examiner)


def test_generation_rounds_count_only_items_that_pass_the_guessability_filter(tmp_path: Path) -> None:
    _exam_setup(tmp_path)  # the corpus
    cfg = tmp_path / "rounds.yaml"
    cfg.write_text(
        """
protocol: exam
seed: 0
corpus: {path: docs, min_chunk_chars: 10, max_chunk_chars: 4000}
models: {examiner: scripted/guess-generator}
roles: {examiner: examiner}
exam:
  num_questions: 3
  questions_per_call: 3
  target_questions: 8
  max_questions: 24
  labels: rules
  balance: {drop_length_cues: false}
  grid: {llms: []}
"""
    )
    result = run_config(cfg, out=tmp_path / "runs", show_progress=False)
    ex = result.summary["exam"]
    rounds = ex["rounds"]
    assert len(rounds) >= 2 and all("guessable" in r for r in rounds)
    # The three harbour items are answerable closed-book: dropped, and not counted towards the target.
    assert ex["filtered"]["guessable"] == 3 and ex["kept"] == rounds[-1]["kept"] == 9 >= 8
    assert "target_missed" not in ex
    kept = [json.loads(x) for x in (result.run_dir / "exam.jsonl").read_text().splitlines()]
    assert len(kept) == 9 and not any("harbour" in q["question"] for q in kept)
    html = (result.run_dir / "report.html").read_text()
    assert "more dropped as guessable" in html


def test_readers_agree_flags_an_item_every_closed_book_reader_gets_right_and_keeps_one_at_chance() -> None:
    rule = "readers_agree"
    # Both readers pick the key, even with low calibrated probabilities (small models spread their mass).
    both = ItemGuessability(
        guessability=0.38, per_model={"a": 0.41, "b": 0.35}, picked_key={"a": True, "b": True}
    )
    assert is_guessable(both, 0.75, rule) and not is_guessable(both, 0.75, "probability")
    # One reader is at chance (picks another option): the item is kept.
    one = ItemGuessability(
        guessability=0.5, per_model={"a": 0.7, "b": 0.3}, picked_key={"a": True, "b": False}
    )
    assert not is_guessable(one, 0.75, rule)
    # A single reader: the probability rule decides.
    single = ItemGuessability(guessability=0.9, per_model={"a": 0.9}, picked_key={"a": True})
    assert is_guessable(single, 0.75, rule) and not is_guessable(single, 0.95, rule)
    assert rule_used({"x": single}, rule) == "probability" and rule_used({"x": both}, rule) == rule
