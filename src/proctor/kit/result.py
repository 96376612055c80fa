"""A protocol's typed result, and what the kit derives from it.

`run(ctx)` returns a subclass of `Result`. The kit then — with no code in the protocol —
* stores every metric it holds in the store's metrics table: each `Estimate`, and each number marked
  `Metric()`; a metric inside a mapping of models (e.g. `candidates: dict[str, CandidateResult]`) is
  stored with the mapping's key as its subject, the others with the subject `run`; its name is its
  field path below the subject (`accuracy_with_reference`, `stats.mean_f1`);
* stores every field marked `Artifact()` as a named artifact (typed payloads other runs read back, e.g.
  the exam's IRT fit), kept out of results.json;
* writes results.json (and the store's `summary` artifact) from the rest of the model;
* renders the default report section from it (`proctor.kit.default_report`).

This is how inspect_ai scorers declare their metrics; here the declaration is the field's type.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from proctor.estimates import Estimate

RUN_SUBJECT = "run"


@dataclass(frozen=True)
class Metric:
    """Marks a plain number field as a metric (`Annotated[float | None, Metric()]`); `Estimate` fields are
    metrics without a mark. `name` overrides the field path as the metric's name."""

    name: str | None = None


@dataclass(frozen=True)
class Artifact:
    """Marks a field as a named artifact: stored under the field's name (or `name`), not in results.json."""

    name: str | None = None


@dataclass(frozen=True)
class OmitNone:
    """Marks an optional field of a `Part` (or `Result`) that is left out of results.json while it is None
    (e.g. an accuracy under a judge the config did not ask for)."""


class Part(BaseModel):
    """A piece of a result model: fields marked `OmitNone()` are dropped from the dump while None."""

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return self._lean(handler(self))

    def _lean(self, data: dict[str, Any]) -> dict[str, Any]:
        for f in type(self).model_fields:
            if data.get(f, 0) is None and _marker(type(self), f, OmitNone) is not None:
                data.pop(f)
        return data


class Usage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0


class BudgetNote(BaseModel):
    limit_usd: float
    spent_usd: float
    held: int


class Result(Part):
    """What every result holds; a protocol's result model adds its own fields.

    `table` holds the console rows (`proctor run` prints them). `protocol`, `config_hash`, `usage`,
    `budget` and the budget warning are filled by the kit after the run. Empty `warnings` and an absent
    `budget` are left out of results.json, as they always were."""

    model_config = ConfigDict(extra="forbid")

    protocol: str = ""
    config_hash: str = ""
    table: list[dict[str, str]] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    usage: dict[str, Usage] = Field(default_factory=dict)
    budget: BudgetNote | None = None

    def _lean(self, data: dict[str, Any]) -> dict[str, Any]:
        data = super()._lean(data)
        if not data.get("warnings"):
            data.pop("warnings", None)
        if data.get("budget") is None:
            data.pop("budget", None)
        for name in _artifact_fields(type(self)):
            data.pop(name, None)
        return data


class OpenResult(Result):
    """The result of a protocol that is not installed here: its own fields are kept as they were written
    (their estimates are still found by shape, see `named_estimates`)."""

    model_config = ConfigDict(extra="allow")


def _marker(model: type[BaseModel], field: str, kind: type[Any]) -> Any:
    for m in model.model_fields[field].metadata:
        if isinstance(m, kind):
            return m
    return None


def _artifact_fields(model: type[BaseModel]) -> list[str]:
    return [f for f in model.model_fields if _marker(model, f, Artifact) is not None]


def artifacts(result: BaseModel) -> dict[str, BaseModel | Any]:
    """The fields marked `Artifact()`, by artifact name."""
    out: dict[str, Any] = {}
    for f in _artifact_fields(type(result)):
        mark = _marker(type(result), f, Artifact)
        value = getattr(result, f)
        if value is not None:
            out[mark.name or f] = value
    return out


@dataclass(frozen=True)
class MetricRow:
    name: str
    subject: str
    value: float | None
    lo: float | None = None
    hi: float | None = None
    n: int | None = None


def metric_rows(result: BaseModel) -> list[MetricRow]:
    """Every metric the result declares, with its subject and name (see the module docstring)."""
    return list(_walk(result, RUN_SUBJECT, ""))


def _finite(x: Any) -> float | None:
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) else None


def _walk(node: BaseModel, subject: str, path: str) -> Iterator[MetricRow]:
    model = type(node)
    for f in model.model_fields:
        if _marker(model, f, Artifact) is not None:
            continue
        value = getattr(node, f)
        if value is None and _marker(model, f, OmitNone) is not None:
            continue
        name = f"{path}.{f}" if path else f
        mark = _marker(model, f, Metric)
        if isinstance(value, Estimate):
            yield MetricRow(
                mark.name if mark and mark.name else name, subject, value.value, value.lo, value.hi, value.n
            )
        elif mark is not None:
            yield MetricRow(mark.name or name, subject, _finite(value))
        elif isinstance(value, BaseModel):
            yield from _walk(value, subject, name)
        elif isinstance(value, dict) and subject == RUN_SUBJECT:
            for k, v in value.items():
                if isinstance(v, Estimate):
                    yield MetricRow(name, str(k), v.value, v.lo, v.hi, v.n)
                elif isinstance(v, BaseModel):
                    yield from _walk(v, str(k), "")


def named_estimates(result: BaseModel) -> list[tuple[str, Estimate]]:
    """Every `Estimate` in the result, depth first, named by its path (`candidates.a.accuracy`)."""
    out: list[tuple[str, Estimate]] = []

    def walk(node: Any, path: str) -> None:
        if isinstance(node, Estimate):
            out.append((path or "(result)", node))
        elif isinstance(node, BaseModel):
            for f in type(node).model_fields:
                if f not in ("usage", "table") and _marker(type(node), f, Artifact) is None:
                    walk(getattr(node, f), f"{path}.{f}" if path else f)
            for f, v in (node.model_extra or {}).items():
                walk(v, f"{path}.{f}" if path else f)
        elif isinstance(node, dict) and {"value", "lo", "hi", "n"} <= set(node):
            out.append((path or "(result)", Estimate.model_validate(node)))  # an uninstalled protocol's
        elif isinstance(node, dict):
            for k, v in node.items():
                walk(v, f"{path}.{k}" if path else str(k))
        elif isinstance(node, list | tuple):
            for i, v in enumerate(node):
                walk(v, f"{path}[{i}]")

    walk(result, "")
    return out
