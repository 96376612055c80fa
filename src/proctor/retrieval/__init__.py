"""Retrieval for RAG candidates: closed-book, BM25, dense, hybrid (RRF) and oracle, one interface."""

from proctor.retrieval.base import ClosedBookRetriever, Retriever, top_k_indices
from proctor.retrieval.bm25 import BM25Retriever
from proctor.retrieval.dense import DenseRetriever, Embedder
from proctor.retrieval.factory import RETRIEVER_KINDS, make_retriever
from proctor.retrieval.hybrid import HybridRetriever
from proctor.retrieval.oracle import OracleRetriever

__all__ = [
    "RETRIEVER_KINDS",
    "BM25Retriever",
    "ClosedBookRetriever",
    "DenseRetriever",
    "Embedder",
    "HybridRetriever",
    "OracleRetriever",
    "Retriever",
    "make_retriever",
    "top_k_indices",
]
