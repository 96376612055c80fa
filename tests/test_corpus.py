"""Corpus loading, skip-and-report, chunking and id stability."""

from __future__ import annotations

import inspect
import json
import random
import shutil
import string
import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from proctor.corpus import (
    Corpus,
    CorpusConfig,
    LoadReport,
    chunk_text,
    content_id,
    iter_chunks,
    iter_documents,
    load_corpus,
    split_sentences,
)
from proctor.errors import UserError

WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo"]


def _sentence(rng: random.Random, n_words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n_words)).capitalize() + "."


def _paragraph(rng: random.Random, n_sentences: int) -> str:
    return " ".join(_sentence(rng, rng.randint(4, 14)) for _ in range(n_sentences))


def _minimal_pdf(text: str) -> bytes:
    """A one-page PDF with `text` in Helvetica, built by hand so the test needs no PDF writer."""
    content = b"BT /F1 12 Tf 72 720 Td (" + text.encode("latin-1") + b") Tj ET"
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = b"%PDF-1.4\n"
    offsets = []
    for i, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % off for off in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return out


def _docs(path: Path, **kw) -> tuple[list, LoadReport]:
    report = LoadReport()
    docs = list(iter_documents(path, report=report, **kw))
    return docs, report


def _reasons(report: LoadReport) -> dict[str, str]:
    return {p: r for p, r in report.skipped}


# ---------------------------------------------------------------- loaders


def test_txt_and_md_loaders(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("First paragraph.\r\n\r\nSecond paragraph.\n", encoding="utf-8")
    (tmp_path / "b.md").write_text("---\ntitle: meta\n---\n# Guide Title\n\nBody text.\n", encoding="utf-8")
    (tmp_path / "c.txt").write_bytes("\ufeffWith a BOM.".encode())
    docs, report = _docs(tmp_path)
    by_source = {d.source: d for d in docs}
    assert set(by_source) == {"a.txt", "b.md", "c.txt"}
    assert by_source["a.txt"].text == "First paragraph.\n\nSecond paragraph.\n"  # CRLF normalised
    md = by_source["b.md"]
    assert md.title == "Guide Title"
    assert "title: meta" not in md.text  # front matter dropped
    assert by_source["c.txt"].text == "With a BOM."
    assert report.skipped == []
    assert report.files_seen == report.files_loaded == report.documents == 3


def test_html_loader_drops_script_and_style(tmp_path: Path) -> None:
    html = (
        "<html><head><title>Page T</title><style>p {color: red}</style></head><body>"
        "<p>See the <a href='x'>manual</a> first.</p><script>evil()</script>"
        "<ul><li>one</li><li>two</li></ul>"
        "<table><tr><th>Route</th><th>Fare</th></tr><tr><td>North</td><td>5 <b>skell</b></td></tr></table>"
        "<p>Line one<br>line two</p><noscript>Please enable JavaScript</noscript></body></html>"
    )
    (tmp_path / "p.html").write_text(html, encoding="utf-8")
    (tmp_path / "q.htm").write_text("<p>short htm</p>", encoding="utf-8")
    docs, _ = _docs(tmp_path)
    doc = docs[0]
    assert doc.title == "Page T"
    assert "See the manual first." in doc.text  # inline tags stay inline
    assert "evil" not in doc.text and "color" not in doc.text and "JavaScript" not in doc.text
    assert "one" in doc.text.split("\n\n") and "two" in doc.text.split("\n\n")  # block tags -> paragraphs
    assert "Route | Fare\nNorth | 5 skell" in doc.text  # table rows -> lines, cells joined
    assert "Line one\nline two" in doc.text
    assert docs[1].source == "q.htm" and docs[1].text == "short htm"


def test_pdf_loader_and_unreadable_pdf(tmp_path: Path) -> None:
    (tmp_path / "good.pdf").write_bytes(_minimal_pdf("Photosynthesis converts light into energy"))
    (tmp_path / "bad.pdf").write_bytes(b"%PDF-1.4\nthis is not really a pdf at all\n")
    docs, report = _docs(tmp_path)
    assert [d.source for d in docs] == ["good.pdf"]
    assert "Photosynthesis converts light into energy" in docs[0].text
    assert "PDF" in _reasons(report)["bad.pdf"]


def test_jsonl_loader_fields_rows_and_malformed_line(tmp_path: Path) -> None:
    lines = [
        json.dumps({"body": "first record", "name": "One", "key": "k1", "lang": "en"}),
        '{"body": "broken", ',
        "",
        json.dumps({"body": "third record", "name": "Three", "key": 3}),
        json.dumps({"other": "no body here"}),
    ]
    (tmp_path / "r.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    docs, report = _docs(tmp_path, text_field="body", title_field="name", id_field="key")
    assert [d.source for d in docs] == ["r.jsonl#row-1", "r.jsonl#row-4"]
    assert [d.text for d in docs] == ["first record", "third record"]
    assert docs[0].title == "One"
    assert docs[0].metadata["record_id"] == "k1" and docs[1].metadata["record_id"] == "3"
    assert docs[0].metadata["fields"] == {"lang": "en"}
    reasons = " | ".join(r for p, r in report.skipped if p == "r.jsonl")
    assert "line 2" in reasons and "malformed JSON" in reasons
    assert "line 5" in reasons and "'body'" in reasons


def test_jsonl_default_text_field(tmp_path: Path) -> None:
    (tmp_path / "r.jsonl").write_text('{"text": "hello"}\n', encoding="utf-8")
    docs, _ = _docs(tmp_path)
    assert docs[0].text == "hello" and docs[0].title is None


def test_json_list_and_single_record(tmp_path: Path) -> None:
    (tmp_path / "list.json").write_text(json.dumps([{"text": "a one"}, {"text": "a two"}]), encoding="utf-8")
    (tmp_path / "one.json").write_text(json.dumps({"text": "single", "title": "S"}), encoding="utf-8")
    (tmp_path / "broken.json").write_text("[{", encoding="utf-8")
    docs, report = _docs(tmp_path, title_field="title")
    assert [d.source for d in docs] == ["list.json#row-1", "list.json#row-2", "one.json"]
    assert docs[2].title == "S"
    assert "malformed JSON" in _reasons(report)["broken.json"]


def test_csv_loader_one_document_per_row(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text(
        'id,content\n1,"row one, with comma"\n2,"row\ntwo"\n3,\n', encoding="utf-8"
    )
    (tmp_path / "wrong.csv").write_text("a,b\n1,2\n", encoding="utf-8")
    docs, report = _docs(tmp_path, text_field="content", id_field="id")
    assert [d.source for d in docs] == ["t.csv#row-1", "t.csv#row-2"]
    assert docs[0].text == "row one, with comma" and docs[1].text == "row\ntwo"
    assert docs[0].metadata["record_id"] == "1"
    reasons = _reasons(report)
    assert "row 3" in reasons["t.csv"]  # empty text cell reported
    assert "no 'content' column" in reasons["wrong.csv"] and "a, b" in reasons["wrong.csv"]


def test_csv_large_cell(tmp_path: Path) -> None:
    big = "word " * 60_000  # 300 KB, above csv's default 128 KB field limit
    (tmp_path / "big.csv").write_text('text\n"' + big + '"\n', encoding="utf-8")
    docs, report = _docs(tmp_path)
    assert len(docs) == 1 and report.skipped == []


def test_doc_id_depends_on_source_and_text(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("same text", encoding="utf-8")
    (tmp_path / "b.txt").write_text("same text", encoding="utf-8")
    docs, _ = _docs(tmp_path)
    assert docs[0].doc_id != docs[1].doc_id
    assert docs[0].doc_id == content_id("a.txt\nsame text", "d_")


# ---------------------------------------------------------------- skip and report


def test_skips_binary_non_utf8_empty_unknown_and_hidden(tmp_path: Path) -> None:
    (tmp_path / "ok.txt").write_text("fine", encoding="utf-8")
    (tmp_path / "blob.txt").write_bytes(b"abc\x00\x01\x02" * 10)
    (tmp_path / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    (tmp_path / "latin.txt").write_bytes("café au lait".encode("latin-1"))
    (tmp_path / "latin.jsonl").write_bytes(b'{"text": "ok"}\n{"text": "caf\xe9"}\n')
    (tmp_path / "empty.md").write_bytes(b"")
    (tmp_path / "blank.txt").write_text("  \n\n ", encoding="utf-8")
    (tmp_path / "notes.xyz").write_text("plain but unknown", encoding="utf-8")
    (tmp_path / ".secret.txt").write_text("hidden", encoding="utf-8")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "config.txt").write_text("hidden too", encoding="utf-8")
    docs, report = _docs(tmp_path)
    assert [d.source for d in docs] == ["ok.txt"]
    reasons = _reasons(report)
    assert "binary" in reasons["blob.txt"] and "binary" in reasons["image.png"]
    assert reasons["latin.txt"] == "not UTF-8 text (decode error at byte 3); convert it to UTF-8"
    assert reasons["latin.jsonl"] == "not UTF-8 text (decode error at byte 28); convert it to UTF-8"
    assert "empty" in reasons["empty.md"] and "empty" in reasons["blank.txt"]
    assert "unsupported extension '.xyz'" in reasons["notes.xyz"]
    assert not any(".secret" in p or ".git" in p for p in reasons)  # hidden: silent
    assert report.files_seen == 8 and report.files_loaded == 1
    lines = report.summary_lines()
    assert any("latin.txt" in line and "UTF-8" in line for line in lines)
    assert "files: 8 seen, 1 loaded, 7 skipped" in lines


def test_extensions_filter_and_plain_text_fallback(tmp_path: Path) -> None:
    (tmp_path / "a.rst").write_text("Restructured text.", encoding="utf-8")
    (tmp_path / "b.txt").write_text("Plain.", encoding="utf-8")
    docs, report = _docs(tmp_path, extensions=["rst"])
    assert [d.source for d in docs] == ["a.rst"]
    assert "not in corpus.extensions" in _reasons(report)["b.txt"]


def test_missing_path_empty_dir_and_all_skipped_raise_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"does not exist \(a relative corpus.path in a config file"):
        load_corpus(tmp_path / "nope")
    with pytest.raises(UserError, match="resolved from the current directory"):
        load_corpus("no/such/folder")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(UserError, match="contains no files") as e:
        load_corpus(empty)
    assert str(empty) in str(e.value)
    bad = tmp_path / "bad"
    bad.mkdir()
    for i in range(7):
        (bad / f"f{i}.bin").write_bytes(b"\x00" * 20)
    with pytest.raises(UserError) as e:
        load_corpus(bad)
    msg = str(e.value)
    assert "No loadable documents" in msg and str(bad) in msg
    assert "f0.bin: binary" in msg and "f4.bin" in msg and "f5.bin" not in msg and "2 more" in msg
    with pytest.raises(UserError, match="No corpus path"):
        load_corpus()


def test_iter_documents_is_lazy(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text('{"text": "one"}\n{"text": "two"}\n', encoding="utf-8")
    (tmp_path / "b.txt").write_text("three", encoding="utf-8")
    report = LoadReport()
    it = iter_documents(tmp_path, report=report)
    assert inspect.isgenerator(it)
    assert next(it).text == "one"
    assert report.documents == 1 and report.files_seen == 1  # nothing beyond the first record was read
    assert [d.text for d in it] == ["two", "three"]
    chunks = iter_chunks(tmp_path)
    assert inspect.isgenerator(chunks)
    with pytest.raises(UserError):
        iter_documents(tmp_path / "missing")  # raised at call time, not at first next()


# ---------------------------------------------------------------- chunking


def test_chunk_sizes_respected() -> None:
    rng = random.Random(7)
    paragraphs = [_paragraph(rng, rng.choice([1, 1, 2, 5, 12])) for _ in range(60)]
    text = "\n\n".join(paragraphs)
    for mode in ("paragraph", "sentence"):
        chunks = chunk_text(text, min_chars=200, max_chars=600, chunk_by=mode)
        assert all(0 < len(c) <= 600 for c in chunks)
        for i, c in enumerate(chunks):
            if len(c) < 200:  # only allowed when neither neighbour has room
                assert i == 0 or len(chunks[i - 1]) + 2 + len(c) > 600
                assert i == len(chunks) - 1 or len(c) + 2 + len(chunks[i + 1]) > 600
        # no text lost or invented (modulo the whitespace that joins pieces)
        assert " ".join(" ".join(chunks).split()) == " ".join(text.split())


def test_short_tail_is_rebalanced() -> None:
    a = "A" * 300 + "."
    b = "B" * 300 + "."
    c = "C" * 50 + "."
    chunks = chunk_text(f"{a}\n\n{b}\n\n{c}", min_chars=200, max_chars=620)
    assert chunks == [a, f"{b}\n\n{c}"]  # b moved forward so the short tail is not left alone


def test_paragraph_mode_keeps_paragraphs_whole_and_splits_long_ones_at_sentences() -> None:
    rng = random.Random(1)
    small = [_paragraph(rng, 2) for _ in range(3)]
    long_para = _paragraph(rng, 40)
    chunks = chunk_text("\n\n".join([*small, long_para]), min_chars=100, max_chars=500)
    for p in small:
        assert any(p in c for c in chunks)  # never cut
    long_chunks = [c for c in chunks if not any(p in c for p in small)]
    assert len(long_chunks) > 2
    assert all(c.endswith(".") for c in chunks)  # cut at sentence ends
    sentence_chunks = chunk_text(
        "\n\n".join(small), min_chars=0, max_chars=len(small[0]) + 40, chunk_by="sentence"
    )
    assert all(len(c) <= len(small[0]) + 40 for c in sentence_chunks)


def test_hard_split_at_whitespace_then_raw_characters() -> None:
    rng = random.Random(3)
    no_punct = " ".join(rng.choice(WORDS) for _ in range(3000))
    chunks = chunk_text(no_punct, min_chars=100, max_chars=300)
    assert all(len(c) <= 300 for c in chunks)
    assert all(w in WORDS for c in chunks for w in c.split())  # no word was cut
    assert " ".join(chunks) == no_punct
    raw = "".join(rng.choice(string.ascii_letters) for _ in range(1000))
    raw_chunks = chunk_text(raw, min_chars=100, max_chars=300)
    assert "".join(raw_chunks) == raw and all(150 < len(c) <= 300 for c in raw_chunks)


def test_split_sentences() -> None:
    assert split_sentences('One. "Two!" Three? Four') == ["One.", '"Two!"', "Three?", "Four"]
    assert split_sentences("Pi is 3.14 exactly.") == ["Pi is 3.14 exactly."]


def test_large_single_line_file(tmp_path: Path) -> None:
    # 10 MB here to keep the suite fast; 50 MB was verified manually (about 2-3 s).
    table = (string.ascii_lowercase * 9 + " " * 22).encode()  # 256 symbols: ~1 space per 12 chars
    text = random.Random(5).randbytes(10_000_000).translate(table).decode("ascii")
    (tmp_path / "huge.txt").write_text(text, encoding="utf-8")
    start = time.perf_counter()
    corpus = load_corpus(tmp_path, CorpusConfig(max_chunk_chars=1000, min_chunk_chars=200))
    elapsed = time.perf_counter() - start
    assert len(text) >= 10_000_000
    assert all(len(c.text) <= 1000 for c in corpus.chunks)
    assert len(corpus.chunks) >= 10_000
    assert " ".join(c.text for c in corpus.chunks).split() == text.split()  # nothing lost or reordered
    assert elapsed < 60  # generous: catches quadratic behaviour, not slow machines


def test_raw_line_without_whitespace(tmp_path: Path) -> None:
    rng = random.Random(9)
    text = "".join(rng.choice(string.ascii_letters) for _ in range(200_000))
    (tmp_path / "raw.txt").write_text(text, encoding="utf-8")
    corpus = load_corpus(tmp_path)
    assert "".join(c.text for c in corpus.chunks) == text
    assert [c.index for c in corpus.chunks] == list(range(len(corpus.chunks)))


# ---------------------------------------------------------------- ids, dedup, Corpus


def _write_sample_corpus(root: Path) -> None:
    rng = random.Random(11)
    (root / "z_last.md").parent.mkdir(parents=True, exist_ok=True)
    (root / "z_last.md").write_text("\n\n".join(_paragraph(rng, 4) for _ in range(5)), encoding="utf-8")
    (root / "sub").mkdir(exist_ok=True)
    (root / "sub" / "b.txt").write_text("\n\n".join(_paragraph(rng, 6) for _ in range(4)), encoding="utf-8")
    (root / "a_first.txt").write_text("\n\n".join(_paragraph(rng, 3) for _ in range(3)), encoding="utf-8")


def test_chunk_ids_stable_across_runs_and_locations(tmp_path: Path) -> None:
    first = tmp_path / "one"
    _write_sample_corpus(first)
    c1 = load_corpus(first)
    c2 = load_corpus(first)
    assert [c.chunk_id for c in c1.chunks] == [c.chunk_id for c in c2.chunks]
    assert c1.fingerprint == c2.fingerprint
    assert list(dict.fromkeys(c.source for c in c1.chunks)) == ["a_first.txt", "sub/b.txt", "z_last.md"]
    moved = tmp_path / "deeper" / "elsewhere" / "two"
    shutil.copytree(first, moved)
    c3 = load_corpus(moved)
    assert [(c.chunk_id, c.doc_id, c.source) for c in c3.chunks] == [
        (c.chunk_id, c.doc_id, c.source) for c in c1.chunks
    ]
    assert c3.fingerprint == c1.fingerprint
    for c in c1.chunks:
        assert c.chunk_id == content_id(c.text, "c_")
    (moved / "a_first.txt").write_text("changed content entirely", encoding="utf-8")
    assert load_corpus(moved).fingerprint != c1.fingerprint


def test_duplicate_chunks_are_dropped(tmp_path: Path) -> None:
    shared = "A shared disclaimer paragraph that appears in both files. " * 5
    (tmp_path / "a.txt").write_text(f"Unique to a. {'x ' * 150}\n\n{shared}", encoding="utf-8")
    (tmp_path / "b.txt").write_text(f"Unique to b. {'y ' * 150}\n\n{shared}", encoding="utf-8")
    corpus = load_corpus(tmp_path, CorpusConfig(max_chunk_chars=400, min_chunk_chars=50))
    ids = [c.chunk_id for c in corpus.chunks]
    assert len(ids) == len(set(ids)) == 3
    assert corpus.report.duplicate_chunks == 1 and corpus.report.chunks == 3
    assert corpus.by_id(ids[1]).source == "a.txt"  # first occurrence kept


def test_corpus_accessors(tmp_path: Path) -> None:
    _write_sample_corpus(tmp_path)
    corpus = load_corpus(tmp_path)
    assert isinstance(corpus, Corpus)
    first = corpus.chunks[0]
    assert corpus.by_id(first.chunk_id) is first
    assert first.chunk_id in corpus and len(corpus) == len(corpus.chunks) and corpus[0] is first
    with pytest.raises(KeyError):
        corpus.by_id("c_doesnotexist")
    assert corpus.report.chunks == len(corpus.chunks)
    assert any(line.startswith("chunks:") for line in corpus.report.summary_lines())


def test_config_path_and_validation(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("config path works", encoding="utf-8")
    corpus = load_corpus(config=CorpusConfig(path=tmp_path, extensions=[".TXT"]))
    assert corpus.chunks[0].text == "config path works"
    assert load_corpus(CorpusConfig(path=str(tmp_path))).fingerprint == corpus.fingerprint  # config first
    with pytest.raises(UserError, match="does not exist"):
        load_corpus(tmp_path / "other", CorpusConfig(path=tmp_path))  # explicit path wins
    with pytest.raises(ValidationError):
        CorpusConfig(path=tmp_path, chunk_size=3)  # type: ignore[call-arg]
    with pytest.raises(ValidationError):
        CorpusConfig(min_chunk_chars=900, max_chunk_chars=500)
    with pytest.raises(ValidationError):
        CorpusConfig(chunk_by="word")  # type: ignore[arg-type]
