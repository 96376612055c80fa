"""The run config of `proctor judge ANSWERS_FILE`: built from the file and the command's flags, or read
from a config file (`--config`) that the file and flags then override."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from proctor.config import RunConfig, _describe_errors, load_config
from proctor.config_paths import config_dir
from proctor.errors import UserError
from proctor.protocols.judge.config import Config
from proctor.protocols.judge.rows import read_rows

DEFAULT_JUDGE = "local/qwen2.5-coder-1.5b"
FIELDS = ("question", "reference", "answer", "id", "label")


def parse_fields(specs: Sequence[str]) -> dict[str, str]:
    """`--field question=q` items as {question_field: q}; a bad item is a UserError naming the fix."""
    out: dict[str, str] = {}
    for spec in specs:
        name, sep, column = spec.partition("=")
        name, column = name.strip(), column.strip()
        if not sep or not column or name not in FIELDS:
            raise UserError(
                f"--field {spec}: write NAME=COLUMN with NAME one of {', '.join(FIELDS)} and COLUMN the "
                "field of your file that holds it, e.g. --field reference=gold_answer."
            )
        out[f"{name}_field"] = column
    return out


def judge_config(
    answers: Path | None,
    *,
    config: Path | None = None,
    labels: Path | None = None,
    fields: Sequence[str] = (),
    model: str | None = None,
    kappa_warning: float | None = None,
) -> RunConfig:
    """The judge run's config: `config` (a YAML file with `protocol: judge`) or a fresh one judged by
    `model` (default: the embedded 1.5B), with the answers file, labels and field names from the flags.
    The file is read once here, so a missing file or field is a UserError before any run starts."""
    columns = parse_fields(fields)
    if config is None:
        if answers is None:
            raise UserError(
                "proctor judge: give an ANSWERS_FILE, or a --config whose judge.answers.path names one."
            )
        raw: dict[str, Any] = {
            "protocol": "judge",
            "name": _run_name(answers),
            "corpus": {},
            "models": {"judge": {"spec": model or DEFAULT_JUDGE}},
            "roles": {"judge": "judge"},
            "judge": {},
        }
    else:
        cfg = load_config(config)
        if cfg.protocol != "judge":
            raise UserError(
                f"{config}: protocol is '{cfg.protocol}', not 'judge'. Give a config with `protocol: judge` "
                "(see docs/judge.md), or run it with `proctor run`."
            )
        raw = cfg.model_dump(mode="json", exclude={"settings"}, exclude_none=True)
        raw["judge"] = cfg.settings.model_dump(mode="json") if cfg.settings is not None else {}
        if model is not None:
            raw["models"][raw["roles"].get("judge", "judge")] = {"spec": model}
    section = raw["judge"]
    answers_section = dict(section.get("answers") or {})
    if answers is not None:
        answers_section["path"] = str(answers.resolve())
        raw["name"] = raw.get("name") if config is not None else _run_name(answers)
    answers_section.update(columns)
    section["answers"] = answers_section
    if labels is not None:
        section["labels"] = str(labels.resolve())
    if kappa_warning is not None:
        section["kappa_warning"] = kappa_warning
    try:
        with config_dir(Path.cwd()):
            cfg = RunConfig.model_validate(raw)
    except ValidationError as e:
        where = f"{config} with the command's flags" if config is not None else "proctor judge"
        raise UserError(f"{where}: invalid settings: {_describe_errors(e, extra=['judge'])}.") from None
    assert isinstance(cfg.settings, Config)
    read_rows(cfg.settings)  # a bad file or field is reported before a run folder is made
    return cfg


def _run_name(answers: Path) -> str:
    """`judge-<file stem>`, so the run folder says which file it graded."""
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "-", answers.stem).strip("-.") or "answers"
    return f"judge-{stem}"[:64]
