"""The exam protocol end to end with scripted models: generation, filters, balanced options, labels,
grading a grid (letter logprobs, generated-letter fallback, unparseable replies recorded as errors),
metrics with intervals, IRT, the exam JSONL file, the report, and a re-run from the cache."""

from __future__ import annotations

import json
import math
import re
import sqlite3
from pathlib import Path

import pandas as pd
import pytest

from proctor.models.retry import RetryableError
from proctor.models.scripted import register_scorer, register_script
from proctor.models.types import RawReply, TokenLogprob, Usage
from proctor.runner import run_config

HOSTILE = "<script>alert('x')</script>"
IMG = "<img src=x onerror=alert(1)>"

# Topic -> facts (subject, attribute, value, wrong values of varied lengths).
FACTS = {
    "harbour": [
        ("Velmora harbour", "opening year", "1742", ["1790", "1688", "1815", "1901"]),
        ("Velmora harbour", "lantern colour", "green", ["red", "dark blue", "white", "amber yellow"]),
        ("Velmora harbour", "founder", "Ostrid Kael", ["Mara Dune", "Tobias Fenwright", "Ilse Varn", "Oren"]),
    ],
    "canal": [
        ("Tarn canal", "length", "9 kilometres", ["4 kilometres", "12 kilometres", "2 km", "30 kilometres"]),
        ("Tarn canal", "chief engineer", "Petra Lund", ["Aldo Ferris", "Nina Holt", "Gus Brann", "Eda Moss"]),
        ("Tarn canal", "main cargo", "tidal glass", ["salt fish", "timber", "wool bales", "granite blocks"]),
    ],
    "festival": [
        ("Lantern Tide festival", "month", "October", ["March", "July", "December", "May"]),
        ("Lantern Tide festival", "venue", "Kettle Point", ["Dunmere", "Skerry Holm", "Gull Rock", "Ashby"]),
        ("Lantern Tide festival", "lantern count", "1,500", ["300", "12,000", "750", "4,200"]),
    ],
    "moot": [
        ("Moot of Forty", "quorum", "twenty-one", ["twelve", "thirty", "nine", "seventeen"]),
        (
            "Moot of Forty",
            "meeting hall",
            "Cistern House",
            ["Glass Hall", "Tide Court", "Fog Tower", "Mill Barn"],
        ),
        (
            "Moot of Forty",
            "speaker title",
            "the Warden",
            ["the Reeve", "the Chancellor", "the Steward", "Elder"],
        ),
    ],
}
ANSWERS = {f"What is the {attr} of {subj}?": val for facts in FACTS.values() for subj, attr, val, _ in facts}


def _doc(topic: str) -> str:
    parts = [f"# {topic.title()}\n"]
    for subj, attr, val, _ in FACTS[topic]:
        parts.append(f"The {attr} of {subj} is {val}. Records about {subj} mention its {attr} often.\n")
    return "\n".join(parts)


GUESSES = {"on": False}
REPAIR = {"reply": ["Ivo Marsh", "Lena Quill", "Ansel Brook"]}
# LEAK on: the lantern-colour question names its answer; REWRITE "fix": a rewrite removes the leak,
# "stubborn": every rewrite still names it. TOPUP on: one question per call, of which only the Moot's is
# kept (the others point at "the text"), a new wording for each set of questions.
LEAK = {"on": False}
REWRITE = {"mode": "fix"}
TOPUP = {"on": False}
LEAKING = "Which colour, green or another, is the lantern colour of Velmora harbour?"


def _rewrite(text: str) -> str:
    q = text.split("\nQuestion: ", 1)[1].split("\n", 1)[0]
    if q == LEAKING or "green" in q:
        fixed = "What is the lantern colour of Velmora harbour?"
        return fixed if REWRITE["mode"] == "fix" else "Is the lantern colour of Velmora harbour green?"
    return q.replace("According to the text, who", "Who")


def _topup_questions(text: str) -> str:
    """TOPUP mode: the first fact of the passage, self-contained only for the Moot."""
    m = re.search(r"this is set (\d+)", text)
    k = int(m.group(1)) if m else 1
    passage = text.split('"""', 2)[1]
    subj, attr, val, wrong = next(f for facts in FACTS.values() for f in facts if f[0] in passage)
    q = f"What is the {attr} of {subj}?" + ("" if k == 1 else f" (question set {k})")
    if subj != "Moot of Forty":
        q = "According to the text, " + q[0].lower() + q[1:]
    return json.dumps(
        {"questions": [{"question": q, "correct_answer": val, "distractors": wrong, "rationale": "-"}]}
    )


def examiner(messages, params):
    text = messages[-1]["content"]
    if "new wrong answers" in text:  # a repair: fresh distractors for the question
        return json.dumps({"distractors": REPAIR["reply"]})
    if "Rewrite the question" in text:  # a repair: the question rewritten, answer and options kept
        return json.dumps({"question": _rewrite(text)})
    if TOPUP["on"] and "multiple-choice question" in text:
        return _topup_questions(text)
    if "multiple-choice" not in text and "Classify each question" not in text:
        # Closed-book answerability: without context this examiner names no option (tested elsewhere).
        if GUESSES["on"]:
            # It "knows" the harbour items without the corpus (names the correct option) and gets every
            # other item wrong.
            options = _options(text)
            truths = {v for facts in FACTS.values() for (_, _, v, _) in facts}
            right = next((k for k, o in options.items() if o in truths), None)
            if "harbour" in text.lower() and right:
                return right
            return next(k for k, o in options.items() if k != right)
        return "I cannot tell which."
    if "Classify each question" in text:
        ids = re.findall(r"^\[(\d+)\]", text, re.M)
        return json.dumps({"labels": [{"id": i, "bloom": "remember", "question_word": "what"} for i in ids]})
    out = []
    for facts in FACTS.values():
        for subj, attr, val, wrong in facts:
            if f"The {attr} of {subj} is {val}." in text:
                q = f"What is the {attr} of {subj}?"
                if attr == "founder":
                    q = f"According to the text, who founded {subj}?"  # not self-contained
                if attr == "speaker title":
                    q = f"What is the {attr} of {subj}? {HOSTILE}"
                if attr == "lantern colour" and LEAK["on"]:
                    q = LEAKING
                distractors = list(wrong)
                if attr == "chief engineer":
                    distractors = [
                        "Petra Lund.",
                        "petra lund",
                        "Nina Holt",
                        "Gus Brann",
                    ]  # repeats the answer
                rationale = f"stated {IMG}" if attr == "quorum" else "stated"
                out.append(
                    {"question": q, "correct_answer": val, "distractors": distractors, "rationale": rationale}
                )
    n = int(re.search(r"Write (\d+) multiple-choice", text).group(1))
    return json.dumps({"questions": out[:n]})


def _options(text: str) -> dict[str, str]:
    block = text.rsplit("Question:", 1)[1]
    return dict(re.findall(r"^([A-D])\. (.*)$", block, re.M))


def _question(text: str) -> str:
    return text.rsplit("Question:", 1)[1].split("\n", 1)[0].strip()


def _lp(letter_probs: dict[str, float]) -> RawReply:
    top = {k: math.log(v) for k, v in letter_probs.items()}
    best = max(top, key=top.get)
    return RawReply(best, Usage(10, 1), logprobs=[TokenLogprob(best, top[best], top)], finish_reason="length")


def reader(messages, params):
    """Knows the answer when a passage containing it was retrieved; guesses the first option otherwise."""
    text = messages[-1]["content"]
    opts = _options(text)
    q = _question(text)
    truth = ANSWERS.get(re.sub(r"\s*<script>.*$", "", q))
    context = text.split("Question:", 1)[0]
    if truth and f"is {truth}." in context:
        letter = next(k for k, v in opts.items() if v == truth)
        return _lp({letter: 0.8, **{k: 0.2 / 3 for k in opts if k != letter}})
    return _lp({"A": 0.4, "B": 0.3, "C": 0.2, "D": 0.1})


def chatty(messages, params):
    """No logprobs: writes the letter in prose (auto falls back to parsing)."""
    text = messages[-1]["content"]
    opts = _options(text)
    if "Moot" in _question(text):
        return "I am not sure about this one."  # names no option -> unparseable, recorded as an error
    truth = ANSWERS.get(_question(text))
    letter = next((k for k, v in opts.items() if v == truth), "B")
    return f"The correct answer is ({letter})."


def broken(messages, params):
    raise RetryableError("HTTP 500", cause="http_500", status=500)


register_script("exam-examiner", examiner)
register_script("exam-reader", reader)
register_script("exam-chatty", chatty)
register_script("exam-broken", broken)


@pytest.fixture
def exam_config(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    for topic in FACTS:
        (docs / f"{topic}.md").write_text(_doc(topic))
    cfg = tmp_path / "exam.yaml"
    cfg.write_text(
        """
protocol: exam
seed: 3
corpus: {path: docs, min_chunk_chars: 10, max_chunk_chars: 4000}
models:
  ex: scripted/exam-examiner
  reader: scripted/exam-reader
  chatty: scripted/exam-chatty
  broken: {spec: scripted/exam-broken, max_retries: 0}
roles: {examiner: ex}
candidates:
  - {name: dead, model: broken}
exam:
  num_questions: 12
  questions_per_call: 3
  top_up: false
  labels: examiner
  filters: {distractor_source_margin: null}
  balance: {drop_length_cues: false}
  repair: {attempts: 0}
  grid: {llms: [reader, chatty], retrievers: [closed_book, bm25, oracle], icl_shots: [0, 2], k: 1}
  irt: {prune_min_items: 4, prune_fraction: 0.2, icc_items: 3}
"""
    )
    return cfg


def _calls(run_dir: Path) -> tuple[int, int]:
    con = sqlite3.connect(run_dir / "run.sqlite")
    total, cached = con.execute(
        "SELECT COUNT(*), SUM(cached) FROM model_calls WHERE error IS NULL"
    ).fetchone()
    return total, cached or 0


def test_exam_run_end_to_end(exam_config: Path, tmp_path: Path) -> None:
    result = run_config(exam_config, out=tmp_path / "runs", show_progress=False)
    s = result.summary
    ex = s["exam"]
    # 12 generated; "according to the text" and the repeated-answer question are filtered and counted.
    assert ex["generated"] == 12
    assert ex["filtered"] == {"not_self_contained": 1, "options_repeat": 1, "guessable": 0}
    assert ex["guessability"]["measured"] == 0  # this examiner names no option without context
    assert ex["distractors_removed"]["options_repeat"] == 2
    assert ex["kept"] == ex["questions"] == 10
    # The exam file: required keys, loadable by pandas, balanced letters, answer consistent with choices.
    path = result.run_dir / "exam.jsonl"
    df = pd.read_json(path, lines=True)
    assert len(df) == 10
    for key in ("id", "question", "choices", "answer", "answer_index", "rationale", "source_chunk_ids"):
        assert key in df.columns
    assert {"bloom", "question_word", "generator", "prompt_version"} <= set(df.columns)
    assert (df["generator"] == "scripted/exam-examiner").all()
    letters = df["answer"].value_counts().to_dict()
    assert max(letters.values()) - min(letters.values()) <= 1  # balanced: 3,3,2,2
    for _, row in df.iterrows():
        assert len(row["choices"]) == 4 and "ABCD"[row["answer_index"]] == row["answer"]
        assert ANSWERS[re.sub(r"\s*<script>.*$", "", row["question"])] == row["choices"][row["answer_index"]]
    assert s["baselines"]["best_fixed_letter"]["value"] == pytest.approx(0.3)
    assert (df["bloom"] == "remember").all() and (df["question_word"] == "what").all()
    # Grid: 2 LLMs x 3 retrievers x 2 ICL settings + the dead candidate x 2 ICL settings.
    pipes = s["pipelines"]
    assert len(pipes) == 14
    oracle = pipes["reader/oracle/icl0"]
    assert oracle["accuracy"]["value"] == 1.0 and oracle["methods"] == {"letter_logprobs": 10}
    lo, hi = oracle["accuracy"]["lo"], oracle["accuracy"]["hi"]
    assert 0.6 < lo < 1.0 and hi == 1.0
    # Beyond guessing: the oracle against the same LLM closed-book (which always picks A), same items.
    gain = oracle["beyond_guessing"]
    assert gain["baseline"] == "reader/closed_book/icl0" and gain["accuracy"]["value"] == 1.0
    assert gain["closed_book"]["value"] == pytest.approx(letters.get("A", 0) / 10)
    assert gain["corrected"]["value"] == 1.0 and gain["corrected"]["n"] == 10
    assert "beyond_guessing" not in pipes["reader/closed_book/icl0"]
    html = (result.run_dir / "report.html").read_text()
    assert "closed-book, same items" in html and "the corpus explains 100.0%" in html
    closed = pipes["reader/closed_book/icl0"]["accuracy"]
    assert closed["value"] == pytest.approx(letters.get("A", 0) / 10)  # always picks A
    # Chatty: parsed from prose; the 3 Moot questions name no option -> errors, not scored as wrong.
    chatty = pipes["chatty/bm25/icl0"]
    assert chatty["methods"] == {"generated_letter": 7}
    assert chatty["errors"] == {"unparseable": 3} and chatty["accuracy"]["n"] == 7
    assert chatty["accuracy"]["value"] == 1.0
    dead = pipes["dead/icl0"]
    assert dead["answered"] == 0 and dead["errors"] == {"http_500": 10}
    # ICL examples come from the exam, never the question itself; 1-shot is nested in 2-shot.
    con = sqlite3.connect(result.run_dir / "run.sqlite")
    rows = [json.loads(r[0]) for r in con.execute("SELECT data FROM items WHERE kind='exam_response'")]
    two = [r for r in rows if r["pipeline"] == "reader/bm25/icl2"]
    assert all(len(r["example_ids"]) == 2 and r["question_id"] not in r["example_ids"] for r in two)
    # Breakdown by topic and IRT results.
    irt = s["irt"]
    assert irt["model"] == "1pl" and irt["n_subjects"] == 12  # the dead pipelines have no answers
    assert {"llm", "retriever", "icl"} <= set(irt["hierarchical"]["components"])
    comps = irt["hierarchical"]["components"]["retriever"]
    assert comps["oracle"] > comps["closed_book"]
    assert irt["adaptive"]["rows"] and 0 < irt["adaptive"]["mean_fraction"] <= 1
    assert irt["prune"]["steps"][0]["n_after"] < irt["prune"]["steps"][0]["n_items"]
    assert (result.run_dir / "exam_pruned.jsonl").exists()
    # The report: exam section present, model text escaped.
    html = (result.run_dir / "report.html").read_text()
    assert "Exam statistics" in html and "Bias baselines" in html
    assert HOSTILE not in html and "&lt;script&gt;" in html
    assert IMG not in html and "&lt;img src=x onerror=alert(1)&gt;" in html
    # A re-run of the same config is served entirely from the cache, with identical results.
    again = run_config(exam_config, out=tmp_path / "runs", show_progress=False)
    total, cached = _calls(again.run_dir)
    assert total == cached
    a = json.loads((result.run_dir / "results.json").read_text())
    b = json.loads((again.run_dir / "results.json").read_text())
    a.pop("usage"), b.pop("usage")
    assert a == b
    assert (again.run_dir / "exam.jsonl").read_text() == path.read_text()


FLAKY = {"fail": True}


def flaky_examiner(messages, params):
    if FLAKY["fail"] and "canal" in messages[-1]["content"]:
        raise RetryableError("HTTP 503", cause="http_503", status=503)
    return examiner(messages, params)


register_script("exam-flaky", flaky_examiner)


def test_exam_resume_repeats_only_failed_work(exam_config: Path, tmp_path: Path) -> None:
    text = exam_config.read_text().replace(
        "ex: scripted/exam-examiner", "ex: {spec: scripted/exam-flaky, max_retries: 0}"
    )
    exam_config.write_text(text)
    FLAKY["fail"] = True
    first = run_config(exam_config, out=tmp_path / "runs", show_progress=False)
    assert first.summary["exam"]["calls_failed"] == {"http_503": 3}
    assert first.summary["exam"]["kept"] == 8  # the canal questions are missing, and counted
    FLAKY["fail"] = False
    resumed = run_config(exam_config, out=tmp_path / "runs", resume=True, show_progress=False)
    assert resumed.run_dir == first.run_dir
    assert resumed.summary["exam"]["kept"] == 10 and resumed.summary["exam"]["calls_failed"] == {}
    html = (resumed.run_dir / "report.html").read_text()
    assert "<h3>Questions (10)</h3>" in html  # the first run's 8-question exam is superseded, not shown
    con = sqlite3.connect(first.run_dir / "run.sqlite")
    fresh = con.execute(
        "SELECT role, COUNT(*) FROM model_calls WHERE cached=0 AND error IS NULL GROUP BY role"
    ).fetchall()
    calls = dict(fresh)
    # Examiner: 3 first-run successes + 1 retried call + label batches; the canal call is the only repeat.
    examiner_calls = con.execute(
        "SELECT COUNT(*) FROM model_calls WHERE role='examiner' AND cached=0 AND error IS NULL"
        " AND item_key LIKE 'exam_draft_%'"
    ).fetchone()[0]
    assert examiner_calls == 4
    assert calls["candidate"] > 0


def test_exam_from_file_needs_no_examiner(exam_config: Path, tmp_path: Path) -> None:
    first = run_config(exam_config, out=tmp_path / "runs", show_progress=False)
    cfg = tmp_path / "from_file.yaml"
    cfg.write_text(
        f"""
protocol: exam
corpus: {{path: docs, min_chunk_chars: 10, max_chunk_chars: 4000}}
models:
  reader: scripted/exam-reader
exam:
  exam_file: {first.run_dir / "exam.jsonl"}
  grid: {{llms: [reader], retrievers: [closed_book, oracle], k: 1}}
  irt: {{enabled: false}}
"""
    )
    result = run_config(cfg, out=tmp_path / "runs2", show_progress=False)
    assert result.summary["exam"]["questions"] == 10
    assert result.summary["pipelines"]["reader/oracle/icl0"]["accuracy"]["value"] == 1.0
    con = sqlite3.connect(result.run_dir / "run.sqlite")
    assert con.execute("SELECT COUNT(*) FROM model_calls WHERE role='examiner'").fetchone()[0] == 0
    assert (result.run_dir / "exam.jsonl").read_text() == (first.run_dir / "exam.jsonl").read_text()


def loglik_scorer(prefix: str, token: str) -> float:
    """Prompt logprobs for option_loglik: the tokens spelling the true answer after the last "Answer:"
    are likely, anything else is not."""
    head, sep, after = prefix.rpartition("Answer:")
    if not sep:
        return -1.0
    truth = ANSWERS.get(re.sub(r"\s*<script>.*$", "", _question(head)), "")
    return -0.1 if truth.startswith((after + token).strip()) else -2.0


register_script("exam-scorer", reader)
register_scorer("exam-scorer", loglik_scorer)


def test_exam_grades_by_option_loglik_when_the_model_has_prompt_logprobs(
    exam_config: Path, tmp_path: Path
) -> None:
    text = exam_config.read_text()
    text = text.replace(
        "  chatty: scripted/exam-chatty\n", "  chatty: scripted/exam-chatty\n  scorer: scripted/exam-scorer\n"
    )
    text = text.replace(
        "grid: {llms: [reader, chatty], retrievers: [closed_book, bm25, oracle], icl_shots: [0, 2], k: 1}",
        "grid: {llms: [scorer, chatty], retrievers: [closed_book], icl_shots: [0, 1], k: 1}",
    )
    text = text.replace("candidates:\n  - {name: dead, model: broken}\n", "")
    exam_config.write_text(text)
    result = run_config(exam_config, out=tmp_path / "runs", show_progress=False)
    pipes = result.summary["pipelines"]
    for icl in (0, 1):
        scorer = pipes[f"scorer/closed_book/icl{icl}"]
        assert scorer["methods"] == {"option_loglik": 10} and scorer["accuracy"]["value"] == 1.0
    assert pipes["chatty/closed_book/icl0"]["methods"] == {"generated_letter": 7}
    con = sqlite3.connect(result.run_dir / "run.sqlite")
    rows = [json.loads(r[0]) for r in con.execute("SELECT data FROM items WHERE kind='exam_response'")]
    mine = [r for r in rows if r["pipeline"].startswith("scorer/")]
    assert len(mine) == 20
    for r in mine:
        assert r["method_requested"] == "auto" and r["fallback"] is None
        assert max(r["scores"], key=r["scores"].get) == r["selected"] == r["answer"]
        assert set(r["logliks"]) == set("ABCD") and max(r["probs"], key=r["probs"].get) == r["selected"]
    chatty = next(r for r in rows if r["pipeline"].startswith("chatty/") and r.get("fallback"))
    assert chatty["fallback"] == "the server returns no prompt logprobs; no logprobs returned"
    # Served from the cache on a re-run, option scores included.
    again = run_config(exam_config, out=tmp_path / "runs", show_progress=False)
    total, cached = _calls(again.run_dir)
    assert total == cached > 0


def test_exam_config_errors(exam_config: Path, tmp_path: Path) -> None:
    from proctor.errors import UserError

    bad = exam_config.read_text().replace("llms: [reader, chatty]", "llms: [reader, nobody]")
    (tmp_path / "bad1.yaml").write_text(bad)
    with pytest.raises(UserError, match=r"exam.grid.llms\[1\] refers to 'nobody'"):
        run_config(tmp_path / "bad1.yaml", out=tmp_path / "runs", show_progress=False)
    bad = exam_config.read_text().replace("labels: examiner", "labels: examiner\n  selection: option_loglik")
    (tmp_path / "bad2.yaml").write_text(bad)
    with pytest.raises(UserError, match="prompt logprobs"):
        run_config(tmp_path / "bad2.yaml", out=tmp_path / "runs", show_progress=False)
    bad = exam_config.read_text().replace("labels: examiner", "labels: examiner\n  chunk_sampling: clusters")
    (tmp_path / "bad3.yaml").write_text(bad)
    with pytest.raises(UserError, match=r"chunk_sampling: clusters .* no `embedder`"):
        run_config(tmp_path / "bad3.yaml", out=tmp_path / "runs", show_progress=False)


def test_exam_only_without_pipelines(exam_config: Path, tmp_path: Path) -> None:
    text = exam_config.read_text()
    text = text.replace("llms: [reader, chatty]", "llms: []").replace(
        "candidates:\n  - {name: dead, model: broken}\n", ""
    )
    exam_config.write_text(text)
    result = run_config(exam_config, out=tmp_path / "runs", show_progress=False)
    assert result.summary["exam"]["kept"] == 10 and result.summary["pipelines"] == {}
    assert any("only the exam was written" in w for w in result.summary["warnings"])
    assert len((result.run_dir / "exam.jsonl").read_text().splitlines()) == 10
    assert "Bias baselines" in (result.run_dir / "report.html").read_text()


def _exam_only(exam_config: Path, exam_settings: str) -> None:
    text = exam_config.read_text()
    text = text.replace("llms: [reader, chatty]", "llms: []").replace(
        "candidates:\n  - {name: dead, model: broken}\n", ""
    )
    text = text.replace("  num_questions: 12\n  questions_per_call: 3\n", exam_settings)
    exam_config.write_text(text)


def _fresh_examiner_calls(run_dir: Path) -> int:
    con = sqlite3.connect(run_dir / "run.sqlite")
    return con.execute(
        "SELECT COUNT(*) FROM model_calls WHERE role='examiner' AND cached=0 AND error IS NULL"
        " AND item_key LIKE 'exam_draft_%'"
    ).fetchone()[0]


def test_target_questions_adds_rounds_and_reuses_earlier_calls(exam_config: Path, tmp_path: Path) -> None:
    # Round 1 asks 3 questions (one chunk); the keep rate sets how many more to ask for 8 kept.
    _exam_only(exam_config, "  num_questions: 3\n  questions_per_call: 3\n  target_questions: 8\n")
    result = run_config(exam_config, out=tmp_path / "runs", show_progress=False)
    ex = result.summary["exam"]
    rounds = ex["rounds"]
    assert len(rounds) == 2 and rounds[0]["asked"] == 3 and rounds[1]["asked"] > 3
    assert rounds[1]["asked"] % 3 == 0 and ex["kept"] == rounds[1]["kept"] >= 8
    assert ex["planned"] == rounds[1]["asked"]
    assert not any("target" in w for w in result.summary["warnings"])
    # The round-1 call is part of round 2's plan: each call is made once.
    assert _fresh_examiner_calls(result.run_dir) == rounds[1]["asked"] // 3
    html = (result.run_dir / "report.html").read_text()
    assert "generation rounds" in html and "3 asked in all, " in html
    # The same questions asked in one round give the same exam (rounds do not change the assembly).
    one = tmp_path / "one"
    one.mkdir()
    (one / "docs").symlink_to(tmp_path / "docs")
    (one / "exam.yaml").write_text(
        exam_config.read_text().replace(
            "num_questions: 3\n  questions_per_call: 3\n  target_questions: 8\n",
            f"num_questions: {rounds[1]['asked']}\n  questions_per_call: 3\n",
        )
    )
    single = run_config(one / "exam.yaml", out=tmp_path / "runs1", show_progress=False)
    assert (single.run_dir / "exam.jsonl").read_text() == (result.run_dir / "exam.jsonl").read_text()


def test_target_questions_stops_at_the_cap_and_says_so(exam_config: Path, tmp_path: Path) -> None:
    # Only 10 distinct questions exist in this corpus: a target of 20 cannot be met within 24 asked.
    _exam_only(
        exam_config,
        "  num_questions: 6\n  questions_per_call: 3\n  target_questions: 20\n  max_questions: 24\n",
    )
    result = run_config(exam_config, out=tmp_path / "runs", show_progress=False)
    ex = result.summary["exam"]
    assert ex["rounds"][-1]["asked"] == 24 and ex["kept"] == 10
    assert any("short of target_questions 20" in w for w in result.summary["warnings"])
    bad = exam_config.read_text().replace("max_questions: 24", "max_questions: 4")
    (tmp_path / "bad.yaml").write_text(bad)
    from proctor.errors import UserError

    with pytest.raises(UserError, match="max_questions"):
        run_config(tmp_path / "bad.yaml", out=tmp_path / "runs", show_progress=False)


def test_guessable_items_are_dropped_and_the_closed_book_baseline_reported(
    exam_config: Path, tmp_path: Path
) -> None:
    GUESSES["on"] = True
    try:
        result = run_config(exam_config, out=tmp_path / "runs", show_progress=False)
    finally:
        GUESSES["on"] = False
    con = sqlite3.connect(result.run_dir / "run.sqlite")
    ex = json.loads(con.execute("SELECT data FROM artifacts WHERE name = 'exam_stats'").fetchone()[0])
    g = ex["guessability"]
    harbour = [k for k, v in g["per_item"].items() if v["guessability"] == 1.0]
    assert harbour and all(v["guessability"] in (0.0, 1.0) for v in g["per_item"].values())
    assert ex["filtered"]["guessable"] == len(harbour) and g["guessable_by_topic"]["harbour.md"] == 1.0
    kept = [json.loads(line) for line in (result.run_dir / "exam.jsonl").read_text().splitlines()]
    assert not {q["id"] for q in kept} & set(harbour)
    baselines = json.loads(
        con.execute("SELECT data FROM artifacts WHERE name = 'exam_baselines'").fetchone()[0]
    )
    assert baselines["closed_book_examiner"]["value"] == 0.0 and baselines["closed_book_examiner"][
        "n"
    ] == len(kept)
    html = (result.run_dir / "report.html").read_text()
    assert (
        "Closed-book answerability" in html
        and "the examiner, closed-book (question and options only)" in html
    )


def _repair_calls(run_dir: Path) -> list[str]:
    con = sqlite3.connect(run_dir / "run.sqlite")
    rows = con.execute("SELECT key, data FROM items WHERE kind = 'exam_repair' ORDER BY seq").fetchall()
    return [json.loads(d)["failure"] for _, d in rows]


def _prompts(run_dir: Path, kind: str, failure: str | None = None) -> list[str]:
    """The user prompts of the run's calls for items of `kind` (repairs: only those for `failure`), in
    order, read through the store's transcripts."""
    from proctor import load_run

    con = sqlite3.connect(run_dir / "run.sqlite")
    rows = con.execute("SELECT key, data FROM items WHERE kind = ? ORDER BY seq", (kind,)).fetchall()
    keys = [k for k, d in rows if failure is None or json.loads(d)["failure"] == failure]
    with load_run(run_dir) as run:
        return [c.messages[-1].content for k in keys for c in run.transcripts(k) if c.messages]


def _repair_prompts(run_dir: Path, failure: str) -> list[str]:
    return _prompts(run_dir, "exam_repair", failure)


def test_a_question_with_repeated_options_is_repaired_once_and_kept(
    exam_config: Path, tmp_path: Path
) -> None:
    # The chief-engineer question repeats its answer in two of four distractors: two distinct ones are left,
    # too few. With repair on, the examiner writes fresh distractors once and the question is kept.
    _exam_only(exam_config, "  num_questions: 12\n  questions_per_call: 3\n")
    exam_config.write_text(exam_config.read_text().replace("repair: {attempts: 0}", "repair: {attempts: 2}"))
    result = run_config(exam_config, out=tmp_path / "runs", show_progress=False)
    ex = result.summary["exam"]
    # The "according to the text" question is rewritten (its own kind of repair), so nothing is dropped.
    assert ex["repairs"] == {
        "asked": {"not_self_contained": 1, "options_repeat": 1},
        "repaired": {"not_self_contained": 1, "options_repeat": 1},
        "calls": 2,
        "calls_failed": {},
    }
    assert ex["filtered"] == {"guessable": 0} and ex["kept"] == 12
    assert sorted(_repair_calls(result.run_dir)) == ["not_self_contained", "options_repeat"]
    # Only the removed options were replaced: the two distinct ones stay, listed as already used, and
    # two replacements (one per removed option) were asked for.
    prompt = _repair_prompts(result.run_dir, "options_repeat")[0]
    assert "Wrong answers already used" in prompt and "- Nina Holt\n- Gus Brann" in prompt
    assert "Petra Lund.; petra lund" in prompt and "Write 2 new wrong answers" in prompt
    exam = [json.loads(line) for line in (result.run_dir / "exam.jsonl").read_text().splitlines()]
    q = next(q for q in exam if "chief engineer" in q["question"])
    assert q["choices"][q["answer_index"]] == "Petra Lund"
    assert sum("petra lund" in c.lower() for c in q["choices"]) == 1
    assert len({c.lower() for c in q["choices"]}) == 4
    html = (result.run_dir / "report.html").read_text()
    assert "repaired" in html
    # A re-run makes no new repair call (the repair is a stored unit).
    again = run_config(exam_config, out=tmp_path / "runs2", show_progress=False)
    con = sqlite3.connect(again.run_dir / "run.sqlite")
    fresh = con.execute(
        "SELECT COUNT(*) FROM model_calls WHERE cached = 0 AND item_key LIKE 'exam_repair_%'"
    ).fetchone()[0]
    assert fresh == 0 and again.summary["exam"]["kept"] == 12


def test_an_unrepairable_question_is_dropped_and_counted(exam_config: Path, tmp_path: Path) -> None:
    _exam_only(exam_config, "  num_questions: 12\n  questions_per_call: 3\n")
    exam_config.write_text(exam_config.read_text().replace("repair: {attempts: 0}", "repair: {attempts: 2}"))
    REPAIR["reply"] = ["Petra Lund", "petra lund.", "Nina Holt"]  # the examiner keeps repeating the answer
    try:
        result = run_config(exam_config, out=tmp_path / "runs", show_progress=False)
    finally:
        REPAIR["reply"] = ["Ivo Marsh", "Lena Quill", "Ansel Brook"]
    ex = result.summary["exam"]
    assert ex["repairs"]["asked"] == {"not_self_contained": 1, "options_repeat": 1}
    assert ex["repairs"]["repaired"] == {"not_self_contained": 1}
    assert ex["repairs"]["calls"] == 3  # both attempts made for the options, then given up
    assert ex["filtered"]["options_repeat"] == 1 and ex["kept"] == 11
    assert sorted(_repair_calls(result.run_dir)) == ["not_self_contained", "options_repeat", "options_repeat"]


def test_a_question_that_names_its_answer_is_rewritten_once_and_kept(
    exam_config: Path, tmp_path: Path
) -> None:
    _exam_only(exam_config, "  num_questions: 12\n  questions_per_call: 3\n")
    exam_config.write_text(exam_config.read_text().replace("repair: {attempts: 0}", "repair: {attempts: 2}"))
    LEAK["on"] = True
    try:
        result = run_config(exam_config, out=tmp_path / "runs", show_progress=False)
    finally:
        LEAK["on"] = False
    ex = result.summary["exam"]
    assert ex["repairs"]["asked"]["answer_in_question"] == 1
    assert ex["repairs"]["repaired"]["answer_in_question"] == 1
    assert _repair_calls(result.run_dir).count("answer_in_question") == 1  # once: the rewrite passed
    # The prompt names the words of the key found in the question and keeps the key and the options.
    prompt = _repair_prompts(result.run_dir, "answer_in_question")[0]
    assert "appear in the question: green" in prompt and "Correct answer: green" in prompt
    assert "- dark blue" in prompt
    exam = [json.loads(line) for line in (result.run_dir / "exam.jsonl").read_text().splitlines()]
    q = next(q for q in exam if "lantern colour" in q["question"])
    assert q["question"] == "What is the lantern colour of Velmora harbour?"
    assert q["choices"][q["answer_index"]] == "green" and "answer_in_question" not in ex["filtered"]
    html = (result.run_dir / "report.html").read_text()
    assert "answer_in_question" in html and "1 repaired / 1 asked" in html


def test_a_question_that_still_names_its_answer_is_dropped_and_counted(
    exam_config: Path, tmp_path: Path
) -> None:
    _exam_only(exam_config, "  num_questions: 12\n  questions_per_call: 3\n")
    exam_config.write_text(exam_config.read_text().replace("repair: {attempts: 0}", "repair: {attempts: 2}"))
    LEAK["on"], REWRITE["mode"] = True, "stubborn"
    try:
        result = run_config(exam_config, out=tmp_path / "runs", show_progress=False)
    finally:
        LEAK["on"], REWRITE["mode"] = False, "fix"
    ex = result.summary["exam"]
    assert ex["repairs"]["asked"]["answer_in_question"] == 1
    assert "answer_in_question" not in ex["repairs"]["repaired"]
    assert _repair_calls(result.run_dir).count("answer_in_question") == 2  # both attempts, then dropped
    assert ex["filtered"]["answer_in_question"] == 1
    exam = [json.loads(line) for line in (result.run_dir / "exam.jsonl").read_text().splitlines()]
    assert not any("lantern colour" in q["question"] for q in exam)


def test_top_up_asks_for_more_until_num_questions_are_kept(exam_config: Path, tmp_path: Path) -> None:
    # Twelve asked, ten kept (one repeats its answer, one points at "the text"; no repair): the top-up
    # asks again, the examiner writes new questions for the second set, and the exam reaches twelve.
    _exam_only(exam_config, "  num_questions: 12\n  questions_per_call: 3\n  top_up: true\n")
    exam_config.write_text(exam_config.read_text().replace("  top_up: false\n", ""))
    real = examiner

    def second_set_reworded(messages, params):
        reply = real(messages, params)
        text = messages[-1]["content"]
        if "this is set 2" in text and "multiple-choice question" in text:
            qs = json.loads(reply)["questions"]
            for q in qs:
                q["question"] = q["question"].replace("What is", "Which is")
            return json.dumps({"questions": qs})
        return reply

    register_script("exam-examiner", second_set_reworded)
    try:
        result = run_config(exam_config, out=tmp_path / "runs", show_progress=False)
    finally:
        register_script("exam-examiner", real)
    ex = result.summary["exam"]
    rounds = ex["rounds"]
    assert rounds[0] == {"asked": 12, "generated": 12, "kept": 10, "guessable": 0}
    assert len(rounds) == 2 and 12 < rounds[1]["asked"] <= 24 and ex["kept"] >= 12
    assert not any("short of" in w for w in result.summary["warnings"])


def test_top_up_stops_at_twice_num_questions_and_says_so(exam_config: Path, tmp_path: Path) -> None:
    # One question per call; only the Moot's is self-contained, so each pass over the four chunks keeps
    # one. Four wanted: the top-up asks up to eight (2 x num_questions, two passes) and stops there.
    _exam_only(exam_config, "  num_questions: 4\n  questions_per_call: 1\n")
    exam_config.write_text(exam_config.read_text().replace("  top_up: false\n", ""))
    TOPUP["on"] = True
    try:
        result = run_config(exam_config, out=tmp_path / "runs", show_progress=False)
    finally:
        TOPUP["on"] = False
    ex = result.summary["exam"]
    assert [(r["asked"], r["kept"]) for r in ex["rounds"]] == [(4, 1), (8, 2)]
    assert ex["planned"] == 8 and ex["kept"] == 2
    assert _fresh_examiner_calls(result.run_dir) == 8
    assert any("short of num_questions 4, after 8 asked" in w for w in result.summary["warnings"])


def _generation_prompts(run_dir: Path) -> list[str]:
    return _prompts(run_dir, "exam_draft")


def test_a_top_up_round_asks_each_passage_about_an_uncovered_sentence(
    exam_config: Path, tmp_path: Path
) -> None:
    # One question per call; the harbour's and canal's first ones point at "the text" (dropped, no repair),
    # so round 1 keeps 2 of the 4 wanted. Like a small examiner at temperature 0, this one asks about the
    # passage's first fact whenever it is shown the passage, unless the prompt quotes a part to ask about:
    # then it asks about the fact stated there. The top-up round reaches the target only so.
    _exam_only(exam_config, "  num_questions: 4\n  questions_per_call: 1\n")
    exam_config.write_text(exam_config.read_text().replace("  top_up: false\n", ""))
    real = examiner

    def asks_about_the_quoted_part(messages, params):
        text = messages[-1]["content"]
        if "multiple-choice question" not in text:
            return real(messages, params)
        parts = text.split('"""')
        passage, focus = parts[1], (parts[3] if len(parts) > 3 else None)
        facts = next(f for f in FACTS.values() if f[0][0] in passage)
        shown = focus or passage
        subj, attr, val, wrong = next(f for f in facts if f"The {f[1]} of {f[0]} is {f[2]}." in shown)
        q = f"What is the {attr} of {subj}?"
        if focus is None and subj in ("Velmora harbour", "Tarn canal"):
            q = f"According to the text, what is the {attr} of {subj}?"
        item = {"question": q, "correct_answer": val, "distractors": wrong, "rationale": "-"}
        return json.dumps({"questions": [item]})

    register_script("exam-examiner", asks_about_the_quoted_part)
    try:
        result = run_config(exam_config, out=tmp_path / "runs", show_progress=False)
    finally:
        register_script("exam-examiner", real)
    ex = result.summary["exam"]
    assert [(r["asked"], r["kept"]) for r in ex["rounds"]] == [(4, 2), (8, 6)]
    assert ex["later_passes"] == {"asked": 4, "exhausted": 0, "kept": 4}
    prompts = _generation_prompts(result.run_dir)
    second = [p for p in prompts if "this is set 2" in p]
    assert len(second) == 4
    moot = next(p for p in second if "Moot of Forty" in p.split('"""', 2)[1])
    # The Moot's quorum was asked: the least covered sentence of its passage is the meeting hall's.
    assert moot.split('"""')[3].strip() == "The meeting hall of Moot of Forty is Cistern House."
    assert "already asked" not in moot
    first = [p for p in prompts if "this is set" not in p]
    assert len(first) == 4 and not any("Ask about this part" in p for p in first)
    exam = [json.loads(line) for line in (result.run_dir / "exam.jsonl").read_text().splitlines()]
    assert "What is the meeting hall of Moot of Forty?" in {q["question"] for q in exam}
    con = sqlite3.connect(result.run_dir / "run.sqlite")
    drafts = [json.loads(d) for (d,) in con.execute("SELECT data FROM items WHERE kind = 'exam_draft'")]
    assert {(d["variant"], d["focus"] is None) for d in drafts} == {(0, True), (1, False)}
    html = (result.run_dir / "report.html").read_text()
    assert "passage exhausted" in html and "sentence not yet asked about" in html


def test_a_passage_with_no_uncovered_sentence_is_not_asked_again(exam_config: Path, tmp_path: Path) -> None:
    # One passage of one fact: once its question is written, a later pass has nothing new to ask about,
    # so neither the second pass of round 1 nor the top-up calls the examiner again; each is counted.
    for f in (tmp_path / "docs").iterdir():
        f.unlink()
    (tmp_path / "docs" / "moot.md").write_text("The quorum of Moot of Forty is twenty-one.\n")
    _exam_only(exam_config, "  num_questions: 2\n  questions_per_call: 1\n")
    exam_config.write_text(exam_config.read_text().replace("  top_up: false\n", ""))
    result = run_config(exam_config, out=tmp_path / "runs", show_progress=False)
    ex = result.summary["exam"]
    assert ex["kept"] == 1 and _fresh_examiner_calls(result.run_dir) == 1
    assert ex["later_passes"] == {"asked": 0, "exhausted": 1, "kept": 0}
    assert ex["planned"] == 1 and ex["calls"] == 1
