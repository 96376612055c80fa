"""`proctor` console script."""

from __future__ import annotations

import asyncio
import sys
from enum import StrEnum
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

import typer
import yaml
from rich.console import Console
from rich.table import Column, Table

from proctor.errors import Terminated, UserError
from proctor.export_format import ExportFormat

if TYPE_CHECKING:
    from proctor.config import RunConfig
    from proctor.dry_run import DryRun

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Measure what a model knows about your documents.",
)


def _version(value: bool) -> None:
    if value:
        from proctor import __version__

        out.print(f"proctor {__version__}", highlight=False)
        raise typer.Exit()


@app.callback()
def _main(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="print proctor's version and exit"
    ),
) -> None:
    """Measure what a model knows about your documents."""


models_app = typer.Typer(no_args_is_help=True, help="Check the models a config names.")
app.add_typer(models_app, name="models")
# Off a terminal (CI logs, `| tee`, nohup) rich would wrap tables at 80 columns; there, lines are as long
# as their content needs.
err = Console(stderr=True, width=None if sys.stderr.isatty() else 200)
out = Console(width=None if sys.stdout.isatty() else 200)


FAIL_UNDER_HELP = (
    "gate: exit 1 when METRIC (or METRIC[SUBJECT]) is below VALUE, e.g. acc=0.8 (repeatable; see "
    "docs/ci-gating.md)"
)
GATE_ON_HELP = "compare gates on the interval's lower bound (the default) or on the point value"
DRY_RUN_HELP = (
    "read the corpus and plan the run: print per step and role the model calls with a bound of their "
    "tokens and cost; no model is asked"
)
LIMIT_HELP = (
    "every step runs at most its first N units (questions written, answers, judgments, ...); later steps "
    "work on what the limited ones produced"
)
SET_HELP = "override a config field, e.g. --set qa.num_questions=5 (VALUE is YAML; repeatable)"


class GateOn(StrEnum):
    lower_bound = "lower"
    point = "value"


@app.command()
def run(
    config: Path = typer.Argument(..., help="YAML run config"),
    out_dir: Path = typer.Option(Path("runs"), "--out", help="folder that holds run directories"),
    resume: bool = typer.Option(False, "--resume", help="continue the latest unfinished run of this config"),
    quiet: bool = typer.Option(False, "--quiet", help="no progress bars"),
    fail_under: list[str] = typer.Option([], "--fail-under", metavar="METRIC=VALUE", help=FAIL_UNDER_HELP),
    gate_on: GateOn | None = typer.Option(None, "--gate-on", help=GATE_ON_HELP),
    dry_run: bool = typer.Option(False, "--dry-run", help=DRY_RUN_HELP),
    limit: int | None = typer.Option(None, "--limit", min=1, metavar="N", help=LIMIT_HELP),
    sets: list[str] = typer.Option([], "--set", metavar="KEY=VALUE", help=SET_HELP),
) -> None:
    """Run an evaluation; writes runs/<run_id>/ with run.sqlite, results.json, report.html.

    With gates (`--fail-under` or the config's `gates:`) it exits 1 when one fails, after the run."""
    from proctor.config import load_config
    from proctor.gates import parse_gate
    from proctor.runner import run_config

    cfg = load_config(config, overrides=sets)
    if dry_run:
        _print_plan(cfg, limit)
        return
    for spec in fail_under:  # a mistyped gate is an error before the run, not after it
        parse_gate(spec)
    result = run_config(cfg, out=out_dir, resume=resume, show_progress=not quiet, limit=limit)
    _print_summary(result.summary)
    out.print(f"[bold green]Done.[/] Results in {result.run_dir}/ — report: {result.run_dir / 'report.html'}")
    _gate(result.run_dir, fail_under, gate_on, required=False)


def _print_plan(cfg: RunConfig, limit: int | None) -> None:
    """The dry run's tables and notes: the run's, or each member's of a suite."""
    from proctor.dry_run import plan_runs

    runs = plan_runs(cfg, limit=limit)
    for planned in runs:
        if len(runs) > 1:
            out.print(f"[bold]Member {planned.label}[/] of {cfg.run_name}:", highlight=False)
        if planned.plan is None:
            out.print(
                f"not planned: it reads the run folder of member {planned.after}, which exists once that "
                "member has run.",
                markup=False,
                highlight=False,
            )
            continue
        _print_one_plan(planned.plan)


def _print_one_plan(plan: DryRun) -> None:
    t = Table(
        *(Column(c, justify="right" if i >= 5 or i == 2 else "left") for i, c in enumerate(plan.columns))
    )
    for row in plan.rows():
        t.add_row(*row)
    total = plan.totals
    t.add_row(
        "total", "", "", "", "", str(total.calls), str(total.cached), f"{total.prompt_tokens:,}",
        f"{total.completion_tokens:,}", f"${total.cost_usd:.4f}", style="bold",
    )  # fmt: skip
    out.print(f"[bold]Dry run[/] of {plan.config.run_name} ({plan.config.protocol}):", highlight=False)
    out.print(t)
    for note in plan.notes():
        out.print(note, markup=False, highlight=False)


def _gate(run_dir: Path, fail_under: list[str], gate_on: GateOn | None, *, required: bool) -> None:
    """Check the run's gates (its config's `gates:` and `--fail-under`); exit 1 when one fails."""
    from proctor.gates import check_gates, run_gates
    from proctor.kit.record import load_run

    with load_run(run_dir) as record:
        gates = run_gates(record.config.gates, fail_under, gate_on.value if gate_on else None)
        if not gates:
            if required:
                raise UserError(
                    f"gate: no gates for {run_dir} — give --fail-under METRIC=VALUE (e.g. acc=0.8) or a "
                    "`gates:` section in the run's config."
                )
            return
        checks = check_gates(record, gates)
    failed = [c for c in checks if not c.passed]
    for c in checks:
        if c.passed:
            out.print(c.explain(), markup=False, highlight=False, soft_wrap=True)
    for c in failed:
        err.print(c.explain(), markup=False, highlight=False, soft_wrap=True, style="bold red")
    if failed:
        err.print(f"{len(failed)} of {len(checks)} gate check(s) failed.", highlight=False)
        raise typer.Exit(1)
    out.print(f"[bold green]All {len(checks)} gate check(s) passed.[/]", highlight=False)


@app.command()
def gate(
    run_dir: Path = typer.Argument(..., help="a run folder (runs/<run_id>)"),
    fail_under: list[str] = typer.Option([], "--fail-under", metavar="METRIC=VALUE", help=FAIL_UNDER_HELP),
    gate_on: GateOn | None = typer.Option(None, "--gate-on", help=GATE_ON_HELP),
) -> None:
    """Check gates on a finished run: exit 1 when a gate fails, 0 when all pass.

    The gates are the run config's `gates:` section and every `--fail-under`."""
    from proctor.gates import parse_gate

    for spec in fail_under:
        parse_gate(spec)
    _gate(run_dir, fail_under, gate_on, required=True)


@app.command("compare")
def compare_runs(
    run_a: Path = typer.Argument(..., help="the baseline run folder"),
    run_b: Path = typer.Argument(..., help="the run folder to compare with it"),
    fail_on_regression: bool = typer.Option(
        False, "--fail-on-regression", help="exit 1 when run B is significantly below run A anywhere"
    ),
    alpha: float = typer.Option(0.05, "--alpha", help="significance level of the paired test"),
) -> None:
    """Compare two runs of one protocol item by item: per candidate (and judge; for a suite per candidate
    and topic of the knowledge map) the paired difference B - A and McNemar's exact test."""
    from proctor.gates import regressions

    report = regressions(run_a, run_b, alpha=alpha)
    t = Table(
        "candidate",
        *(["topic"] if report.protocol == "suite" else []),
        "measure",
        Column("n", justify="right"),
        Column("A", justify="right"),
        Column("B", justify="right"),
        Column("B - A [95%]", justify="right"),
        Column("lost/gained", justify="right"),
        Column("p", justify="right"),
        "",
        title=f"{report.run_b} against {report.run_a}",
    )
    for r in report.rows:
        d = r.delta
        t.add_row(
            r.candidate,
            *([r.topic or ""] if report.protocol == "suite" else []),
            r.measure,
            str(d.n),
            f"{d.a:.3f}",
            f"{d.b:.3f}",
            f"{d.delta:+.3f} [{d.lo:+.3f}, {d.hi:+.3f}]",
            f"{d.lost}/{d.gained}",
            f"{d.p_mcnemar:.3g}",
            "regressed" if r.regressed else "",
        )
    out.print(t)
    out.print(
        f"{report.matched} paired outcome(s); {report.only_a} only in A, {report.only_b} only in B.",
        highlight=False,
    )
    for note in report.notes:
        err.print(f"[bold yellow]Note:[/] {note}", highlight=False)
    found = report.regressions
    if not found:
        out.print(f"No significant drop (alpha {alpha:g}).", highlight=False)
        return
    head = "Regression" if fail_on_regression else "Significant drop"
    for r in found:
        err.print(f"[bold red]{head}:[/] ", end="")
        err.print(r.explain(alpha), markup=False, highlight=False, soft_wrap=True)
    if fail_on_regression:
        raise typer.Exit(1)


@app.command()
def judge(
    answers: Path | None = typer.Argument(
        None, help="JSONL/CSV/Parquet file: question, reference, answer, optional id and label per record"
    ),
    config: Path | None = typer.Option(None, "--config", help="a YAML config with `protocol: judge`"),
    labels: Path | None = typer.Option(None, "--labels", help="a file of human labels (id, label)"),
    fields: list[str] = typer.Option(
        [], "--field", metavar="NAME=COLUMN", help="where a field is: question, reference, answer, id, label"
    ),
    model: str | None = typer.Option(
        None, "--model", help="judge model spec (default: the embedded local/qwen2.5-coder-1.5b)"
    ),
    kappa_warning: float | None = typer.Option(
        None, "--kappa-warning", help="warn when Cohen's kappa against the labels is below this (0.6)"
    ),
    out_dir: Path = typer.Option(Path("runs"), "--out", help="folder that holds run directories"),
    resume: bool = typer.Option(False, "--resume", help="continue the latest run of this file and flags"),
    quiet: bool = typer.Option(False, "--quiet", help="no progress bars"),
) -> None:
    """Grade an answers file against its references: verdict, P(correct), deciding method and reason per
    row (verdicts.csv); with labels, the judge card (accuracy, kappa, false "correct", rule precision)."""
    from proctor.protocols.judge.command import judge_config
    from proctor.runner import run_config

    cfg = judge_config(
        answers, config=config, labels=labels, fields=fields, model=model, kappa_warning=kappa_warning
    )
    result = run_config(cfg, out=out_dir, resume=resume, show_progress=not quiet)
    _print_summary(result.summary)
    out.print(
        f"[bold green]Done.[/] Verdicts in {result.run_dir / 'verdicts.csv'} — report: "
        f"{result.run_dir / 'report.html'}"
    )


@app.command()
def ingest(
    path: Path = typer.Argument(..., help="file or folder of documents"),
    text_field: str = typer.Option("text", help="text field for .jsonl/.json/.csv"),
    min_chunk_chars: int = typer.Option(200),
    max_chunk_chars: int = typer.Option(1200),
) -> None:
    """Load and chunk a corpus; report what was read and what was skipped, and why."""
    from proctor.corpus import load_corpus
    from proctor.corpus.config import CorpusConfig

    corpus = load_corpus(
        CorpusConfig(
            path=str(path),
            text_field=text_field,
            min_chunk_chars=min_chunk_chars,
            max_chunk_chars=max_chunk_chars,
        )
    )
    for line in corpus.report.summary_lines():
        out.print(line, markup=False, highlight=False)
    out.print(f"fingerprint {corpus.fingerprint[:16]}")


@models_app.command("check")
def models_check(config: Path = typer.Argument(..., help="YAML run config")) -> None:
    """Reach each configured model once with a tiny request."""
    from proctor.config import load_config
    from proctor.runner import build_models, check_servers

    cfg = load_config(config)
    models = build_models(cfg)
    asyncio.run(check_servers(cfg))

    async def probe() -> list[tuple[str, str, str]]:
        rows = []
        for name, model in models.items():
            try:
                c = await model.generate(
                    [{"role": "user", "content": "Reply with the word: ok"}], max_tokens=4
                )
                rows.append((name, model.spec, f"ok ({c.latency_s:.2f}s{', cached' if c.cached else ''})"))
            except Exception as e:
                rows.append((name, model.spec, f"FAILED: {e}"))
            await model.aclose()
        return rows

    rows = asyncio.run(probe())
    t = Table("model", "spec", "status")
    for r in rows:
        t.add_row(*r)
    out.print(t)
    if any(r[2].startswith("FAILED") for r in rows):
        raise UserError(
            f"{config}: some models could not be reached (see the table above). Fix their settings."
        )


@app.command()
def options(protocol: str = typer.Argument(..., help="a protocol name, e.g. exam")) -> None:
    """List the options of a protocol's config section (the YAML section named after it)."""
    from rich.markup import escape

    from proctor.cli.options import option_rows, prose
    from proctor.kit.registry import get_protocol, protocol_names

    if protocol not in protocol_names():
        raise UserError(
            f"options: unknown protocol '{protocol}'; choose one of {', '.join(protocol_names())}."
        )
    declared = get_protocol(protocol)
    cls = declared.settings
    out.print(f"[bold]{protocol}:[/] {prose(cls.__doc__ or '')}", highlight=False)
    out.print("\n[bold]roles[/]  which model (a key of `models`) plays each role", highlight=False)
    for role in declared.roles:
        need = "required" if role.required else "optional"
        out.print(f"  [cyan]roles.{role.name}[/]: {need}", highlight=False)
        out.print(f"      {role.description}", highlight=False, markup=False)
    out.print(f"\n[bold]{protocol}[/]  the `{protocol}:` section", highlight=False)
    rows = option_rows(cls, prefix=f"{protocol}.")
    for name, kind, default, what in rows:
        # Names, types and defaults hold brackets (`members[i]`, `list[str]`): escaped, not read as markup.
        if kind == "section":
            out.print(f"\n[bold]{escape(name)}[/]  {escape(what)}", highlight=False)
            continue
        value = f" = {default}" if default else ""
        out.print(f"  [cyan]{escape(name)}[/]: {escape(kind + value)}", highlight=False, markup=True)
        if what:
            out.print(f"      {what}", highlight=False, markup=False)
    if any(kind.startswith("path") or " path" in kind for _, kind, _, _ in rows):
        out.print("\npath: a file or folder; a relative path is relative to the config file's folder.")


# `proctor demo` runs these, in this order: what proctor is for in under 10 minutes on 2 cores.
QUICK_DEMOS = ("qa", "exam")


@app.command()
def demo(
    out_dir: Path = typer.Option(Path("runs"), "--out", help="folder that holds run directories"),
    all_demos: bool = typer.Option(False, "--all", help="run every protocol's full demo (about 40 minutes)"),
    only: str = typer.Option(
        "",
        "--only",
        help="comma-separated demos to run: a protocol's name, or a named demo (rageval-hotpotqa)",
    ),
    quiet: bool = typer.Option(False, "--quiet"),
    dry_run: bool = typer.Option(False, "--dry-run", help=DRY_RUN_HELP),
) -> None:
    """Run shipped demos on the fictional sample corpus with the embedded models, offline.

    Without options: the qa demo (closed-book vs RAG, judged with the reference) and a small exam with
    its IRT table. `--all` runs every protocol's demo; `--only kieval,reckon` the ones named, which may also
    be a protocol's extra named demos (`--only rageval-hotpotqa`: real HotpotQA questions)."""
    from proctor.config import RunConfig
    from proctor.config_paths import config_dir
    from proctor.kit.registry import get_protocol, protocol_names
    from proctor.runner import run_config

    data = resources.files("proctor") / "data"
    full = {n: p for n in protocol_names() if (p := get_protocol(n).demo_config) is not None}
    demos = {k: p for n in protocol_names() for k, p in get_protocol(n).named_demos.items()}
    wanted = [w.strip() for w in only.split(",") if w.strip()]
    if set(wanted) - set(demos):
        raise UserError(
            f"--only: no demo for {', '.join(sorted(set(wanted) - set(demos)))}; "
            f"demos: {', '.join(sorted(demos))}."
        )
    if wanted or all_demos:
        # --all: every protocol's full demo; the extra named demos only when asked for by name.
        configs = [demos[n] for n in wanted] if wanted else [full[n] for n in sorted(full)]
    else:
        configs = [p for n in QUICK_DEMOS if (p := get_protocol(n).quick_demo_config) is not None]
    reports = []
    for path in configs:
        text = path.read_text(encoding="utf-8").replace("${PROCTOR_DATA}", str(data))
        out.print(f"[bold]Demo: {path.parent.name}{path.stem.removeprefix('demo').replace('_', ' ')}[/]")
        with config_dir(path.parent):  # the demo's own files (seed questions, labels) sit beside it
            cfg = RunConfig.model_validate(yaml.safe_load(text))
        if dry_run:
            _print_plan(cfg, None)
            continue
        result = run_config(cfg, out=out_dir, show_progress=not quiet)
        _print_summary(result.summary)
        reports.append(result.run_dir / "report.html")
    for report in reports:
        out.print(f"[bold green]Demo report:[/] {report}")


@app.command()
def view(
    runs_dir: Path = typer.Argument(Path("runs"), help="folder that holds run directories"),
    host: str = typer.Option(
        "127.0.0.1", "--host", help="address to listen on; other than loopback it needs --token"
    ),
    port: int = typer.Option(8765, "--port", help="port to listen on (0: any free port)"),
    token: str | None = typer.Option(
        None,
        "--token",
        envvar="PROCTOR_VIEW_TOKEN",
        help="access token every request must carry (required off loopback; at least 16 characters)",
    ),
    no_open: bool = typer.Option(False, "--no-open", help="do not open a browser"),
) -> None:
    """Local web app: browse runs, items and model calls; label items; meta-evaluate judges; compare runs."""
    from proctor.viewer import serve

    def announce(url: str) -> None:
        out.print(f"proctor view: {url}  (Ctrl-C to stop)", highlight=False, markup=False)

    serve(runs_dir, host=host, port=port, token=token, open_browser=not no_open, announce=announce)


@app.command()
def export(
    run_dir: Path = typer.Argument(..., help="a run folder (runs/<run_id>)"),
    fmt: ExportFormat = typer.Option(
        ..., "--format", help="inspect: an inspect_ai eval log (.eval or .json); jsonl: one line per answer"
    ),
    out_path: Path | None = typer.Option(
        None,
        "--out",
        help="file to write (default: RUN_DIR/inspect/<run_id>.eval or RUN_DIR/transcripts.jsonl)",
    ),
) -> None:
    """Export a run's candidate answers with their judgments and model calls (prompts and replies) for
    other tools: an inspect_ai eval log that `inspect view` shows, or JSONL (see docs/export.md)."""
    from proctor.kit.export import export_run

    done = export_run(run_dir, fmt, out_path)
    out.print(f"Exported {done.samples} sample(s) to {done.path}", markup=False, highlight=False)
    if fmt is ExportFormat.inspect:
        out.print(f"View it with: inspect view --log-dir {done.path.parent}", markup=False, highlight=False)


@app.command()
def metaeval(
    run_dir: Path = typer.Argument(..., help="a run folder (runs/<run_id>)"),
    annotator: str | None = typer.Option(
        None, "--annotator", help="compare with this annotator's labels (default: each item's latest label)"
    ),
    labels: Path | None = typer.Option(
        None, "--labels", help="JSONL file of labels to import into the run's labels.sqlite first"
    ),
    no_report: bool = typer.Option(False, "--no-report", help="do not write report.html again"),
) -> None:
    """Meta-evaluate a run's judges against human labels: accuracy, Cohen's kappa, confusion, Spearman;
    agreement among annotators. Writes RUN_DIR/metaeval.json and the run's metaeval.* metrics."""
    from proctor.viewer.metaeval_run import METAEVAL_FILE, method_subject, run_metaeval

    result = run_metaeval(run_dir, annotator=annotator, labels_file=labels, report=not no_report)
    meta = result.meta
    if result.imported is not None:
        imp = result.imported
        out.print(
            f"Imported {imp.added} label(s) from {imp.path} ({imp.skipped} already there).", markup=False
        )
    who = f"annotator {meta.annotator}" if meta.annotator else "each item's latest label"
    out.print(
        f"{meta.labels} labelled item(s), {who}; {meta.unsure} unsure (left out).",
        markup=False,
        highlight=False,
    )
    if meta.unmatched:
        err.print(
            f"[bold yellow]Warning:[/] {meta.unmatched} label(s) name items this run does not have "
            "(labels of another run, or item ids mistyped); they are left out.",
        )
    if meta.methods:
        t = Table(
            "method",
            Column("n", justify="right"),
            Column("accuracy", justify="right"),
            Column("kappa [95% interval]", justify="right"),
            Column("Spearman", justify="right"),
            "confusion (rows: human; columns: method)",
            title=f"Meta-evaluation of {result.run_id}",
        )
        for m in meta.methods:
            ag = m.agreement
            interval = f" [{_f(ag.kappa_lo)}, {_f(ag.kappa_hi)}]" if ag.kappa_lo is not None else ""
            rho = m.correlation.rho if m.correlation is not None else None
            confusion = "  ".join(
                f"{cat}: {' '.join(str(v) for v in row)}"
                for cat, row in zip(ag.categories, ag.confusion, strict=True)
            )
            t.add_row(
                method_subject(m.method, m.scale),
                str(ag.n),
                _f(ag.accuracy),
                _f(ag.kappa) + interval,
                _f(rho),
                confusion,
            )
        out.print(t)
    else:
        out.print("No labelled item has an automatic judgment.", markup=False)
    if meta.groups:
        g = Table(
            "annotators",
            Column("items (>=2 labels)", justify="right"),
            Column("Fleiss' kappa", justify="right"),
            Column("Krippendorff's alpha", justify="right"),
            title="Agreement among annotators",
        )
        for grp in meta.groups:
            ga = grp.agreement
            g.add_row(
                f"{ga.annotators} ({grp.scale})",
                str(ga.items),
                _f(ga.fleiss_kappa),
                _f(ga.krippendorff_alpha),
            )
        out.print(g)
    out.print(
        f"Written: {Path(run_dir) / METAEVAL_FILE} and the run's metaeval.* metrics.",
        markup=False,
        highlight=False,
    )


def _f(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def _print_summary(summary: dict) -> None:
    """Print the protocol's headline table: `summary["table"]` is a list of rows (column -> text)."""
    rows = summary.get("table") or []
    if rows:
        t = Table(*(Column(k, overflow="fold") for k in rows[0]))
        for r in rows:
            t.add_row(*(str(v) for v in r.values()))
        out.print(t)
    for warning in summary.get("warnings") or []:
        err.print(f"[bold yellow]Warning:[/] {warning}")


def main() -> None:
    # Click handles usage errors itself (exit 2); a UserError from any command becomes one paragraph.
    try:
        app()
    except UserError as e:
        err.print("[bold red]Error:[/] ", end="")
        err.print(str(e), markup=False, highlight=False, soft_wrap=True)
        sys.exit(2)
    except Terminated as e:
        err.print(f"Interrupted ({e.signal_name}). Resume with --resume.")
        sys.exit(143)
    except KeyboardInterrupt:
        err.print("Interrupted. Resume with --resume.")
        sys.exit(130)


if __name__ == "__main__":
    main()
