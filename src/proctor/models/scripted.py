"""Deterministic replies for tests and dry runs: `scripted/<name>` names a registered Python callable
or a YAML/JSON rules file. Prompt logprobs (option log-likelihood) come from a scorer registered under
the same name with `register_scorer`; without one, the model declares that it has none.

Rules file::

    default: "I do not know."
    rules:
      - match: "capital of France"     # regex, searched in the last user message
        reply: "Paris"
      - match: "Return JSON"
        json: {"verdict": "correct", "reason": "matches"}
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from proctor.errors import ModelCallError, UserError
from proctor.models.types import GenerationParams, Message, RawReply, TokenLogprob, ToolCallRequest, Usage

ScriptFn = Callable[[list[Message], GenerationParams], "str | RawReply | dict[str, Any]"]
# (text before the token, token) -> the token's log-probability.
TokenScoreFn = Callable[[str, str], float]

_REGISTRY: dict[str, ScriptFn] = {}
_SCORERS: dict[str, TokenScoreFn] = {}


def register_script(name: str, fn: ScriptFn) -> None:
    """Make `scripted/<name>` answer with `fn(messages, params)`.

    `fn` may raise RetryableError to inject faults."""
    _REGISTRY[name] = fn


def register_scorer(name: str, fn: TokenScoreFn) -> None:
    """Give `scripted/<name>` prompt logprobs: each whitespace-led word of a scored text is one token,
    scored `fn(text_before_it, token)` (e.g. " Paris" after "...Answer:")."""
    _SCORERS[name] = fn


def score_text(text: str, fn: TokenScoreFn) -> list[TokenLogprob]:
    """Prompt logprobs of `text` under `fn`, tokenized as the mock server does; the first token has none."""
    tokens = [(m.start(), m.group()) for m in re.finditer(r"\s*\S+", text)]
    return [TokenLogprob(tok, float(fn(text[:at], tok)), offset=at) for at, tok in tokens[1:]]


def _words(text: str) -> int:
    return len(text.split())


class ScriptedProvider:
    provider = "scripted"
    supports_json_schema = False
    supports_tools = True  # a script may answer with tool calls: {"content": ..., "tool_calls": [...]}

    def __init__(self, name: str, *, where: str = "model") -> None:
        self.model = name
        if name in _REGISTRY:
            self._fn = _REGISTRY[name]
            self._version = "callable"
        else:
            path = Path(name).expanduser()
            if not path.is_file():
                raise UserError(
                    f"{where}: scripted model '{name}' is neither a registered script nor a rules file. "
                    f"Give the path of a YAML/JSON rules file (scripted/path/to/rules.yaml)."
                )
            raw = path.read_bytes()
            try:
                spec = yaml.safe_load(raw) or {}
            except yaml.YAMLError as e:
                raise UserError(f"{path}: not valid YAML/JSON ({e}). Fix the rules file.") from None
            self._version = hashlib.sha256(raw).hexdigest()[:16]
            self._fn = _rules_fn(spec, str(path))

    @property
    def supports_prompt_logprobs(self) -> bool:
        return self.model in _SCORERS

    def identity(self) -> dict[str, Any]:
        return {"provider": "scripted", "model": self.model, "version": self._version}

    async def complete(self, messages: list[Message], params: GenerationParams) -> RawReply:
        if params.echo_prompt:
            scorer = _SCORERS.get(self.model)
            if scorer is None:
                raise ModelCallError(f"scripted/{self.model}: no scorer registered", cause="unsupported")
            text = messages[-1]["content"]
            return RawReply(text=text, usage=Usage(_words(text), 0), logprobs=score_text(text, scorer))
        out = self._fn(messages, params)
        if isinstance(out, RawReply):
            return out
        if isinstance(out, dict):  # {"content": ..., "tool_calls": [{"name", "arguments" (text or object)}]}
            text = str(out.get("content") or "")
            calls = tuple(
                ToolCallRequest.parse(str(c.get("id") or f"call_{i}"), str(c["name"]), c.get("arguments", ""))
                for i, c in enumerate(out.get("tool_calls") or [])
            )
            usage = Usage(sum(_words(m["content"]) for m in messages), _words(text) + 5 * len(calls))
            return RawReply(text=text, usage=usage, finish_reason="stop", tool_calls=calls)
        prompt = sum(_words(m["content"]) for m in messages)
        return RawReply(text=out, usage=Usage(prompt, _words(out)), finish_reason="stop")

    async def aclose(self) -> None:
        return None


def _rules_fn(spec: dict[str, Any], where: str) -> ScriptFn:
    rules = []
    for i, r in enumerate(spec.get("rules") or []):
        if "match" not in r or not ({"reply", "json"} & set(r)):
            raise UserError(f"{where}: rule {i} needs 'match' and one of 'reply' or 'json'.")
        reply = json.dumps(r["json"]) if "json" in r else str(r["reply"])
        rules.append((re.compile(r["match"], re.IGNORECASE | re.DOTALL), reply))
    default = str(spec.get("default", ""))

    def fn(messages: list[Message], params: GenerationParams) -> str:
        last = next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")
        for pattern, reply in rules:
            if pattern.search(last):
                return reply
        return default

    return fn
