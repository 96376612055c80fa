"""Tests of the static HTML report, on a synthetic run store shaped like the qa protocol's, read back
with `load_run` as the runner does."""

from __future__ import annotations

import base64
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from proctor.errors import UserError
from proctor.estimates import Estimate
from proctor.kit.record import Run, load_run
from proctor.kit.shared.questions import GenerationStats
from proctor.models.recording import CallRecord
from proctor.protocols.qa.result import JudgedAccuracy, QaCandidate, QaResult
from proctor.report import SECTIONS, plots, render_report_html, write_report
from proctor.report._env import fmt_interval, fmt_num, fmt_pct, fmt_usd
from proctor.store import RunStore

SCRIPT = "<script>alert(1)</script>"
IMG = "<img src=x onerror=alert(2)>"
CANDIDATES = ("gpt-mini", "rag-bm25")


def _call(
    role: str, model: str, *, cached: bool = False, error: str | None = None, cost: float = 0.001
) -> CallRecord:
    return CallRecord(
        provider="openai",
        model=model,
        role=role,
        item_key=None,
        prompt_tokens=100,
        completion_tokens=20,
        cost_usd=cost,
        latency_s=0.5,
        cached=cached,
        attempts=1,
        error=error,
    )


def _candidate(
    with_ref: tuple[float, float, float, int], without_ref: tuple[float, float, float, int], n: int
) -> QaCandidate:
    def acc(v: tuple[float, float, float, int]) -> JudgedAccuracy:
        return JudgedAccuracy(value=v[0], lo=v[1], hi=v[2], n=v[3], method="wilson")

    return QaCandidate(
        model="openai/gpt-4o-mini",
        retriever="bm25",
        questions=3,
        answered=n,
        answer_errors=3 - n,
        accuracy_with_reference=acc(with_ref),
        accuracy_without_reference=acc(without_ref),
        em=Estimate(value=0.6667, lo=0.2, hi=0.94, n=n, method="bootstrap"),
        f1=Estimate(value=0.6667, n=n),
    )


QA_RESULT = QaResult(
    protocol="qa",
    config_hash="cfg123",
    questions=GenerationStats(planned=5, generated=4, failed=1, filtered={"duplicate": 1, IMG: 0}, kept=3),
    candidates={
        "gpt-mini": _candidate((0.723, 0.61, 0.82, 3), (1.0, 0.44, 1.0, 3), 3),
        "rag-bm25": _candidate((0.5, 0.2, 0.8, 2), (1.0, 0.2, 1.0, 1), 2),
    },
)


def build_qa_store(path: Path) -> RunStore:
    """A finished qa run: 3 questions x 2 candidates, one failed answer, one unparsable judge reply."""
    store = RunStore(path)
    config = {"protocol": "qa", "note": SCRIPT, "models": {"judge": {"base_url": "http://localhost:8080/v1"}}}
    store.start_run("run-2024-qa", "qa", config, "cfg123", "0.1.0")
    questions = [
        ("q1", "What is the capital of France?", "Paris"),
        ("q2", f"Which tag runs code? {SCRIPT}", "The script tag"),
        ("q3", "How many legs has a spider?", "Eight"),
    ]
    for qid, question, ref in questions:
        store.put_item(
            f"q_{qid}",
            "question",
            {
                "question_id": qid,
                "question": question,
                "reference_answer": ref,
                "source_chunk_ids": [f"doc1#{qid}"],
                "source": "doc1.md",
                "generator": "openai/gpt-4o",
                "prompt_version": "v1",
            },
        )
    for qid, question, ref in questions:
        for cand in CANDIDATES:
            key = f"a_{qid}_{cand}"
            if qid == "q3" and cand == "rag-bm25":
                store.put_item(
                    key,
                    "answer",
                    {"candidate": cand, "question_id": qid, "question": question},
                    status="error",
                    error=f"HTTP 500 from server {IMG}",
                    error_cause="http_500",
                )
                continue
            answer = IMG + " " + SCRIPT if (qid == "q2" and cand == "gpt-mini") else ref
            correct = answer == ref
            store.put_item(
                key,
                "answer",
                {
                    "candidate": cand,
                    "question_id": qid,
                    "question": question,
                    "answer": answer,
                    "reference_answer": ref,
                    "retrieved_ids": [f"doc1#{qid}"],
                    "em": float(correct),
                    "f1": float(correct),
                    "judge_with_reference": {
                        "verdict": "correct" if correct else "incorrect",
                        "reason": "matches",
                    },
                    "judge_without_reference": None,
                },
            )
            store.put_judgment(key, "em", verdict=None, score=float(correct), reason=None)
            store.put_judgment(key, "f1", verdict=None, score=float(correct), reason=None)
            store.put_judgment(
                key,
                "llm_with_reference",
                verdict="correct" if correct else "incorrect",
                score=float(correct),
                reason=f"reason for {qid}: {SCRIPT}",
            )
            if qid == "q1" and cand == "rag-bm25":
                store.put_judgment(
                    key,
                    "llm_without_reference",
                    verdict=None,
                    score=None,
                    reason=None,
                    error=f"judge reply not JSON: {IMG}",
                )
            else:
                store.put_judgment(
                    key, "llm_without_reference", verdict="correct", score=1.0, reason="plausible"
                )
    store.put_item(
        "q_q4",
        "question",
        {"question_id": "q4"},
        status="error",
        error="unparseable: not json",
        error_cause="unparseable",
    )
    store.put_metric("accuracy.llm_with_reference", "gpt-mini", 0.723, lo=0.61, hi=0.82, n=3)
    store.put_metric("accuracy.llm_with_reference", "rag-bm25", 0.5, lo=0.2, hi=0.8, n=2)
    store.put_metric("accuracy.llm_without_reference", "gpt-mini", 1.0, lo=0.44, hi=1.0, n=3)
    store.put_metric("accuracy.llm_without_reference", "rag-bm25", 1.0, lo=0.2, hi=1.0, n=1)
    store.put_metric("em.mean", "gpt-mini", 0.6667, lo=0.2, hi=0.94, n=3)
    store.put_metric("f1.mean", "gpt-mini", 0.6667, n=3)
    store.put_metric("judge_agreement.kappa", "all", 0.25, n=4)
    store.put_artifact("summary", QA_RESULT.model_dump(mode="json"))
    for _ in range(3):
        store.record_call(_call("candidate", "gpt-4o-mini"))
    store.record_call(_call("candidate", "gpt-4o-mini", cached=True))
    store.record_call(_call("judge", "gpt-4o", error="parse error"))
    store.finish_run("run-2024-qa")
    return store


class _TagCollector(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))


def _written(folder: Path, build: object) -> Run:
    """The run that `build(store)` wrote into `folder`, read back with `load_run`."""
    store = RunStore(folder / "run.sqlite")
    assert callable(build)
    build(store)
    store.close()
    return load_run(folder)


@pytest.fixture(scope="module")
def qa_store(tmp_path_factory: pytest.TempPathFactory) -> Run:
    folder = tmp_path_factory.mktemp("qa")
    build_qa_store(folder / "run.sqlite").close()
    return load_run(folder)


@pytest.fixture(scope="module")
def qa_html(qa_store: Run) -> str:
    return render_report_html(qa_store)


def test_write_report_writes_one_self_contained_file(qa_store: Run, tmp_path: Path) -> None:
    out = write_report(qa_store, tmp_path / "nested" / "report.html")
    assert out == tmp_path / "nested" / "report.html"
    assert out.is_file()
    assert list(out.parent.iterdir()) == [out]  # no temporary file left behind
    html = out.read_text(encoding="utf-8")
    assert html.startswith("<!doctype html>")
    assert "data:image/png;base64," in html
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", html, re.I)
    assert "<link" not in html and "@import" not in html and "url(" not in html
    parser = _TagCollector()
    parser.feed(html)
    for tag, attrs in parser.tags:
        for name, value in attrs:
            if name in ("src", "href") and value:
                assert value.startswith(("data:image/png;base64,", "#")), (tag, name, value)


def test_plots_are_valid_pngs(qa_html: str) -> None:
    images = re.findall(r"data:image/png;base64,([A-Za-z0-9+/=]+)", qa_html)
    # accuracy.llm_with_reference, accuracy.llm_without_reference, em.mean, f1.mean, judge agreement
    assert len(images) == 5
    for b64 in images:
        assert base64.b64decode(b64).startswith(b"\x89PNG\r\n\x1a\n")


def test_untrusted_text_is_escaped(qa_html: str) -> None:
    assert SCRIPT not in qa_html
    assert IMG not in qa_html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in qa_html
    assert "&lt;img src=x onerror=alert(2)&gt;" in qa_html
    parser = _TagCollector()
    parser.feed(qa_html)
    assert not [t for t, _ in parser.tags if t == "script"]
    assert not [(t, a) for t, attrs in parser.tags for a, _ in attrs if a.lower().startswith("on")]


def test_header_and_config(qa_html: str) -> None:
    assert "run-2024-qa" in qa_html
    assert "finished" in qa_html
    assert "0.1.0" in qa_html
    assert "<details" in qa_html and "Configuration" in qa_html
    assert "&#34;base_url&#34;: &#34;http://localhost:8080/v1&#34;" in qa_html  # pretty JSON, escaped


def test_error_item_and_judge_parse_error_are_shown(qa_html: str) -> None:
    errors = qa_html.split('id="errors"', 1)[1].split('id="protocol"', 1)[0]
    assert "a_q3_rag-bm25" in errors
    assert "http_500" in errors
    assert "HTTP 500 from server" in errors
    assert "<strong>2</strong> items ended in an error" in errors
    # one row per cause with its count
    assert '<tr><td>http_500</td><td class="num">1</td></tr>' in errors
    assert '<tr><td>unparseable</td><td class="num">1</td></tr>' in errors
    assert "q_q4" in errors
    # the unparsable judge reply is listed, and marked in the question browser, not scored
    assert "a_q1_rag-bm25" in errors and "llm_without_reference" in errors
    assert "judge reply not JSON" in errors
    assert "unparsed" in qa_html.split('id="protocol"', 1)[1]


def test_metric_values_appear(qa_html: str) -> None:
    metrics = qa_html.split('id="metrics"', 1)[1].split('id="calls"', 1)[0]
    assert "accuracy.llm_with_reference" in metrics
    assert "0.723" in metrics and "[0.610, 0.820]" in metrics
    assert "0.667" in metrics
    assert "judge_agreement.kappa" in metrics and "0.250" in metrics
    # the qa candidates table shows accuracy as a percentage with its interval
    qa = qa_html.split('id="protocol"', 1)[1]
    assert "72.3%" in qa and "[61.0, 82.0]" in qa


def test_cost_table_totals(qa_html: str) -> None:
    calls = qa_html.split('id="calls"', 1)[1].split('id="errors"', 1)[0]
    assert "openai/gpt-4o-mini" in calls and "openai/gpt-4o" in calls
    total = calls.split('class="total"', 1)[1].split("</tr>", 1)[0]
    cells = re.findall(r"<td[^>]*>(.*?)</td>", total)
    assert cells[:4] == ["total", "5", "1", "1"]
    assert cells[4].startswith("600<br>") and "500 · 100" in cells[4]  # tokens: total, prompt · completion
    assert "$0.0050" in total and "$0.0040" in total  # nominal vs spent (the cache hit is free)


def test_qa_section(qa_html: str) -> None:
    qa = qa_html.split('id="protocol"', 1)[1]
    assert "Question generation" in qa and "planned" in qa and "duplicate" in qa
    assert "75.0%" in qa  # kept / generated
    assert qa.count('<details class="question"') == 4  # including the failed question
    assert "Question item failed (unparseable)" in qa
    assert "What is the capital of France?" in qa and "doc1.md" in qa and "Paris" in qa
    assert "Judge agreement" in qa
    assert "judge with reference" in qa and "judge without reference" in qa


def test_judge_agreement_counts(qa_store: Run) -> None:
    from proctor.protocols.qa.report import qa_context

    ctx = qa_context(qa_store)
    agreement = ctx["agreement"]
    assert agreement is not None
    # parsed by both: gpt-mini q1, q2, q3; rag-bm25 q2 -> agree where with-reference says correct
    assert agreement["overall"]["n"] == 4
    assert agreement["overall"]["agree"] == 3
    assert agreement["overall"]["only_without"] == 1
    by_cand = {r["candidate"]: r for r in ctx["per_candidate"]}
    assert by_cand["rag-bm25"]["errors"] == 1 and by_cand["rag-bm25"]["answered"] == 2
    acc = {a["judge"]: a for a in by_cand["rag-bm25"]["accuracy"]}
    assert acc["llm_without_reference"]["unparsed"] == 1


def test_unknown_protocol_and_custom_section(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def build(store: RunStore) -> None:
        store.start_run("r1", "nosuchprotocol", {}, "h", "0.1.0")
        store.put_item("k1", "guess", {"question": SCRIPT, "answer": "x"})
        store.put_item("k2", "guess", {"question": "q"}, status="error", error="boom", error_cause="timeout")
        store.put_item("k3", "guess", {"question": "q3", "answer": "y"})
        store.put_judgment("k1", "rule", verdict="incorrect", score=0.0, reason=None)
        store.put_judgment("k3", "rule", verdict="correct", score=1.0, reason=None)
        store.record_call(_exchange("k1", "candidate", "PROMPT-K1", f"REPLY-K1 {SCRIPT}"))
        store.record_call(_exchange("k2", "candidate", "PROMPT-K2", None, error="timeout"))
        store.record_call(_exchange("k3", "candidate", "PROMPT-K3", "REPLY-K3"))
        store.put_artifact(
            "summary", {"candidates": {"c": {"accuracy": {"value": 0.5, "lo": 0.1, "hi": 0.9, "n": 2}}}}
        )

    store = _written(tmp_path, build)
    html = render_report_html(store)
    # A protocol without report code gets the default section: estimates, item table, failures by cause.
    assert "candidates.c.accuracy" in html and "[0.100, 0.900]" in html
    assert "Items: guess (3)" in html and "&lt;script&gt;" in html and SCRIPT not in html
    assert "<td>timeout</td>" in html
    # The failed item and the one judged incorrect show their prompt and reply; the correct one does not.
    evidence_rows = html.split('<tr class="evidence-row">')[1:]
    assert len(evidence_rows) == 2
    assert "PROMPT-K1" in evidence_rows[0] and "REPLY-K1 &lt;script&gt;" in evidence_rows[0]
    assert "PROMPT-K2" in evidence_rows[1] and "/runs/r1/items/k2" in evidence_rows[1]
    assert "PROMPT-K3" not in html
    monkeypatch.setitem(SECTIONS, "nosuchprotocol", lambda s: "<p id='custom'>kieval fragment</p>")
    assert "<p id='custom'>kieval fragment</p>" in render_report_html(store)

    def broken(s: Run) -> str:
        raise RuntimeError(f"boom {SCRIPT}")

    monkeypatch.setitem(SECTIONS, "nosuchprotocol", broken)
    html = render_report_html(store)
    assert "could not be rendered" in html and "RuntimeError: boom &lt;script&gt;" in html
    assert 'id="metrics"' in html  # the generic sections survive


def test_empty_store_renders(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    RunStore(tmp_path / "empty" / "run.sqlite").close()
    with pytest.raises(UserError, match="holds no run"):  # a store without a run record has no report
        load_run(tmp_path / "empty")
    run = _written(tmp_path, lambda store: store.start_run("r0", "qa", {}, "h", "0.1.0"))
    html = render_report_html(run)
    assert "r0" in html
    assert "No metrics recorded." in html and "No model calls recorded." in html


def test_plots_handle_missing_values_and_dollar_labels() -> None:
    b64 = plots.metric_bars(
        "accuracy.x", ["$a", "b$c$d", "x" * 80], [0.5, None, 1.0], [0.4, None, None], [0.6, None, None]
    )
    assert base64.b64decode(b64).startswith(b"\x89PNG")
    b64 = plots.share_bars("agreement", ["all", "$cand"], [0.5, 1.0], [4, 2])
    assert base64.b64decode(b64).startswith(b"\x89PNG")


def test_number_formatting() -> None:
    assert fmt_num(0.72345) == "0.723"
    assert fmt_num(1234) == "1,234"
    assert fmt_num(None) == "—"
    assert fmt_pct(0.5) == "50.0%"
    assert fmt_interval(0.1, None) == "—"
    assert fmt_interval(0.1, 0.25, pct=True) == "[10.0, 25.0]"
    assert fmt_usd(0.00123) == "$0.0012"


def _exchange(key: str, role: str, prompt: str, reply: str | None, error: str | None = None) -> CallRecord:
    return CallRecord(
        "openai", "gpt-4o-mini", role, key, 100, 20, 0.001, 0.5, False, 1, error=error,
        messages=[{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": prompt}],
        reply=reply,
    )  # fmt: skip


def test_failed_and_surprising_answers_embed_their_prompt_and_reply(tmp_path: Path) -> None:
    from proctor.report.evidence import MAX_CHARS, evidence

    long_context = "CONTEXT-START " + "filler " * 2000 + " QUESTION-AT-THE-END"

    def build(store: RunStore) -> None:
        build_qa_store(tmp_path / "run.sqlite").close()
        # Incorrect (and hostile), a failed one, a judge disagreement, and one all judges call correct.
        store.record_call(_exchange("a_q2_gpt-mini", "candidate", f"Which tag runs code? {SCRIPT}", IMG))
        store.record_call(_exchange("a_q2_gpt-mini", "judge", "Grade it: <candidate_answer>", "incorrect"))
        store.record_call(_exchange("a_q3_rag-bm25", "candidate", long_context, None, error="http_500"))
        store.record_call(_exchange("a_q1_rag-bm25", "judge", "Grade without reference", "not json"))
        store.record_call(_exchange("a_q1_gpt-mini", "candidate", "PROMPT-OF-A-CORRECT-ANSWER", "Paris"))

    run = _written(tmp_path, build)
    html = render_report_html(run)
    protocol = html.split('id="protocol"', 1)[1]
    rows = protocol.split('<tr class="evidence-row">')[1:]
    blocks = {k: r for r in rows for k in ("a_q2_gpt-mini", "a_q3_rag-bm25", "a_q1_rag-bm25") if k in r}
    assert set(blocks) == {"a_q2_gpt-mini", "a_q3_rag-bm25", "a_q1_rag-bm25"}
    assert "PROMPT-OF-A-CORRECT-ANSWER" not in html  # an answer every judge calls correct shows none
    wrong = blocks["a_q2_gpt-mini"]
    assert "prompt and reply (2 calls)" in wrong and "Which tag runs code?" in wrong
    assert "&lt;img src=x onerror=alert(2)&gt;" in wrong and IMG not in wrong  # escaped model text
    assert "&lt;candidate_answer&gt;" in wrong and "/runs/run-2024-qa/items/a_q2_gpt-mini" in wrong
    failed = blocks["a_q3_rag-bm25"]
    assert "CONTEXT-START" in failed and "QUESTION-AT-THE-END" in failed  # cut in the middle
    assert "characters cut from the middle" in failed and "no reply" in failed and "http_500" in failed
    assert "Grade without reference" in blocks["a_q1_rag-bm25"]  # the unparsed judge reply's prompt
    # Embedded for a bounded number of items; the rest name their viewer page only.
    keys = ["a_q2_gpt-mini", "a_q3_rag-bm25", "a_q1_rag-bm25"]
    found = evidence(run, keys, max_items=2)
    assert [found[k].embedded for k in keys] == [True, True, False]
    assert found["a_q1_rag-bm25"].calls == [] and found["a_q1_rag-bm25"].view_path.endswith("a_q1_rag-bm25")
    assert all(len(m.text) <= MAX_CHARS + 3 for c in found["a_q3_rag-bm25"].calls for m in c.messages)
