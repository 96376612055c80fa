"""Reference-QA: the simplest end-to-end protocol and the baseline for the others.

The examiner writes open questions with reference answers from corpus chunks; each candidate (plain LLM
or RAG) answers; answers are scored by EM/F1 and by LLM judges with and without the reference.
"""
