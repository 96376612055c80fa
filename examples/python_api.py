"""Your function, your documents, from Python: an OpenAI-compatible model writes questions from the
documents in CORPUS and judges the answers of `my_pipeline` and of the model itself with BM25 retrieval.
Run: OPENAI_API_KEY=... CORPUS=my_docs python examples/python_api.py (any server: set OPENAI_BASE_URL)."""

import os

import proctor


def my_pipeline(question: str) -> str:
    return "I don't know."  # call your RAG pipeline or agent here


url = os.environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1")
run = proctor.evaluate(
    {
        "protocol": "qa",
        "corpus": {"path": os.environ.get("CORPUS", "my_docs")},
        "models": {"llm": {"spec": "openai/" + os.environ.get("MODEL", "gpt-4o-mini"), "base_url": url}},
        "roles": {"examiner": "llm", "judge": "llm"},
        "candidates": [
            {"name": "mine", "python": my_pipeline},
            {"name": "rag", "model": "llm", "retriever": "bm25"},
        ],
        "qa": {"num_questions": 10, "judges": ["with_reference"]},
    }
)
for m in run.metrics():
    if m.name == "accuracy.llm_with_reference":
        print(f"{m.subject}: accuracy {m.value} (95% interval {m.lo} to {m.hi}, n={m.n})")
print("report:", run.folder / "report.html")
