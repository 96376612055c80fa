"""Tests for proctor.judging: EM/F1 (hand-computed), LLM judges on scripted models, intervals."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

import proctor
from proctor.errors import StructuredOutputError
from proctor.judging import (
    VERDICT_SCHEMA,
    Verdict,
    exact_match,
    f1,
    judge_with_reference,
    judge_without_reference,
    mean_ci,
    normalize_answer,
    precision_recall_f1,
    wilson_interval,
)
from proctor.models import GenerationParams, Message, get_model
from proctor.models.scripted import register_script
from proctor.prompts import prompt_version

# --- normalisation, EM, F1 ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "norm"),
    [
        ("The Treaty of Ambry.", "treaty of ambry"),
        ("  An   apple, a pear!  ", "apple pear"),
        ("Theatre anthem", "theatre anthem"),  # articles only as whole words
        ("Verrane’s glass-works", "verranes glassworks"),  # curly apostrophe and hyphen dropped
        ("the", ""),
    ],
)
def test_normalize_answer(raw: str, norm: str) -> None:
    assert normalize_answer(raw) == norm


def test_exact_match() -> None:
    assert exact_match("The Ilse Barrier!", "ilse barrier") == 1.0
    assert exact_match("Ilse Barrier gates", "Ilse Barrier") == 0.0
    assert exact_match("1,092 metres", "1092 metres") == 1.0  # punctuation removed inside numbers
    assert exact_match("Dunmere", ["Orrinsford", "dunmere."]) == 1.0
    assert exact_match("Ambry", ["Orrinsford", "Dunmere"]) == 0.0


def test_f1_partial_overlap_hand_computed() -> None:
    # pred tokens: [mount, caddow, in, midfell] (4), gold tokens: [mount, caddow] (2); overlap 2
    # precision 2/4, recall 2/2, F1 = 2*0.5*1/(1.5) = 2/3
    p, r, f = precision_recall_f1("Mount Caddow in Midfell", "Mount Caddow")
    assert (p, r) == (0.5, 1.0)
    assert f == pytest.approx(2 / 3)
    assert f1("Mount Caddow in Midfell", "Mount Caddow") == pytest.approx(2 / 3)


def test_f1_articles_and_punctuation_ignored() -> None:
    assert f1("The Moot of Forty.", "moot of forty") == 1.0
    # "a", "the" dropped: pred [tern, on, skerry, holm] vs gold [teskavar, tern]; overlap 1
    # precision 1/4, recall 1/2, F1 = 2*(1/4)*(1/2)/(3/4) = 1/3
    assert f1("A tern on the Skerry Holm", "the Teskavar tern") == pytest.approx(1 / 3)


def test_f1_counts_tokens_as_multiset() -> None:
    # pred [no, no, nets] vs gold [no, nets]: overlap min(2,1)+1 = 2 -> p 2/3, r 1, F1 0.8
    assert f1("no no nets", "no nets") == pytest.approx(0.8)


def test_f1_yes_no_mismatch_is_zero() -> None:
    assert f1("yes", "no") == 0.0
    assert f1("Yes.", "yes") == 1.0
    # a yes/no gold against a longer prediction that contains it: 0 (HotpotQA rule), not 2/3
    assert f1("yes it is", "yes") == 0.0
    assert f1("no", "no nets were lowered") == 0.0
    assert f1("noanswer", "Orrinsford") == 0.0
    assert precision_recall_f1("no", "yes") == (0.0, 0.0, 0.0)


def test_f1_no_overlap_and_empty() -> None:
    assert f1("Ambry", "Dunmere") == 0.0
    assert f1("", "Dunmere") == 0.0
    assert f1("the", "a") == 0.0  # both normalise to empty: HotpotQA gives 0 (EM still says equal)
    assert exact_match("the", "a") == 1.0


def test_f1_list_of_golds_takes_max() -> None:
    golds = ["Ilse Barrier", "the tidal gates at the mouth of the River Ilse"]
    # vs gold 1: pred [ilse, barrier, gates] overlap 2 -> p 2/3, r 1, F1 0.8
    # vs gold 2: [tidal, gates, at, mouth, of, river, ilse] overlap {ilse, gates} -> p 2/3, r 2/7, F1 0.4
    assert f1("Ilse Barrier gates", golds) == pytest.approx(0.8)
    assert precision_recall_f1("Ilse Barrier gates", golds) == pytest.approx((2 / 3, 1.0, 0.8))
    with pytest.raises(ValueError):
        f1("x", [])


# --- LLM judges on scripted models --------------------------------------------------------


def _scripted(name: str, replies: list[str], seen: list[list[Message]]):
    """A scripted model that returns `replies` in turn (repeating the last) and records prompts."""

    def fn(messages: list[Message], params: GenerationParams) -> str:
        seen.append(list(messages))
        assert params.json_schema == VERDICT_SCHEMA
        assert params.temperature == 0
        return replies[min(len(seen) - 1, len(replies) - 1)]

    register_script(name, fn)
    return get_model(f"scripted/{name}", cache=False)


QUESTION = "In which year was the Treaty of Ambry signed?"
REFERENCE = "1911"


async def test_judge_with_reference_parses_verdict_and_renders_reference() -> None:
    seen: list[list[Message]] = []
    reply = json.dumps({"reason": "Same year as the reference.", "verdict": "correct"})
    model = _scripted("judge-wr-ok", [reply], seen)
    v = await judge_with_reference(
        model, question=QUESTION, answer="It was signed in 1911.", reference=REFERENCE
    )
    assert isinstance(v, Verdict)
    assert (v.verdict, v.correct, v.reason) == ("correct", True, "Same year as the reference.")
    assert v.judge == "scripted/judge-wr-ok"
    assert v.prompt_version == prompt_version("judging/with_reference")
    assert len(seen) == 1
    prompt = "\n".join(m["content"] for m in seen[0])
    assert "<reference_answer>\n1911\n</reference_answer>" in prompt
    assert QUESTION in prompt and "It was signed in 1911." in prompt


async def test_judge_without_reference_omits_reference() -> None:
    seen: list[list[Message]] = []
    reply = json.dumps({"reason": "Wrong year.", "verdict": "incorrect"})
    model = _scripted("judge-wor-ok", [reply], seen)
    v = await judge_without_reference(model, question=QUESTION, answer="1899")
    assert (v.verdict, v.correct) == ("incorrect", False)
    assert v.prompt_version == prompt_version("judging/without_reference")
    assert v.prompt_version != prompt_version("judging/with_reference")
    prompt = "\n".join(m["content"] for m in seen[0])
    assert "reference_answer" not in prompt
    assert QUESTION in prompt and "1899" in prompt


async def test_judge_reply_in_prose_and_code_fence_parses() -> None:
    seen: list[list[Message]] = []
    reply = (
        "Let me compare the two answers.\n```json\n"
        '{"reason": "The candidate names a different year.", "verdict": "incorrect"}\n```\nDone.'
    )
    model = _scripted("judge-fenced", [reply], seen)
    v = await judge_with_reference(model, question=QUESTION, answer="1912", reference=REFERENCE)
    assert (v.verdict, v.correct) == ("incorrect", False)
    assert v.reason == "The candidate names a different year."
    assert len(seen) == 1  # parsed without a re-ask


async def test_judge_bad_verdict_is_reasked_then_parsed() -> None:
    seen: list[list[Message]] = []
    bad = json.dumps({"reason": "Close enough.", "verdict": "partially_correct"})
    good = json.dumps({"reason": "Only part of the answer.", "verdict": "incorrect"})
    model = _scripted("judge-reask", [bad, good], seen)
    v = await judge_with_reference(model, question=QUESTION, answer="1910s", reference=REFERENCE)
    assert v.verdict == "incorrect"
    assert len(seen) == 2
    assert seen[1][-2] == {"role": "assistant", "content": bad}


async def test_judge_unparsable_reply_raises_after_reasks() -> None:
    seen: list[list[Message]] = []
    model = _scripted("judge-garbage", ["I think the answer is basically right."], seen)
    with pytest.raises(StructuredOutputError) as info:
        await judge_with_reference(model, question=QUESTION, answer="1911", reference=REFERENCE)
    assert info.value.raw == "I think the answer is basically right."
    assert len(seen) == model.max_reasks + 1


def test_verdict_schema_puts_reason_first() -> None:
    assert list(VERDICT_SCHEMA["properties"]) == ["reason", "verdict"]


# --- intervals ------------------------------------------------------------------------------


def test_wilson_interval_known_values() -> None:
    # 5/10: centre 0.5, half-width (1.96 / 1.38416) * sqrt(0.025 + 0.009604) = 0.263410
    lo, hi = wilson_interval(5, 10)
    assert lo == pytest.approx(0.236590, abs=1e-6)
    assert hi == pytest.approx(0.763410, abs=1e-6)
    # 0/10: lower bound 0, upper bound z^2 / (n + z^2) = 3.8416 / 13.8416
    assert wilson_interval(0, 10) == (0.0, pytest.approx(3.8416 / 13.8416))
    # 10/10 mirrors 0/10
    assert wilson_interval(10, 10) == (pytest.approx(10 / 13.8416), 1.0)
    # 8/10: textbook 95% Wilson interval (0.4902, 0.9433)
    lo, hi = wilson_interval(8, 10)
    assert (round(lo, 4), round(hi, 4)) == (0.4902, 0.9433)
    assert wilson_interval(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError):
        wilson_interval(11, 10)


def test_mean_ci_t_interval() -> None:
    # values 1..5: mean 3, sd sqrt(2.5), sem sqrt(0.5); t_{0.975, 4} = 2.776445
    mean, lo, hi = mean_ci([1, 2, 3, 4, 5])
    half = 2.776445 * math.sqrt(0.5)
    assert mean == 3.0
    assert (lo, hi) == (pytest.approx(3 - half, abs=1e-5), pytest.approx(3 + half, abs=1e-5))
    assert mean_ci([0.5, 0.5, 0.5]) == (0.5, 0.5, 0.5)
    m, lo1, hi1 = mean_ci([0.7])
    assert m == 0.7 and math.isnan(lo1) and math.isnan(hi1)
    assert all(math.isnan(x) for x in mean_ci([]))
    with pytest.raises(ValueError):
        mean_ci([1.0, float("nan")])


def test_mean_ci_bootstrap_is_reproducible() -> None:
    values = [0.0, 0.25, 0.5, 0.5, 1.0, 1.0, 0.75, 0.0]
    a = mean_ci(values, method="bootstrap", rng=np.random.default_rng(7))
    b = mean_ci(values, method="bootstrap", rng=np.random.default_rng(7))
    assert a == b
    mean, lo, hi = a
    assert mean == pytest.approx(0.5)
    assert 0.0 <= lo < mean < hi <= 1.0
    with pytest.raises(ValueError):
        mean_ci(values, method="bootstrap")


# --- sample corpus ---------------------------------------------------------------------------

CORPUS = Path(proctor.__file__).parent / "data" / "sample_corpus"


def test_sample_corpus_shape() -> None:
    files = sorted(p for p in CORPUS.iterdir() if p.is_file())
    assert not any(p.name.lower().startswith("readme") for p in files)
    assert sum(p.suffix == ".md" for p in files) >= 6
    for p in files:
        words = len(p.read_text(encoding="utf-8").split())
        assert 100 <= words <= 600, (p.name, words)


def test_f1_of_two_empty_normalisations_is_zero_as_in_hotpotqa() -> None:
    # Both normalise to nothing: HotpotQA's official F1 (R-Eval's numbers) finds no common token -> 0.
    assert f1("a an the", "the") == 0.0
    assert precision_recall_f1("", "...") == (0.0, 0.0, 0.0)


# --- verdict probability, self-consistency, ensembles -----------------------------------------------

from proctor.judging.llm import OWN_VERDICT, JudgeStyle, verdict_probability  # noqa: E402
from proctor.kit.shared.answers import AnswerItem  # noqa: E402
from proctor.kit.shared.judges import GUARDED_THRESHOLD, Panel, judge_answer  # noqa: E402
from proctor.models import RawReply, TokenLogprob, Usage  # noqa: E402


def _verdict_tokens(verdict: str, lp_correct: float, lp_incorrect: float) -> list[TokenLogprob]:
    top = {"correct": lp_correct, "incorrect": lp_incorrect, "the": -30.0}
    return [
        TokenLogprob(token='{"', logprob=0.0, top={'{"': 0.0}),
        TokenLogprob(token="verdict", logprob=0.0, top={"verdict": 0.0}),
        TokenLogprob(token=verdict, logprob=top[verdict], top=top),
        TokenLogprob(token='"}', logprob=0.0, top={'"}': 0.0}),
    ]


def test_verdict_probability_is_the_two_way_softmax_at_the_verdict_token() -> None:
    p = verdict_probability(_verdict_tokens("incorrect", math.log(0.3), math.log(0.6)))
    assert p == pytest.approx(0.3 / 0.9)
    p = verdict_probability(_verdict_tokens("correct", math.log(0.98), math.log(0.01)))
    assert p == pytest.approx(0.98 / 0.99)


def test_verdict_probability_missing_alternative_gets_the_lowest_listed_logprob() -> None:
    tok = TokenLogprob(token=' "correct"}', logprob=-0.01, top={' "correct"}': -0.01, "Correct": -5.0})
    p_c = math.exp(-0.01) + math.exp(-5.0)  # two spellings of "correct"; "incorrect" gets the floor
    assert verdict_probability([tok]) == pytest.approx(p_c / (p_c + math.exp(-5.0)))
    assert verdict_probability([TokenLogprob(token="yes", logprob=0.0, top={})]) is None
    assert verdict_probability(None) is None


def _answer(answer: str = "The Marrow Current", reference: str = "the Ostrel Current") -> AnswerItem:
    return AnswerItem(
        candidate="c",
        question_id="q1",
        question="Which current warms the west coast?",
        reference_answer=reference,
        answer=answer,
        em=0.0,
        f1=0.0,
    )


def _judge_reply(verdict: str, p_correct: float) -> RawReply:
    text = json.dumps({"reason": f"says {verdict}", "verdict": verdict})
    lp_c, lp_i = math.log(p_correct), math.log(1 - p_correct)
    return RawReply(text=text, usage=Usage(50, 10), logprobs=_verdict_tokens(verdict, lp_c, lp_i))


async def test_judgment_records_method_and_probability_from_logprobs() -> None:
    register_script("judge-p", lambda m, p: _judge_reply("correct", 0.8))
    model = get_model("scripted/judge-p", cache=False)
    j = await judge_answer(_answer(), kind="with_reference", model=model, rules=True, guards=False)
    assert j.verdict == "correct"
    assert j.data == {"method": "llm", "p_correct": pytest.approx(0.8, abs=1e-3)}
    # A rule decides without a call and without a probability.
    j = await judge_answer(
        _answer("Ostrel Current", "the Ostrel Current"), kind="with_reference", model=model, rules=True
    )
    assert j.data == {"method": "normalised_match", "p_correct": None}


async def test_self_consistency_takes_the_majority_over_seeded_samples() -> None:
    seen: list[tuple[float, int | None]] = []

    def script(messages: list[Message], params: GenerationParams) -> RawReply:
        seen.append((params.temperature, params.seed))
        # seeds 0, 1, 2 -> correct, incorrect, correct
        return _judge_reply("incorrect" if params.seed == 1 else "correct", 0.9 if params.seed != 1 else 0.3)

    register_script("judge-sc", script)
    panel = Panel(
        (get_model("scripted/judge-sc", cache=False),), style=JudgeStyle(samples=3, temperature=0.7)
    )
    j = await judge_answer(_answer(), kind="with_reference", model=panel)
    assert sorted(seen) == [(0.7, 0), (0.7, 1), (0.7, 2)]
    assert j.verdict == "correct"
    assert j.data is not None
    assert j.data["samples"] == 3 and j.data["agreement"] == pytest.approx(2 / 3, abs=1e-3)
    assert j.data["p_correct"] == pytest.approx((0.9 + 0.3 + 0.9) / 3, abs=1e-3)


async def test_self_consistency_tie_is_not_correct() -> None:
    register_script(
        "judge-tie",
        lambda m, p: _judge_reply(*(("correct", 0.9) if (p.seed or 0) % 2 == 0 else ("incorrect", 0.1))),
    )
    panel = Panel((get_model("scripted/judge-tie", cache=False),), style=JudgeStyle(samples=2))
    j = await judge_answer(_answer(), kind="with_reference", model=panel)
    assert j.verdict == "incorrect" and j.data is not None and j.data["agreement"] == 0.5


@pytest.mark.parametrize(("combine", "expected"), [("majority", "correct"), ("unanimous", "incorrect")])
async def test_ensemble_combines_judges(combine: str, expected: str) -> None:
    register_script("judge-yes", lambda m, p: _judge_reply("correct", 0.9))
    register_script("judge-no", lambda m, p: _judge_reply("incorrect", 0.2))
    models = tuple(get_model(f"scripted/{n}", cache=False) for n in ("judge-yes", "judge-yes", "judge-no"))
    panel = Panel(models, combine=combine)  # type: ignore[arg-type]
    j = await judge_answer(_answer(), kind="with_reference", model=panel, guards=False)
    assert j.verdict == expected
    assert j.data is not None and j.data["method"] == f"llm_{combine}"
    assert j.data["votes"] == {"scripted/judge-yes": "correct", "scripted/judge-no": "incorrect"}
    assert j.reason is not None and j.reason.startswith("2 of 3 judges said correct")


async def test_guard_overrules_an_ensemble_correct_and_keeps_the_probability() -> None:
    register_script("judge-yes2", lambda m, p: _judge_reply("correct", 0.9))
    model = get_model("scripted/judge-yes2", cache=False)
    a = _answer("It opened in 1887.", "1878")
    j = await judge_answer(a, kind="with_reference", model=model, rules=True, guards=True)
    assert j.verdict == "incorrect"
    assert j.data is not None and j.data["method"] == "reference_quantity_missing"
    assert j.data["p_correct"] == pytest.approx(0.9, abs=1e-3)


async def test_threshold_decides_from_the_probability_and_verdict_only_asks_for_no_reason() -> None:
    schemas: list[dict[str, object]] = []

    def script(messages: list[Message], params: GenerationParams) -> RawReply:
        schemas.append(params.json_schema or {})
        reply = _judge_reply("correct", 0.7)
        return RawReply(text='{"verdict": "correct"}', usage=reply.usage, logprobs=reply.logprobs)

    register_script("judge-vo", script)
    model = get_model("scripted/judge-vo", cache=False)
    strict = Panel((model,), style=JudgeStyle(verdict_only=True, threshold=0.8))
    j = await judge_answer(_answer(), kind="with_reference", model=strict)
    assert j.verdict == "incorrect" and j.reason == "verdict only: correct, P(correct) 0.700"
    assert list(schemas[-1]["properties"]) == ["verdict"]  # type: ignore[call-overload]
    lenient = Panel((model,), style=JudgeStyle(verdict_only=True, threshold=0.6))
    assert (await judge_answer(_answer(), kind="with_reference", model=lenient)).verdict == "correct"


async def test_a_guarded_judge_with_reference_credits_from_the_lower_threshold_only() -> None:
    """P(correct) 0.4: "correct" for the judge with reference when the guards stand behind it
    (`GUARDED_THRESHOLD`), the judge's own verdict everywhere else and when a threshold is configured."""
    register_script("judge-04", lambda m, p: _judge_reply("incorrect", 0.4))
    model = get_model("scripted/judge-04", cache=False)
    panel = Panel((model,), style=JudgeStyle(verdict_only=True))
    a = _answer("It is the Ostrel.", "the Ostrel Current")
    assert GUARDED_THRESHOLD < 0.4 < OWN_VERDICT
    guarded = await judge_answer(a, kind="with_reference", model=panel, guards=True)
    assert guarded.verdict == "correct" and guarded.data is not None
    assert guarded.data["p_correct"] == pytest.approx(0.4, abs=1e-3)
    assert (await judge_answer(a, kind="with_reference", model=panel)).verdict == "incorrect"
    assert (await judge_answer(a, kind="without_reference", model=panel, guards=True)).verdict == "incorrect"
    own = Panel((model,), style=JudgeStyle(verdict_only=True, threshold=OWN_VERDICT))
    assert (await judge_answer(a, kind="with_reference", model=own, guards=True)).verdict == "incorrect"
    # The lower threshold is safe because the guards veto what it would wrongly credit: a guessed name.
    guess = _answer("The Marrow Current.", "the Ostrel Current")
    vetoed = await judge_answer(guess, kind="with_reference", model=panel, guards=True)
    assert vetoed.verdict == "incorrect" and vetoed.data is not None
    assert vetoed.data["method"] == "reference_term_missing"
