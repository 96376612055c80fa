"""Writes `docs/config-reference.md` from the settings models: `RunConfig` (the top level of a run config)
and every registered protocol's settings model, field by field with its type, default and description.

    python -m proctor.cli.config_reference            # rewrite docs/config-reference.md
    python -m proctor.cli.config_reference --check    # exit 1 when the committed file is stale

The types are rendered as `proctor options <protocol>` prints them (`proctor.cli.options`)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from proctor.cli.options import option_rows, prose

DEFAULT_OUT = Path(__file__).resolve().parents[3] / "docs" / "config-reference.md"
REGENERATE = "python -m proctor.cli.config_reference"

# Top-level fields whose models carry no description (a comment in the source, or nothing): said here.
TOP_LEVEL_NOTES = {
    "protocol": "the protocol to run: qa, exam, kieval, interview, rageval, reckon or suite",
    "name": "prefix of the run folder's name (default: the protocol)",
    "seed": "every random choice of the run derives from it",
    "corpus.path": "a file or a folder (read recursively) of .txt, .md, .html, .pdf, .jsonl, .json or .csv "
    "files",
    "corpus.text_field": "the .jsonl/.json key or .csv column holding the text",
    "corpus.title_field": "the .jsonl/.json key or .csv column holding a title",
    "corpus.id_field": "the .jsonl/.json key or .csv column kept as the record's id",
    "corpus.min_chunk_chars": "chunks shorter than this are merged with a neighbour where it leaves room",
    "corpus.max_chunk_chars": "no chunk is longer; a longer paragraph is cut at sentences, then whitespace",
    "corpus.chunk_by": "the unit chunks are packed from: whole paragraphs, or sentences",
    "corpus.extensions": "load only files with these extensions (e.g. ['.md', '.txt']), an extension "
    "without a loader read as plain text; default: every supported file (.txt .md .html .pdf .jsonl .json "
    ".csv), others skipped and reported",
    "models.<name>": "a named model; `name: openai/gpt-4o-mini` is shorthand for `name: {spec: ...}`",
    "models.<name>.spec": "openai/<model> (OpenAI or any OpenAI-compatible server at `base_url`), "
    "local/<name> (embedded, offline) or scripted/<name> (deterministic replies, for tests)",
    "models.<name>.max_concurrency": "calls in flight at once (default 16 per URL; local/: its n_parallel)",
    "models.<name>.timeout_s": "seconds before a call counts as timed out (and is retried)",
    "models.<name>.max_retries": "retries on 429, 5xx, timeouts and connection errors (exponential backoff)",
    "models.<name>.input_price_per_mtok": "USD per million prompt tokens, for cost accounting and the budget",
    "models.<name>.output_price_per_mtok": "USD per million completion tokens",
    "candidates[i].name": "the candidate's name in reports (unique in the run)",
    "candidates[i].retriever": "the passages put in the prompt: none (closed_book), bm25, dense, hybrid "
    "(dense and hybrid need `embedder`) or oracle (the question's source chunks)",
    "candidates[i].k": "passages retrieved per question",
    "candidates[i].temperature": "sampling temperature of the candidate's answers",
    "candidates[i].max_tokens": "reply budget (tokens) of one answer",
    "candidates[i].http.timeout_s": "seconds before a request counts as timed out",
    "cache_dir": "folder of the call cache and other caches (default $PROCTOR_CACHE_DIR, else "
    "~/.cache/proctor); a relative path is relative to the working folder",
}

LEGEND = """\
Types: `int`, `float`, `str`, `bool`; `null` where a field may be left empty; `"a" | "b"` for a choice of
fixed values; `list[...]` and `dict[str, ...]` for YAML lists and mappings; `path` for a file or folder —
a relative `path` is relative to the config file's folder (other file names, such as a Python candidate's
`path/to/file.py:answer`, an agent's `database:<schema.yaml>` or `cache_dir`, are relative to the folder
proctor runs in). `(required)` marks a field without a default. `<name>` stands for a key you choose,
`[i]` for an entry of a list. `proctor options <protocol>` prints a protocol's part of this page."""


def _md(text: str) -> str:
    """Text for Markdown: `<...>` and `*` outside code spans escaped, so `<schema.yaml>` stays visible."""
    parts = text.split("`")
    for i in range(0, len(parts), 2):  # even parts are outside backticks
        parts[i] = (
            parts[i].replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("*", r"\*")
        )
    return "`".join(parts)


def _code(text: str) -> str:
    """A code span that holds any backticks in `text`."""
    fence = "``" if "`" in text else "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _rows(rows: list[tuple[str, str, str, str]], notes: dict[str, str], level: str) -> list[str]:
    """Options without a section first, then each section (nested ones too) under its own heading."""
    sections = [r[0] for r in rows if r[1] == "section"]

    def owner(name: str) -> str | None:
        found = [s for s in sections if name.startswith(s + ".")]
        return max(found, key=len) if found else None

    def describe(row: tuple[str, str, str, str]) -> str:
        name, kind, default, what = row
        what = re.sub(r"\s+", " ", what or notes.get(name, "")).strip()
        line = f"- {_code(name)} ({_md_type(kind, default)})"
        return f"{line}: {_md(what)}" if what else line

    out = [describe(r) for r in rows if r[1] != "section" and owner(r[0]) is None]
    for row in rows:
        if row[1] != "section":
            continue
        name, what = row[0], re.sub(r"\s+", " ", row[3] or notes.get(row[0], "")).strip()
        out += ["", f"{level} {_code(name)}", ""]
        if what:
            out += [_md(what), ""]
        out += [describe(r) for r in rows if r[1] != "section" and owner(r[0]) == name]
    return out


def _md_type(kind: str, default: str) -> str:
    if default == "(required)":
        return f"{_code(kind)}, required"
    if default:
        return f"{_code(kind)}, default {_code(default)}"
    return _code(kind)


def render() -> str:
    """The whole page, deterministic (same models -> same text)."""
    from proctor.config import RunConfig
    from proctor.kit.registry import get_protocol, protocol_names

    lines = [
        "# Config reference",
        "",
        f"<!-- Generated from the settings models by `{REGENERATE}`; do not edit by hand. -->",
        "",
        "Every field a run config accepts: the top level (`RunConfig`), then each protocol's own section, "
        "the YAML mapping named after the protocol (`qa:`, `exam:`, ...). Unknown fields are rejected "
        "with an error that names them.",
        "",
        LEGEND,
        "",
        "## Top level",
        "",
    ]
    lines += _rows(option_rows(RunConfig), TOP_LEVEL_NOTES, "###")
    for name in protocol_names():
        declared = get_protocol(name)
        cls = declared.settings
        lines += ["", f"## `{name}:`", ""]
        doc = prose(cls.__doc__ or "").replace("\n", " ")
        if doc:
            lines += [_md(doc), ""]
        if declared.roles:
            lines += ["Roles (`roles.<role>: <a key of models>`):", ""]
            for role in declared.roles:
                need = "required" if role.required else "optional"
                lines.append(f"- `roles.{role.name}` ({need}): {_md(role.description)}")
            lines.append("")
        lines += _rows(option_rows(cls, prefix=f"{name}."), {}, "###")
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    text = render()
    if "--check" in args:
        current = DEFAULT_OUT.read_text(encoding="utf-8") if DEFAULT_OUT.is_file() else ""
        if current != text:
            print(f"{DEFAULT_OUT} is stale: run `{REGENERATE}`", file=sys.stderr)
            return 1
        return 0
    DEFAULT_OUT.write_text(text, encoding="utf-8")
    print(f"wrote {DEFAULT_OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
