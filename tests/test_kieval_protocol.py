"""The KIEval protocol end to end with scripted models: early stop (off topic in round 2), evaluator
replies re-asked and, when still invalid, recorded as errors and not scored; voting over several
evaluators; the confident set; RAG candidates; zero calls and identical results on a re-run."""

from __future__ import annotations

import json
import math
import re
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from proctor.errors import UserError
from proctor.models.retry import RetryableError
from proctor.models.scripted import register_script
from proctor.protocols.kieval import score
from proctor.runner import run_config

QUESTIONS = [
    {
        "id": "photo",
        "question": "Which gas do plants take in for photosynthesis?",
        "choices": ["Oxygen", "Carbon dioxide", "Helium", "Neon"],
        "answer": "B",
        "answer_index": 1,
    },
    {
        "id": "planet",
        "question": "Which planet is closest to the Sun?",
        "choices": ["Mercury", "Venus", "Mars", "Jupiter"],
        "answer": "A",
        "answer_index": 0,
    },
    {
        "id": "sodium",
        "question": "What is the chemical symbol for sodium?",
        "choices": ["So", "Na", "Sd", "S"],
        "answer": "B",
        "answer_index": 1,
    },
]

CALLS: Counter[str] = Counter()
EVALUATOR_PROMPTS: list[list[dict[str, str]]] = []


def _round_of(messages: list[dict[str, str]]) -> int:
    """Round index (0-based) of a candidate follow-up: user turns after the multiple-choice question."""
    return sum(1 for m in messages if m["role"] == "user") - 2


def candidate(messages: list[dict[str, str]], params: Any) -> str:
    CALLS["candidate"] += 1
    first = next(m["content"] for m in messages if m["role"] == "user")
    if len(messages) == 2:  # system + the multiple-choice question
        if "closest to the Sun" in first:
            return "A. Mercury orbits nearest to the Sun."
        if "sodium" in first:
            return "The answer is C, Sd."
        return "B) Carbon dioxide is absorbed through the stomata."
    r = _round_of(messages)
    if "closest to the Sun" in first and r == 1:
        return "Let me tell you about my favourite pancake recipe instead."
    return f"On-topic reply number {r} with <b>bold</b> & a fact."


def interactor(messages: list[dict[str, str]], params: Any) -> str:
    CALLS["interactor"] += 1
    n = sum(1 for m in messages if m["role"] == "assistant")  # its own earlier questions
    assert n == 0 or "The interviewee replied" in messages[-1]["content"]
    return f"Probing question {n + 1}: why does that hold?"


def _evaluation(overall: int, *, aspects: int | None = None, stop: str | None = None) -> str:
    a = aspects if aspects is not None else overall
    body: dict[str, Any] = {
        k: {"comment": f"{k} ok", "score": a}
        for k in ("accuracy", "logic", "relevance", "coherence", "conciseness")
    }
    body.update(
        overall_comment="fine",
        overall_score=overall,
        stop_conversation=stop is not None,
        stop_reason=stop or "none",
    )
    return json.dumps(body)


def evaluator(messages: list[dict[str, str]], params: Any) -> str:
    CALLS["evaluator"] += 1
    EVALUATOR_PROMPTS.append(messages)
    text = next(m["content"] for m in messages if m["role"] == "user")
    attempt = sum(1 for m in messages if m["role"] == "assistant")
    rnd = int(re.search(r"latest reply \(round (\d+)\)", text).group(1))
    last_reply = text.rsplit("[CANDIDATE]", 1)[1]
    if "pancake" in last_reply:
        return _evaluation(1, stop="off_topic")
    if "sodium" in text and rnd == 2:
        return "I think the candidate did well overall."  # never JSON, even when re-asked
    if "photosynthesis" in text and rnd == 2 and attempt == 0:
        return "{'accuracy': oops"  # broken once; the re-ask fixes it
    return _evaluation(4 if rnd == 1 else 3)


register_script("kv-candidate", candidate)
register_script("kv-interactor", interactor)
register_script("kv-evaluator", evaluator)


def write_questions(tmp_path: Path, rows: list[dict[str, Any]] = QUESTIONS) -> Path:
    p = tmp_path / "seed.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return p


def write_config(tmp_path: Path, extra: str = "", *, candidates: str | None = None, models: str = "") -> Path:
    seed = write_questions(tmp_path)
    cfg = tmp_path / "kieval.yaml"
    cfg.write_text(
        f"""
protocol: kieval
corpus: {{}}
models:
  cand: scripted/kv-candidate
  inter: scripted/kv-interactor
  eval: scripted/kv-evaluator
{models}
roles: {{interactor: inter, evaluator: eval}}
candidates:
{candidates or "  - {name: c1, model: cand}"}
kieval:
  questions: {{path: {seed}}}
  max_rounds: 3
{extra}
"""
    )
    return cfg


@pytest.fixture(autouse=True)
def _reset() -> None:
    CALLS.clear()
    EVALUATOR_PROMPTS.clear()


def _items(run_dir: Path, kind: str) -> list[dict[str, Any]]:
    con = sqlite3.connect(run_dir / "run.sqlite")
    rows = con.execute(
        "SELECT key, status, data, error, error_cause FROM items WHERE kind=? ORDER BY seq", (kind,)
    ).fetchall()
    return [{"key": k, "status": s, "data": json.loads(d), "error": e, "cause": c} for k, s, d, e, c in rows]


def test_off_topic_stop_unparseable_round_and_reask(tmp_path: Path) -> None:
    result = run_config(write_config(tmp_path), out=tmp_path / "runs", show_progress=False)
    convs = {c["data"]["question_id"]: c for c in _items(result.run_dir, "kieval_conversation")}
    rounds = _items(result.run_dir, "kieval_round")

    # photosynthesis: 3 full rounds (round 2's first evaluator reply was broken and fixed by the re-ask).
    photo = convs["photo"]
    assert photo["status"] == "done" and photo["data"]["end"] == "completed"
    assert photo["data"]["rounds"] == 3
    assert photo["data"]["round_overall"] == [4, 3, 3]
    w1, w2 = math.exp(-0.2), math.exp(-0.4)
    assert photo["data"]["kieval"] == pytest.approx(10 * (10 + 7 * w1 + 7 * w2) / (1 + w1 + w2))
    reasks = [m for m in EVALUATOR_PROMPTS if "photosynthesis" in m[1]["content"] and len(m) > 2]
    assert len(reasks) == 1 and reasks[0][2]["content"] == "{'accuracy': oops"

    # planet: off topic in round 2 -> stopped there, the stopping round scored, no round 3.
    planet = convs["planet"]
    assert planet["data"]["end"] == "off_topic"
    assert planet["data"]["rounds"] == 2
    assert planet["data"]["round_overall"] == [4, 1]
    assert planet["data"]["kieval"] == pytest.approx(10 * (10 + 1 * w1) / (1 + w1))
    assert planet["data"]["kieval"] == pytest.approx(score([4, 1]))
    planet_rounds = [r for r in rounds if r["data"]["question_id"] == "planet"]
    assert [r["data"]["round"] for r in planet_rounds] == [0, 1]
    assert planet_rounds[1]["data"]["stop_conversation"] is True
    assert planet_rounds[1]["data"]["stop_reason"] == "off_topic"

    # sodium: round 2's evaluator reply never parses -> re-asked, then an error with its cause, not scored.
    sodium = convs["sodium"]
    assert sodium["status"] == "done" and sodium["data"]["end"] == "evaluator_error"
    assert sodium["data"]["rounds"] == 1 and sodium["data"]["round_overall"] == [4]
    assert sodium["data"]["kieval"] == pytest.approx(score([4]))
    bad = [r for r in rounds if r["data"]["question_id"] == "sodium" and r["data"]["round"] == 1]
    # The round was played (its turns are kept) but not scored: its evaluator's judgment is the error.
    assert len(bad) == 1 and bad[0]["data"]["overall_score"] is None
    assert bad[0]["data"]["candidate_reply"].startswith("On-topic reply number 1")
    con = sqlite3.connect(result.run_dir / "run.sqlite")
    sql = "SELECT judge, error_cause FROM judgments WHERE item_key=?"
    assert con.execute(sql, (bad[0]["key"],)).fetchall() == [("kieval_evaluator:eval", "unparseable")]
    sodium_asks = [
        m for m in EVALUATOR_PROMPTS if "sodium" in m[1]["content"] and "(round 2)" in m[1]["content"]
    ]
    assert len(sodium_asks) == 3  # the first try and two re-asks
    assert "JSON" in sodium_asks[-1][-1]["content"]

    s = result.summary
    c1 = s["candidates"]["c1"]
    assert c1["stop_reasons"] == {"completed": 1, "evaluator_error": 1, "off_topic": 1}
    assert c1["kieval"]["n"] == 3
    expected = [photo["data"]["kieval"], planet["data"]["kieval"], sodium["data"]["kieval"]]
    assert c1["kieval"]["value"] == pytest.approx(sum(expected) / 3)
    assert c1["rounds"]["value"] == pytest.approx(2.0)
    # static accuracy: photo B right, planet A right, sodium C wrong
    assert c1["static_accuracy"]["value"] == pytest.approx(2 / 3) and c1["static_accuracy"]["n"] == 3
    assert s["contamination"]["applicable"] is False
    assert any("could not be parsed" in w for w in s["warnings"])
    assert (result.run_dir / "report.html").exists()


def test_rerun_costs_zero_calls_and_gives_identical_results(tmp_path: Path) -> None:
    cfg = write_config(tmp_path)
    first = run_config(cfg, out=tmp_path / "runs", show_progress=False)
    n_first = sum(CALLS.values())
    second = run_config(cfg, out=tmp_path / "runs", show_progress=False)
    assert sum(CALLS.values()) == n_first, "every reply came from the cache"
    assert (first.run_dir / "results.json").read_bytes() == (second.run_dir / "results.json").read_bytes()


def vote_a(messages: list[dict[str, str]], params: Any) -> str:
    return _evaluation(4, aspects=2)


def vote_b(messages: list[dict[str, str]], params: Any) -> str:
    return _evaluation(4, aspects=3)


def vote_c(messages: list[dict[str, str]], params: Any) -> str:
    text = messages[1]["content"]
    if "(round 2)" in text:
        return "no json here"
    return _evaluation(1, aspects=3, stop="repetition")


register_script("kv-vote-a", vote_a)
register_script("kv-vote-b", vote_b)
register_script("kv-vote-c", vote_c)


@pytest.mark.parametrize("voting", ["majority", "mean"])
def test_several_evaluators_vote(tmp_path: Path, voting: str) -> None:
    cfg = write_config(
        tmp_path,
        f"  evaluators: [va, vb, vc]\n  voting: {voting}\n  max_rounds: 2",
        models="  va: scripted/kv-vote-a\n  vb: scripted/kv-vote-b\n  vc: scripted/kv-vote-c",
    )
    cfg.write_text(cfg.read_text().replace("  max_rounds: 3\n", ""))
    result = run_config(cfg, out=tmp_path / "runs", show_progress=False)
    rounds = [r for r in _items(result.run_dir, "kieval_round") if r["data"]["question_id"] == "photo"]
    r0, r1 = rounds[0]["data"], rounds[1]["data"]
    # Round 1: a says 4/aspects 2, b 4/3, c 1/3 and "stop" (outvoted 1 of 3).
    if voting == "majority":
        assert r0["overall_score"] == 4 and r0["accuracy"]["score"] == 3
    else:
        assert r0["overall_score"] == pytest.approx(3.0) and r0["accuracy"]["score"] == pytest.approx(8 / 3)
    assert r0["stop_conversation"] is False and r0["evaluators"] == ["va", "vb", "vc"]
    # Round 2: c's reply never parses -> the round is scored by a and b; c's error is kept on the round.
    assert rounds[1]["status"] == "done"
    assert r1["evaluators"] == ["va", "vb"] and r1["evaluator_errors"] == ["vc"]
    # c's failure is its judgment of the round, with the cause in the cause column.
    assert sorted(r1["evaluations"]) == ["va", "vb"]
    con = sqlite3.connect(result.run_dir / "run.sqlite")
    sql = "SELECT judge, error_cause FROM judgments WHERE item_key=?"
    judged = dict(con.execute(sql, (rounds[1]["key"],)).fetchall())
    assert judged == {
        "kieval_evaluator:va": None,
        "kieval_evaluator:vb": None,
        "kieval_evaluator:vc": "unparseable",
    }
    if voting == "majority":
        assert r1["accuracy"]["score"] == 2  # a 2 vs b 3: a tie goes to the lower score
    else:
        assert r1["accuracy"]["score"] == pytest.approx(2.5)


def _right_letter(text: str, right: str) -> str:
    opts = dict(re.findall(r"^([A-D])\. (.+)$", text, re.MULTILINE))
    return next(k for k, v in opts.items() if v == right)


RIGHT = {"photosynthesis": "Carbon dioxide", "closest to the Sun": "Mercury", "sodium": "Na"}


def _checker(messages: list[dict[str, str]], params: Any, *, sure_of_planet: bool) -> str:
    text = messages[-1]["content"]
    if "The letter of the correct option" in text:  # the confident-set check
        if "closest to the Sun" in text and not sure_of_planet:
            return "A"  # right only when the shuffle put Mercury first
        return _right_letter(text, next(v for k, v in RIGHT.items() if k in text))
    if "impartial evaluator" in messages[0]["content"]:
        return _evaluation(3)
    return "Why?"


register_script("kv-chk-int", lambda m, p: _checker(m, p, sure_of_planet=True))
register_script("kv-chk-eval", lambda m, p: _checker(m, p, sure_of_planet=False))


def test_confident_set_keeps_confident_questions_with_seeded_shuffles(tmp_path: Path) -> None:
    cfg = write_config(
        tmp_path,
        "  confident_set: {enabled: true, shuffles: 4, threshold: 0.75}",
        models="  ci: scripted/kv-chk-int\n  ce: scripted/kv-chk-eval",
    )
    text = cfg.read_text().replace("{interactor: inter, evaluator: eval}", "{interactor: ci, evaluator: ce}")
    cfg.write_text(text.replace("max_rounds: 3", "max_rounds: 1"))
    result = run_config(cfg, out=tmp_path / "runs", show_progress=False)
    cs = result.summary["questions"]["confident_set"]
    checks = _items(result.run_dir, "kieval_confidence")
    assert len(checks) == 3 * 4 * 2  # questions x shuffles x (interactor, evaluator)
    planet = [
        c["data"] for c in checks if c["data"]["question_id"] == "planet" and c["data"]["model"] == "ce"
    ]
    right = sum(1 for c in planet if c["correct"])
    assert right == sum(1 for c in planet if c["order"][0] == 0)
    assert cs["checked"] == 3 and cs["kept"] == 2 + (right >= 3)
    assert cs["dropped_low_confidence"] == 3 - cs["kept"]
    used = {q["data"]["question_id"] for q in _items(result.run_dir, "kieval_question") if q["data"]["used"]}
    assert {"photo", "sodium"} <= used and len(used) == cs["kept"]
    convs = _items(result.run_dir, "kieval_conversation")
    assert {c["data"]["question_id"] for c in convs} == used
    # Shuffles come from the run's seed: the same seed gives the same orders, another seed others.
    orders = [c["data"]["order"] for c in checks]
    again = run_config(cfg, out=tmp_path / "runs2", show_progress=False)
    assert [c["data"]["order"] for c in _items(again.run_dir, "kieval_confidence")] == orders
    cfg.write_text("seed: 11\n" + cfg.read_text())
    other = run_config(cfg, out=tmp_path / "runs3", show_progress=False)
    assert [c["data"]["order"] for c in _items(other.run_dir, "kieval_confidence")] != orders


def rag_candidate(messages: list[dict[str, str]], params: Any) -> str:
    last = messages[-1]["content"]
    return "B. Because of the passage." if "[Passage 1]" in last else "No passage given."


register_script("kv-rag", rag_candidate)


def test_rag_candidate_gets_passages_every_turn(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "plants.md").write_text("# Plants\n\nPlants take in carbon dioxide for photosynthesis. " * 5)
    (docs / "planets.md").write_text("# Planets\n\nMercury is the planet closest to the Sun. " * 5)
    (docs / "sodium.md").write_text("# Sodium\n\nThe chemical symbol for sodium is Na. " * 5)
    cfg = write_config(
        tmp_path,
        "  num_questions: 2",
        candidates="  - {name: rag, model: rag, retriever: bm25, k: 1}",
        models="  rag: scripted/kv-rag",
    )
    cfg.write_text(cfg.read_text().replace("corpus: {}", "corpus: {path: docs, min_chunk_chars: 10}"))
    result = run_config(cfg, out=tmp_path / "runs", show_progress=False)
    mc = _items(result.run_dir, "kieval_mc_answer")
    assert len(mc) == 2 and all(len(m["data"]["context_ids"]) == 1 for m in mc)
    assert result.summary["questions"]["sampled"] == 2 and result.summary["questions"]["usable"] == 3
    rounds = _items(result.run_dir, "kieval_round")
    assert rounds and all(r["data"]["candidate_reply"] == "B. Because of the passage." for r in rounds)
    assert all(len(r["data"]["context_ids"]) == 1 for r in rounds)


FLAKY = {"down": True}


def flaky_candidate(messages: list[dict[str, str]], params: Any) -> str:
    if len(messages) > 2 and _round_of(messages) == 1 and FLAKY["down"]:
        raise RetryableError("HTTP 503", cause="http_503", status=503)
    return candidate(messages, params)


register_script("kv-flaky", flaky_candidate)


def test_transient_failure_is_recorded_and_resume_continues_from_that_round(tmp_path: Path) -> None:
    FLAKY["down"] = True
    cfg = write_config(
        tmp_path,
        candidates="  - {name: flaky, model: flaky}",
        models="  flaky: {spec: scripted/kv-flaky, max_retries: 0}",
    )
    write_questions(tmp_path, QUESTIONS[:1])  # photosynthesis: three full rounds when nothing fails
    first = run_config(cfg, out=tmp_path / "runs", show_progress=False)
    (conv,) = _items(first.run_dir, "kieval_conversation")
    assert conv["status"] == "error" and conv["cause"] == "http_503" and conv["data"]["rounds"] == 1
    failed = [r for r in _items(first.run_dir, "kieval_round") if r["status"] == "error"]
    assert len(failed) == 1 and failed[0]["data"]["round"] == 1 and failed[0]["cause"] == "http_503"
    assert failed[0]["data"]["interactor_question"] and "candidate_reply" not in failed[0]["data"]
    assert first.summary["candidates"]["flaky"]["conversation_errors"] == 1
    assert any("--resume" in w for w in first.summary["warnings"])

    FLAKY["down"] = False
    calls_before = Counter(CALLS)
    resumed = run_config(cfg, out=tmp_path / "runs", resume=True, show_progress=False)
    (conv,) = _items(resumed.run_dir, "kieval_conversation")
    assert conv["status"] == "done" and conv["data"]["rounds"] == 3
    # Round 1's stored interviewer question is reused; only rounds 1 (reply, evaluation) and 2 are new.
    assert CALLS["interactor"] - calls_before["interactor"] == 1
    assert CALLS["evaluator"] - calls_before["evaluator"] == 3  # round 2 needs one re-ask (see evaluator)
    assert CALLS["candidate"] - calls_before["candidate"] == 2


def test_config_mistakes_are_user_errors(tmp_path: Path) -> None:
    cfg = write_config(tmp_path, "  evaluators: [nope]")
    with pytest.raises(UserError, match=r"kieval\.evaluators\[0\]"):
        run_config(cfg, out=tmp_path / "runs", show_progress=False)
    cfg = write_config(tmp_path, candidates="  - {name: o, model: cand, retriever: oracle}")
    with pytest.raises(UserError, match=r"candidates\[0\]\.retriever"):
        run_config(cfg, out=tmp_path / "runs", show_progress=False)
    cfg = write_config(tmp_path)
    cfg.write_text(
        cfg.read_text().replace("roles: {interactor: inter, evaluator: eval}", "roles: {evaluator: eval}")
    )
    with pytest.raises(UserError, match=r"roles\.interactor"):
        run_config(cfg, out=tmp_path / "runs", show_progress=False)
    cfg = write_config(tmp_path)
    cfg.write_text(cfg.read_text().replace("max_rounds: 3", "max_rounds: 0"))
    with pytest.raises(UserError, match=r"kieval\.max_rounds"):
        run_config(cfg, out=tmp_path / "runs", show_progress=False)
