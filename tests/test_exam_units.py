"""Unit tests of the exam protocol's parts: answer selection (scripted and over HTTP), filters, option
balancing, labels, the exam file and the bias baselines."""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from proctor.candidates.multiple_choice import (
    check_method,
    letter_of_token,
    letter_probs,
    loglik_prompt_from_messages,
    parse_letter,
    select_option,
)
from proctor.errors import ModelCallError, StructuredOutputError, UserError
from proctor.models import get_model
from proctor.models.cache import CallCache
from proctor.models.recording import Budget, call_scope
from proctor.models.scripted import register_scorer, register_script
from proctor.models.types import RawReply, TokenLogprob, Usage
from proctor.protocols.exam.assemble import (
    assemble_exam,
    balanced_sequence,
    choose_distractors,
    drop_length_cues,
    length_credit,
)
from proctor.protocols.exam.config import Config, FilterConfig
from proctor.protocols.exam.exam_file import ExamQuestion, read_exam, write_exam
from proctor.protocols.exam.filters import (
    Draft,
    Embeddings,
    ExampleTerms,
    compile_patterns,
    filter_draft,
    jaccard,
    near_duplicates,
    ngrams,
    option_ngram_size,
    words,
)
from proctor.protocols.exam.focus import focus_excerpt, sentences
from proctor.protocols.exam.generation import generation_messages
from proctor.protocols.exam.labels import merge_labels, rule_bloom, rule_question_word
from proctor.protocols.exam.stats import bias_baselines, max_baseline_gap
from proctor.testing.mock_server import MockServer

CHOICES = ["1742", "1790", "the year 1815", "1901"]

# --- answer selection ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("B", "B"),
        (" (C) ", "C"),
        ("**D**", "D"),
        ("Answer: A", "A"),
        ("The correct answer is (B).", "B"),
        ("the answer is c", None),  # lower-case letters are not options
        ("C. 1815", "C"),
        ("I would pick option D because of the harbour records.", "D"),
        ("1790", "B"),  # the exact text of one option
        ("The year 1815", "C"),
        ("A lantern is lit.", None),  # sentence-initial article, not option A
        ("B or C, hard to say", None),
        ("", None),
        ("I do not know.", None),
    ],
)
def test_parse_letter(reply: str, expected: str | None) -> None:
    assert parse_letter(reply, CHOICES) == expected


def test_letter_tokens_and_probs() -> None:
    assert [letter_of_token(t, 4) for t in ("A", " B", "C.", "(D", "E", "a", "AB")] == [
        "A",
        "B",
        "C",
        "D",
        None,
        None,
        None,
    ]
    top = {"B": math.log(0.5), " B": math.log(0.1), "C": math.log(0.2), "The": math.log(0.15)}
    probs, mass = letter_probs([TokenLogprob("B", math.log(0.5), top)], 4)
    assert mass == pytest.approx(0.8)
    assert probs["B"] == pytest.approx(0.75) and probs["C"] == pytest.approx(0.25) and probs["A"] == 0.0
    assert letter_probs([TokenLogprob("The", -0.1, {"The": -0.1, "It": -3.0})], 4) is None
    assert letter_probs(None, 4) is None


def _lp_reply(messages, params):
    if params.max_tokens == 1 and params.top_logprobs:
        top = {"C": math.log(0.6), "A": math.log(0.3), "Sure": math.log(0.1)}
        return RawReply("C", Usage(5, 1), logprobs=[TokenLogprob("C", top["C"], top)])
    return "should not be asked"


def _prose_reply(messages, params):
    return "After reading the passages, the answer is (B)."


register_script("mc-logprobs", _lp_reply)
register_script("mc-prose", _prose_reply)


async def test_select_option_methods() -> None:
    lp = get_model("scripted/mc-logprobs", cache=False)
    sel = await select_option(lp, [{"role": "user", "content": "q"}], CHOICES, method="auto")
    assert (sel.letter, sel.index, sel.method) == ("C", 2, "letter_logprobs")
    assert sel.probs["C"] == pytest.approx(2 / 3) and sel.letter_mass == pytest.approx(0.9)
    assert sel.fallback == "the server returns no prompt logprobs" and sel.scores is None
    prose = get_model("scripted/mc-prose", cache=False)
    sel = await select_option(prose, [{"role": "user", "content": "q"}], CHOICES, method="auto")
    assert (sel.letter, sel.method) == ("B", "generated_letter")
    assert sel.fallback == "the server returns no prompt logprobs; no logprobs returned"
    with pytest.raises(StructuredOutputError):
        await select_option(prose, [{"role": "user", "content": "q"}], CHOICES, method="letter_logprobs")
    # option_loglik is a method now: refused up front only for a model known to lack prompt logprobs.
    check_method("option_loglik", "exam.selection")
    with pytest.raises(UserError, match="prompt logprobs"):
        check_method("option_loglik", "exam.selection", prose)
    with pytest.raises(ModelCallError) as err:
        await select_option(prose, [{"role": "user", "content": "q"}], CHOICES, method="option_loglik")
    assert err.value.cause == "unsupported"
    with pytest.raises(UserError, match="unknown"):
        check_method("telepathy", "exam.selection")


def _year_scores(prefix: str, token: str) -> float:
    """Token scores making option C ("the year 1815") win per token but lose on the raw sum: B's one token
    is -2.0, C's three tokens sum to -2.1 (mean -0.7)."""
    after = prefix.rsplit("Answer:", 1)[-1]
    if prefix.endswith("Answer:"):
        return {" 1742": -3.0, " 1790": -2.0, " the": -1.0, " 1901": -4.0}.get(token, -5.0)
    if after == " the":
        return -0.5 if token == " year" else -5.0
    if after == " the year":
        return -0.6 if token == " 1815" else -5.0
    return -1.0


register_script("mc-loglik", _lp_reply)
register_scorer("mc-loglik", _year_scores)


async def test_option_loglik_with_a_scripted_scorer() -> None:
    model = get_model("scripted/mc-loglik", cache=False)
    check_method("option_loglik", "exam.selection", model)
    for method in ("auto", "option_loglik"):
        sel = await select_option(model, [{"role": "user", "content": "q"}], CHOICES, method=method)
        assert (sel.letter, sel.method, sel.fallback) == ("C", "option_loglik", None)
        assert sel.scores == pytest.approx({"A": -3.0, "B": -2.0, "C": -0.7, "D": -4.0})
    assert loglik_prompt_from_messages([{"role": "user", "content": "q"}]) == "q\n\nAnswer:"


async def test_option_loglik_over_http_normalises_by_length(tmp_path: Path) -> None:
    """The option the server scores highest per token wins, although another has the higher raw sum; the
    echo requests are cached, so the same selection again makes no HTTP call."""
    messages = [{"role": "system", "content": "Pick one."}, {"role": "user", "content": "When?"}]
    with MockServer(prompt_logprob=_year_scores) as server:
        model = get_model("openai/mock", base_url=server.base_url, cache=CallCache(tmp_path / "c.sqlite"))
        try:
            sel = await select_option(model, messages, CHOICES)
            assert (sel.letter, sel.index, sel.method, sel.text) == ("C", 2, "option_loglik", "the year 1815")
            assert sel.logliks["B"] == [-2.0, 1, 5]
            assert sel.logliks["C"] == [pytest.approx(-2.1), 3, 14]
            assert sel.logliks["B"][0] > sel.logliks["C"][0]  # the raw sum would have picked B
            assert sel.scores["C"] == pytest.approx(-0.7) and max(sel.probs, key=sel.probs.get) == "C"
            assert sum(sel.probs.values()) == pytest.approx(1.0)
            assert not server.chat_requests()
            prompt = "Pick one.\n\nWhen?\n\nAnswer:"
            scored = [r.body["prompt"] for r in server.completion_requests()[1:]]  # after the probe
            assert sorted(scored) == sorted(f"{prompt} {c}" for c in CHOICES)
            assert all(r.body["echo"] is True and r.body["max_tokens"] == 1 for r in server.requests)
            n = server.count
            again = await select_option(model, messages, CHOICES)
            assert again == sel and server.count == n  # all from the cache
            # An explicit template is used as given.
            await select_option(model, messages, CHOICES, loglik_prompt="Q: When?\nAnswer:")
            assert server.requests[-1].body["prompt"].startswith("Q: When?\nAnswer: ")
        finally:
            await model.aclose()


@pytest.mark.parametrize("mode", ["reject", "ignore"])
async def test_auto_falls_back_to_letter_logprobs_without_echo(mode: str) -> None:
    """A server that refuses echo (400) or ignores it: one probe per model, then letter logprobs, and
    each item says why."""
    with MockServer(reply=lambda body: "D", echo_mode=mode) as server:
        model = get_model("openai/mock", base_url=server.base_url, cache=False, max_retries=3)
        try:
            for q in ("q1", "q2", "q3"):
                sel = await select_option(model, [{"role": "user", "content": q}], CHOICES)
                assert (sel.letter, sel.method) == ("D", "letter_logprobs")
                assert sel.fallback == "the server returns no prompt logprobs"
            assert len(server.completion_requests()) == 1 and len(server.chat_requests()) == 3
            with pytest.raises(ModelCallError) as err:
                await select_option(
                    model, [{"role": "user", "content": "q"}], CHOICES, method="option_loglik"
                )
            assert err.value.cause == "unsupported" and len(server.completion_requests()) == 1
        finally:
            await model.aclose()


async def test_option_loglik_retries_and_budget() -> None:
    """Echo requests take the ordinary path: transient faults are retried, a spent budget sends nothing."""
    with MockServer(
        prompt_logprob=_year_scores, fault_rate=1.0, fault_kinds=("500",), fault_first_n=1
    ) as server:
        model = get_model("openai/mock", base_url=server.base_url, cache=False, retry_base_delay_s=0.01)
        try:
            sel = await select_option(
                model, [{"role": "user", "content": "q"}], CHOICES, method="option_loglik"
            )
            assert sel.letter == "C"
            assert sum(r.fault == "500" for r in server.requests) == 5  # probe + 4 options, once each
            fresh = get_model("openai/mock", base_url=server.base_url, cache=False)
            server.reset()
            with call_scope(budget=Budget(limit_usd=0.0)), pytest.raises(ModelCallError) as err:
                await select_option(fresh, [{"role": "user", "content": "q"}], CHOICES)
            assert err.value.cause == "budget" and server.count == 0
            await fresh.aclose()
        finally:
            await model.aclose()


async def test_select_option_over_http() -> None:
    """Letter logprobs through the OpenAI-compatible provider (the path the embedded server takes)."""
    replies = {"q1": "D", "q2": "I think (A) is right"}

    def reply(body):
        last = body["messages"][-1]["content"]
        return replies[last]

    with MockServer(reply=reply, echo_mode="reject") as server:  # a chat server: no prompt logprobs
        model = get_model("openai/mock", base_url=server.base_url, cache=False)
        try:
            sel = await select_option(model, [{"role": "user", "content": "q1"}], CHOICES, top_logprobs=5)
            assert (sel.letter, sel.method, sel.probs["D"]) == ("D", "letter_logprobs", 1.0)
            body = server.requests[-1].body
            assert body["logprobs"] is True and body["top_logprobs"] == 5 and body["max_tokens"] == 1
            sel = await select_option(model, [{"role": "user", "content": "q2"}], CHOICES)
            assert (sel.letter, sel.method) == ("A", "generated_letter")
            assert (
                sel.fallback
                == "the server returns no prompt logprobs; no option letter among the top logprobs"
            )
        finally:
            await model.aclose()


# --- filters ------------------------------------------------------------------------------------


class FakeEmbedder:
    """Texts mapping to chosen directions; anything else gets its own orthogonal-ish vector."""

    def __init__(self, same: list[set[str]]) -> None:
        self.same = same

    def embed(self, texts: list[str]) -> np.ndarray:
        out = []
        for t in texts:
            group = next((i for i, g in enumerate(self.same) if t in g), None)
            seed = 1000 + group if group is not None else int(hashlib.sha256(t.encode()).hexdigest()[:12], 16)
            v = np.random.default_rng(seed).normal(size=1024)
            out.append(v / np.linalg.norm(v))
        return np.array(out, dtype=np.float32)


def _draft(q: str, correct: str, distractors: list[str]) -> Draft:
    return Draft("k", q, correct, distractors, "r", "c1", "d1", "doc.md")


def test_questions_copied_from_the_worked_example_are_dropped() -> None:
    from proctor.protocols.exam.generation import example_passage

    cfg = FilterConfig(distractor_source_margin=None)
    pats = compile_patterns(cfg.not_self_contained)
    ex = ExampleTerms.of(example_passage())
    assert {"brannock", "aberllyn"} <= ex.names and "1887" in ex.numbers and "the" not in ex.names
    source = "RECKON clusters knowledge units and asks one question per cluster; it cut costs by 56 %."
    others = ["It raises the cost", "It leaves the cost unchanged", "It doubles the cost"]
    # Seen with the 1.5B examiner: a question about the example's railway from a paper's chunk.
    copied = _draft("What limited the Brannock Valley Railway?", "It cut costs", list(others))
    assert filter_draft(copied, cfg, pats, None, source, ex).reason == "copies_example"
    numbers = _draft(
        "Which years bound the line's freight era?", "1887 to 1961", ["1890 to 1950", "1900", "1800"]
    )
    assert filter_draft(numbers, cfg, pats, None, source, ex).reason == "copies_example"
    # The same question from a passage that is about the railway is fine, and so is a plain one.
    about = "The Brannock Valley Railway was built cheaply; it cut costs with a narrow gauge."
    same = _draft("What limited the Brannock Valley Railway?", "It cut costs", list(others))
    assert filter_draft(same, cfg, pats, None, about, ex).reason is None
    plain = _draft("What does RECKON ask per cluster?", "One question", ["Two", "Ten questions", "None"])
    assert filter_draft(plain, cfg, pats, None, source, ex).reason is None
    off = FilterConfig(distractor_source_margin=None, example_copies=False)
    again = _draft("What limited the Brannock Valley Railway?", "It cut costs", list(others))
    assert filter_draft(again, off, pats, None, source, ex).reason is None


@pytest.mark.parametrize(
    ("question", "dropped"),
    [
        # Kept by the 1.5B examiner on the method papers before these patterns existed.
        ("What does the variable `i` represent in the code snippet?", True),
        ("What is the main focus of the paper?", True),
        ("What is the name of the table that contains the KIEval results on MMLU?", True),
        ("What is the name of the model used in the first paragraph?", True),
        ("What is the main reason for the strong agreement in this study?", True),
        ("What is the name of the second author of the first paper?", True),
        # Self-contained: the paper is named, or the question asks which paper.
        ("Who is the first author of the paper 'Beyond scalar reward model'?", False),
        ("Which paper introduced the Stanford Alpaca model?", False),
        ("What does RECKON cluster before asking questions?", False),
    ],
)
def test_default_patterns_catch_references_to_unseen_papers_tables_and_snippets(
    question: str, dropped: bool
) -> None:
    cfg = FilterConfig(distractor_source_margin=None)
    d = filter_draft(
        _draft(question, "Knowledge units", ["Chunks", "Documents", "Tokens"]),
        cfg,
        compile_patterns(cfg.not_self_contained),
        None,
        None,
    )
    assert (d.reason == "not_self_contained") is dropped


def test_ngram_helpers() -> None:
    assert option_ngram_size(["a b", "c d e f", "g h i"]) == 3
    assert ngrams(words("The Tarn canal"), 5) == {("the", "tarn", "canal")}
    assert jaccard(ngrams(words("a b c"), 2), ngrams(words("a b d"), 2)) == pytest.approx(1 / 3)


def test_filter_draft_reasons() -> None:
    cfg = FilterConfig(distractor_source_margin=None)
    pats = compile_patterns(cfg.not_self_contained)
    d = filter_draft(
        _draft("According to the passage, when did it open?", "1742", ["1", "2", "3"]), cfg, pats, None, None
    )
    assert d.reason == "not_self_contained"
    d = filter_draft(
        _draft("Was the canal opened in 1742 or later?", "1742", ["1790", "1815", "1901"]),
        cfg,
        pats,
        None,
        None,
    )
    assert d.reason == "answer_in_question"
    d = filter_draft(
        _draft(
            "When did the Tarn canal open?",
            "in 1742",
            ["In 1742!", "in 1790", "in 1815", "in 1901", "in 1790"],
        ),
        cfg,
        pats,
        None,
        None,
    )
    assert d.reason is None and d.distractors == ["in 1790", "in 1815", "in 1901"]
    assert d.removed == Counter({"options_repeat": 2})
    # A partial correct answer ("Kael" inside "Ostrid Kael") is a repeat; close numbers are not.
    d = filter_draft(
        _draft("Who founded Velmora?", "Ostrid Kael", ["Kael", "Mara Dune", "Ilse Varn", "Oren Tall"]),
        cfg,
        pats,
        None,
        None,
    )
    assert d.distractors == ["Mara Dune", "Ilse Varn", "Oren Tall"]
    d = filter_draft(
        _draft("How long is the vessel?", "42 metres", ["40 metres", "44 metres", "38 metres"]),
        cfg,
        pats,
        None,
        None,
    )
    assert d.reason is None and len(d.distractors) == 3
    # Embedding: a paraphrase of the answer goes; too few distractors left -> the question goes.
    emb = Embeddings(FakeEmbedder([{"Ostrid Kael", "the founder Kael"}]))
    d = filter_draft(
        _draft("Who founded Velmora?", "Ostrid Kael", ["the founder Kael", "Mara Dune", "Ilse Varn"]),
        cfg,
        pats,
        emb,
        None,
    )
    assert d.reason == "options_repeat" and d.removed["options_repeat"] == 1
    # A distractor much closer to the source than the correct answer goes.
    source = "Velmora was founded in 1742 by Ostrid Kael near Kettle Point."
    emb = Embeddings(FakeEmbedder([{source, "Kettle Point"}]))
    cfg2 = FilterConfig(distractor_source_margin=0.1)
    d = filter_draft(
        _draft(
            "Who founded Velmora?", "Ostrid Kael", ["Kettle Point", "Mara Dune", "Ilse Varn", "Oren Tall"]
        ),
        cfg2,
        pats,
        emb,
        source,
    )
    assert d.reason is None and "Kettle Point" not in d.distractors
    assert d.removed["distractor_closer_to_source"] == 1


def test_near_duplicates() -> None:
    qs = [
        "When did the Tarn canal open?",
        "when did the tarn canal open",
        "Who founded Velmora?",
        "Who set up Velmora?",
    ]
    assert near_duplicates(qs, None, 0.9) == [False, True, False, False]
    emb = Embeddings(FakeEmbedder([{"Who founded Velmora?", "Who set up Velmora?"}]))
    assert near_duplicates(qs, emb, 0.9) == [False, True, False, True]


def test_questions_worded_alike_with_different_answers_are_both_kept() -> None:
    # Three stems an embedder puts together: two ask different facts (different years), the third asks
    # the first one's fact again ("1742" and "in 1742" repeat each other as options would).
    founded, opened, again = (
        "In which year was Velmora harbour founded?",
        "In which year was Velmora harbour opened?",
        "When was Velmora harbour founded?",
    )
    alike = {founded, opened, again}
    cfg = Config(filters=FilterConfig(distractor_source_margin=None), balance={"drop_length_cues": False})
    drafts = [
        Draft(f"k{i}", q, a, ["1790", "1688", "1815"], "r", "c1", "d1", "doc.md")
        for i, (q, a) in enumerate([(founded, "1742"), (opened, "1761"), (again, "in 1742")])
    ]
    emb = Embeddings(FakeEmbedder([alike]))
    exam, stats = assemble_exam(
        drafts, cfg, emb, {}, np.random.default_rng(0), generator="g", prompt_version="v"
    )
    assert [q.question for q in exam] == [founded, opened]
    assert stats.filtered == {"near_duplicate": 1}
    # The same words are a repeat whatever the answer (one of the two answers is wrong), even when the
    # first of them was itself dropped as a duplicate.
    qs = [founded, again, again]
    assert near_duplicates(qs, emb, 0.9, answers=["1742", "1742", "1761"], cfg=cfg.filters) == [
        False,
        True,
        True,
    ]


def test_repair_prompts_list_options_only_where_the_examiner_does_not_copy_them_back() -> None:
    from proctor.protocols.exam.repair import repair_messages

    d = _draft("Who was the first Reeve of Corby Sett?", "Cathal Brisk", ["Josias Venn", "Ambrose Tellwyn"])
    d.rejected = ["Marra Obdeen"]
    repeat = repair_messages(d, "options_repeat", "Passage.", 1)[-1]["content"]
    assert "- Josias Venn" in repeat and "Marra Obdeen" in repeat
    for failure in ("distractor_closer_to_source", "key_stands_out"):
        text = repair_messages(d, failure, "Passage.", 3)[-1]["content"]
        assert not any(x in text for x in ("Josias Venn", "Ambrose Tellwyn", "Marra Obdeen")), failure
        assert "Write 3 new wrong answers" in text


# --- balancing and shuffling --------------------------------------------------------------------


def test_balanced_sequence() -> None:
    rng = np.random.default_rng(0)
    seq = balanced_sequence(103, 4, rng)
    counts = Counter(seq)
    assert len(seq) == 103 and max(counts.values()) - min(counts.values()) <= 1


def test_choose_distractors_balances_length_ranks() -> None:
    rng = np.random.default_rng(1)
    drafts = [
        _draft(
            f"q{i}?",
            "medium answer",
            ["a", "bb", "a much longer distractor", "another long one", "ccc", "a third long distractor"],
        )
        for i in range(8)
    ]
    plain = choose_distractors(drafts, rng, balance=False)
    assert plain[0] == ["a", "bb", "a much longer distractor"]
    chosen = choose_distractors(drafts, rng)
    longest = sum(length_credit(["medium answer", *c], 0, "longest") for c in chosen)
    shortest = sum(length_credit(["medium answer", *c], 0, "shortest") for c in chosen)
    assert longest == 2 and shortest == 2  # a quarter each of 8


def test_drop_length_cues() -> None:
    items = [_mcq(["a long correct answer", "x", "y", "z"]) for _ in range(6)]
    items += [_mcq(["aa", "bb", "cc", "dd"]) for _ in range(6)]
    kept, dropped = drop_length_cues(items, 0.03)
    share = sum(length_credit(q.choices, 0, "longest") for q in kept) / len(kept)
    assert dropped > 0 and share <= 0.28


def _mcq(choices: list[str], *, question: str = "q", answer_index: int = 0) -> ExamQuestion:
    return ExamQuestion(
        id=f"q-{question}-{choices[0]}",
        question=question,
        choices=choices,
        answer="ABCD"[answer_index],
        answer_index=answer_index,
    )


def _biased_drafts(n: int, rng: np.random.Generator) -> list[Draft]:
    """An examiner told to keep options about equally long: distractors scatter around the correct
    answer's length, so the correct option is rarely the longest or the shortest (itself a cue)."""
    out = []
    for i in range(n):
        lc = int(rng.integers(15, 40))
        correct = "c" * lc
        distractors = [f"{j}" * int(lc * rng.uniform(0.6, 1.5)) for j in range(5)]
        out.append(Draft(f"k{i}", f"Question number {i}?", correct, distractors, "", f"c{i}", "d", "s"))
    return out


def test_assembled_exam_has_chance_level_baselines() -> None:
    rng = np.random.default_rng(7)
    cfg = Config(filters=FilterConfig(distractor_source_margin=None))
    drafts = _biased_drafts(160, rng)
    raw = [{"choices": [d.correct, *d.distractors[:3]], "answer_index": 0} for d in drafts]
    exam, stats = assemble_exam(drafts, cfg, None, {}, rng, generator="g", prompt_version="v")
    b = bias_baselines(exam)
    naive_longest = sum(length_credit(q["choices"], 0, "longest") for q in raw) / len(raw)
    assert naive_longest < 0.15  # the cue is real before balancing
    assert len(exam) >= 100 and stats.kept == len(exam)
    gap = max_baseline_gap(b)
    assert gap is not None and gap <= 0.05
    assert max(b.letter_counts.values()) - min(b.letter_counts.values()) <= 1
    for q in exam:
        assert set(q.choices[q.answer_index]) == {"c"}
        assert q.answer == "ABCD"[q.answer_index]
    # Same drafts and seed, same exam.
    rng2 = np.random.default_rng(7)
    exam2, _ = assemble_exam(
        _biased_drafts(160, rng2), cfg, None, {}, rng2, generator="g", prompt_version="v"
    )
    assert [(q.id, q.answer) for q in exam2] == [(q.id, q.answer) for q in exam]


def test_bias_baselines_split_ties() -> None:
    exam = [_mcq(["aa", "bb", "cc", "dd"]), _mcq(["long one", "b", "c", "d"])]
    b = bias_baselines(exam)
    assert b.always_longest is not None and b.always_shortest is not None and b.best_fixed_letter is not None
    assert b.always_longest.value == pytest.approx((0.25 + 1.0) / 2)
    assert b.always_shortest.value == pytest.approx((0.25 + 0.0) / 2)
    assert b.best_fixed_letter.letter == "A" and b.best_fixed_letter.value == 1.0


# --- labels -------------------------------------------------------------------------------------


def test_rule_labels() -> None:
    assert rule_question_word("In which year did the canal open?") == "which"
    assert rule_question_word("Whose lantern was first?") == "who"
    assert rule_question_word("Name the founder of Velmora.") == "other"
    assert rule_bloom("When did the Tarn canal open?") == "remember"
    assert rule_bloom("Why did the Dry Years end?") == "analyze"
    assert rule_bloom("Which plan would best protect the harbour from storms?") == "evaluate"
    assert rule_bloom("Design a schedule for the ferry crossing.") == "create"


def test_merge_labels_validates_examiner() -> None:
    lab = merge_labels("When did the canal open?", {"bloom": "Analyse", "question_word": "why"})
    assert lab["bloom"] == "analyze" and lab["bloom_source"] == "examiner"
    assert lab["question_word"] == "when" and lab["question_word_source"] == "rules"  # "why" is not in it
    lab = merge_labels("When did the canal open?", {"bloom": "memorise", "question_word": "when"})
    assert lab["bloom_source"] == "rules" and lab["question_word_source"] == "examiner"
    assert merge_labels("Name the founder.", None)["question_word"] == "other"


# --- the exam file ------------------------------------------------------------------------------


def _q(i: int, **extra) -> dict:
    return {
        "id": f"q{i}",
        "question": f"Question {i}? <b>bold</b>",
        "choices": ["w", "x", "y", "z"],
        "answer": "C",
        "answer_index": 2,
        "rationale": "because",
        "source_chunk_ids": ["c1"],
        "bloom": "remember",
        "question_word": "other",
        "generator": "local/x",
        "prompt_version": "abc",
        "topic": "doc.md",
        **extra,
    }


def test_exam_file_roundtrip_and_loaders(tmp_path: Path) -> None:
    import pyarrow.json as pj

    path = write_exam(tmp_path / "exam.jsonl", [ExamQuestion.model_validate(_q(i)) for i in (1, 2)])
    assert [q["id"] for q in read_exam(path)] == ["q1", "q2"]
    table = pj.read_json(path)  # what `datasets.load_dataset("json", ...)` uses underneath
    assert table.num_rows == 2 and table.column("choices").to_pylist()[0] == ["w", "x", "y", "z"]
    first = json.loads(path.read_text().splitlines()[0])
    assert list(first)[:11] == [
        "id",
        "question",
        "choices",
        "answer",
        "answer_index",
        "rationale",
        "source_chunk_ids",
        "bloom",
        "question_word",
        "generator",
        "prompt_version",
    ]


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ("not json", "not valid JSON"),
        (json.dumps({"id": "x"}), "missing field"),
        (json.dumps(_q(1, answer="A")), "answer_index 2 is 'C'"),
        (json.dumps(_q(1, choices=["only one"], answer_index=0, answer="A")), "choices"),
    ],
)
def test_exam_file_errors_name_the_line(tmp_path: Path, line: str, needle: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(_q(0)) + "\n" + line + "\n")
    with pytest.raises(UserError, match=needle) as e:
        read_exam(path)
    assert "line 2" in str(e.value)


def test_answer_loglik_prompt_answers_examples_with_option_text() -> None:
    from proctor.protocols.exam.grading import answer_loglik_prompt

    q = _mcq(CHOICES, question="When?")
    ex = _mcq(["Ann", "Bo", "Cy", "Di"], question="Who?", answer_index=1)
    text = answer_loglik_prompt(q, [ex], [])
    assert "Question: Who?\nA. Ann\nB. Bo\nC. Cy\nD. Di\nAnswer: Bo\n\nQuestion: When?\nA. 1742\n" in text
    assert text.endswith("D. 1901\nAnswer:")


def test_cluster_sampling_spreads_questions_over_the_topics_of_one_document() -> None:
    import hashlib
    import re
    from types import SimpleNamespace

    from proctor.protocols.exam.generation import chunk_order

    class BagOfWords:
        def embed(self, texts: list[str]) -> np.ndarray:
            out = np.zeros((len(texts), 256), dtype=np.float32)
            for row, text in enumerate(texts):
                for w in re.findall(r"\w+", text.lower()):
                    out[row, int(hashlib.sha1(w.encode()).hexdigest()[:8], 16) % 256] += 1.0
            return out / np.linalg.norm(out, axis=1, keepdims=True)

    topics = {
        "harbour": "harbour lantern quay tide pier ships dock",
        "canal": "canal lock barge towpath engineer sluice",
        "festival": "festival music dancers parade lanterns stage",
        "moot": "moot council quorum speaker vote hall",
    }
    # One document, its chunks grouped by topic (as a long manual would be): 4 topics x 5 chunks.
    chunks = [
        SimpleNamespace(chunk_id=f"{t}{i}", doc_id="manual", text=f"{words_} part {i}", topic=t)
        for t, words_ in topics.items()
        for i in range(5)
    ]
    for seed in range(3):
        ctx = SimpleNamespace(
            corpus=SimpleNamespace(chunks=chunks),
            rng=np.random.default_rng(seed),
            embedder=BagOfWords(),
            config=SimpleNamespace(seed=seed),
        )
        order = chunk_order(ctx, "clusters", 4)  # type: ignore[arg-type]
        assert sorted(c.chunk_id for c in order) == sorted(c.chunk_id for c in chunks)
        assert {c.topic for c in order[:4]} == set(topics)  # the first four questions cover every topic
        assert {c.topic for c in order[4:8]} == set(topics)
        # `spread` round-robins over documents: with one document that is just a shuffle.
        ctx.rng = np.random.default_rng(seed)
        assert sorted(c.chunk_id for c in chunk_order(ctx, "spread")) == sorted(c.chunk_id for c in chunks)


def test_beyond_guessing_is_the_chance_corrected_gain_over_the_same_llm_closed_book() -> None:
    import numpy as np

    from proctor.protocols.exam.beyond_guessing import beyond_guessing, corrected_gain
    from proctor.protocols.exam.grading import ExamResponse, Pipeline
    from proctor.protocols.exam.result import ItemGuessability

    assert corrected_gain(0.7, 0.4) == pytest.approx(0.5) and corrected_gain(0.9, 1.0) is None
    exam = [
        ExamQuestion(id=f"q{i}", question=f"Q{i}?", choices=["a", "b", "c", "d"], answer="A", answer_index=0)
        for i in range(10)
    ]

    def resp(p: str, q: str, ok: bool) -> ExamResponse:
        return ExamResponse(
            pipeline=p,
            question_id=q,
            answer="A",
            example_ids=[],
            retrieved_ids=[],
            method_requested="auto",
            selected="A" if ok else "B",
            selected_index=0 if ok else 1,
            correct=ok,
            method="letter_logprobs",
            fallback=None,
            probs=None,
            letter_mass=None,
            scores=None,
            logliks=None,
            reply="",
        )

    closed = Pipeline("m/closed_book/icl0", "m", "closed_book", 0, 0)
    rag = Pipeline("m/bm25/icl0", "m", "bm25", 3, 0)
    other = Pipeline("n/bm25/icl0", "n", "bm25", 3, 0)  # no closed-book pipeline of its LLM: the examiner
    answers = {
        closed.name: {q.id: resp(closed.name, q.id, i < 4) for i, q in enumerate(exam)},  # 0.4
        rag.name: {q.id: resp(rag.name, q.id, i < 7) for i, q in enumerate(exam)},  # 0.7
        other.name: {q.id: resp(other.name, q.id, i < 5) for i, q in enumerate(exam[:8])},  # 5/8
    }
    # The examiner closed-book got 2 of 10 right (picked A on q0, q1).
    guesses = {q.id: ItemGuessability(picked="A" if i < 2 else "C") for i, q in enumerate(exam)}
    out = beyond_guessing([closed, rag, other], exam, answers, guesses, np.random.default_rng(0))
    assert set(out) == {rag.name, other.name}
    g = out[rag.name]
    assert (
        g.baseline == closed.name and g.closed_book.value == 0.4 and g.corrected.value == pytest.approx(0.5)
    )
    assert g.corrected.lo is not None and g.corrected.lo < 0.5 < g.corrected.hi and g.corrected.n == 10
    o = out[other.name]
    assert o.baseline == "examiner, closed-book" and o.closed_book.n == 8
    assert o.corrected.value == pytest.approx((5 / 8 - 2 / 8) / (1 - 2 / 8))


# --- focus excerpts of a passage asked again -----------------------------------------------------------

ROPEWAY = (
    "# The ropeway\n\nThe Keldrith Ropeway opened in 1879 after eight years of work. The Keldrith Ropeway "
    "Company was founded in 1868 by Ambrose Tellwyn. It carries slate and wool.\n\nIts longest span, the "
    "Skarrow Leap, is 1,030 m long and crosses a limestone gully near Wenlow Cross."
)
ROPEWAY_WRITTEN = [
    ("In which year did the Keldrith Ropeway open?", "1879"),
    ("Who founded the Keldrith Ropeway Company?", "Ambrose Tellwyn"),
]


def test_focus_excerpt_is_the_least_covered_sentence_that_states_a_fact() -> None:
    assert sentences(ROPEWAY)[2] == "It carries slate and wool."  # no heading; no name or number here
    # The first two sentences are partly asked about; the span's is not at all, so it is chosen although
    # later in the passage; the slate sentence states no checkable fact.
    assert focus_excerpt(ROPEWAY, ROPEWAY_WRITTEN).startswith("Its longest span, the Skarrow Leap")
    # Before any question, the first fact sentence (ties: passage order).
    assert focus_excerpt(ROPEWAY, []) == "The Keldrith Ropeway opened in 1879 after eight years of work."


def test_later_variants_of_a_passage_get_different_excerpts_until_it_is_exhausted() -> None:
    used: list[str] = []
    while (e := focus_excerpt(ROPEWAY, ROPEWAY_WRITTEN, used)) is not None:
        used.append(e)
    # The examiner ignored every excerpt (no new questions), yet each pass got another sentence.
    assert len(used) == len(set(used)) == 3 and used[0].startswith("Its longest span")
    # Then by how much is not yet covered: the opening's "eight years" before the company's 1868.
    assert used[1].startswith("The Keldrith Ropeway opened") and used[2].startswith("The Keldrith Ropeway Co")
    # A sentence whose names and numbers were all asked for is covered; a short one comes with its
    # neighbour.
    short = "The Moot of Forty met at Cistern House. It still meets there."
    assert focus_excerpt(short, [("Where did the Moot of Forty meet?", "Cistern House")]) is None
    assert focus_excerpt(short, []) == short


def test_the_first_pass_prompt_is_unchanged_and_a_later_pass_quotes_its_excerpt() -> None:
    # The first pass replays from the call cache only while its messages stay exactly these (pinned
    # before focus excerpts existed).
    passage = "The Keldrith Ropeway opened in 1879. It carried slate."
    for title, n, digest in (
        ("Ropeway", 3, "ed68c7ca500152103a608afb94c0b89261bacb44e56a406723f868d314b8ab53"),
        (None, 1, "48274f83decedb1a3bad77ea92e7040473a9488493899ec3ce17f2c1320c786d"),
    ):
        messages = generation_messages(passage, title, n, 3, 0)
        assert hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest() == digest
    later = generation_messages(passage, None, 1, 3, 1, "The Keldrith Ropeway opened in 1879.")[-1]["content"]
    assert "Ask about this part of the text (this is set 2" in later
    assert later.split('"""')[3].strip() == "The Keldrith Ropeway opened in 1879."
