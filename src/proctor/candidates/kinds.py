"""Candidate kinds beyond the LLM: an agent (an LLM acting through tools), a user's Python callable, and a
user's HTTP service — so a LangChain / LlamaIndex / Haystack pipeline or a deployed RAG service is
evaluated as it is, by every protocol that asks questions.

Python callable contract: `fn(question, choices=None, conversation=None)` (sync or async; only the
parameters it declares are passed) returns the answer text, or a dict `{"text": ..., "contexts": [...],
"trace": {...}}` (`answer` is accepted for `text`). In a config built in code, `python:` may be the
function itself, or an object whose `answer` method keeps this contract.

HTTP contract: `POST <url>` with JSON `{"question": str, "choices": [str] | null, "conversation":
[{"role", "content"}] | null}`; the reply is JSON `{"text": str, "contexts": [str]?, "trace": {}?}`.
5xx and connection errors are retried (3 attempts, backoff), then recorded on the item with their cause.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import inspect
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from proctor.agents.config import AgentConfig
from proctor.agents.tools import Toolbox
from proctor.candidates import Answer
from proctor.config import HttpCandidateConfig
from proctor.corpus.types import Chunk
from proctor.errors import StepError, UserError
from proctor.models.base import Model
from proctor.models.types import Message
from proctor.python_ref import python_target

ATTEMPTS = 3


def _last_user(history: list[Message]) -> str:
    return next((str(m["content"]) for m in reversed(history) if m["role"] == "user"), "")


def _answer_from(value: Any, kind: str) -> Answer:
    """Text or {text|answer, contexts, trace} -> Answer; anything else is an error on the item."""
    if isinstance(value, str):
        return Answer(text=value.strip(), trace={"kind": kind})
    if isinstance(value, dict):
        text = value.get("text", value.get("answer"))
        if isinstance(text, str):
            contexts = [str(c) for c in value.get("contexts") or []]
            extra = value.get("trace")
            trace: dict[str, Any] = dict(extra) if isinstance(extra, dict) else {}
            return Answer(text=text.strip(), trace={"kind": kind, "contexts": contexts, **trace})
    raise StepError(
        f"the {kind} candidate returned {type(value).__name__}; expected text or {{'text': ..., 'contexts': "
        f"[...]}}",
        cause="invalid_output",
    )


class ExternalCandidate:
    """Shared by the kinds without a model of proctor's: no retriever, replies from the last user turn."""

    retriever = None
    kind = "external"

    def __init__(self, name: str) -> None:
        self.name = name

    def context_for(self, question: str, gold_ids: list[str] | None = None) -> list[Chunk]:
        return []

    async def ask(
        self, question: str, choices: list[str] | None, conversation: list[Message] | None
    ) -> Answer:
        raise NotImplementedError

    async def answer(
        self, question: str, choices: list[str] | None = None, *, gold_ids: list[str] | None = None
    ) -> Answer:
        return await self.ask(question, choices, None)

    async def reply(self, history: list[Message]) -> Message:
        ans = await self.ask(_last_user(history), None, history)
        return {"role": "assistant", "content": ans.text}


def load_callable(ref: str, where: str) -> Callable[..., Any]:
    """'pkg.module:attr' or 'path/to/file.py:attr' -> the object; a user error naming `where` otherwise."""
    target, sep, attr = ref.rpartition(":")
    if not sep or not target or not attr:
        raise UserError(
            f"{where}: '{ref}' must look like 'mypkg.module:function' or 'path/to/file.py:function'."
        )
    try:
        if target.endswith(".py"):
            path = Path(target).expanduser().resolve()
            if not path.is_file():
                raise UserError(f"{where}: {path} does not exist. Give an existing Python file.")
            spec = importlib.util.spec_from_file_location(f"proctor_user_{path.stem}", path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module
            spec.loader.exec_module(module)
        else:
            module = importlib.import_module(target)
    except UserError:
        raise
    except Exception as e:
        raise UserError(
            f"{where}: importing '{target}' failed ({type(e).__name__}: {e}). Fix the module."
        ) from e
    obj = getattr(module, attr, None)
    if obj is None:
        raise UserError(f"{where}: '{target}' has no attribute '{attr}'.")
    return obj


class PythonCandidate(ExternalCandidate):
    """A user's function: imported from `ref` ('pkg.module:attr' or 'file.py:attr'), or given in code as
    the function itself or an object whose `answer` method is called."""

    kind = "python"

    def __init__(self, name: str, ref: object, where: str) -> None:
        super().__init__(name)
        obj = load_callable(ref, where) if isinstance(ref, str) else ref
        try:
            self.fn = python_target(obj)
        except TypeError:
            raise UserError(f"{where}: '{ref}' is not callable.") from None
        self.params = set(inspect.signature(self.fn).parameters)

    async def ask(
        self, question: str, choices: list[str] | None, conversation: list[Message] | None
    ) -> Answer:
        kwargs: dict[str, Any] = {"question": question}
        if "choices" in self.params:
            kwargs["choices"] = choices
        if "conversation" in self.params:
            kwargs["conversation"] = conversation
        try:
            if inspect.iscoroutinefunction(self.fn):
                value = await self.fn(**kwargs)
            else:
                value = await asyncio.to_thread(self.fn, **kwargs)
                if inspect.isawaitable(value):  # e.g. an object with an async __call__
                    value = await value
        except Exception as e:  # the user's pipeline failing is recorded on the item, with the cause
            raise StepError(
                f"the python candidate raised {type(e).__name__}: {e}", cause="candidate_error"
            ) from e
        return _answer_from(value, "python")


class HttpCandidate(ExternalCandidate):
    kind = "http"

    def __init__(self, name: str, cfg: HttpCandidateConfig, where: str) -> None:
        super().__init__(name)
        self.cfg = cfg
        missing = [v for v in cfg.headers_env.values() if v not in os.environ]
        if missing:
            raise UserError(
                f"{where}.headers_env: the environment variable {missing[0]} is not set. Export it."
            )

    async def ask(
        self, question: str, choices: list[str] | None, conversation: list[Message] | None
    ) -> Answer:
        headers = {h: os.environ[v] for h, v in self.cfg.headers_env.items()}
        body = {"question": question, "choices": choices, "conversation": conversation}
        cause, detail = "connection", ""
        async with httpx.AsyncClient(timeout=self.cfg.timeout_s) as client:
            for attempt in range(ATTEMPTS):
                try:
                    r = await client.post(self.cfg.url, json=body, headers=headers)
                except httpx.TimeoutException as e:
                    cause, detail = "timeout", str(e)
                except httpx.TransportError as e:
                    cause, detail = "connection", str(e)
                else:
                    if r.status_code < 400:
                        try:
                            return _answer_from(r.json(), "http")
                        except ValueError:
                            raise StepError(
                                "the HTTP candidate's reply is not JSON", cause="bad_response"
                            ) from None
                    cause, detail = f"http_{r.status_code if r.status_code < 500 else '5xx'}", r.text[:200]
                    if r.status_code < 500 and r.status_code != 429:
                        break
                await asyncio.sleep(0.5 * 2**attempt)
        raise StepError(f"the HTTP candidate failed ({cause}): {detail}", cause=cause)


class AgentCandidate(ExternalCandidate):
    """An LLM answering through a workflow over an environment; the trajectory is the answer's trace."""

    kind = "agent"

    def __init__(self, name: str, model: Model, cfg: AgentConfig, session: Callable[[], Toolbox]) -> None:
        super().__init__(name)
        self.model = model
        self.cfg = cfg
        self.session = session

    async def ask(
        self, question: str, choices: list[str] | None, conversation: list[Message] | None
    ) -> Answer:
        from proctor.agents.workflows import run_workflow

        trajectory = await run_workflow(self.model, self.session(), question, self.cfg, choices)
        return Answer(
            text=trajectory.answer or "",
            trace={"kind": "agent", "trajectory": trajectory.model_dump(mode="json")},
        )
