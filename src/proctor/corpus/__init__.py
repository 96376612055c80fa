"""Corpus loading and chunking: files -> `Document`s -> `Chunk`s with stable content ids."""

from proctor.corpus.chunking import chunk_document, chunk_text, split_paragraphs, split_sentences
from proctor.corpus.config import CorpusConfig
from proctor.corpus.corpus import Corpus, fingerprint_chunks, iter_chunks, load_corpus
from proctor.corpus.loaders import SUPPORTED_EXTENSIONS, html_to_text, iter_documents, make_document
from proctor.corpus.report import LoadReport
from proctor.corpus.types import Chunk, Document, ScoredChunk, content_id

__all__ = [
    "SUPPORTED_EXTENSIONS",
    "Chunk",
    "Corpus",
    "CorpusConfig",
    "Document",
    "LoadReport",
    "ScoredChunk",
    "chunk_document",
    "chunk_text",
    "content_id",
    "fingerprint_chunks",
    "html_to_text",
    "iter_chunks",
    "iter_documents",
    "load_corpus",
    "make_document",
    "split_paragraphs",
    "split_sentences",
]
