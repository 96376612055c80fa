"""`proctor view` item detail for exams, agent traces and pairwise preferences, against scripted runs:

* an exam question shows each option with how many pipelines chose it, the correct option, the item's
  guessability, its IRT parameters and its characteristic curve (an inline SVG);
* an agent answer shows its trajectory step by step (thought, action and arguments, observation, answer,
  stop reason);
* the compare page takes A / B / tie preferences, stores them append-only under a key naming both runs
  (the same pair whichever run is A), exports them, and sums them up with a sign test;
* hostile model text (an option, a tool observation) is rendered as text.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from markupsafe import escape
from starlette.testclient import TestClient

from proctor.config import CorpusConfig
from proctor.corpus import load_corpus
from proctor.models.scripted import register_script
from proctor.psychometrics import item_characteristic
from proctor.runner import run_config
from proctor.viewer import create_app
from proctor.viewer.exam import icc_plot

HOSTILE = '<script>alert("pwned")</script>'
CSRF = "detail-csrf-token"

# --- an exam from a file, answered by four scripted pipelines ---------------------------------------
# (subject, answer, distractors); question i is answered right by the pipelines whose skill exceeds i.
EXAM_FACTS = [
    ("the founder of Velmora", "Ostrid Kael", ["Mara Dune", "Ilse Varn", HOSTILE]),
    ("the opening year of the Tarn canal", "1742", ["1790", "1688", "1815"]),
    ("the colour of Quillan lanterns", "green", ["red", "white", "amber"]),
    ("the quorum of the Moot", "twenty-one", ["twelve", "thirty", "nine"]),
    ("the venue of the Lantern Tide", "Kettle Point", ["Dunmere", "Gull Rock", "Ashby"]),
    ("the cargo of the Tarn canal", "tidal glass", ["salt fish", "timber", "wool bales"]),
]
TRUTH = {f"What is {s}?": a for s, a, _ in EXAM_FACTS}
SKILL = {("exam-good", True): 6, ("exam-good", False): 4, ("exam-poor", True): 3, ("exam-poor", False): 1}


def _exam_reply(name: str, messages: list[dict[str, Any]]) -> str:
    text = messages[-1]["content"]
    block = text.rsplit("Question:", 1)[1]
    q = block.split("\n", 1)[0].strip()
    opts = dict(re.findall(r"^([A-J])\. (.*)$", block, re.M))
    truth = TRUTH[q]
    index = list(TRUTH).index(q)
    oracle = f"is {truth}." in text.split("Question:", 1)[0]
    right = next(k for k, v in opts.items() if v == truth)
    wrong = next(k for k, v in opts.items() if v != truth)
    return f"The correct answer is ({right if index < SKILL[(name, oracle)] else wrong})."


register_script("exam-good", lambda m, p: _exam_reply("exam-good", m))
register_script("exam-poor", lambda m, p: _exam_reply("exam-poor", m))


def _exam_run(base: Path, root: Path) -> str:
    docs = base / "exam-docs"
    docs.mkdir()
    for i, (s, a, _) in enumerate(EXAM_FACTS):
        (docs / f"fact{i}.md").write_text(f"# Fact {i}\n\nRecords say that {s} is {a}.\n")
    corpus = load_corpus(CorpusConfig(path=docs, min_chunk_chars=10, max_chunk_chars=4000))
    chunk = {c.source.rsplit("/", 1)[-1].removesuffix(".md"): c.chunk_id for c in corpus.chunks}
    lines = []
    for i, (s, a, distractors) in enumerate(EXAM_FACTS):
        at = i % 4
        record = {
            "id": f"q{i}",
            "question": f"What is {s}?",
            "choices": [*distractors[:at], a, *distractors[at:]],
            "answer": "ABCD"[at],
            "answer_index": at,
            "rationale": "stated",
            "source_chunk_ids": [chunk[f"fact{i}"]],
            "bloom": "remember",
            "question_word": "what",
            "generator": "hand",
            "prompt_version": "hand",
        }
        if i == 0:
            record["guessability"] = 0.375
        lines.append(json.dumps(record))
    (base / "exam.jsonl").write_text("\n".join(lines) + "\n")
    cfg = base / "exam.yaml"
    cfg.write_text(
        f"""
protocol: exam
name: viewer-exam
seed: 0
corpus: {{path: exam-docs, min_chunk_chars: 10, max_chunk_chars: 4000}}
models: {{good: scripted/exam-good, poor: scripted/exam-poor}}
exam:
  exam_file: {base / "exam.jsonl"}
  grid: {{llms: [good, poor], retrievers: [closed_book, oracle], k: 1}}
"""
    )
    return run_config(cfg, out=root, show_progress=False).run_dir.name


# --- an agent (ReAct over a HotpotQA-style document environment) whose tool sees a hostile passage -----
HOTPOT = [
    {
        "_id": "h1",
        "question": "Which river flows through the city where the Ambry Glassworks stands?",
        "answer": "River Ilse",
        "type": "bridge",
        "supporting_facts": [["Ambry Glassworks", 0], ["Ambry", 0]],
        "context": [
            [
                "Ambry Glassworks",
                [f"The Ambry Glassworks stands in Ambry. {HOSTILE}", "It was founded in 1862."],
            ],
            ["Ambry", ["Ambry is a town on the River Ilse."]],
        ],
    }
]


def _agent(messages: list[dict[str, Any]], params: Any) -> str:
    observations = re.findall(r"^Observation: (.*)$", messages[-1]["content"], re.M)
    if not observations:
        return "Thought: look up the glassworks\nAction: Search[Ambry Glassworks]"
    if len(observations) == 1:
        return "Thought: now the town\nAction: Search[Ambry]"
    return "Thought: found it\nAction: Finish[River Ilse]"


register_script("detail-agent", _agent)


def _agent_run(base: Path, root: Path) -> str:
    (base / "hotpot.json").write_text(json.dumps(HOTPOT))
    cfg = base / "rageval.yaml"
    cfg.write_text(
        """
protocol: rageval
name: viewer-agent
corpus: {}
models: {m: scripted/detail-agent}
rageval:
  database: null
  documents: false
  hotpotqa: hotpot.json
  grid: {workflows: [react], llms: [m]}
"""
    )
    return run_config(cfg, out=root, show_progress=False).run_dir.name


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    base = tmp_path_factory.mktemp("viewer-detail")
    root = base / "runs"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PROCTOR_CACHE_DIR", str(base / "cache"))
        _exam_run(base, root)
        _agent_run(base, root)
    yield root


@pytest.fixture
def client(root: Path) -> TestClient:
    return TestClient(
        create_app(root, csrf_token=CSRF), base_url="http://127.0.0.1", headers={"Origin": "http://127.0.0.1"}
    )


def _run_id(root: Path, name: str) -> str:
    return next(p.name for p in root.iterdir() if p.name.startswith(name))


def _key(root: Path, run_id: str, kind: str, field: str, value: str) -> str:
    con = sqlite3.connect(root / run_id / "run.sqlite")
    row = con.execute(
        f"SELECT key FROM items WHERE kind = ? AND json_extract(data, '$.{field}') = ?", (kind, value)
    ).fetchone()
    assert row, (kind, field, value)
    return str(row[0])


def _artifact(root: Path, run_id: str, name: str) -> Any:
    con = sqlite3.connect(root / run_id / "run.sqlite")
    return json.loads(con.execute("SELECT data FROM artifacts WHERE name = ?", (name,)).fetchone()[0])


# --- 1. exam questions -------------------------------------------------------------------------------
def _option_rows(page: str) -> list[tuple[str, str, str]]:
    """(letter and marks, count, share) per row of the options table."""
    table = page.split('id="options"', 1)[1].split("</table>", 1)[0]
    cell = r"<td[^>]*>(.*?)</td>"
    rows = re.findall(rf"<tr[^>]*>{cell}<td[^>]*>.*?</td>{cell}{cell}", table)
    return [(re.sub(r"<[^>]+>", "", a).strip(), n, s) for a, n, s in rows]


def test_exam_question_shows_option_counts_guessability_irt_and_curve(client: TestClient, root: Path) -> None:
    run = _run_id(root, "viewer-exam")
    key = _key(root, run, "exam_question", "id", "q0")
    page = client.get(f"/runs/{run}/items/{key}").text
    # q0: every pipeline is right (skill >= 1 everywhere): 4 of 4 chose A, the correct option.
    assert _option_rows(page) == [
        ("A correct", "4", "100.0%"),
        ("B", "0", "0.0%"),
        ("C", "0", "0.0%"),
        ("D", "0", "0.0%"),
    ]
    assert "4 of 4 graded answers correct" in page and "closed-book guessability 0.38" in page
    # The hostile distractor is text, not markup.
    assert HOSTILE not in page and str(escape(HOSTILE)) in page

    # q3: right only where skill > 3: good+closed_book and good+oracle; the two poor pipelines chose the
    # first wrong option (A, as the correct one is D).
    key3 = _key(root, run, "exam_question", "id", "q3")
    page3 = client.get(f"/runs/{run}/items/{key3}").text
    rows = _option_rows(page3)
    assert rows[3] == ("D correct", "2", "50.0%") and rows[0] == ("A", "2", "50.0%")

    irt = _artifact(root, run, "exam_irt")
    item = next(it for it in irt["items"] if it["id"] == "q3")
    assert f"<dt>IRT model</dt><dd>{irt['model']}</dd>" in page3
    assert f"<dt>difficulty (b)</dt><dd>{item['difficulty']:.2f}</dd>" in page3
    assert f"<dt>discrimination (a)</dt><dd>{item['discrimination']:.2f}</dd>" in page3
    svg = page3.split('<svg id="icc"', 1)[1].split("</svg>", 1)[0]
    points = re.search(r'<polyline points="([^"]+)"', svg)
    assert points is not None
    drawn = [tuple(map(float, p.split(","))) for p in points.group(1).split()]
    assert len(drawn) == 81
    expected = icc_plot(item["difficulty"], item["discrimination"], item["guessing"])
    assert points.group(1) == expected.points
    # The static report shows the same option counts (one function behind both).
    assert "chosen by 4 (100%)" in (root / run / "report.html").read_text()


def test_icc_follows_the_item_parameters() -> None:
    # P(b) = c + (1 - c) / 2 at theta = b; a steeper item changes faster; the floor is c.
    p = item_characteristic([0.5, -40.0, 40.0], difficulty=0.5, discrimination=1.7, guessing=0.2)
    assert p[0] == pytest.approx(0.6) and p[1] == pytest.approx(0.2) and p[2] == pytest.approx(1.0)
    assert item_characteristic([1.0], 0.0, 1.0)[0] == pytest.approx(1 / (1 + 2.718281828459045**-1))
    plot = icc_plot(0.0, 1.0, 0.25)
    ys = [float(pt.split(",")[1]) for pt in plot.points.split()]
    assert ys == sorted(ys, reverse=True)  # P rises with ability: y (down the page) falls
    assert plot.guessing_y is not None and plot.difficulty_x == pytest.approx((plot.left + plot.right) / 2)
    assert icc_plot(9.0, 1.0, None).difficulty_x is None and icc_plot(0.0, 1.0, None).guessing_y is None


# --- 2. agent traces ---------------------------------------------------------------------------------
def test_agent_answer_shows_its_trajectory_step_by_step(client: TestClient, root: Path) -> None:
    run = _run_id(root, "viewer-agent")
    key = _key(root, run, "rageval_answer", "task_id", _task_id(root, run))
    page = client.get(f"/runs/{run}/items/{key}").text
    assert "<h2>Agent trace</h2>" in page
    head = page.split('id="trace-head"', 1)[1].split("</p>", 1)[0]
    assert "react" in head and "3 steps" in head and "stop: <b>finished</b>" in head
    trace = page.split('<div id="trace">', 1)[1].split("<h2>", 1)[0]
    steps = re.findall(r'<div class="tr-step[^"]*">(.*?)</div>\s*(?=<div class="tr-step|<p)', trace, re.S)
    assert len(steps) == 3
    assert "<i>look up the glassworks</i>" in steps[0] and "<b>Search</b>" in steps[0]
    assert "Ambry Glassworks" in steps[0] and "<i>now the town</i>" in steps[1]
    assert "River Ilse" in steps[1]  # the second observation
    assert "Answer: River Ilse · stop: <b>finished</b>" in trace
    # The hostile passage came back as a tool observation: shown as text, in the trace and the raw data.
    assert HOSTILE not in page
    assert str(escape(f"The Ambry Glassworks stands in Ambry. {HOSTILE}")) in steps[0]
    # The static report renders the same steps through the same macro.
    assert "Answer: River Ilse · stop: <b>finished</b>" in (root / run / "report.html").read_text()


def _task_id(root: Path, run_id: str) -> str:
    con = sqlite3.connect(root / run_id / "run.sqlite")
    row = con.execute(
        "SELECT json_extract(data, '$.task_id') FROM items WHERE kind = 'rageval_answer'"
    ).fetchone()
    return str(row[0])


# --- 3. pairwise preference on the compare page -------------------------------------------------------
QA_FACTS = {
    "Velmora": ("Who founded the city of Velmora?", "Ostrid Kael"),
    "Tarn": ("In which year was the Tarn canal opened?", "1742"),
    "Quillan": ("What colour are Quillan lanterns?", "green"),
}


def _qa_examiner(messages: list[dict[str, Any]], params: Any) -> str:
    text = messages[-1]["content"]
    return next(
        (json.dumps({"question": q, "answer": a}) for k, (q, a) in QA_FACTS.items() if k in text), "not json"
    )


def _qa_weak(messages: list[dict[str, Any]], params: Any) -> str:
    return "Ostrid Kael." if "Velmora" in messages[-1]["content"] else f"No idea. {HOSTILE}"


def _qa_strong(messages: list[dict[str, Any]], params: Any) -> str:
    text = messages[-1]["content"]
    return next(a for k, (_, a) in QA_FACTS.items() if k in text)


def _qa_judge(messages: list[dict[str, Any]], params: Any) -> str:
    text = next(m["content"] for m in messages if m["role"] == "user")
    got = re.search(r"<candidate_answer>(.*?)</candidate_answer>", text, re.DOTALL)
    ok = any(a in text and got and a.lower() in got.group(1).lower() for _, a in QA_FACTS.values())
    return json.dumps({"reason": "checked", "verdict": "correct" if ok else "incorrect"})


register_script("detail-qa-examiner", _qa_examiner)
register_script("detail-qa-weak", _qa_weak)
register_script("detail-qa-strong", _qa_strong)
register_script("detail-qa-judge", _qa_judge)


def _qa_run(base: Path, root: Path, name: str, script: str) -> str:
    docs = base / "qa-docs"
    docs.mkdir(exist_ok=True)
    for key, (q, a) in QA_FACTS.items():
        (docs / f"{key}.md").write_text(f"# {key}\n\nA fact about {key}: the answer to '{q}' is {a}. " * 3)
    cfg = base / f"{name}.yaml"
    cfg.write_text(
        f"""
protocol: qa
name: {name}
corpus: {{path: qa-docs, min_chunk_chars: 10, max_chunk_chars: 2000}}
models: {{ex: scripted/detail-qa-examiner, cand: scripted/{script}, judge: scripted/detail-qa-judge}}
roles: {{examiner: ex, judge: judge}}
candidates: [{{name: solo, model: cand}}]
qa: {{num_questions: 3, judges: [with_reference]}}
"""
    )
    return run_config(cfg, out=root, show_progress=False).run_dir.name


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str, str]]:
    """Two qa runs: A right on Velmora only (hostile elsewhere), B right on all three: two flips."""
    base = tmp_path_factory.mktemp("viewer-pref")
    root = base / "runs"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PROCTOR_CACHE_DIR", str(base / "cache"))
        a = _qa_run(base, root, "pref-a", "detail-qa-weak")
        b = _qa_run(base, root, "pref-b", "detail-qa-strong")
    yield root, a, b


def _flips(page: str) -> list[tuple[str, str]]:
    """The flipped item pairs (a pair flips under each judge: one row per judge, one preference per pair)."""
    return list(
        dict.fromkeys(
            re.findall(r'<tr class="flip" tabindex="-1" data-key-a="([^"]+)" data-key-b="([^"]+)">', page)
        )
    )


def _prefer(c: TestClient, run_a: str, item_a: str, run_b: str, item_b: str, label: str, who: str, **kw: Any):
    body = {
        "run_a": run_a,
        "item_a": item_a,
        "run_b": run_b,
        "item_b": item_b,
        "label": label,
        "annotator": who,
    }
    return c.post("/compare/preferences", json=body, headers={"X-CSRF-Token": CSRF, **kw.get("headers", {})})


def _summary(page: str) -> tuple[int, int, int, float]:
    m = re.search(
        r'class="pref-a">(\d+)</b>.*?class="pref-b">(\d+)</b>.*?class="pref-tie">(\d+)</b>'
        r'.*?class="pref-p">([0-9.]+)</span>',
        page,
        re.S,
    )
    assert m, page
    return int(m[1]), int(m[2]), int(m[3]), float(m[4])


def test_preferences_are_stored_per_pair_whichever_run_is_a_and_summed_with_a_sign_test(
    pair: tuple[Path, str, str],
) -> None:
    from scipy.stats import binomtest

    root, a, b = pair
    c = TestClient(
        create_app(root, csrf_token=CSRF), base_url="http://127.0.0.1", headers={"Origin": "http://127.0.0.1"}
    )
    page = c.get(f"/compare?a={a}&b={b}").text
    flips = _flips(page)
    assert len(flips) == 2 and _summary(page) == (0, 0, 0, 1.0)
    assert HOSTILE not in page and str(escape(HOSTILE)) in page
    (f1a, f1b), (f2a, f2b) = flips
    assert _prefer(c, a, f1a, b, f1b, "b", "ana").json()["label"] == "b"
    assert _prefer(c, a, f2a, b, f2b, "b", "ana").status_code == 200
    assert _prefer(c, a, f2a, b, f2b, "tie", "ana").status_code == 200  # changed her mind: latest counts
    # Bob works on the comparison the other way round: his "a" is run B.
    assert _prefer(c, b, f1b, a, f1a, "a", "bob").status_code == 200
    assert _prefer(c, b, f2b, a, f2a, "b", "bob").status_code == 200

    page = c.get(f"/compare?a={a}&b={b}").text
    assert _summary(page) == (1, 2, 1, round(binomtest(1, 3, 0.5).pvalue, 4))
    row1 = page.split(f'data-key-a="{f1a}"', 1)[1].split("</tr>", 1)[0]
    assert "ana: B</span>" in row1 and "bob: B</span>" in row1
    swapped = c.get(f"/compare?a={b}&b={a}").text
    assert _summary(swapped)[:3] == (2, 1, 1)

    # Append-only, in the labels of the pair's first run (by run id), under a key naming both runs.
    first, other = sorted([a, b])
    con = sqlite3.connect(root / first / "labels.sqlite")
    rows = con.execute("SELECT item_key, annotator, label FROM labels ORDER BY id").fetchall()
    assert len(rows) == 5 and all(k.startswith("pref:") and first in k and other in k for k, _, _ in rows)
    with pytest.raises(sqlite3.DatabaseError):
        con.execute("DELETE FROM labels")
    assert c.get(f"/runs/{other}/labels").json() == []

    # Exported with both runs and items named and the preferred run spelled out.
    lines = [json.loads(x) for x in c.get(f"/runs/{first}/labels.jsonl").text.splitlines()]
    assert len(lines) == 4  # the latest per pair and annotator
    ana1 = next(
        x for x in lines if x["annotator"] == "ana" and a in (x["run_a"], x["run_b"]) and f1a in x["item_id"]
    )
    assert ana1["preferred"] == b and {ana1["item_a"], ana1["item_b"]} == {f1a, f1b}
    assert {x["preferred"] for x in lines if x["annotator"] == "ana"} == {b, "tie"}


def test_preference_posts_are_checked(pair: tuple[Path, str, str]) -> None:
    root, a, b = pair
    c = TestClient(
        create_app(root, csrf_token=CSRF), base_url="http://127.0.0.1", headers={"Origin": "http://127.0.0.1"}
    )
    (fa, fb), _ = _flips(c.get(f"/compare?a={a}&b={b}").text)
    assert _prefer(c, a, fa, b, fb, "x", "ana").status_code == 400
    assert _prefer(c, a, fa, b, fb, "a", "  ").status_code == 400
    assert _prefer(c, a, fa, a, fa, "a", "ana").status_code == 400
    assert _prefer(c, a, "no-such-item", b, fb, "a", "ana").status_code == 404
    assert _prefer(c, a, fa, "../etc", fb, "a", "ana").status_code == 404
    assert _prefer(c, a, fa, b, fb, "a", "ana", headers={"X-CSRF-Token": "wrong"}).status_code == 403
    # A preference is not an item label: the item endpoint refuses it.
    r = c.post(
        f"/runs/{a}/labels",
        json={"item_id": fa, "label": "a", "annotator": "ana"},
        headers={"X-CSRF-Token": CSRF},
    )
    assert r.status_code == 400
