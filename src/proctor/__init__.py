"""proctor: measure what an LLM, a RAG pipeline or an agent knows about reference material."""

__version__ = "0.1.0"

from proctor.api import aevaluate, evaluate, judge, judge_many

# Reading a config needs the protocols' settings models: the registry hands them to `proctor.config`.
from proctor.kit import registry as _registry  # noqa: F401
from proctor.kit.record import Run, load_run

__all__ = ["Run", "__version__", "aevaluate", "evaluate", "judge", "judge_many", "load_run"]
