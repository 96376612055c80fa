"""Bad input through the real CLI: one clear paragraph, exit code 2, no traceback; corpus problems
are skipped and reported where other files are fine."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "proctor.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env or dict(os.environ),
    )


def assert_user_error(r: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr + r.stdout
    for n in needles:
        assert n in r.stderr, r.stderr


def test_empty_directory(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    assert_user_error(cli("ingest", str(tmp_path / "empty")), "empty", "contains no files")


def test_missing_path(tmp_path: Path) -> None:
    assert_user_error(cli("ingest", str(tmp_path / "nope")), "nope")


def test_bad_files_are_skipped_and_reported(tmp_path: Path) -> None:
    d = tmp_path / "docs"
    d.mkdir()
    (d / "good.md").write_text("# Good\n\nA perfectly fine paragraph about lighthouses and their keepers.\n")
    (d / "binary.txt").write_bytes(b"\x00\x01\x02PNG\x00" * 100)
    (d / "latin1.txt").write_bytes("caf\xe9 au lait, cr\xe8me br\xfbl\xe9e".encode("latin-1"))
    r = cli("ingest", str(d))
    assert r.returncode == 0, r.stderr
    assert "binary.txt" in r.stdout and "latin1.txt" in r.stdout
    assert "UTF-8" in r.stdout
    assert "1 document" in r.stdout or "documents: 1" in r.stdout or "1 doc" in r.stdout


def test_fifty_megabyte_single_line_file(tmp_path: Path) -> None:
    d = tmp_path / "big"
    d.mkdir()
    (d / "line.txt").write_text(("word " * 10_485_760)[: 50 * 1024 * 1024])
    r = cli("ingest", str(d))
    assert r.returncode == 0, r.stderr
    assert "line.txt" not in r.stdout.split("skipped")[-1] or "skipped: 0" in r.stdout


def config(tmp_path: Path, body: str) -> Path:
    (tmp_path / "docs").mkdir(exist_ok=True)
    (tmp_path / "docs" / "a.md").write_text("Some text about the sea and the ships that sail on it.\n")
    p = tmp_path / "run.yaml"
    p.write_text(body)
    return p


BASE = """protocol: qa
corpus: {path: docs}
models:
  m: {spec: openai/x, base_url: "http://127.0.0.1:9/v1"}
roles: {examiner: m, judge: m}
candidates: [{name: c, model: m}]
"""


def test_invalid_yaml(tmp_path: Path) -> None:
    p = config(tmp_path, "protocol: qa\ncorpus: {path: docs\n")
    assert_user_error(cli("run", str(p)), str(p), "invalid YAML", "line")


def test_unknown_config_field(tmp_path: Path) -> None:
    p = config(tmp_path, BASE + "temprature: 0.3\n")
    assert_user_error(cli("run", str(p)), str(p), "unknown field 'temprature'")


def test_unreachable_base_url(tmp_path: Path) -> None:
    p = config(tmp_path, BASE)
    assert_user_error(cli("run", str(p)), "models.m.base_url", "cannot reach", "127.0.0.1:9")


def test_models_check_unreachable(tmp_path: Path) -> None:
    p = config(tmp_path, BASE)
    assert_user_error(cli("models", "check", str(p)), "models.m.base_url")


@pytest.mark.parametrize("args", [["run"], ["frobnicate"]])
def test_usage_errors_exit_2(args: list[str]) -> None:
    r = cli(*args)
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_options_lists_every_protocol_option_with_a_description() -> None:
    from proctor.cli.options import option_rows
    from proctor.kit.registry import protocol_config_class, protocol_names

    for name in protocol_names():
        undocumented = [
            r[0] for r in option_rows(protocol_config_class(name)) if r[1] != "section" and not r[3]
        ]
        assert undocumented == [], f"{name}: options without a description: {undocumented}"
    r = cli("options", "exam")
    assert r.returncode == 0, r.stderr
    assert "exam.irt.prune_fraction: float = 0.1" in r.stdout and "exam.grid.retrievers" in r.stdout
    assert_user_error(cli("options", "nonesuch"), "unknown protocol 'nonesuch'", "exam")
