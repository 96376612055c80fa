"""The user docs: the generated config reference is current, `proctor options` prints readable types, the
README stays short with its two commands first, and its links resolve."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Literal

import pytest
from pydantic import BaseModel, Field, SerializeAsAny

import proctor  # noqa: F401  (installs the protocol registry)
from proctor.cli import config_reference
from proctor.cli.options import _type_name, option_rows
from proctor.config_paths import ConfigFile, ConfigPath

ROOT = Path(__file__).resolve().parents[1]
REPRS = re.compile(r"Annotated|AfterValidator|<function|<class|typing\.|0x[0-9a-f]{6,}")


def test_config_reference_is_current() -> None:
    committed = (ROOT / "docs" / "config-reference.md").read_text(encoding="utf-8")
    assert committed == config_reference.render(), (
        "docs/config-reference.md is stale: run `.venv/bin/python -m proctor.cli.config_reference`"
    )


def test_config_reference_check_flags_a_stale_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stale = tmp_path / "config-reference.md"
    stale.write_text("# Config reference\n", encoding="utf-8")
    monkeypatch.setattr(config_reference, "DEFAULT_OUT", stale)
    assert config_reference.main(["--check"]) == 1
    assert config_reference.main([]) == 0  # rewrites it
    assert config_reference.main(["--check"]) == 0


def test_config_reference_covers_every_protocol_with_readable_types() -> None:
    from proctor.kit.registry import protocol_names

    text = config_reference.render()
    for name in protocol_names():
        assert f"## `{name}:`" in text
    assert not REPRS.search(text), REPRS.search(text)
    assert "- `corpus.path` (`path | null`, default `null`)" in text
    assert "- `exam.exam_file` (`path | null`, default `null`)" in text
    assert "- `kieval.questions.path` (`path`, required)" in text
    assert "### `models.<name>`" in text and "### `candidates[i].agent.limits`" in text
    assert "- `exam.grid.llms` (`list[str]`, default `[]`)" in text
    # `<...>` outside code is escaped, so Markdown does not swallow it as an HTML tag.
    assert "database:&lt;schema.yaml&gt;" in text


class _Section(BaseModel):
    """A nested section."""

    depth: int = Field(2, description="how deep")


class _Shapes(BaseModel):
    """Field shapes the reference must render readably."""

    corpus: ConfigPath = Field(description="a config path")
    labels: ConfigFile | None = None
    choice: Literal["a", "b"] = "a"
    names: list[str] = Field(default_factory=list)
    weights: dict[str, float] = Field(default_factory=dict)
    either: Annotated[int, Field(ge=0)] | str = 0
    section: _Section = Field(default_factory=_Section)
    sections: list[_Section] = Field(default_factory=list)
    named: dict[str, _Section] = Field(default_factory=dict)
    settings: SerializeAsAny[BaseModel] | None = None


def test_type_names_are_readable() -> None:
    rows = {r[0]: r[1:] for r in option_rows(_Shapes)}
    assert rows["corpus"] == ("path", "(required)", "a config path")
    assert rows["labels"][0] == "path | null"
    assert rows["choice"][:2] == ('"a" | "b"', '"a"')
    assert rows["names"][:2] == ("list[str]", "[]")
    assert rows["weights"][0] == "dict[str, float]"
    assert rows["either"][0] == "int | str"
    assert rows["section"][0] == "section" and rows["section.depth"][:2] == ("int", "2")
    assert rows["sections[i]"][0] == "section" and "sections[i].depth" in rows
    assert rows["named.<name>"][0] == "section" and "named.<name>.depth" in rows
    assert rows["<protocol>"][0] == "section" and "settings" not in rows
    assert _type_name(Path | None) == "path | null"


def test_options_prints_readable_types() -> None:
    def options(protocol: str) -> str:
        r = subprocess.run(
            [sys.executable, "-m", "proctor.cli.main", "options", protocol],
            capture_output=True,
            text=True,
            env={**os.environ, "COLUMNS": "400", "NO_COLOR": "1"},
            cwd=ROOT,
            timeout=120,
        )
        assert r.returncode == 0, r.stderr
        return r.stdout

    exam = options("exam")
    assert not REPRS.search(exam), REPRS.search(exam)
    assert "exam.exam_file: path | null = null" in exam
    assert "exam.grid.llms: list[str] = []" in exam  # brackets printed, not eaten as console markup
    assert "relative to the config file's folder" in exam
    suite = options("suite")
    assert "suite.members[i].seed_from: str | null = null" in suite
    assert "suite.members[i].<protocol>" in suite and "Annotated" not in suite


def test_readme_is_short_with_the_two_commands_first() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    lines = text.splitlines()
    assert len(lines) <= 200, len(lines)
    first_block = text.split("```bash\n", 1)[1].split("```", 1)[0].splitlines()
    assert first_block == ["./install.sh && .venv/bin/proctor demo", ".venv/bin/python -m pytest -q"]
    assert text.index("```bash") < text.index("\n## ")  # before any section


@pytest.mark.parametrize("page", ["README.md", "bench/README.md"])
def test_relative_links_resolve(page: str) -> None:
    path = ROOT / page
    text = path.read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    broken = [
        link
        for link in links
        if not re.match(r"[a-z]+:", link)
        and not link.startswith("#")
        and not (path.parent / link.split("#", 1)[0]).exists()
    ]
    assert broken == []


def test_user_docs_carry_no_issue_numbers_or_dates() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert not re.search(r"\bissue \d+|\b20\d\d-\d\d-\d\d\b", text), page
