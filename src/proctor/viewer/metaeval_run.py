"""`proctor metaeval RUN_DIR`: the viewer's meta-evaluation of a run's automatic methods against its human
labels, from the command line — labels optionally imported from a JSONL file into the run's
`labels.sqlite` first, the result written to `RUN_DIR/metaeval.json` and to the run store's metrics
(`metaeval.*`, so the report lists them; report.html is written again when the run has one).

Metrics: `metaeval.accuracy`, `metaeval.kappa` (with its bootstrap interval) and `metaeval.spearman` per
method (the subject; `<method> [1-4]` for rated conversation rounds), `metaeval.fleiss_kappa` and
`metaeval.krippendorff_alpha` per scale (subject `annotators:<scale>`), `metaeval.pair_kappa` per pair of
annotators (subject `<a>|<b>:<scale>`). A new meta-evaluation replaces all earlier `metaeval.*` rows.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from proctor.errors import UserError
from proctor.store.record import RUN_FILE, MetricRecord, RunRecord, StoreError, is_run_folder
from proctor.store.safe_files import UnsafeStoreFile
from proctor.store.writes import replace_metrics
from proctor.viewer.labels import LabelFileError, LabelIn, LabelStore, parse_lines, resolve_item_ids
from proctor.viewer.metaeval import MetaEvaluation, meta_evaluate

METAEVAL_FILE = "metaeval.json"
METRIC_PREFIX = "metaeval."
LABEL_LINE = '{"item_id": "<item key>", "label": "correct"}'


@dataclass
class Imported:
    path: str
    added: int
    skipped: int


@dataclass
class MetaEvalResult:
    """What `proctor metaeval` computed and wrote (metaeval.json is this, as JSON)."""

    run_id: str
    imported: Imported | None
    meta: MetaEvaluation


def method_subject(method: str, scale: str) -> str:
    return method if scale == "binary" else f"{method} [1-4]"


def _label_store(folder: Path) -> LabelStore:
    try:
        return LabelStore(folder)
    except UnsafeStoreFile as e:
        raise UserError(
            f"proctor metaeval: refused to open the labels of '{folder}': {e}. Put the labels database "
            f"itself in the run folder (not a link to it), or remove it to start anew."
        ) from None


def _run_folder(run_dir: Path) -> Path:
    if not run_dir.is_dir():
        raise UserError(
            f"proctor metaeval: '{run_dir}' is not a folder. Give a run folder that `proctor run` wrote, "
            "e.g. runs/<run_id> (`proctor view` lists them)."
        )
    if not is_run_folder(run_dir):
        raise UserError(
            f"proctor metaeval: '{run_dir}' has no {RUN_FILE}, so it is not a run folder. Give the folder "
            "of one run (runs/<run_id>), not the folder that holds the runs."
        )
    return run_dir


def _read_labels(path: Path, annotator: str | None) -> list[LabelIn]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(
            f"proctor metaeval: --labels '{path}' does not exist. Give a JSONL file with one label per "
            f"line, e.g. {LABEL_LINE} (the viewer's labels.jsonl export has this form)."
        ) from None
    except UnicodeDecodeError:
        raise UserError(
            f"proctor metaeval: --labels '{path}' is not UTF-8 text. Save it as UTF-8 JSONL, one label "
            f"per line, e.g. {LABEL_LINE}."
        ) from None
    except OSError as e:
        raise UserError(
            f"proctor metaeval: cannot read --labels '{path}' ({e.strerror or e}). Check the path and "
            "its permissions."
        ) from None
    try:
        return parse_lines(text, annotator or "imported")
    except LabelFileError as e:
        raise UserError(
            f"proctor metaeval: --labels '{path}', {e}. Fix that line: each line is an object like "
            f"{LABEL_LINE} (labels: correct, incorrect, unsure, or 1-4 for conversation rounds); nothing "
            "was imported."
        ) from None


def _metric_rows(meta: MetaEvaluation) -> list[MetricRecord]:
    out: list[MetricRecord] = []
    common = {"annotator": meta.annotator}
    for m in meta.methods:
        ag, subject = m.agreement, method_subject(m.method, m.scale)
        out.append(
            MetricRecord(
                name="metaeval.accuracy", subject=subject, value=ag.accuracy, n=ag.n,
                data={**common, "scale": m.scale},
            )
        )  # fmt: skip
        out.append(
            MetricRecord(
                name="metaeval.kappa",
                subject=subject,
                value=ag.kappa,
                lo=ag.kappa_lo,
                hi=ag.kappa_hi,
                n=ag.n,
                data={**common, "scale": m.scale, "categories": ag.categories, "confusion": ag.confusion},
            )
        )
        if m.correlation is not None:
            c = m.correlation
            out.append(
                MetricRecord(
                    name="metaeval.spearman", subject=subject, value=c.rho, n=c.n, data={**common, "p": c.p}
                )
            )
    for g in meta.groups:
        subject, ga = f"annotators:{g.scale}", g.agreement
        data = {"annotators": ga.annotators, "labels": ga.labels}
        for name, value in (
            ("metaeval.fleiss_kappa", ga.fleiss_kappa),
            ("metaeval.krippendorff_alpha", ga.krippendorff_alpha),
        ):
            out.append(MetricRecord(name=name, subject=subject, value=value, n=ga.items, data=data))
    for p in meta.pairs:
        ag = p.agreement
        out.append(
            MetricRecord(
                name="metaeval.pair_kappa",
                subject=f"{p.a}|{p.b}:{p.scale}",
                value=ag.kappa,
                lo=ag.kappa_lo,
                hi=ag.kappa_hi,
                n=ag.n,
                data={"accuracy": ag.accuracy},
            )
        )
    return out


def run_metaeval(
    run_dir: Path,
    *,
    annotator: str | None = None,
    labels_file: Path | None = None,
    report: bool = True,
) -> MetaEvalResult:
    """Import `labels_file` (if given), meta-evaluate against `annotator`'s labels (or each item's latest
    label by anyone), write metaeval.json and the `metaeval.*` metrics, and re-render report.html when the
    run has one and `report` is set."""
    folder = _run_folder(Path(run_dir))
    annotator = (annotator or "").strip() or None
    imported = None
    try:
        record = RunRecord(folder)
    except StoreError as e:
        raise UserError(
            f"proctor metaeval: cannot read '{folder / RUN_FILE}' ({e}). Is the run still being created? "
            "Wait for it to finish, or give another run folder."
        ) from None
    if labels_file is not None:
        parsed = resolve_item_ids(record, _read_labels(Path(labels_file), annotator))
        with _label_store(folder) as labels:
            added, skipped = labels.import_labels(parsed)
        imported = Imported(str(labels_file), added, skipped)
    try:
        with _label_store(folder) as labels:
            known = labels.annotators()
            if not known:
                raise UserError(
                    f"proctor metaeval: '{folder}' has no human labels yet. Label items in `proctor view`, "
                    "or import a file with --labels FILE.jsonl (one label per line, e.g. "
                    f"{LABEL_LINE})."
                )
            if annotator is not None and annotator not in known:
                raise UserError(
                    f"proctor metaeval: no labels by annotator '{annotator}' in '{folder}'. Annotators "
                    f"with labels: {', '.join(known)}; leave out --annotator to use each item's latest label."
                )
            meta = meta_evaluate(record, labels, annotator)
    finally:
        record.close()
    result = MetaEvalResult(folder.name, imported, meta)
    text = json.dumps(asdict(result), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    tmp = folder / f".{METAEVAL_FILE}.tmp"
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(folder / METAEVAL_FILE)
    replace_metrics(folder, METRIC_PREFIX, _metric_rows(meta))
    if report and (folder / "report.html").is_file():
        from proctor.kit.record import load_run
        from proctor.report import write_report

        with load_run(folder) as run:
            write_report(run, folder / "report.html")
    return result
