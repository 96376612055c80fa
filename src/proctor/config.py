"""Run configuration: YAML validated by pydantic. Unknown fields are rejected; every error names the
file, the field and the fix."""

from __future__ import annotations

import copy
import difflib
import hashlib
import json
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any, Literal, Protocol, get_args

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializeAsAny,
    ValidationError,
    field_validator,
    model_validator,
)

from proctor.agents.config import AgentConfig
from proctor.config_paths import config_dir
from proctor.corpus.config import CorpusConfig
from proctor.embeddings.config import EmbedderConfig, env_var_name
from proctor.errors import UserError
from proctor.python_ref import PythonRef, check_python, given


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ModelConfig(Strict):
    """One model. `spec` is provider/name: openai/<model>, local/<name> or scripted/<name>."""

    spec: str
    base_url: str | list[str] | None = Field(
        None, description="the server's URL, or a list of URLs of servers of the same model (replicas)"
    )
    api_key_env: str | None = Field(None, description="name of the environment variable holding the key")
    max_concurrency: int | None = Field(None, ge=1, le=1024)
    timeout_s: float | None = Field(
        None, gt=0, description="seconds per request; default 120 for openai/, 600 for local/ (slow CPUs)"
    )
    max_retries: int = Field(4, ge=0, le=20)
    input_price_per_mtok: float = Field(0.0, ge=0)
    output_price_per_mtok: float = Field(0.0, ge=0)
    n_parallel: int | None = Field(None, ge=1, le=16, description="local/ only: server slots")
    n_ctx: int | None = Field(None, ge=512, le=131072, description="local/ only: context tokens per slot")
    threads: int | None = Field(None, ge=1, le=256, description="local/ only: CPU threads (per replica)")
    replicas: int | None = Field(
        None, ge=1, le=64, description="local/ only: embedded servers of this model, calls spread over them"
    )

    @field_validator("spec")
    @classmethod
    def _spec_form(cls, v: str) -> str:
        provider, _, name = v.partition("/")
        if provider not in {"openai", "local", "scripted"} or not name:
            raise ValueError("must be openai/<model>, local/<name> or scripted/<name>")
        return v

    @field_validator("base_url")
    @classmethod
    def _base_urls(cls, v: str | list[str] | None) -> str | list[str] | None:
        if isinstance(v, list):
            if not v:
                raise ValueError(
                    "an empty list — give one URL, or the URLs of several servers of the same model "
                    "(base_url: [http://host1:8000/v1, http://host2:8000/v1])"
                )
            seen: set[str] = set()
            for u in v:
                if u.rstrip("/") in seen:
                    raise ValueError(f"lists {u} twice — list each replica's URL once")
                seen.add(u.rstrip("/"))
        return v

    @model_validator(mode="after")
    def _replicas(self) -> ModelConfig:
        provider = self.spec.partition("/")[0]
        if isinstance(self.base_url, list) and provider != "openai":
            raise ValueError(
                f"base_url: a list of servers applies to openai/ models only; for several embedded servers "
                f"of '{self.spec}' set `replicas: N` instead"
            )
        if self.replicas is None or provider == "local":
            return self
        if provider == "openai":
            n = len(self.base_url) if isinstance(self.base_url, list) else None
            if self.replicas != n:
                raise ValueError(
                    "replicas: an openai/ model's replicas are the servers it lists — give base_url as a "
                    "list of their URLs (base_url: [http://host1:8000/v1, http://host2:8000/v1]) and remove "
                    "`replicas`" + (f" (or make it {n}, the number of URLs listed)" if n else "")
                )
            return self
        raise ValueError(f"replicas applies to local/ models only; remove it from '{self.spec}'")

    @field_validator("api_key_env")
    @classmethod
    def _env_name(cls, v: str | None) -> str | None:
        return env_var_name(v)


class HttpCandidateConfig(Strict):
    """A user's service answering over HTTP (see `proctor.candidates.kinds` for the JSON contract)."""

    url: str = Field(description="POST endpoint, e.g. http://127.0.0.1:8000/answer")
    headers_env: dict[str, str] = Field(
        default_factory=dict,
        description="header name -> environment variable holding its value (secrets stay out of configs)",
    )
    timeout_s: float = Field(60.0, gt=0)


class CandidateConfig(Strict):
    """A system under test — one kind: an LLM (`model`), optionally behind a retriever (RAG); an agent
    (`model` + `agent`: a workflow over an environment); a user's Python callable (`python`); or a user's
    HTTP service (`http`)."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    name: str
    model: str | None = Field(None, description="a key of `models` (LLM and agent candidates)")
    retriever: Literal["closed_book", "bm25", "dense", "hybrid", "oracle"] = "closed_book"
    k: int = Field(3, ge=1, le=50)
    temperature: float = Field(0.0, ge=0, le=2)
    max_tokens: int = Field(256, ge=1)
    agent: AgentConfig | None = Field(None, description="the LLM acts through tools (see the Agents section)")
    python: PythonRef | None = Field(
        None,
        description="'mypkg.rag:answer' or 'path/to/file.py:answer' — a sync or async callable (in code: "
        "the function itself, or an object with an answer() method)",
    )
    http: HttpCandidateConfig | None = None

    @field_validator("python", mode="before")
    @classmethod
    def _python_kind(cls, v: Any) -> Any:
        return check_python(v)

    @property
    def kind(self) -> str:
        python = given(self.python)
        return "agent" if self.agent else "python" if python else "http" if self.http else "llm"

    @model_validator(mode="after")
    def _one_kind(self) -> CandidateConfig:
        python = given(self.python)
        external = [k for k, v in (("python", python), ("http", self.http)) if v]
        if len(external) > 1 or (external and (self.model or self.agent)):
            raise ValueError(
                f"candidate '{self.name}': give one kind — `model` (an LLM, optionally with `agent`), "
                f"`python` or `http`"
            )
        if not external and not self.model:
            raise ValueError(f"candidate '{self.name}': `model` is required (a key of `models`)")
        return self


class GateConfig(Strict):
    """One gate of the `gates:` section: after the run, `proctor run` exits 1 when the metric (of the
    subject, or of every subject that has it) is below `min` — on the lower bound of its 95% interval by
    default, or on its point value (`on: value`). See docs/ci-gating.md."""

    metric: str = Field(description="a metric name of the run (e.g. accuracy.llm_with_reference), or `acc`")
    min: float = Field(description="the threshold; the gate fails below it")
    subject: str | None = Field(
        None,
        description="a candidate / pipeline (or the leading part of a subject, e.g. `alice @ t1`); "
        "unset: every subject that has the metric",
    )
    on: Literal["lower", "value"] = Field(
        "lower", description="compare the interval's lower bound or the value"
    )

    @field_validator("min")
    @classmethod
    def _finite(cls, v: float) -> float:
        if v != v or v in (float("inf"), float("-inf")):
            raise ValueError("must be a finite number")
        return v


class RayConfig(Strict):
    """The `ray:` section: where Ray runs and how much of it proctor may use (with `executor: ray`).

    Work sent to Ray: corpus reading, chunking and chunk embedding (Ray Data), and the servers of `local/`
    models with `replicas` (Ray actors). Everything else — the run store, the call cache, the protocol —
    stays in the driver process.
    """

    address: str | None = Field(
        None,
        description="a running cluster ('auto', 'host:6379' or 'ray://host:10001'); unset starts a local "
        "instance in this process",
    )
    num_cpus: int | None = Field(
        None, ge=1, le=4096, description="CPUs of the local instance proctor starts (default: all cores)"
    )
    max_concurrency: int | None = Field(
        None, ge=1, le=4096, description="corpus tasks running at once (default: the cluster's CPUs)"
    )
    files_per_task: int = Field(
        64, ge=1, le=100_000, description="most corpus files per task (a task also stops at 32 MB of files)"
    )
    embed: bool = Field(True, description="embed the chunks on Ray when the config names an `embedder`")
    embed_actors: int = Field(1, ge=1, le=1024, description="embedding workers (1 CPU, model loaded once)")
    output_dir: str | None = Field(
        None,
        description="folder for the chunk table (Parquet); default <cache_dir>/corpus-ray. On a multi-node "
        "cluster it must be a mount every node shares (the workers write it, the driver reads it)",
    )
    start_timeout_s: float = Field(120.0, gt=0, le=3600, description="give up starting/joining Ray after")


class ProtocolCatalog(Protocol):
    """What reading a config needs to know of the protocols: each one's settings model and roles. The
    kit's registry installs itself here (`use_catalog`), so this module imports no protocol code."""

    def settings_class(self, name: str) -> type[BaseModel]: ...

    def unknown_role(self, name: str, roles: dict[str, str]) -> str | None: ...


_CATALOG: list[ProtocolCatalog] = []


def use_catalog(catalog: ProtocolCatalog) -> None:
    """Install the catalog configs are validated against (done by `proctor.kit.registry` on import)."""
    _CATALOG[:] = [catalog]


def _catalog() -> ProtocolCatalog:
    if not _CATALOG:
        raise RuntimeError("no protocol catalog: import proctor before reading a config")
    return _CATALOG[0]


class RunConfig(Strict):
    protocol: str
    name: str | None = Field(None, pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    seed: int = 0
    corpus: CorpusConfig
    models: dict[str, ModelConfig]
    roles: dict[str, str] = Field(
        default_factory=dict,
        description="which model (a key of `models`) plays which of the protocol's roles",
    )
    embedder: str | EmbedderConfig | None = Field(
        None,
        description="needed for dense/hybrid retrieval: a spec (local/all-minilm-l6-v2), a key of "
        "`models` (its spec, base_url, api_key_env), or {spec: openai/<model>, base_url, api_key_env}",
    )
    candidates: list[CandidateConfig] = []
    cache_dir: str | None = None
    budget_usd: float | None = Field(
        None,
        gt=0,
        description="stop sending paid calls once this much (USD, at the configured prices) is spent",
    )
    store_text: bool = Field(
        True,
        description="keep every model call's messages and reply in run.sqlite (false: numbers only)",
    )
    executor: Literal["local", "ray"] = Field(
        "local", description="where corpus processing and local-model replicas run (see `ray:`)"
    )
    ray: RayConfig = Field(default_factory=RayConfig)
    gates: list[GateConfig] = Field(
        default_factory=list,
        description="pass/fail thresholds checked after the run; a failed gate makes `proctor run` exit 1",
    )
    # The section named after the protocol (e.g. `qa:`), validated by that protocol's own Config.
    settings: SerializeAsAny[BaseModel] | None = None

    @model_validator(mode="before")
    @classmethod
    def _protocol_section(cls, data: Any) -> Any:
        if not isinstance(data, dict) or not isinstance(data.get("protocol"), str):
            return data
        name = data["protocol"]
        section_cls = _catalog().settings_class(name)
        data = dict(data)
        if "settings" in data:
            if isinstance(data["settings"], section_cls) and name not in data:
                return data  # built in code: RunConfig(protocol="qa", ..., settings=qa.Config(...))
            raise ValueError(f"unknown field 'settings' — put the protocol's options under `{name}:`")
        section = data.pop(name, None)
        try:
            data["settings"] = section_cls.model_validate(section or {})
        except ValidationError as e:
            raise ValueError(_describe_errors(e, prefix=name, model=section_cls)) from None
        return data

    @model_validator(mode="before")
    @classmethod
    def _embedder_section(cls, data: Any) -> Any:
        # `embedder: {spec, base_url, ...}` validated on its own, so an error names `embedder.<field>`
        # rather than each member of the field's union.
        if not isinstance(data, dict) or not isinstance(data.get("embedder"), dict):
            return data
        try:
            return {**data, "embedder": EmbedderConfig.model_validate(data["embedder"])}
        except ValidationError as e:
            raise ValueError(_describe_errors(e, prefix="embedder", model=EmbedderConfig)) from None

    @field_validator("models", mode="before")
    @classmethod
    def _shorthand(cls, v: Any) -> Any:
        # `models: {small: local/qwen2.5-coder-0.5b}` is shorthand for `{small: {spec: ...}}`.
        if isinstance(v, dict):
            return {k: ({"spec": m} if isinstance(m, str) else m) for k, m in v.items()}
        return v

    @model_validator(mode="after")
    def _references(self) -> RunConfig:
        names = set(self.models)
        problem = _catalog().unknown_role(self.protocol, self.roles)
        if problem:
            raise ValueError(problem)
        for role, ref in self.roles.items():
            if ref not in names:
                raise ValueError(
                    f"roles.{role} refers to model '{ref}', which is not a key of `models` {sorted(names)}"
                )
        seen = set()
        for i, c in enumerate(self.candidates):
            if c.model is not None and c.model not in names:
                raise ValueError(
                    f"candidates[{i}].model refers to '{c.model}', not a key of `models` {sorted(names)}"
                )
            if c.name in seen:
                raise ValueError(
                    f"candidates[{i}].name '{c.name}' is used twice; candidate names must be unique"
                )
            seen.add(c.name)
            if c.retriever in ("dense", "hybrid") and not self.embedder:
                raise ValueError(
                    f"candidates[{i}] uses retriever '{c.retriever}', which needs `embedder` to be set"
                )
        self.embedder_config()  # an embedder naming neither a spec nor a key of `models` fails here
        return self

    def embedder_config(self) -> EmbedderConfig | None:
        """The embedder the `embedder` field names, resolved: a key of `models` gives that model's spec,
        base_url and api_key_env; a spec string stands alone. None without an embedder."""
        e = self.embedder
        if e is None or isinstance(e, EmbedderConfig):
            return e
        if e in self.models:
            m = self.models[e]
            if isinstance(m.base_url, list):
                raise ValueError(
                    f"embedder: models.{e} lists several servers; an embedder takes one base_url — give "
                    f"`embedder: {{spec: {m.spec}, base_url: <one URL>}}`"
                )
            try:
                return EmbedderConfig(
                    spec=m.spec, base_url=m.base_url, api_key_env=m.api_key_env,
                    max_retries=m.max_retries,
                    **({"timeout_s": m.timeout_s} if m.timeout_s is not None else {}),
                )  # fmt: skip
            except ValidationError:
                raise ValueError(
                    f"embedder: models.{e} is '{m.spec}', which does not embed; an embedder is "
                    f"local/all-minilm-l6-v2 or an openai/<model> served at an /embeddings endpoint"
                ) from None
        if "/" not in e:
            raise ValueError(
                f"embedder: '{e}' is neither a key of `models` {sorted(self.models)} nor a spec such as "
                f"local/all-minilm-l6-v2 or openai/<model>; fix the name or give "
                f"{{spec: openai/<model>, base_url: ..., api_key_env: ...}}"
            )
        try:
            return EmbedderConfig(spec=e)
        except ValidationError:
            raise ValueError(
                f"embedder: '{e}' is not an embedder spec; use local/all-minilm-l6-v2 (alias local/minilm), "
                f"openai/<model> (with base_url: give {{spec, base_url, api_key_env}}) or a key of `models`"
            ) from None

    def config_hash(self) -> str:
        """Identity of what the run measures: the budget, where the work runs (executor, ray), the gates
        checked on the result and whether call text is kept (`store_text`) are left out, so `--resume`
        with a raised budget, on Ray, or with other gates continues the same run."""
        data = self.model_dump(mode="json", exclude={"budget_usd", "executor", "ray", "gates", "store_text"})
        # Nor how many embedded servers run a model: 4 replicas measure what 1 does (same cache keys), so a
        # run started with 1 resumes with 4. (Left out when unset too, so older configs keep their hash.)
        for m in data["models"].values():
            m.pop("replicas", None)
        blob = json.dumps(data, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()

    @property
    def run_name(self) -> str:
        return self.name or self.protocol


def _describe_errors(
    err: ValidationError, prefix: str = "", model: type[BaseModel] | None = None, extra: Sequence[str] = ()
) -> str:
    """The first errors as one line each, joined; an unknown field names the closest known one of its
    section (`model`: the class validated, RunConfig by default; `extra`: more names known there)."""
    if model is None and not prefix:
        model = RunConfig
    parts = []
    for e in err.errors()[:5]:
        locs = [prefix, *(str(p) for p in e["loc"])] if prefix else [str(p) for p in e["loc"]]
        loc = _join(locs)
        if e["type"] == "extra_forbidden":
            parent = _join(locs[:-1]) or "the top level"
            known = _field_names(model, [str(p) for p in e["loc"][:-1]]) if model is not None else []
            if model is RunConfig and len(e["loc"]) == 1:
                known = [n for n in known if n != "settings"] + list(extra)
            close = difflib.get_close_matches(str(e["loc"][-1]), known, n=1, cutoff=0.6)
            if close:
                parts.append(f"unknown field '{loc}' — did you mean '{_join([*locs[:-1], close[0]])}'?")
            else:
                parts.append(f"unknown field '{loc}' — remove it or fix its spelling (at {parent})")
        elif e["type"] == "missing":
            parts.append(f"field '{loc}' is required — add it")
        elif not loc:
            parts.append(e["msg"].removeprefix("Value error, "))
        else:
            parts.append(f"field '{loc}': {e['msg'].removeprefix('Value error, ')}")
    more = f" (and {len(err.errors()) - 5} more)" if len(err.errors()) > 5 else ""
    return "; ".join(parts) + more


def _field_names(model: type[BaseModel], path: list[str]) -> list[str]:
    """The field names of the section at `path` under `model` (list positions and dict keys of models
    such as `models.<name>` are stepped over)."""
    current: type[BaseModel] | None = model
    for part in path:
        if current is None:
            return []
        info = current.model_fields.get(part)
        if info is not None:
            current = _model_in(info.annotation)
    return list(current.model_fields) if current is not None else []


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model a field holds: itself, optional, or as the items of a list or dict."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _join(locs: list[str]) -> str:
    """`suite.members[1].exam.num_questions`: list positions in brackets, as YAML users index them."""
    out = ""
    for part in locs:
        out += f"[{part}]" if part.isdigit() and out else (f".{part}" if out else part)
    return out


def _format_validation_error(
    path: Path, err: ValidationError, raw: Any = None, sets: Sequence[str] = ()
) -> str:
    protocol = raw.get("protocol") if isinstance(raw, dict) else None
    extra = [protocol] if isinstance(protocol, str) else []
    where = f"{path} with --set {', '.join(sets)}" if sets else str(path)
    return (
        f"{where}: invalid config: {_describe_errors(err, extra=extra)}. See the config reference in "
        "docs/config-reference.md (or `proctor options <protocol>`)."
    )


def apply_overrides(raw: dict[str, Any], sets: Sequence[str]) -> dict[str, Any]:
    """`--set KEY=VALUE` on the config as read: KEY a dotted path (`qa.num_questions`, `models.judge.
    max_retries`, `candidates.0.k`), VALUE parsed as YAML (`5`, `true`, `[a, b]`, `{spec: ...}`). The result
    is validated like the file, so an unknown key or a bad value is the usual error."""
    out = copy.deepcopy(raw)
    for item in sets:
        key, sep, text = item.partition("=")
        parts = key.strip().split(".")
        if not sep or not all(parts):
            raise UserError(
                f"--set {item}: expected KEY=VALUE with a dotted KEY, e.g. --set qa.num_questions=5."
            )
        try:
            value = yaml.safe_load(text) if text.strip() else None
        except yaml.YAMLError:
            value = text  # not YAML: the text as it is
        node: Any = out
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            where = ".".join(parts[: i + 1])
            if isinstance(node, list):
                if not part.isdigit() or int(part) >= len(node):
                    raise UserError(
                        f"--set {item}: '{where}' — {'.'.join(parts[:i])} is a list of {len(node)}; give a "
                        f"position from 0 to {len(node) - 1}."
                    )
                if last:
                    node[int(part)] = value
                else:
                    node = node[int(part)]
                continue
            if not isinstance(node, dict):
                above = ".".join(parts[:i])
                raise UserError(
                    f"--set {item}: '{above}' is a value ({node!r}), not a section; set it whole, e.g. "
                    f"--set {above}=..."
                )
            if last:
                node[part] = value
                continue
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            elif isinstance(child, str) and i == 1 and parts[0] == "models":
                child = node[part] = {"spec": child}  # `models: {x: spec}` shorthand, then its options
            node = child
    return out


def load_config(path: str | Path, overrides: Sequence[str] = ()) -> RunConfig:
    """Read and validate a YAML run config. Relative file paths in it resolve against its folder.
    `${PROCTOR_DATA}` stands for proctor's data folder (the shipped demos' sample corpus); `overrides` are
    `--set KEY=VALUE` items (see `apply_overrides`)."""
    p = Path(path)
    if not p.is_file():
        raise UserError(
            f"{p}: config file not found. Give the path of a YAML run config (see docs/config-reference.md)."
        )
    try:
        data = str(resources.files("proctor") / "data")
        text = p.read_text(encoding="utf-8").replace("${PROCTOR_DATA}", data)
        raw = yaml.safe_load(text)
    except UnicodeDecodeError:
        raise UserError(f"{p}: the config is not UTF-8 text. Save it as UTF-8.") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise UserError(
            f"{p}: invalid YAML{where}: {problem}. Fix the syntax (indentation, colons, quotes)."
        ) from None
    if not isinstance(raw, dict):
        raise UserError(
            f"{p}: the config must be a YAML mapping with at least `protocol`, `corpus` and `models`."
        )
    if overrides:
        raw = apply_overrides(raw, overrides)
    try:
        with config_dir(p.parent.resolve()):
            return RunConfig.model_validate(raw)
    except ValidationError as e:
        raise UserError(_format_validation_error(p, e, raw, overrides)) from None
