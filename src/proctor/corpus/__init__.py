"""Corpus loading and chunking."""
