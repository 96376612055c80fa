"""`proctor` console script."""

from __future__ import annotations

import asyncio
import sys
from importlib import resources
from pathlib import Path

import typer
import yaml
from rich.console import Console
from rich.table import Table

from proctor.errors import UserError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Measure what a model knows about your documents.",
)
models_app = typer.Typer(no_args_is_help=True, help="Check the models a config names.")
app.add_typer(models_app, name="models")
err = Console(stderr=True)
out = Console()


@app.command()
def run(
    config: Path = typer.Argument(..., help="YAML run config"),
    out_dir: Path = typer.Option(Path("runs"), "--out", help="folder that holds run directories"),
    resume: bool = typer.Option(False, "--resume", help="continue the latest unfinished run of this config"),
    quiet: bool = typer.Option(False, "--quiet", help="no progress bars"),
) -> None:
    """Run an evaluation; writes runs/<run_id>/ with run.sqlite, results.json, report.html."""
    from proctor.runner import run_config

    result = run_config(config, out=out_dir, resume=resume, show_progress=not quiet)
    _print_summary(result.summary)
    out.print(f"[bold green]Done.[/] Results in {result.run_dir}/ — report: {result.run_dir / 'report.html'}")


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
def demo(
    out_dir: Path = typer.Option(Path("runs"), "--out", help="folder that holds run directories"),
    questions: int = typer.Option(6, help="number of questions to generate"),
    quiet: bool = typer.Option(False, "--quiet"),
) -> None:
    """Run the shipped protocols on the fictional sample corpus with the embedded models, offline."""
    from proctor.config import RunConfig
    from proctor.runner import run_config

    data = resources.files("proctor") / "data"
    raw = yaml.safe_load((data / "demo" / "qa.yaml").read_text(encoding="utf-8"))
    raw["corpus"]["path"] = str(data / "sample_corpus")
    raw["qa"]["num_questions"] = questions
    result = run_config(RunConfig.model_validate(raw), out=out_dir, show_progress=not quiet)
    _print_summary(result.summary)
    out.print(f"[bold green]Demo done.[/] Open {result.run_dir / 'report.html'}")


def _print_summary(summary: dict) -> None:
    cands = summary.get("candidates") or {}
    if not cands:
        return
    t = Table("candidate", "answered", "acc (judge w/ ref)", "acc (judge w/o ref)", "F1")
    for name, r in cands.items():

        def acc(key: str, r: dict = r) -> str:
            a = r.get(key) or {}
            if a.get("value") is None:
                return "—"
            return f"{a['value']:.2f} [{a['lo']:.2f}, {a['hi']:.2f}] n={a['n']}"

        f1v = (r.get("f1") or {}).get("value")
        t.add_row(
            name,
            f"{r['answered']}/{r['questions']}",
            acc("accuracy_with_reference"),
            acc("accuracy_without_reference"),
            "—" if f1v is None else f"{f1v:.2f}",
        )
    out.print(t)
    q = summary.get("questions") or {}
    if q and q.get("kept", 1) == 0:
        err.print("[bold yellow]Warning:[/] no question survived generation and filtering; see the report.")


def main() -> None:
    # Click handles usage errors itself (exit 2); a UserError from any command becomes one paragraph.
    try:
        app()
    except UserError as e:
        err.print("[bold red]Error:[/] ", end="")
        err.print(str(e), markup=False, highlight=False, soft_wrap=True)
        sys.exit(2)
    except KeyboardInterrupt:
        err.print("Interrupted. Resume with --resume.")
        sys.exit(130)


if __name__ == "__main__":
    main()
