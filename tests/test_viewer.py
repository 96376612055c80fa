"""`proctor view`: the app against run folders made by scripted-model runs — runs list, item paging,
filters and search, item detail with its calls, conversations, labels (post, read back, export, import),
meta-evaluation against hand-computed kappa, comparison of two runs, escaping of hostile model text, and
the security checks (CSRF, run ids, Host header)."""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from proctor.metaeval.agreement import agreement, cohen_kappa
from proctor.models.retry import RetryableError
from proctor.models.scripted import register_script
from proctor.runner import run_config
from proctor.store import RunStore
from proctor.viewer import create_app
from proctor.viewer import items as items_q
from proctor.viewer.compare import mcnemar_exact, paired_interval
from proctor.viewer.rundir import open_run
from proctor.viewer.search import ensure_index

HOSTILE = '<script>alert("pwned")</script>'
FACTS = {
    "Velmora": ("Who founded the city of Velmora?", "Ostrid Kael"),
    "Tarn": ("In which year was the Tarn canal opened?", "1742"),
    "Quillan": ("What colour are Quillan lanterns?", "green"),
}
CSRF = "test-csrf-token"


def _examiner(messages, params):
    text = messages[-1]["content"]
    for key, (q, a) in FACTS.items():
        if key in text:
            return json.dumps({"question": q, "answer": a})
    return "not json"


def _candidate_a(messages, params):
    text = messages[-1]["content"]
    if "Velmora" in text:
        return "It was founded by Ostrid Kael."
    if "Tarn" in text:
        return "1742"
    return f"They are red. {HOSTILE}"  # wrong, and hostile


def _candidate_b(messages, params):
    text = messages[-1]["content"]
    if "Quillan" in text:
        return "They are green."  # B fixes Quillan
    return _candidate_a(messages, params)


def _failing(messages, params):
    raise RetryableError("HTTP 500", cause="http_500", status=500)


def _judge(messages, params):
    text = next(m["content"] for m in messages if m["role"] == "user")
    answer = re.search(r"<candidate_answer>(.*?)</candidate_answer>", text, re.DOTALL)
    got = answer.group(1).lower() if answer else ""
    ok = any(a in text and a.lower() in got for _, a in FACTS.values())
    return json.dumps({"reason": f"checked {HOSTILE}", "verdict": "correct" if ok else "incorrect"})


register_script("viewer-examiner", _examiner)
register_script("viewer-cand-a", _candidate_a)
register_script("viewer-cand-b", _candidate_b)
register_script("viewer-fail", _failing)
register_script("viewer-judge", _judge)


def _config(folder: Path, name: str, candidate_script: str) -> Path:
    docs = folder / "docs"
    docs.mkdir(parents=True, exist_ok=True)
    for key, (q, a) in FACTS.items():
        (docs / f"{key}.md").write_text(f"# {key}\n\nA fact about {key}: the answer to '{q}' is {a}. " * 3)
    cfg = folder / f"{name}.yaml"
    cfg.write_text(
        f"""
protocol: qa
name: {name}
corpus: {{path: docs, min_chunk_chars: 10, max_chunk_chars: 2000}}
models:
  ex: scripted/viewer-examiner
  cand: scripted/{candidate_script}
  bad: {{spec: scripted/viewer-fail, max_retries: 1}}
  judge: scripted/viewer-judge
roles: {{examiner: ex, judge: judge}}
candidates:
  - {{name: solo, model: cand}}
  - {{name: broken, model: bad}}
qa: {{num_questions: 3, judges: [with_reference], equivalence_rules: false}}
"""
    )
    return cfg


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str, str]]:
    """Two finished qa runs under one root: A (wrong on Quillan, with a hostile reply) and B (right)."""
    base = tmp_path_factory.mktemp("viewer")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PROCTOR_CACHE_DIR", str(base / "cache"))
        root = base / "runs"
        a = run_config(_config(base, "viewer-a", "viewer-cand-a"), out=root, show_progress=False).run_dir
        b = run_config(_config(base, "viewer-b", "viewer-cand-b"), out=root, show_progress=False).run_dir
    yield root, a.name, b.name


@pytest.fixture
def client(runs: tuple[Path, str, str]) -> TestClient:
    return TestClient(
        create_app(runs[0], csrf_token=CSRF),
        base_url="http://127.0.0.1",
        headers={"Origin": "http://127.0.0.1"},
    )


def _answer_keys(root: Path, run_id: str) -> dict[str, str]:
    """candidate|question -> item key of the run's answers."""
    con = sqlite3.connect(root / run_id / "run.sqlite")
    out = {}
    for key, data in con.execute("SELECT key, data FROM items WHERE kind='answer'"):
        d = json.loads(data)
        out[f"{d['candidate']}|{d['question']}"] = key
    return out


def _post_label(client: TestClient, run_id: str, key: str, label: str, who: str = "ana", note: str = ""):
    return client.post(
        f"/runs/{run_id}/labels",
        json={"item_id": key, "label": label, "annotator": who, "note": note},
        headers={"X-CSRF-Token": CSRF},
    )


# --- runs list -----------------------------------------------------------------------------------------
def test_runs_list_shows_protocol_status_calls_and_filters(client: TestClient, runs) -> None:
    _, a, b = runs
    html = client.get("/").text
    assert a in html and b in html
    assert "qa" in html and "finished" in html
    assert "accuracy.llm_with_reference" in html  # a headline estimate

    def listed(**params: str) -> str:
        return client.get("/", params=params).text.split('id="runs"', 1)[1].split("</table>", 1)[0]

    assert a in listed(name="viewer-b") or b in listed(name="viewer-b")
    assert b in listed(name="viewer-b") and a not in listed(name="viewer-b")
    assert a in listed(protocol="qa") and b in listed(protocol="qa")
    assert a not in listed(protocol="exam") and b not in listed(protocol="exam")


def test_run_page_embeds_report_with_a_strict_policy(client: TestClient, runs) -> None:
    _, a, _ = runs
    page = client.get(f"/runs/{a}")
    assert page.status_code == 200 and f"/runs/{a}/report" in page.text
    report = client.get(f"/runs/{a}/report")
    assert report.status_code == 200
    assert "script-src" not in report.headers["content-security-policy"]  # default-src 'none': no script
    assert report.headers["content-security-policy"].startswith("default-src 'none'")


# --- item browser --------------------------------------------------------------------------------------
def test_item_paging_filters_and_search(client: TestClient, runs) -> None:
    root, a, _ = runs
    folder = root / a
    run = open_run(folder)
    run.attach_index(ensure_index(folder, search=True))
    f = items_q.ItemFilter(kind="answer")
    first = items_q.page(run, f, size=2)
    assert first.total == 6 and first.pages == 3 and len(first.rows) == 2
    seen = [
        r.key for p in (1, 2, 3) for r in items_q.page(run, f.model_copy(update={"page": p}), size=2).rows
    ]
    assert len(set(seen)) == 6  # every answer exactly once across pages
    assert [r.seq for r in first.rows] == sorted(r.seq for r in first.rows)
    run.close()

    def keys(**params: str) -> set[str]:
        html = client.get(f"/runs/{a}/items", params={"kind": "answer", **params}).text
        return set(re.findall(r'data-key="([^"]+)"', html))

    answers = _answer_keys(root, a)
    assert len(keys()) == 6
    assert keys(candidate="solo") == {k for ck, k in answers.items() if ck.startswith("solo|")}
    assert keys(verdict="incorrect") == {answers["solo|What colour are Quillan lanterns?"]}
    assert keys(cause="http_500") == {k for ck, k in answers.items() if ck.startswith("broken|")}
    assert keys(status="error") == keys(cause="http_500")
    assert keys(q="lanterns") == {
        answers["solo|What colour are Quillan lanterns?"],
        answers["broken|What colour are Quillan lanterns?"],
    }
    assert keys(q="Ostrid", candidate="solo") == {answers["solo|Who founded the city of Velmora?"]}
    assert keys(q='") OR *') == set()  # FTS syntax in the input is not interpreted
    # The default kind is the judged one.
    assert set(re.findall(r'data-key="([^"]+)"', client.get(f"/runs/{a}/items").text)) == keys()


def test_item_list_sorts_by_every_column_pages_stably_and_keeps_the_order(client: TestClient, runs) -> None:
    root, a, _ = runs
    folder = root / a
    answers = _answer_keys(root, a)
    data = {
        k: json.loads(d)
        for k, d in sqlite3.connect(folder / "run.sqlite").execute(
            "SELECT key, data FROM items WHERE kind='answer'"
        )
    }
    seq = dict(sqlite3.connect(folder / "run.sqlite").execute("SELECT key, seq FROM items"))
    run = open_run(folder)
    run.attach_index(ensure_index(folder))
    for order in ("asc", "desc"):
        f = items_q.ItemFilter(kind="answer", sort="answer", order=order)
        paged = [
            r.key for p in (1, 2, 3) for r in items_q.page(run, f.model_copy(update={"page": p}), size=2).rows
        ]
        expected = sorted(
            answers.values(),
            key=lambda k: ((data[k].get("answer") or "").lower()[:48], seq[k]),
            reverse=order == "desc",
        )
        assert paged == expected  # one total order across pages, ties broken by insertion number
        # j / k on an item page walk the same order.
        middle = paged[2]
        assert items_q.neighbours(run, f, seq[middle]) == (paged[1], paged[3])
        assert items_q.neighbours(run, f, seq[paged[0]])[0] is None
    run.close()

    def listed(**params: str) -> list[str]:
        html = client.get(f"/runs/{a}/items", params={"kind": "answer", **params}).text
        return re.findall(r'data-key="([^"]+)"', html)

    by_candidate = listed(sort="candidate")
    assert [data[k]["candidate"] for k in by_candidate] == ["broken"] * 3 + ["solo"] * 3
    assert [data[k]["candidate"] for k in listed(sort="candidate", order="desc")] == ["solo"] * 3 + [
        "broken"
    ] * 3
    by_question = listed(sort="item")
    assert [data[k]["question"] for k in by_question] == sorted(data[k]["question"] for k in by_question)
    assert listed(sort="seq", order="desc") == sorted(answers.values(), key=seq.get, reverse=True)
    # Failed answers have no verdict: they sort first, then correct, then incorrect.
    verdicts = listed(sort="judgments")
    assert verdicts[-1] == answers["solo|What colour are Quillan lanterns?"]
    assert {data[k]["candidate"] for k in verdicts[:3]} == {"broken"}
    status = dict(sqlite3.connect(folder / "run.sqlite").execute("SELECT key, status FROM items"))
    assert len({status[k] for k in answers.values()}) == 2
    assert listed(sort="status", order="desc") == sorted(
        answers.values(), key=lambda k: (status[k], seq[k]), reverse=True
    )  # descending is the exact reverse: ties in reverse insertion order
    # By the latest label: the one labelled item comes last ascending ('' sorts first), first descending.
    tarn = answers["solo|In which year was the Tarn canal opened?"]
    assert _post_label(client, a, tarn, "unsure", who="sorter").status_code == 200
    assert listed(sort="labels")[-1] == tarn and listed(sort="labels", order="desc")[0] == tarn
    # A later label is applied to the sort at the next request; an item's latest label is its key.
    quillan = answers["solo|What colour are Quillan lanterns?"]
    assert _post_label(client, a, quillan, "correct", who="sorter").status_code == 200
    assert listed(sort="labels")[-2:] == [quillan, tarn]
    assert _post_label(client, a, tarn, "correct", who="sorter").status_code == 200
    assert listed(sort="labels")[-2:] == sorted([quillan, tarn], key=seq.get)  # both "correct" now
    # Headers link to their sort (a second click reverses it), and the filters stay in the links.
    html = client.get(
        f"/runs/{a}/items", params={"kind": "answer", "candidate": "solo", "sort": "answer"}
    ).text
    head = html.split("<thead>", 1)[1].split("</thead>", 1)[0]
    assert 'aria-sort="ascending"' in head and "sort=answer&amp;order=desc" in head
    assert "candidate=solo" in head and "sort=status" in head
    assert "sort=answer" in html.split('id="items"', 1)[1]  # item links carry the order to j / k
    # Only the listed columns: anything else is refused, never put into SQL.
    assert client.get(f"/runs/{a}/items", params={"sort": "seq; DROP TABLE items"}).status_code == 400
    assert client.get(f"/runs/{a}/items", params={"order": "sideways"}).status_code == 400


def test_item_detail_shows_judgments_and_every_call(client: TestClient, runs) -> None:
    root, a, _ = runs
    key = _answer_keys(root, a)["solo|Who founded the city of Velmora?"]
    html = client.get(f"/runs/{a}/items/{key}", params={"kind": "answer"}).text
    con = sqlite3.connect(root / a / "run.sqlite")
    calls = con.execute("SELECT id, role FROM model_calls WHERE item_key=?", (key,)).fetchall()
    assert {r for _, r in calls} >= {"candidate", "judge"}
    timeline = html.split('id="calls"', 1)[1]
    assert timeline.count('<section class="call') == len(calls)  # one entry per call, in call order
    assert [int(i) for i in re.findall(r'id="call-(\d+)"', timeline)] == sorted(i for i, _ in calls)
    assert "llm_with_reference" in html and "Ostrid Kael" in html
    # Question, reference and answer side by side, above the label buttons.
    summary = html.split('id="summary"', 1)[1].split("</dl>", 1)[0]
    cells = re.findall(r"<dt>(\w+)</dt><dd[^>]*>(.*?)</dd>", summary, re.DOTALL)
    assert cells == [
        ("question", "Who founded the city of Velmora?"),
        ("reference", "Ostrid Kael"),
        ("answer", "It was founded by Ostrid Kael."),
    ]
    # The candidate's and the judge's full prompts and replies: the judge's prompt holds the answer tags.
    cand, judge = (timeline.split(f'id="call-{i}"', 1)[1].split("</section>", 1)[0] for i, _ in calls)
    assert "Who founded the city of Velmora?" in cand and "It was founded by Ostrid Kael." in cand
    assert re.search(
        r"&lt;candidate_answer&gt;\s*It was founded by Ostrid Kael.\s*&lt;/candidate_answer&gt;", judge
    )
    assert "response_schema" in judge and "no transcript stored" not in html
    assert 'data-next="' in html or 'data-prev="' in html  # j / k neighbours under the filter
    assert client.get(f"/runs/{a}/items/no-such-key").status_code == 404


def test_a_side_index_of_an_older_shape_is_rebuilt(runs, tmp_path: Path) -> None:
    import shutil

    root, a, _ = runs
    folder = tmp_path / "runs" / a
    shutil.copytree(root / a, folder)
    side = sqlite3.connect(folder / "viewer.sqlite")
    side.executescript(
        "DROP TABLE IF EXISTS item_meta; CREATE TABLE item_meta (seq INTEGER PRIMARY KEY, key TEXT NOT NULL,"
        " kind TEXT, status TEXT, candidate TEXT, error_cause TEXT);"
        "CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT);"
        "INSERT OR REPLACE INTO meta VALUES ('version', '4');"
    )
    side.close()
    client = TestClient(create_app(tmp_path / "runs", csrf_token=CSRF), base_url="http://127.0.0.1")
    page = client.get(f"/runs/{a}/items", params={"kind": "answer", "sort": "answer"})
    assert page.status_code == 200 and len(re.findall(r'data-key="', page.text)) == 6


def test_an_item_with_many_calls_pages_its_timeline(tmp_path: Path) -> None:
    from proctor.models.recording import CallRecord

    folder = tmp_path / "runs" / "long-agent"
    folder.mkdir(parents=True)
    store = RunStore(folder / "run.sqlite")
    store.start_run(folder.name, "qa", {}, "0" * 64, "test")
    store.put_item("a_long", "answer", {"question": "Which step?", "answer": "step 119"})
    for i in range(120):
        messages = [
            {"role": "system", "content": "You are an agent."},
            {"role": "user", "content": f"step {i}?"},
        ]
        store.record_call(
            CallRecord(
                "local",
                "m",
                "candidate",
                "a_long",
                10,
                2,
                0.0,
                0.1,
                False,
                1,
                messages=messages,
                reply=f"reply to step {i}",
            )
        )
    store.finish_run(folder.name)
    store.close()
    client = TestClient(create_app(tmp_path / "runs", csrf_token=CSRF), base_url="http://127.0.0.1")

    def timeline(**params: str) -> tuple[str, list[str]]:
        html = client.get(f"/runs/{folder.name}/items/a_long", params=params).text
        return html, re.findall(r"reply to step (\d+)", html.split('id="calls"', 1)[1])

    html, replies = timeline()
    assert replies == [str(i) for i in range(50)]  # the first page only, in call order
    assert "120 calls" in html and "showing 1–50 (page 1 of 3)" in html
    assert 'id="calls-more"' in html and 'id="calls-prev"' not in html
    more = re.search(r'id="calls-more" href="\?([^"#]+)', html)
    assert more is not None and "calls=2" in more.group(1)
    html, replies = timeline(calls="3")
    assert replies == [str(i) for i in range(100, 120)] and 'id="calls-more"' not in html
    assert timeline(calls="99")[1] == [str(i) for i in range(100, 120)]  # past the end: the last page
    assert client.get(f"/runs/{folder.name}/items/a_long", params={"calls": "-1"}).status_code == 400


def test_run_page_shows_the_resolved_config_as_yaml(client: TestClient, runs) -> None:
    import yaml

    _, a, _ = runs
    html = client.get(f"/runs/{a}").text
    block = html.split('id="config"', 1)[1].split("</pre>", 1)[0].split('<pre class="text">', 1)[1]
    config = yaml.safe_load(block.replace("&#39;", "'").replace("&#34;", '"').replace("&amp;", "&"))
    assert config["protocol"] == "qa" and config["name"] == "viewer-a"
    assert config["qa"]["num_questions"] == 3 and config["qa"]["judges"] == ["with_reference"]
    assert config["models"]["cand"]["spec"] == "scripted/viewer-cand-a" and config["store_text"] is True


def test_conversation_rounds_shown_turn_by_turn(tmp_path: Path) -> None:
    folder = tmp_path / "runs" / "kv-run"
    store = RunStore(folder / "run.sqlite")
    store.start_run("kv-run", "kieval", {"candidates": [{"name": "c1"}]}, "h", "test")
    store.put_item("kvc_1", "kieval_conversation", {"conversation": "kvc_1", "candidate": "c1", "rounds": 2})
    for i, key in enumerate(["kvr_b", "kvr_a"]):  # stored out of order
        store.put_item(
            key,
            "kieval_round",
            {
                "conversation": "kvc_1",
                "candidate": "c1",
                "round": 1 - i,
                "interactor_question": f"Q{2 - i}?",
                "candidate_reply": f"R{2 - i} {HOSTILE}",
                "overall_score": 3.0,
            },
        )
        store.put_judgment(
            key, "kieval_evaluator:e", verdict=None, score=None, reason=None, data={"overall_score": 3}
        )
    store.finish_run("kv-run")
    store.close()
    client = TestClient(
        create_app(tmp_path / "runs", csrf_token=CSRF),
        base_url="http://127.0.0.1",
        headers={"Origin": "http://127.0.0.1"},
    )
    html = client.get("/runs/kv-run/items/kvc_1").text
    assert html.index("Q1?") < html.index("R1") < html.index("Q2?") < html.index("R2")
    assert "round 1" in html and "round 2" in html
    assert HOSTILE not in html
    round_page = client.get("/runs/kv-run/items/kvr_a").text
    assert 'data-scale="rating"' in round_page and "Q1?" in round_page and "Q2?" in round_page
    # Rounds take 1-4, not correct/incorrect.
    assert _post_label(client, "kv-run", "kvr_a", "correct").status_code == 400
    assert _post_label(client, "kv-run", "kvr_a", "3").status_code == 200
    meta = client.get("/runs/kv-run/metaeval").text
    assert "kieval_evaluator:e" in meta


# --- labels --------------------------------------------------------------------------------------------
def test_label_round_trip_export_import(client: TestClient, runs, tmp_path: Path) -> None:
    root, a, _ = runs
    answers = _answer_keys(root, a)
    key = answers["solo|Who founded the city of Velmora?"]
    assert _post_label(client, a, key, "incorrect", note="first look").status_code == 200
    r = _post_label(client, a, key, "correct", note="on reflection")
    assert r.status_code == 200 and r.json()["label"] == "correct"
    history = client.get(f"/runs/{a}/labels", params={"item": key}).json()
    assert [h["label"] for h in history[-2:]] == ["incorrect", "correct"]  # append-only: both kept
    assert history[-1]["annotator"] == "ana" and history[-1]["note"] == "on reflection"
    assert (root / a / "labels.sqlite").exists()
    # The labels live in the run folder's labels.sqlite, never in the run store or the call cache.
    assert "labels" not in {
        r[0] for r in sqlite3.connect(root / a / "run.sqlite").execute("SELECT name FROM sqlite_master")
    }
    # Refused: no CSRF token, unknown item, unknown label, no annotator.
    bad = client.post(f"/runs/{a}/labels", json={"item_id": key, "label": "correct", "annotator": "ana"})
    assert bad.status_code == 403
    assert _post_label(client, a, "nope", "correct").status_code == 404
    assert _post_label(client, a, key, "maybe").status_code == 400
    assert _post_label(client, a, key, "correct", who=" ").status_code == 400
    # Export: the latest label per item and annotator, readable by reckon.human_labels.
    export = client.get(f"/runs/{a}/labels.jsonl", params={"annotator": "ana", "labels": "correct,incorrect"})
    lines = [json.loads(x) for x in export.text.splitlines()]
    mine = [x for x in lines if x["item_id"] == key]
    assert len(mine) == 1 and mine[0]["label"] == "correct" and mine[0]["note"] == "on reflection"
    from proctor.protocols.reckon.metaeval import load_labels

    path = tmp_path / "labels.jsonl"
    path.write_text(export.text)
    loaded = load_labels(str(path))
    by_item = loaded.items if hasattr(loaded, "items") and isinstance(loaded.items, dict) else loaded
    assert by_item[key] == 1
    # Import into the other run: added once, skipped when imported again; reckon's form accepted too.
    _, _, b = runs
    text = export.text + '{"candidate": "solo", "unit_id": "ku_x", "label": "incorrect"}\n'
    first = client.post(f"/runs/{b}/labels/import", content=text, headers={"X-CSRF-Token": CSRF})
    assert first.json() == {"added": len(lines) + 1, "skipped": 0}
    again = client.post(f"/runs/{b}/labels/import", content=export.text, headers={"X-CSRF-Token": CSRF})
    assert again.json() == {"added": 0, "skipped": len(lines)}
    broken = client.post(
        f"/runs/{b}/labels/import",
        content='{"item_id": "x", "label": "nah"}\n',
        headers={"X-CSRF-Token": CSRF},
    )
    assert broken.status_code == 400 and "line 1" in broken.json()["error"]
    assert client.post(f"/runs/{b}/labels/import", content=export.text).status_code == 403


def test_labels_are_append_only_in_the_database(runs) -> None:
    root, a, _ = runs
    from proctor.viewer.labels import LabelIn, LabelStore

    with LabelStore(root / a) as store:
        store.add(LabelIn(item_id="k", label="unsure", annotator="z"))
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            store._conn.execute("UPDATE labels SET label='correct'")
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            store._conn.execute("DELETE FROM labels")


# --- meta-evaluation -----------------------------------------------------------------------------------
def test_kappa_equals_hand_computed_value() -> None:
    human = ["correct"] * 6 + ["incorrect"] * 4
    judge = ["correct"] * 5 + ["incorrect"] + ["correct"] * 2 + ["incorrect"] * 2
    # confusion (human rows, judge cols): [[5, 1], [2, 2]]; p_o = 7/10;
    # p_e = (6*7 + 4*3) / 100 = 0.54; kappa = (0.7 - 0.54) / 0.46 = 0.347826...
    ag = agreement(human, judge, ["correct", "incorrect"])
    assert ag.confusion == [[5, 1], [2, 2]]
    assert ag.accuracy == pytest.approx(0.7)
    assert ag.kappa == pytest.approx(0.16 / 0.46)
    assert ag.kappa_lo is not None and ag.kappa_hi is not None
    assert ag.kappa_lo <= ag.kappa <= ag.kappa_hi
    from sklearn.metrics import cohen_kappa_score

    assert cohen_kappa(human, judge, ["correct", "incorrect"]) == pytest.approx(
        cohen_kappa_score(human, judge)
    )
    assert cohen_kappa(["correct"] * 3, ["correct"] * 3, ["correct", "incorrect"]) is None  # undefined
    # ... whenever neither rater varies, agreeing or not (as reckon's report has always shown it)
    assert cohen_kappa(["correct"] * 3, ["incorrect"] * 3, ["correct", "incorrect"]) is None


def test_metaeval_page_matches_hand_computed_agreement(tmp_path: Path, runs) -> None:
    root, a, _ = runs
    answers = _answer_keys(root, a)
    client = TestClient(
        create_app(root, csrf_token=CSRF), base_url="http://127.0.0.1", headers={"Origin": "http://127.0.0.1"}
    )
    # Judge verdicts on solo's answers: Velmora correct, Tarn correct, Quillan incorrect.
    # Human (zed): Velmora correct, Tarn incorrect, Quillan incorrect -> confusion [[1, 0], [1, 1]]
    # (human rows), p_o = 2/3, p_e = (1*2 + 2*1) / 9 = 4/9, kappa = (2/3 - 4/9) / (5/9) = 0.4.
    for q, lab in [
        ("Who founded the city of Velmora?", "correct"),
        ("In which year was the Tarn canal opened?", "incorrect"),
        ("What colour are Quillan lanterns?", "incorrect"),
    ]:
        assert _post_label(client, a, answers[f"solo|{q}"], lab, who="zed").status_code == 200
    html = client.get(f"/runs/{a}/metaeval", params={"annotator": "zed"}).text
    row = html.split('data-method="llm_with_reference"', 1)[1].split("</tr>", 1)[0]
    cells = re.findall(r'<td class="num[^"]*">([^<]*)</td>', row)
    assert cells[:3] == ["3", "0.667", "0.400"]  # n, accuracy, kappa


# --- comparison ----------------------------------------------------------------------------------------
def test_compare_two_runs_lists_the_flipped_item(client: TestClient, runs) -> None:
    _, a, b = runs
    html = client.get("/compare", params={"a": a, "b": b}).text
    flips = html.split('id="flips"', 1)[1].split("</table>", 1)[0]
    rows = flips.split("<tbody>", 1)[1].split('<tr class="flip"')[1:]
    # Quillan flips under the LLM judge and under F1 (cut at 0.5); nothing else changed.
    assert len(rows) == 2 and all("What colour are Quillan lanterns?" in r for r in rows)
    assert {re.findall(r"<td>([^<]*)</td>", r)[1] for r in rows} == {"llm_with_reference", "f1"}
    # Each flip shows the answer in each run: A's wrong (and hostile, escaped) one, B's right one.
    assert all('class="text small answer-a">They are red. &lt;script&gt;' in r for r in rows)
    assert all('class="text small answer-b">They are green.</div>' in r for r in rows)
    deltas = html.split('id="deltas"', 1)[1].split("</table>", 1)[0]
    assert "solo" in deltas and "0.333" in deltas  # 2/3 -> 3/3
    assert mcnemar_exact(gained=1, lost=0) == pytest.approx(1.0)
    assert mcnemar_exact(gained=0, lost=5) == pytest.approx(2 * 0.5**5)
    import numpy as np

    lo, hi = paired_interval(np.array([1, 1, 0, 0] * 10, bool), np.array([1, 1, 1, 0] * 10, bool))
    assert lo <= 0.25 <= hi


# --- security ------------------------------------------------------------------------------------------
def test_hostile_model_text_is_escaped_everywhere(client: TestClient, runs) -> None:
    root, a, b = runs
    key = _answer_keys(root, a)["solo|What colour are Quillan lanterns?"]
    pages = [
        f"/runs/{a}/items?kind=answer",
        f"/runs/{a}/items?kind=answer&q=lanterns",
        f"/runs/{a}/items/{key}",
        f"/compare?a={a}&b={b}",
        "/",
        f"/runs/{a}",
    ]
    for url in pages:
        html = client.get(url).text
        assert HOSTILE not in html, url
    assert "&lt;script&gt;alert(" in client.get(f"/runs/{a}/items/{key}").text
    assert "script-src" not in client.get("/").headers["content-security-policy"]  # default-src 'self'


def test_only_runs_under_the_root_are_served(client: TestClient, runs) -> None:
    for bad in (
        "/runs/%2e%2e/items",
        "/runs/..%2F..%2Fetc",
        "/runs/nope/items",
        "/compare?a=..&b=..",
    ):
        assert client.get(bad).status_code == 404, bad
    from proctor.viewer.rundir import RunNotFound, resolve_run

    root = runs[0]
    for run_id in ("..", ".", "../runs", "a/b", "/etc"):
        with pytest.raises(RunNotFound):
            resolve_run(root, run_id)
    evil = TestClient(client.app, base_url="http://evil.example")
    assert evil.get("/").status_code == 400  # DNS rebinding: a non-loopback Host is refused
