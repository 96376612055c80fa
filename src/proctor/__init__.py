"""proctor: measure what an LLM, a RAG pipeline or an agent knows about reference material."""

__version__ = "0.1.0"
