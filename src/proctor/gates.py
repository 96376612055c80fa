"""Pass/fail gates on a finished run, and regressions between two runs — what a CI job fails on.

A **gate** is `metric=threshold`, optionally for one subject: `accuracy.llm_with_reference=0.8`,
`acc=0.8` (the alias `acc` names each protocol's headline accuracy, see `ACC`),
`accuracy[rag-bm25]=0.7`, `mastery.combined[alice @ t1]=0.5`. It is checked on every subject that has
the metric (or on the subjects the selector names) and fails when the lower bound of the metric's 95 %
interval — or, with `on="value"`, its point value — is below the threshold. A metric without an interval
(a plain number) is compared on its value; one without a value (nothing was measured) fails. Gates read
the run's metrics table (`run.metrics()`), nothing else.

A **regression** is a significant drop from run A (the baseline) to run B: items are paired across the
runs and tested with the viewer's paired comparison (`proctor.viewer.compare`: McNemar's exact test,
bootstrap interval of the difference). Per candidate and judge for a run of one protocol; for a suite,
per candidate over all its items and per candidate and topic of the knowledge map (the cells of
`mastery.combined`), pooled over the members like the map is. A drop is flagged when B is below A and the
p-value is below `alpha`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np

from proctor.config import GateConfig
from proctor.errors import UserError
from proctor.kit.record import Run, load_run
from proctor.store.record import MetricRecord
from proctor.viewer.compare import PairedDelta, compare, match_key, paired_delta

if TYPE_CHECKING:
    from proctor.protocols.suite.result import MemberRuns

GateOn = Literal["lower", "value"]
RUN_SUBJECT = "run"

# `acc`: the headline accuracy of each protocol (the one alias; any metric can be named in full).
ACC: dict[str, str] = {
    "qa": "accuracy.llm_with_reference",
    "exam": "accuracy",
    "reckon": "accuracy.reckon",
    "kieval": "kieval.accuracy",
    "interview": "interview.acc1",
    "rageval": "rageval.equivalent",
    "suite": "mastery.combined",
}
ALIASES: dict[str, dict[str, str]] = {"acc": ACC}

_SPEC = re.compile(r"^\s*(?P<metric>[^\[\]=\s]+)\s*(?:\[(?P<subject>[^\]]*)\])?\s*=\s*(?P<min>\S+)\s*$")


@dataclass(frozen=True)
class Gate:
    metric: str  # as written: a metric name or an alias
    min: float
    subject: str | None = None
    on: GateOn = "lower"

    @property
    def text(self) -> str:
        where = f"[{self.subject}]" if self.subject is not None else ""
        return f"{self.metric}{where}={self.min:g}"

    @classmethod
    def from_config(cls, g: GateConfig) -> Gate:
        return cls(g.metric, g.min, g.subject, g.on)


def parse_gate(spec: str, *, on: GateOn = "lower") -> Gate:
    """`METRIC=VALUE` or `METRIC[SUBJECT]=VALUE` (a UserError naming the form when it is neither)."""
    m = _SPEC.match(spec)
    value = None
    if m is not None:
        try:
            value = float(m["min"])
        except ValueError:
            value = None
    if m is None or value is None or not math.isfinite(value):
        raise UserError(
            f"--fail-under '{spec}': write METRIC=VALUE or METRIC[SUBJECT]=VALUE with a number as VALUE, "
            "e.g. --fail-under acc=0.8 or --fail-under 'accuracy.llm_with_reference[rag]=0.7'."
        )
    subject = m["subject"].strip() if m["subject"] is not None else None
    return Gate(m["metric"], value, subject or None, on)


def run_gates(config_gates: Iterable[GateConfig], cli: Iterable[str], on: str | None = None) -> list[Gate]:
    """The gates of a run: the config's `gates:` then the command line's `--fail-under`. `on` (the
    `--gate-on` option: `lower` or `value`) overrides every gate's comparison when given; command-line
    gates use the lower bound by default."""
    gates = [Gate.from_config(g) for g in config_gates] + [parse_gate(s) for s in cli]
    if on is None:
        return gates
    if on not in ("lower", "value"):
        raise UserError(f"--gate-on {on}: choose lower (the interval's lower bound) or value.")
    how: GateOn = "lower" if on == "lower" else "value"
    return [Gate(g.metric, g.min, g.subject, how) for g in gates]


@dataclass(frozen=True)
class GateCheck:
    """One gate on one subject."""

    gate: Gate
    metric: str  # the metric's name (the alias resolved)
    record: MetricRecord
    passed: bool

    @property
    def compared(self) -> float | None:
        r = self.record
        return r.lo if self.gate.on == "lower" and r.lo is not None else r.value

    def explain(self) -> str:
        """One paragraph: metric, subject, value with its interval, n, what was compared to what."""
        r, g = self.record, self.gate
        name = self.metric if g.metric == self.metric else f"{self.metric} (`{g.metric}`)"
        whose = "of the run" if r.subject == RUN_SUBJECT else f"of '{r.subject}'"
        head = f"Gate {g.text} {'passed' if self.passed else 'failed'}: {name} {whose}"
        if r.value is None:
            return f"{head} has no value (n={r.n or 0}: nothing was measured), so it cannot reach {g.min:g}."
        shown = f"{head} is {_num(r.value)}"
        if r.lo is not None and r.hi is not None:
            shown += f" [95% interval {_num(r.lo)}, {_num(r.hi)}]"
        shown += f" (n={r.n})" if r.n is not None else ""
        if g.on == "lower" and r.lo is not None:
            what = f"the lower bound of its interval, {_num(r.lo)},"
        elif g.on == "lower":
            what = f"it has no interval, so its value {_num(r.value)}"
        else:
            what = f"its value {_num(r.value)}"
        verdict = "is below" if not self.passed else "reaches"
        tail = ""
        if not self.passed and g.on == "lower" and r.lo is not None and r.value >= g.min:
            tail = (
                " The value itself reaches the threshold: the interval is too wide to be sure — more items "
                "narrow it (or gate on the value with --gate-on value / `on: value`)."
            )
        return f"{shown}; {what} {verdict} the threshold {g.min:g}.{tail}"


def _num(x: float) -> str:
    return f"{x:.3f}" if abs(x) < 1000 else f"{x:.4g}"


def resolve_metric(gate: Gate, names: set[str], protocol: str) -> str:
    """The metric a gate names: itself when the run has it, else its alias for this run's protocol; a
    UserError listing the run's metric names otherwise."""
    if gate.metric in names:
        return gate.metric
    alias = ALIASES.get(gate.metric, {}).get(protocol)
    if alias is not None and alias in names:
        return alias
    listed = ", ".join(sorted(names)) or "none (the run stored no metrics; did it finish?)"
    hint = ""
    if gate.metric in ALIASES:
        mapped = ALIASES[gate.metric]
        hint = (
            f" `{gate.metric}` stands for {mapped[protocol]} in a {protocol} run, which this run lacks."
            if protocol in mapped
            else f" `{gate.metric}` has no meaning for a {protocol} run; name a metric."
        )
    raise UserError(
        f"gate {gate.text}: the run has no metric '{gate.metric}'.{hint} Its metrics: {listed}. Name one of "
        "them (optionally with [SUBJECT]), or `acc` for the protocol's headline accuracy."
    )


def subject_matches(selector: str, subject: str) -> bool:
    """A subject selector names a subject exactly, or its leading part: `alice` and `alice @ t1` both
    select `alice @ t1 (lamp lens tower)`."""
    return subject == selector or subject.startswith((f"{selector} @ ", f"{selector} ("))


def check_gates(run: Run, gates: Iterable[Gate]) -> list[GateCheck]:
    """Every gate on every subject it selects (a UserError for a metric or subject the run lacks)."""
    metrics = run.metrics()
    names = {m.name for m in metrics}
    out: list[GateCheck] = []
    for gate in gates:
        metric = resolve_metric(gate, names, run.protocol)
        records = [m for m in metrics if m.name == metric]
        if gate.subject is not None:
            picked = [m for m in records if subject_matches(gate.subject, m.subject)]
            if not picked:
                subjects = ", ".join(f"'{m.subject}'" for m in records)
                raise UserError(
                    f"gate {gate.text}: metric {metric} has no subject '{gate.subject}'. Its subjects: "
                    f"{subjects}. Name one of them (or its leading part), or leave out [SUBJECT] to gate "
                    "every subject."
                )
            records = picked
        for r in records:
            out.append(GateCheck(gate, metric, r, _passes(r, gate)))
    return out


def _passes(r: MetricRecord, gate: Gate) -> bool:
    compared = r.lo if gate.on == "lower" and r.lo is not None else r.value
    return compared is not None and compared >= gate.min


def gate_run(folder: str | Path, gates: Iterable[Gate]) -> list[GateCheck]:
    """Load the run in `folder` and check `gates` on it."""
    with load_run(folder) as run:
        return check_gates(run, list(gates))


# --- regressions between two runs ----------------------------------------------------------------

ALL_TOPICS = "all topics"


@dataclass(frozen=True)
class RegressionRow:
    """One paired comparison: a candidate (and topic, for suites) under one measure."""

    candidate: str
    topic: str | None  # `t2 (cheese curd milk)`, ALL_TOPICS, or None outside a suite
    measure: str  # the judge, or for a suite the map's pooled mastery
    delta: PairedDelta
    regressed: bool

    def explain(self, alpha: float) -> str:
        d = self.delta
        where = f"'{self.candidate}'"
        if self.topic == ALL_TOPICS:
            where += " over all topics"
        elif self.topic is not None:
            where += f" on topic {self.topic}"
        return (
            f"{where} ({self.measure}): {d.a:.3f} in run A, {d.b:.3f} in run B, a change of {d.delta:+.3f} "
            f"[95% interval {d.lo:+.3f}, {d.hi:+.3f}] on {d.n} paired items ({d.lost} lost, {d.gained} "
            f"gained); McNemar's exact p = {d.p_mcnemar:.4g} < alpha {alpha:g}."
        )


@dataclass
class RegressionReport:
    run_a: str
    run_b: str
    protocol: str
    alpha: float
    matched: int  # paired items (per measure)
    only_a: int
    only_b: int
    rows: list[RegressionRow] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def regressions(self) -> list[RegressionRow]:
        return [r for r in self.rows if r.regressed]


def _regressed(d: PairedDelta, alpha: float) -> bool:
    return d.delta < 0 and d.p_mcnemar < alpha


def regressions(folder_a: str | Path, folder_b: str | Path, *, alpha: float = 0.05) -> RegressionReport:
    """Run B against the baseline run A: every paired comparison, the significant drops flagged."""
    if not 0 < alpha < 1:
        raise UserError(f"--alpha {alpha:g}: give a significance level between 0 and 1, e.g. 0.05.")
    with load_run(folder_a) as a, load_run(folder_b) as b:
        if a.protocol != b.protocol:
            raise UserError(
                f"compare: {a.folder} is a {a.protocol} run and {b.folder} a {b.protocol} run; compare two "
                "runs of the same protocol."
            )
        suite = a.protocol == "suite"
        report = _suite_regressions(a, b, alpha) if suite else _run_regressions(a, b, alpha)
    if report.matched == 0:
        raise UserError(
            f"compare: no judged item of {report.run_a} matches one of {report.run_b} ({report.only_a} and "
            f"{report.only_b} judged items); compare runs of the same questions (same corpus, examiner and "
            "seed) and candidates of the same names."
        )
    return report


def _run_regressions(a: Run, b: Run, alpha: float) -> RegressionReport:
    """Per candidate and judge, with the viewer's comparison of judged outcomes; a protocol whose items
    carry their correctness instead of judgments (the exam) per candidate from its per-item evidence."""
    cmp = compare(a.run_id, a, b.run_id, b)
    report = RegressionReport(a.run_id, b.run_id, a.protocol, alpha, cmp.matched, cmp.only_a, cmp.only_b)
    for d in cmp.deltas:
        report.rows.append(RegressionRow(d.candidate, None, d.judge, d, _regressed(d, alpha)))
    if cmp.matched == 0:
        pa, pb = _evidence(a, ""), _evidence(b, "")
        if pa is not None and pb is not None:
            report.rows, report.matched, report.only_a, report.only_b = _paired_rows(pa, pb, None, alpha)
    return report


@dataclass(frozen=True)
class _Judged:
    candidate: str
    chunk_ids: tuple[str, ...]
    correct: bool
    measure: str


def _evidence(run: Run, member: str) -> dict[str, _Judged] | None:
    """The per-item correctness the knowledge map reads from a run (`member_evidence`), keyed so the same
    question of the same candidate matches across runs; None for a protocol without such evidence."""
    from proctor.protocols.suite.evidence import member_evidence

    ev = member_evidence(run)
    if not ev.supported:
        return None
    items = run.items_by_key(e.item for e in ev.items)
    out: dict[str, _Judged] = {}
    for e in ev.items:
        it = items.get(e.item)
        data = it.data if it is not None and isinstance(it.data, dict) else {}
        ref = data.get("question_id") or data.get("unit_id")
        key = match_key(it.kind if it else "", e.candidate, None if ref is None else str(ref), e.item)
        out[f"{member}|{key}"] = _Judged(e.candidate, e.chunk_ids, e.correct, ev.measure)
    return out


def _paired_rows(
    a: dict[str, _Judged],
    b: dict[str, _Judged],
    topics: tuple[dict[str, str], dict[str, str]] | None,
    alpha: float,
) -> tuple[list[RegressionRow], int, int, int]:
    """Rows per candidate (and, with `topics` — chunk id -> topic id, topic id -> label — per candidate
    and topic: an item counts on every topic one of its chunks belongs to, as on the map)."""
    shared = [k for k in a if k in b]
    groups: dict[tuple[str, str | None], list[str]] = {}
    measures: dict[str, set[str]] = {}
    for k in shared:
        cand = a[k].candidate
        measures.setdefault(cand, set()).add(a[k].measure)
        if topics is None:
            groups.setdefault((cand, None), []).append(k)
            continue
        groups.setdefault((cand, ALL_TOPICS), []).append(k)
        topic_of, _ = topics
        for t in sorted({topic_of[c] for c in a[k].chunk_ids if c in topic_of}):
            groups.setdefault((cand, t), []).append(k)
    rows = []
    labels = topics[1] if topics is not None else {}
    for (cand, topic), keys in sorted(groups.items(), key=lambda g: (g[0][0], _topic_order(g[0][1]))):
        va = np.array([a[k].correct for k in keys], dtype=bool)
        vb = np.array([b[k].correct for k in keys], dtype=bool)
        measure = "mastery" if topics is not None else "; ".join(sorted(measures[cand]))
        d = paired_delta(cand, measure, va, vb)
        shown = labels.get(topic, topic) if topic is not None else None
        rows.append(RegressionRow(cand, shown, measure, d, _regressed(d, alpha)))
    return rows, len(shared), len(a) - len(shared), len(b) - len(shared)


def _topic_order(topic: str | None) -> tuple[int, int, str]:
    """All topics first, then t1, t2, ..., t10 in number order."""
    if topic is None or topic == ALL_TOPICS:
        return (0, 0, "")
    digits = topic.lstrip("t")
    return (1, int(digits), "") if digits.isdigit() else (2, 0, topic)


def _suite_regressions(a: Run, b: Run, alpha: float) -> RegressionReport:
    from proctor.protocols.suite.result import SuiteResult

    ra, rb = a.result, b.result
    if not isinstance(ra, SuiteResult) or not isinstance(rb, SuiteResult):
        unfinished = a.folder if not isinstance(ra, SuiteResult) else b.folder
        raise UserError(f"compare: the suite run {unfinished} has not finished (it has no results.json).")
    notes = []
    topic_of = ra.topics.of_chunks()
    if topic_of != rb.topics.of_chunks():
        notes.append(
            "The two suites' topic models differ (another corpus, seed or embedder); items are placed on "
            "run A's topics."
        )
    labels = {t.topic_id: f"{t.topic_id} ({t.name})" for t in ra.topics.topics}
    pa: dict[str, _Judged] = {}
    pb: dict[str, _Judged] = {}
    runs_a, runs_b = _members(a), _members(b)
    members_b = {m.member: m for m in runs_b.runs}
    for ma in runs_a.runs:
        mb = members_b.get(ma.member)
        if mb is None:
            notes.append(f"member {ma.member} is in run A only; left out.")
            continue
        with (
            load_run(_member_folder(a, ma.run_dir)) as run_a,
            load_run(_member_folder(b, mb.run_dir)) as run_b,
        ):
            ea, eb = _evidence(run_a, ma.member), _evidence(run_b, ma.member)
        if ea is not None and eb is not None:
            pa |= ea
            pb |= eb
    rows, matched, only_a, only_b = _paired_rows(pa, pb, (topic_of, labels), alpha)
    report = RegressionReport(a.run_id, b.run_id, "suite", alpha, matched, only_a, only_b, rows, notes)
    return report


def _members(suite: Run) -> MemberRuns:
    """The members' run folders, as the suite recorded them (its artifact `suite_members`)."""
    from proctor.protocols.suite.result import MemberRuns

    recorded = suite.artifact("suite_members", MemberRuns)
    if recorded is None:
        raise UserError(f"compare: the suite run {suite.folder} records no member runs (did it finish?).")
    return recorded


def _member_folder(suite: Run, recorded: str) -> Path:
    """A member's run folder as the suite recorded it, else beside the suite's folder (runs moved
    together, e.g. a baseline downloaded as a CI artifact)."""
    path = Path(recorded)
    if (path / "run.sqlite").is_file():
        return path
    beside = suite.folder.parent / path.name
    if (beside / "run.sqlite").is_file():
        return beside
    raise UserError(
        f"compare: the suite {suite.folder} names the member run {recorded}, which is neither there nor "
        f"beside the suite ({beside}). Keep the members' run folders next to the suite's folder."
    )
