"""Embeddings from any OpenAI-compatible `/embeddings` endpoint (OpenAI, vLLM, Ollama, llama.cpp, TEI...).

Synchronous (httpx) because embedding is called from sync code such as retrievers; retries follow the
one retry policy of the model-call path.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import httpx
import numpy as np

from proctor.embeddings.base import Embedder
from proctor.errors import ModelCallError, UserError
from proctor.models.cache import CallCache
from proctor.models.openai_compat import DEFAULT_BASE_URL, resolve_api_key, validate_base_url
from proctor.models.retry import RetryableError, RetryPolicy, parse_retry_after


class OpenAIEmbedder(Embedder):
    """Batches POSTed to `<base_url>/embeddings`; rows ordered by the response's `index`."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key_env: str | None = None,
        batch_size: int = 128,
        dimensions: int | None = None,
        timeout_s: float = 60.0,
        retry: RetryPolicy | None = None,
        cache: CallCache | None,
        where: str,
    ) -> None:
        super().__init__(f"openai/{model}", batch_size=batch_size, cache=cache, where=where)
        self.model = model
        self.base_url = validate_base_url(base_url or DEFAULT_BASE_URL, where)
        self.api_key_env = api_key_env
        self.dimensions = dimensions
        self.timeout_s = timeout_s
        self.retry = retry or RetryPolicy()
        # Fail early on a missing key; the key itself is re-read per client and never stored on self.
        resolve_api_key(api_key_env, self.base_url, where)
        self._local = threading.local()
        self._clients: list[httpx.Client] = []
        self._clients_lock = threading.Lock()

    def identity(self) -> dict[str, Any]:
        return {
            "provider": "openai",
            "model": self.model,
            "base_url": self.base_url,
            "dimensions": self.dimensions,
        }

    def _client(self) -> httpx.Client:
        # httpx.Client is not documented as thread-safe for concurrent use: one per thread.
        client = getattr(self._local, "client", None)
        if client is None:
            headers = {"Content-Type": "application/json"}
            key = resolve_api_key(self.api_key_env, self.base_url, self.where)
            if key:
                headers["Authorization"] = f"Bearer {key}"
            client = self._local.client = httpx.Client(headers=headers, timeout=self.timeout_s)
            with self._clients_lock:
                self._clients.append(client)
        return client

    def _compute(self, texts: list[str]) -> np.ndarray:
        # Servers reject empty inputs; a single space embeds "nothing" well enough.
        body: dict[str, Any] = {
            "model": self.model,
            "input": [t if t.strip() else " " for t in texts],
            "encoding_format": "float",
        }
        if self.dimensions is not None:
            body["dimensions"] = self.dimensions
        attempts = 0
        while True:
            attempts += 1
            try:
                return self._post(body, len(texts))
            except RetryableError as e:
                if attempts > self.retry.max_retries:
                    if e.cause == "connection":
                        raise UserError(
                            f"{self.where}: cannot reach the embedding server at {self.base_url} "
                            f"({e}). Start the server or correct base_url in the config."
                        ) from None
                    raise ModelCallError(
                        f"{self.spec}: gave up after {attempts} attempts ({e.cause}): {e}",
                        cause=e.cause,
                        status=e.status,
                    ) from None
                time.sleep(self.retry.delay(attempts - 1, e.retry_after))

    def _post(self, body: dict[str, Any], n: int) -> np.ndarray:
        try:
            resp = self._client().post(f"{self.base_url}/embeddings", json=body)
        except httpx.TimeoutException:
            raise RetryableError(f"no reply within {self.timeout_s}s", cause="timeout") from None
        except (httpx.RemoteProtocolError, httpx.ReadError) as e:
            raise RetryableError(f"truncated response: {type(e).__name__}", cause="truncated") from None
        except (httpx.TransportError, OSError) as e:
            raise RetryableError(f"connection error: {type(e).__name__}", cause="connection") from None
        status = resp.status_code
        if status in (401, 403):
            raise UserError(
                f"{self.where}: {self.base_url} refused the credentials (HTTP {status}). "
                f"Check the API key in the variable named by api_key_env."
            )
        if status in (408, 429) or status >= 500:
            raise RetryableError(
                f"HTTP {status}", cause=f"http_{status}", status=status,
                retry_after=parse_retry_after(resp.headers.get("Retry-After")),
            )  # fmt: skip
        if status >= 400:
            raise ModelCallError(
                f"{self.where}: {self.spec} HTTP {status}: {resp.text[:300]}",
                cause=f"http_{status}",
                status=status,
            )
        try:
            items = json.loads(resp.text)["data"]
            rows = sorted(items, key=lambda d: int(d.get("index", 0)))
            vecs = np.asarray([r["embedding"] for r in rows], dtype=np.float32)
        except (ValueError, KeyError, TypeError) as e:
            raise RetryableError(f"malformed body: {type(e).__name__}", cause="bad_response") from None
        if vecs.ndim != 2 or vecs.shape[0] != n:
            raise RetryableError(f"expected {n} embeddings, got shape {vecs.shape}", cause="bad_response")
        return vecs

    def close(self) -> None:
        with self._clients_lock:
            clients, self._clients = self._clients, []
        for c in clients:
            c.close()
        self._local = threading.local()
