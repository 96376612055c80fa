"""A run as an inspect_ai eval log, so `inspect view` and inspect_ai's log reader show it.

Written with inspect_ai's own log models (`inspect_ai.log`), an optional dependency (`pip install
'proctor[export]'`). One sample per candidate answer (`proctor.store.export.ExportSample`): input the
question, target the reference, messages the candidate's last call (its prompt and reply), output the
candidate's answer, one score per judgment (its reason as the explanation), every call made for the item
as a model event in the sample's transcript, and the item's key, kind, candidate and payload as metadata.
The header names the protocol as the task and the candidates' models as the model, and carries the run's
metrics as results.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from proctor.errors import UserError
from proctor.store.export import (
    ExportCall,
    ExportMessage,
    ExportSample,
    ExportToolCall,
    SampleSpec,
    iter_samples,
)
from proctor.store.record import RunRecord

if TYPE_CHECKING:
    from inspect_ai.event import ModelEvent
    from inspect_ai.log import EvalLog, EvalSample
    from inspect_ai.model import ChatMessage, ModelUsage
    from inspect_ai.tool import ToolCall

INSTALL_HINT = "pip install 'proctor[export]'"
# Run statuses as inspect_ai's log statuses.
_STATUS = {"finished": "success", "running": "started", "failed": "error", "interrupted": "cancelled"}


def require_inspect_ai() -> None:
    """End with a one-paragraph error when inspect_ai is not installed."""
    try:
        import inspect_ai.log  # noqa: F401
    except ImportError:
        raise UserError(
            "--format inspect writes an inspect_ai eval log and needs the inspect_ai package, which is not "
            f"installed. Install it with `{INSTALL_HINT}` (or `pip install inspect_ai`), or export with "
            "--format jsonl."
        ) from None


def write_inspect_log(record: RunRecord, specs: Sequence[SampleSpec], path: Path) -> int:
    """Write the run's samples as an inspect_ai log at `path` (`.eval` or `.json`); returns the number of
    samples."""
    require_inspect_ai()
    from inspect_ai.log import write_eval_log

    log = eval_log(record, specs)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_eval_log(log, str(path))
    return len(log.samples or [])


def eval_log(record: RunRecord, specs: Sequence[SampleSpec]) -> EvalLog:
    """The run as an `EvalLog` (samples in memory: inspect_ai writes a log whole)."""
    from inspect_ai.log import EvalConfig, EvalDataset, EvalLog, EvalResults, EvalSpec, EvalStats

    info = record.info()
    if info is None:
        raise UserError(f"{record.folder}: the run store holds no run (was it started?).")
    samples = [_sample(s) for s in iter_samples(record, specs)]
    usage = _total_usage(samples)
    config = record.config_data() or {}
    corpus = config.get("corpus") if isinstance(config.get("corpus"), dict) else {}
    created = _iso(info.started) or datetime.now(UTC).isoformat()
    spec = EvalSpec(
        eval_id=info.run_id,
        run_id=info.run_id,
        created=created,
        task=info.protocol,
        task_id=info.config_hash or info.run_id,
        dataset=EvalDataset(
            name=Path(str(corpus.get("path"))).name if corpus and corpus.get("path") else None,
            location=str(corpus.get("path")) if corpus and corpus.get("path") else None,
            samples=len(samples),
            sample_ids=[str(s.id) for s in samples],
        ),
        model=_candidate_models(record, samples),
        config=EvalConfig(),
        packages={"proctor": info.proctor_version or ""},
        metadata={"proctor_run_id": info.run_id, "proctor_run_folder": str(record.folder)},
    )
    results = EvalResults(
        total_samples=len(samples),
        completed_samples=sum(1 for s in samples if s.error is None),
        scores=_scores(record),
    )
    stats = EvalStats(started_at=created, completed_at=_iso(info.finished) or "", model_usage=usage)
    status = _STATUS.get(info.status, "started")
    return EvalLog(eval=spec, status=status, results=results, stats=stats, samples=samples)


def _sample(s: ExportSample) -> EvalSample:
    from inspect_ai._util.error import EvalError
    from inspect_ai.log import EvalSample
    from inspect_ai.model import ModelOutput
    from inspect_ai.scorer import Score

    candidate_calls = [c for c in s.calls if c.role == "candidate"]
    last = candidate_calls[-1] if candidate_calls else None
    model = _call_model(last) if last else (s.candidate or "unknown")
    if last is not None and last.messages is not None:
        messages = [*_chat(last.messages), *_reply(last, model)]
    else:  # no text stored: the exchange as the item records it
        messages = _chat([ExportMessage(role="user", content=s.question or "")])
        if s.answer is not None:
            messages += _reply(ExportCall(id=0, reply=s.answer), model)
    scores = {
        j.judge: Score(
            value=j.score if j.score is not None else (j.verdict or ""),
            answer=s.answer,
            explanation=j.reason,
            metadata={"verdict": j.verdict, "judge": j.judge},
        )
        for j in s.judgments
        if j.error is None
    }
    judge_errors = {j.judge: {"error": j.error, "cause": j.error_cause} for j in s.judgments if j.error}
    return EvalSample(
        id=s.key,
        epoch=1,
        input=s.question or "",
        choices=s.choices,
        target=s.reference or "",
        messages=messages,
        output=ModelOutput.from_content(model=model, content=s.answer or ""),
        scores=scores or None,
        metadata={
            "key": s.key,
            "kind": s.kind,
            "status": s.status,
            "candidate": s.candidate,
            "error_cause": s.error_cause,
            "judge_errors": judge_errors,
            "payload": s.payload,
        },
        events=[_event(c) for c in s.calls],
        model_usage=_usage(s.calls),
        # The time the item's model calls took (what inspect_ai shows as the sample's duration).
        total_time=sum(c.latency_s or 0.0 for c in s.calls),
        working_time=sum(c.latency_s or 0.0 for c in s.calls),
        error=EvalError(message=s.error, traceback="", traceback_ansi="") if s.error else None,
    )


def _chat(messages: Sequence[ExportMessage]) -> list[ChatMessage]:
    from inspect_ai.model import ChatMessageAssistant, ChatMessageSystem, ChatMessageTool, ChatMessageUser

    out: list[ChatMessage] = []
    for m in messages:
        content = m.content or ""
        if m.role == "system":
            out.append(ChatMessageSystem(content=content))
        elif m.role == "assistant":
            out.append(ChatMessageAssistant(content=content, tool_calls=_tool_calls(m.tool_calls)))
        elif m.role == "tool":
            out.append(ChatMessageTool(content=content, tool_call_id=m.tool_call_id))
        else:
            out.append(ChatMessageUser(content=content))
    return out


def _reply(call: ExportCall, model: str) -> list[ChatMessage]:
    from inspect_ai.model import ChatMessageAssistant

    if call.reply is None and not call.reply_tool_calls:
        return []
    return [
        ChatMessageAssistant(
            content=call.reply or "", tool_calls=_tool_calls(call.reply_tool_calls), model=model
        )
    ]


def _tool_calls(calls: list[ExportToolCall] | None) -> list[ToolCall] | None:
    """Tool calls with their JSON arguments parsed (arguments that are not a JSON object are kept whole,
    as inspect_ai does for a call it could not parse)."""
    from inspect_ai.tool import ToolCall

    if not calls:
        return None
    out = []
    for c in calls:
        try:
            args = json.loads(c.arguments)
        except json.JSONDecodeError:
            args = None
        out.append(
            ToolCall(
                id=c.id or "",
                function=c.name,
                arguments=args if isinstance(args, dict) else {"arguments": c.arguments},
            )
        )
    return out


def _event(call: ExportCall) -> ModelEvent:
    """A call as a model event of the sample's transcript (what `inspect view` shows per call)."""
    from inspect_ai.event import ModelEvent
    from inspect_ai.model import GenerateConfig, ModelOutput

    p = call.params
    config = GenerateConfig(
        temperature=p.get("temperature"),
        max_tokens=p.get("max_tokens"),
        seed=p.get("seed"),
    )
    model = _call_model(call)
    output = ModelOutput.from_content(model=model, content=call.reply or "")
    if output.choices and call.reply_tool_calls:
        output.choices[0].message.tool_calls = _tool_calls(call.reply_tool_calls)
    output.usage = _one_usage(call)
    event = ModelEvent(
        model=model,
        role=call.role,
        input=_chat(call.messages or []),
        tools=[],
        tool_choice="none",
        config=config,
        output=output,
        retries=max((call.attempts or 1) - 1, 0),
        error=call.error,
        cache="read" if call.cached else None,
        working_time=call.latency_s,
        metadata={"proctor_call_id": call.id, "step": call.step, "text_stored": call.text_stored},
    )
    if call.created is not None:
        event.timestamp = datetime.fromtimestamp(call.created, UTC)
    return event


def _call_model(call: ExportCall) -> str:
    return "/".join(p for p in (call.provider, call.model) if p) or "unknown"


def _one_usage(call: ExportCall) -> ModelUsage:
    from inspect_ai.model import ModelUsage

    i, o = call.prompt_tokens or 0, call.completion_tokens or 0
    return ModelUsage(input_tokens=i, output_tokens=o, total_tokens=i + o)


def _usage(calls: Sequence[ExportCall]) -> dict[str, ModelUsage]:
    out: dict[str, ModelUsage] = {}
    for c in calls:
        model = _call_model(c)
        out[model] = out[model] + _one_usage(c) if model in out else _one_usage(c)
    return out


def _total_usage(samples: Sequence[EvalSample]) -> dict[str, ModelUsage]:
    out: dict[str, ModelUsage] = {}
    for s in samples:
        for model, u in s.model_usage.items():
            out[model] = out[model] + u if model in out else u
    return out


def _candidate_models(record: RunRecord, samples: Sequence[EvalSample]) -> str:
    """The models that played the candidate (`provider/model`), else the candidates' names."""
    rows = record.connection.execute(
        "SELECT DISTINCT provider, model FROM model_calls WHERE role = 'candidate' ORDER BY provider, model"
    )
    models = ["/".join(p for p in r if p) for r in rows]
    if not models:
        models = sorted({str((s.metadata or {}).get("candidate")) for s in samples} - {"None"})
    return ", ".join(models) or "unknown"


def _scores(record: RunRecord) -> list[Any]:
    """The run's metrics, one score per metric name with a value per subject (a candidate, a pipeline)."""
    from inspect_ai.log import EvalMetric, EvalScore

    by_name: dict[str, dict[str, EvalMetric]] = {}
    for m in record.metrics():
        if m.value is None:
            continue
        by_name.setdefault(m.name, {})[m.subject] = EvalMetric(name=m.subject, value=m.value)
    return [EvalScore(name=name, scorer=name, metrics=metrics) for name, metrics in by_name.items()]


def _iso(ts: float | None) -> str | None:
    return None if ts is None else datetime.fromtimestamp(ts, UTC).isoformat()
