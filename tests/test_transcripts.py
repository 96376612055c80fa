"""Call transcripts: every model call's messages, parameters and reply stored once per distinct text,
linked to its item, step and role; off with `store_text: false`; readable from old stores; no secret in
any file a run writes."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import zipfile
import zlib
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from starlette.testclient import TestClient

import proctor
from proctor.export_format import ExportFormat
from proctor.kit.export import export_run
from proctor.models.base import Model
from proctor.models.recording import call_scope
from proctor.models.retry import RetryableError, RetryPolicy
from proctor.models.scripted import ScriptedProvider, register_script
from proctor.models.types import RawReply, TokenLogprob, ToolCallRequest, Usage
from proctor.runner import run_config
from proctor.store import RunStore
from proctor.store.record import RunRecord
from proctor.testing.mock_server import MockServer
from proctor.viewer import create_app
from proctor.viewer.items import MESSAGE_PREVIEW

FACTS = {
    "Velmora": ("Who founded the city of Velmora?", "Ostrid Kael"),
    "Tarn": ("In which year was the Tarn canal opened?", "1742"),
}
SYSTEM = "You are a careful assistant. " * 40  # a long shared prompt part: stored once


def tr_examiner(messages: list[dict[str, Any]], params: Any) -> str:
    text = messages[-1]["content"]
    for key, (q, a) in FACTS.items():
        if key in text:
            return json.dumps({"question": q, "answer": a})
    return "not json"


def tr_candidate(messages: list[dict[str, Any]], params: Any) -> str:
    # Not the references word for word, so the LLM judge (not a rule) decides.
    return "I believe it was Ostrid." if "Velmora" in messages[-1]["content"] else "Around 1740."


def tr_judge(messages: list[dict[str, Any]], params: Any) -> str:
    return json.dumps({"reason": "compared with the reference", "verdict": "correct"})


_flaky_calls = {"n": 0}


def tr_flaky(messages: list[dict[str, Any]], params: Any) -> str:
    _flaky_calls["n"] += 1
    if _flaky_calls["n"] == 1:
        raise RetryableError("HTTP 503", cause="http_503", status=503)
    return "after a retry"


def tr_reasked(messages: list[dict[str, Any]], params: Any) -> str:
    # Not JSON the first time; JSON once the re-ask message is there.
    return '{"verdict": "correct"}' if len(messages) > 1 else "I think it is correct"


def tr_tools(messages: list[dict[str, Any]], params: Any) -> RawReply:
    return RawReply(
        text="",
        usage=Usage(3, 2),
        tool_calls=(ToolCallRequest.parse("c1", "search", '{"q": "Tarn"}'),),
        logprobs=[TokenLogprob("a", -0.5), TokenLogprob("b", -1.5)],
    )


register_script("tr-examiner", tr_examiner)
register_script("tr-candidate", tr_candidate)
register_script("tr-judge", tr_judge)
register_script("tr-flaky", tr_flaky)
register_script("tr-reasked", tr_reasked)
register_script("tr-tools", tr_tools)
register_script("tr-echo", lambda messages, params: "echo: " + messages[-1]["content"])


def qa_config(tmp_path: Path, extra: str = "") -> Path:
    docs = tmp_path / "docs"
    docs.mkdir(exist_ok=True)
    for key, (q, a) in FACTS.items():
        (docs / f"{key}.md").write_text(f"# {key}\n\nA fact about {key}: the answer to '{q}' is {a}. " * 3)
    cfg = tmp_path / "qa.yaml"
    cfg.write_text(
        f"""
protocol: qa
corpus: {{path: docs, min_chunk_chars: 10, max_chunk_chars: 2000}}
models:
  ex: scripted/tr-examiner
  cand: scripted/tr-candidate
  judge: scripted/tr-judge
roles: {{examiner: ex, judge: judge}}
candidates:
  - {{name: closed, model: cand}}
qa: {{num_questions: 2, judges: [with_reference]}}
{extra}
"""
    )
    return cfg


def run_store(tmp_path: Path, store_text: bool = True) -> RunStore:
    (tmp_path / "run").mkdir(exist_ok=True)
    return RunStore(tmp_path / "run" / "run.sqlite", store_text=store_text)


def ask(model: Model, store: RunStore, messages: list[dict[str, Any]], **kw: Any) -> Any:
    async def go() -> Any:
        with call_scope(recorder=store, role="judge", item_key="item-1", step="judging"):
            return await model.generate(messages, **kw)  # type: ignore[arg-type]

    return asyncio.run(go())


def all_bytes_with_blobs(folder: Path) -> bytes:
    """Every file under `folder`, every zlib blob inside its SQLite files and every member of its zip files
    (inspect_ai's `.eval` logs) decompressed."""
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    out = b"".join(f.read_bytes() for f in files)  # first: opening a store below makes and drops files
    for f in files:
        if zipfile.is_zipfile(f):
            with zipfile.ZipFile(f) as z:
                out += b"".join(z.read(name) for name in z.namelist())
        if f.suffix in (".sqlite", ".db"):
            con = sqlite3.connect(f"{f.resolve().as_uri()}?mode=ro", uri=True)
            try:
                tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
                for t in tables:
                    for row in con.execute(f'SELECT * FROM "{t}"'):
                        for v in row:
                            if isinstance(v, bytes):
                                try:
                                    out += zlib.decompress(v)
                                except zlib.error:
                                    out += v
            finally:
                con.close()
    return out


# --- the exchange of every call ------------------------------------------------------------------------


def test_a_run_stores_every_calls_messages_and_reply_linked_to_item_step_and_role(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PROCTOR_CACHE_DIR", str(tmp_path / "cache"))
    result = run_config(qa_config(tmp_path), out=tmp_path / "runs", show_progress=False)
    with proctor.load_run(result.run_dir) as run:
        calls = run.transcripts()
        assert calls and len(calls) == len(run.calls())
        assert [c.id for c in calls] == sorted(c.id for c in calls)
        assert all(c.text_stored and c.messages for c in calls)
        assert {c.role for c in calls} == {"examiner", "candidate", "judge"}
        answer = next(it for it in run.items("answer") if "Velmora" in json.dumps(it.data))
        mine = run.transcripts(answer.key)
        cand = [c for c in mine if c.role == "candidate"]
        assert len(cand) == 1 and cand[0].reply == "I believe it was Ostrid."
        assert cand[0].step and cand[0].item_key == answer.key
        assert "Who founded the city of Velmora?" in cand[0].messages[-1].content  # type: ignore[index]
        assert cand[0].params["temperature"] == 0.0 and "max_tokens" in cand[0].params
        judged = [c for c in run.transcripts() if c.role == "judge"]
        assert judged and all(c.params.get("response_schema") for c in judged)
        assert all("<candidate_answer>" in c.messages[-1].content for c in judged)  # type: ignore[index]
        assert judged[0].reply is not None and '"verdict": "correct"' in judged[0].reply
    # A re-run answers from the cache: those calls are recorded too, cached, with their text.
    again = run_config(qa_config(tmp_path), out=tmp_path / "runs2", show_progress=False)
    with proctor.load_run(again.run_dir) as run:
        hits = [c for c in run.transcripts() if c.cached]
        assert hits and all(c.reply is not None and c.attempts == 0 for c in hits)


def test_identical_text_is_stored_once(tmp_path: Path) -> None:
    store = run_store(tmp_path)
    model = Model(ScriptedProvider("tr-echo"))
    for user in ("first question", "second question", "first question"):
        ask(model, store, [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}])
    store.close()
    con = sqlite3.connect(tmp_path / "run" / "run.sqlite")
    texts = [zlib.decompress(z).decode() for (z,) in con.execute("SELECT z FROM texts")]
    # One system prompt, two distinct questions, two distinct replies — for three calls.
    assert sorted(texts) == sorted(
        [SYSTEM, "first question", "second question", "echo: first question", "echo: second question"]
    )
    assert con.execute("SELECT COUNT(*) FROM model_calls").fetchone()[0] == 3
    size = sum(len(z) for (z,) in con.execute("SELECT z FROM texts"))
    assert size < len(SYSTEM)  # compressed
    with RunRecord(tmp_path / "run") as rec:
        calls = rec.transcripts("item-1")
    assert [c.messages[0].content for c in calls] == [SYSTEM] * 3  # type: ignore[index]
    assert [c.reply for c in calls] == [
        "echo: first question",
        "echo: second question",
        "echo: first question",
    ]
    assert all(c.step == "judging" and c.role == "judge" for c in calls)


def test_a_reask_is_its_own_call_and_a_retried_call_one_row(tmp_path: Path) -> None:
    store = run_store(tmp_path)
    schema = {"title": "Verdict", "type": "object", "properties": {"verdict": {"type": "string"}}}
    ask(
        Model(ScriptedProvider("tr-reasked")),
        store,
        [{"role": "user", "content": "judge"}],
        json_schema=schema,
    )
    flaky = Model(ScriptedProvider("tr-flaky"), retry=RetryPolicy(max_retries=2, base_delay_s=0.0))
    ask(flaky, store, [{"role": "user", "content": "try"}])
    store.close()
    with RunRecord(tmp_path / "run") as rec:
        first, reask, retried = rec.transcripts()
    assert first.reply == "I think it is correct" and len(first.messages or []) == 1
    assert [m.role for m in reask.messages or []] == ["user", "assistant", "user"]
    assert reask.messages[1].content == "I think it is correct"  # type: ignore[index]
    assert reask.reply == '{"verdict": "correct"}' and reask.params["response_schema"] == "Verdict"
    assert retried.attempts == 2 and retried.reply == "after a retry" and retried.error is None


def test_tool_calls_and_a_logprobs_summary_are_recorded(tmp_path: Path) -> None:
    store = run_store(tmp_path)
    tool = {"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}
    history = [
        {"role": "user", "content": "find it"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [ToolCallRequest("c0", "lookup", "{}").as_message_entry()],
        },
        {"role": "tool", "content": "nothing found", "tool_call_id": "c0"},
    ]
    ask(Model(ScriptedProvider("tr-tools")), store, history, tools=[tool], logprobs=True)
    store.close()
    with RunRecord(tmp_path / "run") as rec:
        (call,) = rec.transcripts()
    assert call.params["tools"] == ["search"] and call.params["logprobs"] is True
    assert call.reply_tool_calls and call.reply_tool_calls[0].name == "search"
    assert json.loads(call.reply_tool_calls[0].arguments) == {"q": "Tarn"}
    msgs = call.messages or []
    assert msgs[1].tool_calls and msgs[1].tool_calls[0].name == "lookup"
    assert msgs[2].tool_call_id == "c0" and msgs[2].content == "nothing found"
    assert call.logprobs is not None and call.logprobs.n_tokens == 2
    assert call.logprobs.mean_logprob == pytest.approx(-1.0) and call.logprobs.min_logprob == -1.5


# --- store_text: false -----------------------------------------------------------------------------------


def test_store_text_false_stores_no_message_or_reply_text(tmp_path: Path) -> None:
    store = run_store(tmp_path, store_text=False)
    model = Model(ScriptedProvider("tr-echo"))
    ask(model, store, [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "zebra-orchid-41"}])
    store.close()
    raw = all_bytes_with_blobs(tmp_path / "run")
    assert b"zebra-orchid-41" not in raw and b"careful assistant" not in raw
    with RunRecord(tmp_path / "run") as rec:
        (call,) = rec.transcripts()
    assert not call.text_stored and call.messages is None and call.reply is None
    assert call.params["temperature"] == 0.0 and call.prompt_tokens > 0


def test_store_text_false_in_a_run_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROCTOR_CACHE_DIR", str(tmp_path / "cache"))
    on = run_config(qa_config(tmp_path), out=tmp_path / "on", show_progress=False)
    off = run_config(qa_config(tmp_path, "store_text: false"), out=tmp_path / "off", show_progress=False)
    assert b"<candidate_answer>" in all_bytes_with_blobs(on.run_dir)  # judge template, only in prompts
    assert b"<candidate_answer>" not in all_bytes_with_blobs(off.run_dir)
    with proctor.load_run(off.run_dir) as run:
        calls = run.transcripts()
        assert calls and not any(c.text_stored or c.messages or c.reply for c in calls)
        assert run.config.store_text is False
        assert run.connection.execute("SELECT COUNT(*) FROM texts").fetchone()[0] == 0


# --- old stores --------------------------------------------------------------------------------------------

# The store as written just before transcripts: no `texts` table, `model_calls` without their columns.
OLD_SCHEMA = """
CREATE TABLE runs (run_id TEXT PRIMARY KEY, protocol TEXT, config_json TEXT, config_hash TEXT,
  status TEXT, started REAL, finished REAL, proctor_version TEXT);
CREATE TABLE items (key TEXT PRIMARY KEY, kind TEXT NOT NULL, status TEXT NOT NULL, data TEXT, error TEXT,
  error_cause TEXT, seq INTEGER, updated REAL, deps TEXT);
CREATE TABLE model_calls (id INTEGER PRIMARY KEY AUTOINCREMENT, provider TEXT, model TEXT, role TEXT,
  item_key TEXT, prompt_tokens INTEGER, completion_tokens INTEGER, cost_usd REAL, latency_s REAL,
  cached INTEGER, attempts INTEGER, error TEXT, created REAL);
CREATE TABLE judgments (item_key TEXT NOT NULL, judge TEXT NOT NULL, verdict TEXT, score REAL, reason TEXT,
  error TEXT, data TEXT, error_cause TEXT, deps TEXT, PRIMARY KEY (item_key, judge));
CREATE TABLE metrics (name TEXT NOT NULL, subject TEXT NOT NULL, value REAL, lo REAL, hi REAL, n INTEGER,
  data TEXT, PRIMARY KEY (name, subject));
CREATE TABLE artifacts (name TEXT PRIMARY KEY, data TEXT);
"""


def old_store(folder: Path) -> Path:
    folder.mkdir(parents=True)
    con = sqlite3.connect(folder / "run.sqlite")
    con.executescript(OLD_SCHEMA)
    con.execute(
        "INSERT INTO items VALUES ('k1', 'answer', 'done', ?, NULL, NULL, 1, 0, NULL)",
        (json.dumps({"question": "Q?", "answer": "A."}),),
    )
    con.execute(
        "INSERT INTO model_calls (provider, model, role, item_key, prompt_tokens, completion_tokens,"
        " cost_usd, latency_s, cached, attempts, error, created) VALUES"
        " ('scripted', 'x', 'candidate', 'k1', 5, 2, 0, 0.1, 0, 1, NULL, 1.0)"
    )
    con.commit()
    con.close()
    return folder


def test_a_store_written_before_transcripts_opens_with_no_transcript(tmp_path: Path) -> None:
    folder = old_store(tmp_path / "old")
    with RunRecord(folder) as rec:
        assert not rec.records_transcripts()
        (call,) = rec.transcripts("k1")
    assert call.role == "candidate" and call.prompt_tokens == 5 and call.attempts == 1
    assert not call.text_stored and call.messages is None and call.reply is None and call.params == {}
    # The writer (e.g. --resume) adds the columns; old rows still say "no transcript".
    store = RunStore(folder / "run.sqlite")
    ask(Model(ScriptedProvider("tr-echo")), store, [{"role": "user", "content": "new"}])
    store.close()
    with RunRecord(folder) as rec:
        old, new = rec.transcripts()
    assert not old.text_stored and new.text_stored and new.reply == "echo: new"


# --- secrets -----------------------------------------------------------------------------------------------

KEY_CANARY = "sk-canary-KEY-7f3a9d1e"
HEADER_CANARY = "Bearer canary-HEADER-51c2b8"


class _Service(BaseHTTPRequestHandler):
    seen: ClassVar[list[str]] = []

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        _Service.seen.append(str(self.headers.get("Authorization")))
        data = json.dumps({"text": "Ostrid Kael"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


def mock_reply(body: dict[str, Any]) -> str:
    text = "\n".join(str(m.get("content")) for m in body["messages"])
    if "<candidate_answer>" in text:
        return json.dumps({"reason": "ok", "verdict": "correct"})
    for key, (q, a) in FACTS.items():
        if key in text:
            return json.dumps({"question": q, "answer": a})
    return "I do not know."


def test_canary_key_and_secret_header_reach_no_file_of_the_run_the_cache_or_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("PROCTOR_CACHE_DIR", str(cache))
    monkeypatch.setenv("CANARY_KEY", KEY_CANARY)
    monkeypatch.setenv("CANARY_HEADER", HEADER_CANARY)
    service = HTTPServer(("127.0.0.1", 0), _Service)
    threading.Thread(target=service.serve_forever, daemon=True).start()
    try:
        with MockServer(reply=mock_reply) as server:
            docs = tmp_path / "docs"
            docs.mkdir()
            for key, (q, a) in FACTS.items():
                (docs / f"{key}.md").write_text(f"# {key}\n\nAbout {key}: the answer to '{q}' is {a}. " * 3)
            cfg = tmp_path / "qa.yaml"
            cfg.write_text(
                f"""
protocol: qa
corpus: {{path: docs, min_chunk_chars: 10, max_chunk_chars: 2000}}
models:
  m: {{spec: openai/mock, base_url: {server.base_url}, api_key_env: CANARY_KEY}}
roles: {{examiner: m, judge: m}}
candidates:
  - {{name: llm, model: m}}
  - name: service
    http:
      url: "http://127.0.0.1:{service.server_port}/answer"
      headers_env: {{Authorization: CANARY_HEADER}}
qa: {{num_questions: 2, judges: [with_reference]}}
"""
            )
            result = run_config(cfg, out=tmp_path / "runs", show_progress=False)
            sent = server.chat_requests()
    finally:
        service.shutdown()
    # The secrets were really used ...
    assert sent and all(KEY_CANARY in str(r.headers.get("Authorization")) for r in sent)
    assert _Service.seen and all(s == HEADER_CANARY for s in _Service.seen)
    with proctor.load_run(result.run_dir) as run:
        assert any(c.text_stored and c.reply for c in run.transcripts())
    # Both exports, written into the run folder, are scanned with it.
    for fmt in ExportFormat:
        done = export_run(result.run_dir, fmt)
        assert done.samples == 4 and done.path.is_relative_to(result.run_dir)
    # ... and reach no file: run folder (store, log, report, exports), cache — blobs decompressed.
    assert (result.run_dir / "proctor.log").is_file() and any(cache.rglob("*"))
    for folder in (result.run_dir, cache):
        raw = all_bytes_with_blobs(folder)
        assert raw
        for canary in (KEY_CANARY, HEADER_CANARY, "canary-KEY", "canary-HEADER"):
            assert canary.encode() not in raw, f"{canary} found under {folder}"


# --- the viewer's item page ---------------------------------------------------------------------------------


def item_page(root: Path, run_id: str, key: str) -> str:
    client = TestClient(create_app(root, csrf_token="t"), base_url="http://127.0.0.1")
    response = client.get(f"/runs/{run_id}/items/{key}")
    assert response.status_code == 200
    return response.text


def test_item_page_truncates_long_messages_with_show_all_and_escapes_them(tmp_path: Path) -> None:
    store = run_store(tmp_path)
    store.put_item("item-1", "answer", {"question": "Q?", "reference_answer": "R.", "answer": "A."})
    long_text = "<b>context</b> " + "word " * MESSAGE_PREVIEW + "THE-END"
    ask(Model(ScriptedProvider("tr-echo")), store, [{"role": "user", "content": long_text}])
    store.close()
    html = item_page(tmp_path, "run", "item-1")
    timeline = html.split('id="calls"', 1)[1]
    assert "show all (" in timeline and timeline.count("THE-END") == 2  # the message's and the reply's "all"
    assert "<b>context</b>" not in html and "&lt;b&gt;context&lt;/b&gt;" in timeline
    assert "judging" in timeline and "temperature: 0.0" in timeline


def test_item_page_says_no_transcript_when_text_is_off_or_the_store_is_old(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PROCTOR_CACHE_DIR", str(tmp_path / "cache"))
    off = run_config(qa_config(tmp_path, "store_text: false"), out=tmp_path / "runs", show_progress=False)
    with proctor.load_run(off.run_dir) as run:
        key = run.items("answer")[0].key
    html = item_page(off.run_dir.parent, off.run_dir.name, key)
    assert "no transcript stored (store_text: false)" in html and "messages sent" not in html
    old = old_store(tmp_path / "old" / "old-run")
    html = item_page(old.parent, old.name, "k1")
    assert "no transcript stored" in html and "candidate" in html.split('id="calls"', 1)[1]
