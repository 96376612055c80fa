"""RECKON building blocks without model calls: duplicate merging, evidence sentences, clustering, the
question invitation, stage-1 helpers, human labels and agreement statistics, cost accounting."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from proctor.clustering import cluster, k_from_target, map_2d
from proctor.errors import UserError
from proctor.models.recording import CallRecord
from proctor.models.structured import ParseError, parse_json
from proctor.protocols.reckon.config import Config
from proctor.protocols.reckon.cost import cost_summary
from proctor.protocols.reckon.judging import (
    answer_sentences,
    extract_schema,
    judge_cluster_schema,
    new_evidence,
)
from proctor.protocols.reckon.metaeval import item_id, load_labels, meta_evaluate
from proctor.protocols.reckon.questions import INVITATION, with_invitation
from proctor.protocols.reckon.run import ReckonItem
from proctor.protocols.reckon.units import (
    KnowledgeUnit,
    load_carry_over,
    merge_duplicates,
    sentences,
    split_sentences,
)
from proctor.store import RunStore


def _unit(uid: str, kw: str, desc: str, chunk: str = "c1", evidence: str | None = None) -> KnowledgeUnit:
    return KnowledgeUnit(
        unit_id=uid,
        type="factual",
        keyword=kw,
        description=desc,
        chunk_id=chunk,
        chunk_ids=[chunk],
        evidence=evidence,
    )


def _unit_vectors(*rows: list[float]) -> np.ndarray:
    x = np.array(rows, dtype=np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_merge_exact_and_near_duplicates() -> None:
    units = [
        _unit("a", "Tern", "The tern nests on Skerry Holm."),
        _unit("b", "tern!", "the tern nests on skerry holm", chunk="c2"),  # exact after normalising
        _unit("c", "Ferry", "The ferry sails at 21:00."),
        _unit("d", "Tern nesting", "Terns nest on Skerry Holm.", chunk="c3"),  # near duplicate of a
        _unit("e", "Glass", "Tidal glass is green."),
    ]
    vecs = _unit_vectors([1, 0, 0], [0, 1, 0], [0, 0, 1], [0.99, 0.05, 0], [0.5, 0, 0.5])
    kept = merge_duplicates(units, vecs, threshold=0.95)
    assert kept == [0, 2, 4]
    assert [m.unit_id for m in units[0].merged] == ["b", "d"]
    assert units[0].chunk_ids == ["c1", "c2", "c3"]
    assert merge_duplicates([_unit("x", "a", "b")], _unit_vectors([1, 0]), 0.9) == [0]


def test_sentences_split_prose_lists_and_tables() -> None:
    text = (
        "# Title\n\nOn Teskavar water boils at **91 °C**, not at\n100 °C. "
        "A soft-boiled egg takes seven minutes.\n\n"
        "- **National bird:** the Teskavar tern nests here.\n| Orrinsford | Southreach | 17,900 | capital |\n"
    )
    s = sentences(text)
    assert s[0] == "On Teskavar water boils at 91 °C, not at 100 °C."
    assert "A soft-boiled egg takes seven minutes." in s
    assert any(x.startswith("National bird:") for x in s)
    assert any("Orrinsford" in x for x in s) and not any(x.startswith("Title") for x in s)
    # One splitter for units, evidence and answers: abbreviations hold a sentence together, units do not.
    assert split_sentences("Founded by St. Helena. Boils at 91 °C. J. Verrane came.") == [
        "Founded by St. Helena.",
        "Boils at 91 °C.",
        "J. Verrane came.",
    ]


def test_k_from_target_and_cluster_cap() -> None:
    assert [k_from_target(n, 5) for n in (1, 2, 7, 8, 12, 13, 100)] == [1, 1, 1, 2, 2, 3, 20]
    rng = np.random.default_rng(0)
    centres = np.eye(8, dtype=np.float32)[:3] * 5
    x = np.vstack([c + 0.05 * rng.standard_normal((6, 8)) for c in centres])
    for method in ("kmeans", "minibatch", "agglomerative", "auto"):
        groups = cluster(x, target=6, cap=12, method=method, seed=1)
        assert sorted(len(g) for g in groups) == [6, 6, 6], method
        assert sorted(i for g in groups for i in g) == list(range(18))
        assert {i // 6 for i in groups[0]} == {0}
    # One target cluster of 18 exceeds the cap of 5: split until every cluster fits.
    groups = cluster(x, target=18, cap=5, seed=1)
    assert all(len(g) <= 5 for g in groups) and sum(map(len, groups)) == 18
    # Same seed, same clusters; silhouette finds the three blobs although the target asks for one.
    assert cluster(x, target=6, cap=12, seed=3) == cluster(x, target=6, cap=12, seed=3)
    assert len(cluster(x, target=18, cap=18, selection="silhouette", seed=1)) == 3
    assert cluster(x[:1], target=5, cap=10) == [[0]] and cluster(x[:0], target=5, cap=10) == []
    assert sorted(map(len, cluster(x, target=6, cap=12, method="auto", minibatch_above=10, seed=1))) == [
        6,
        6,
        6,
    ]
    assert map_2d(x).shape == (18, 2) and map_2d(x[:1]).shape == (1, 2)


def test_question_ends_with_the_invitation() -> None:
    assert with_invitation("Where do terns nest") == f"Where do terns nest? {INVITATION}"
    q = f"Where do terns nest? {INVITATION}"
    assert with_invitation(q) == q
    assert with_invitation("Where?  then tell me what else you know about these").endswith("about these")


def test_stage_one_numbers_answer_sentences_and_schema_bounds_them() -> None:
    answer = (
        "Here is what I know:\n\n1. **Tidal glass** is green. It is made from sand.\n"
        "- The bell is bronze.\n- The bell is bronze.\n\nThat is all."
    )
    assert answer_sentences(answer) == [
        "Here is what I know:",
        "Tidal glass is green.",
        "It is made from sand.",
        "The bell is bronze.",  # repeated once: kept once
        "That is all.",
    ]
    assert answer_sentences("") == [] and answer_sentences("***\n---") == []
    schema = extract_schema(2, 5, 3)
    assert schema["required"] == ["A", "B"]
    assert parse_json('{"A": [2, 3], "B": []}', schema) == {"A": [2, 3], "B": []}
    for bad in (
        '{"A": [6], "B": []}',
        '{"A": [0], "B": []}',
        '{"A": "Tidal glass is green.", "B": []}',
    ):
        with pytest.raises(ParseError):
            parse_json(bad, schema)
    with pytest.raises(ParseError):  # at most 3 sentences per unit
        parse_json('{"A": [1, 2, 3, 4], "B": []}', schema)


def test_cluster_judge_helpers() -> None:
    # The schema lets a reply miss a unit or spoil its verdict without failing the whole call.
    reply = '{"A": {"reason": "ok", "verdict": "correct"}, "C": {"verdict": "partly"}}'
    assert parse_json(reply, judge_cluster_schema(3))["C"] == {"verdict": "partly"}
    # A source sentence the description already holds is not repeated in the prompt.
    desc = "At the market, a dozen means fourteen fish. Two recall the tribute."
    assert (
        new_evidence(_unit("u", "dozen", desc, evidence="At the market a dozen means fourteen fish.")) == ""
    )
    ev = "On Teskavar water boils at 91 °C."
    assert new_evidence(_unit("u", "dozen", desc, evidence=ev)) == ev
    assert new_evidence(_unit("u", "dozen", desc)) == ""


def test_carry_over_file(tmp_path: Path) -> None:
    f = tmp_path / "u.jsonl"
    f.write_text(
        "# from an earlier run\n\n"
        + json.dumps(
            {
                "unit_id": "ku_1",
                "type": "factual",
                "keyword": "Tern",
                "description": "Nests on Holm.",
                "chunk_ids": ["c1"],
            }
        )
        + "\n"
        + json.dumps({"keyword": "Ferry", "description": "Sails at 21:00.", "type": "weird"})
        + "\n"
    )
    units = load_carry_over(str(f))
    assert units[0].unit_id == "ku_1" and units[1].unit_id.startswith("ku_")
    assert units[0].chunk_id == "c1" and units[1].chunk_id is None and units[1].chunk_ids == []
    assert units[1].type == "other" and all(u.origin == "carry_over" for u in units)
    f.write_text('{"keyword": "", "description": "x"}\n')
    with pytest.raises(UserError, match="line 1"):
        load_carry_over(str(f))


def test_label_file_format(tmp_path: Path) -> None:
    f = tmp_path / "labels.jsonl"
    f.write_text(
        '# comment\n{"item_id": "ku_1@a", "label": "correct", "note": "fine"}\n\n'
        '{"candidate": "b", "unit_id": "ku_1", "label": "Incorrect"}\n'
    )
    assert load_labels(str(f)).items == {"ku_1@a": 1, "ku_1@b": 0}
    for bad, match in (
        ('{"item_id": "x", "label": "yes"}', "must be"),
        ('{"label": "correct"}', "item_id"),
        ("not json", "not valid JSON"),
        ('{"item_id": "x", "label": "correct"}\n{"item_id": "x", "label": "incorrect"}', "twice"),
        (
            '{"candidate": "a", "sentence": "A b.", "label": "correct"}\n'
            '{"candidate": "a", "sentence": "a B", "label": "incorrect"}',
            "twice",
        ),
        ('{"candidate": "a", "sentence": "--", "label": "correct"}', "no words"),
    ):
        f.write_text(bad + "\n")
        with pytest.raises(UserError, match=match):
            load_labels(str(f))
    with pytest.raises(UserError, match="not found"):
        load_labels(str(tmp_path / "none.jsonl"))


def test_meta_evaluation_statistics() -> None:
    human = {"a": [1, 1, 0, 0, 1], "b": [1, 0, 0, 0, 0], "c": [1, 1, 1, 1, 0]}
    method = {"a": [1, 1, 0, 1, 1], "b": [1, 0, 0, 0, 1], "c": [1, 1, 1, 1, 0]}
    bleu = {"a": [0.9, 0.8, 0.1, 0.2, 0.7], "b": [0.6, 0.1, 0.0, 0.1, 0.2], "c": [0.9, 0.9, 0.8, 0.7, 0.3]}
    items, labels = [], {}
    for cand in human:
        for i in range(5):
            iid = item_id(cand, f"u{i}")
            labels[iid] = human[cand][i]
            scores = {"reckon": float(method[cand][i]), "bleu": bleu[cand][i]}
            items.append(ReckonItem.model_construct(item_id=iid, candidate=cand, scores=scores))
    items[0].scores["reckon"] = None  # uncovered: left out of RECKON's n
    labels["u9@zzz"] = 1
    res = meta_evaluate(items, labels, {"reckon": None, "bleu": 0.5}).model_dump()
    assert (res["matched"], res["unmatched"]) == (15, 1)
    r = next(m for m in res["methods"] if m["method"] == "reckon")
    h = [x for c in human for x in human[c]][1:]
    m = [x for c in method for x in method[c]][1:]
    assert r["n"] == 14
    assert r["accuracy"] == pytest.approx(np.mean(np.array(h) == np.array(m)), abs=1e-4)
    assert r["kappa"] == pytest.approx(cohen_kappa_score(h, m), abs=1e-4)
    b = next(m for m in res["methods"] if m["method"] == "bleu")
    assert b["n"] == 15 and b["accuracy"] == 1.0 and b["kappa"] == 1.0  # cut at 0.5, BLEU matches humans
    assert b["candidate"]["pearson"] is not None and b["n_candidates"] == 3
    assert b["item"]["spearman"] > 0.7
    # The numbers reckon reported before its statistics moved to proctor.metaeval.agreement (issue 14).
    pinned = {
        "reckon": (14, 0.8571, 0.7143, (0.7454, 0.7454, 0.7454), (0.9177, 1.0, 1.0)),
        "bleu": (15, 1.0, 1.0, (0.9561, 0.8747, 0.7638), (0.9999, 1.0, 1.0)),
    }
    for row in res["methods"]:
        n, acc, kappa, item, cand = pinned[row["method"]]
        assert (row["n"], row["accuracy"], row["kappa"]) == (n, acc, kappa)
        assert tuple(row["item"][k] for k in ("pearson", "spearman", "kendall")) == item
        assert tuple(row["candidate"][k] for k in ("pearson", "spearman", "kendall")) == cand
    assert [(c["candidate"], c["method"], c["human"]) for c in r["per_candidate_scores"]] == [
        ("a", 0.75, 0.5),
        ("b", 0.4, 0.2),
        ("c", 0.8, 0.8),
    ]
    # The shared core adds the confusion matrix (rows human, columns method; correct, incorrect) and
    # kappa's bootstrap interval.
    assert r["confusion"] == [[7, 0], [2, 5]] and b["confusion"] == [[8, 0], [0, 7]]
    assert r["kappa_lo"] <= r["kappa"] <= r["kappa_hi"] and b["kappa_lo"] == b["kappa_hi"] == 1.0


def test_meta_evaluation_undefined_kappa() -> None:
    """Kappa is undefined (None) when neither humans nor the method vary, agreeing or not; 0 when only the
    method varies; correlations need three pairs and variation on both sides."""

    def row(human: list[int], scores: list[float]) -> dict[str, Any]:
        its = [
            ReckonItem.model_construct(item_id=item_id("x", f"u{i}"), candidate="x", scores={"m": s})
            for i, s in enumerate(scores)
        ]
        labels = {item_id("x", f"u{i}"): h for i, h in enumerate(human)}
        out: dict[str, Any] = meta_evaluate(its, labels, {"m": 0.5}).methods[0].model_dump()
        return out

    assert row([1, 1, 1], [1.0, 1.0, 1.0])["kappa"] is None
    assert row([1, 1, 1], [0.0, 0.0, 0.0])["kappa"] is None
    assert row([1], [0.0])["kappa"] is None
    mixed = row([1, 1, 1, 1], [1.0, 0.0, 1.0, 0.3])
    assert (mixed["accuracy"], mixed["kappa"], mixed["item"]["pearson"]) == (0.5, 0.0, None)
    opposite = row([1, 0, 1, 0], [0.0, 1.0, 0.0, 0.9])
    assert (opposite["accuracy"], opposite["kappa"]) == (0.0, -1.0)
    assert tuple(opposite["item"].values()) == (-0.9972, -0.9428, -0.8944)


def test_cost_summary_groups_roles(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "run.sqlite")

    def call(role: str, p: int, c: int, cached: bool = False) -> None:
        store.record_call(CallRecord("scripted", "m", role, None, p, c, (p + c) / 1e6, 0.0, cached, 1))

    call("reckon:units", 500, 100)
    call("reckon:question", 200, 50)
    call("reckon:answer", 100, 300, cached=True)
    call("reckon:extract", 400, 100)
    call("reckon:judge", 150, 30)
    for _ in range(3):
        call("baseline:question", 300, 20)
        call("baseline:answer", 80, 40)
        call("baseline:judge", 250, 30)
        call("baseline:judge_noref", 200, 30)
    cost = cost_summary(store.call_totals())[0].model_dump()
    assert cost["reckon"]["calls"] == 4 and cost["reckon"]["tokens"] == 1330
    assert cost["baseline"]["calls"] == 9 and cost["baseline"]["tokens"] == 3 * 720
    assert cost["token_ratio"] == pytest.approx(1330 / 2160, abs=1e-4)
    assert cost["examiner_judge_token_ratio"] == pytest.approx((250 + 680) / (3 * 600), abs=1e-4)
    assert cost["shared_units"]["tokens"] == 600 and cost["judge_without_reference"]["calls"] == 3
    assert cost["cost_ratio"] == pytest.approx(1330 / 2160, abs=1e-3)


def test_config_validation() -> None:
    with pytest.raises(ValueError, match="max_cluster_size"):
        Config(target_cluster_size=6, max_cluster_size=4)
    with pytest.raises(ValueError):
        Config(extra_field=1)  # type: ignore[call-arg]
    # The default cap is about the paper's 5.6 units per question, or the target when that is larger.
    assert Config(target_cluster_size=4).cluster_cap == 6 and Config().cluster_cap == 6
    assert Config(target_cluster_size=10).cluster_cap == 10
    assert Config(target_cluster_size=4, max_cluster_size=5).cluster_cap == 5


def test_unit_labels_are_letters_so_they_cannot_be_taken_for_sentence_numbers() -> None:
    from proctor.protocols.reckon.judging import labels

    assert labels(3) == ["A", "B", "C"]
    assert labels(28)[-3:] == ["Z", "AA", "AB"]
    assert not any(ch.isdigit() for label in labels(60) for ch in label)


def _fact_unit(keyword: str, description: str, evidence: str | None = None) -> KnowledgeUnit:
    return KnowledgeUnit(
        unit_id=keyword,
        type="fact",
        keyword=keyword,
        description=description,
        chunk_id="c1",
        chunk_ids=["c1"],
        evidence=evidence,
    )


def test_an_excerpt_stating_the_unit_word_for_word_is_decided_by_a_rule() -> None:
    from proctor.protocols.reckon.judging import states_unit

    u = _fact_unit("head of government", "The head of government of Veyra is the Administrator, Ines Marlow.")
    assert states_unit("The head of government of Veyra is the Administrator, Ines Marlow.", u) is not None
    assert (
        states_unit("Sure. THE HEAD OF GOVERNMENT OF VEYRA IS THE ADMINISTRATOR INES MARLOW!", u) is not None
    )
    # Negated, hedged, partial or paraphrased: the LLM judges.
    assert (
        states_unit(
            "It is not true that the head of government of Veyra is the Administrator, Ines Marlow.", u
        )
        is None
    )
    assert states_unit("Maybe the head of government of Veyra is the Administrator, Ines Marlow.", u) is None
    assert states_unit("The head of government of Veyra is the Administrator.", u) is None
    assert states_unit("Ines Marlow, the Administrator, leads Veyra's government.", u) is None
    # The source sentence counts too; a reference of two words is a term, not a fact.
    ev = _fact_unit(
        "dam",
        "The dam was finished in 1931.",
        evidence="Work on the Orrin Dam ended in 1931 after six years.",
    )
    assert states_unit("Work on the Orrin Dam ended in 1931 after six years.", ev) is not None
    assert states_unit("Orrin Dam", _fact_unit("dam", "Orrin Dam")) is None


def test_a_pick_without_the_units_names_is_replaced_by_the_sentence_that_has_them() -> None:
    from proctor.protocols.reckon.judging import distinctive_terms, lexical_overlap, relexicalise

    units = [
        _fact_unit("head of state", "The head of state of Veyra is the Chair, Oskar Lind."),
        _fact_unit(
            "head of government", "The head of government of Veyra is the Administrator, Ines Marlow."
        ),
    ]
    terms = distinctive_terms(units)
    assert terms[0] == {"chair", "oskar", "lind"} and terms[1] == {"administrator", "ines", "marlow"}
    sentences = [
        "Veyra is governed by a joint authority.",
        "Its ceremonial head is the Chair, Oskar Lind.",
        "Day-to-day government lies with the Administrator, Ines Marlow.",
    ]
    overlap = lexical_overlap(terms, sentences)
    # The extractor gave the head-of-state sentence to both units: the second is re-picked, the first kept.
    assert relexicalise(overlap, [[2], [2]]) == [None, [3]]
    # A pick that has some of the unit's names stands; an empty pick is left to the extractor's "none".
    assert relexicalise(overlap, [[2], [3]]) == [None, None]
    assert relexicalise(overlap, [[2], []]) == [None, None]


def test_a_cluster_question_that_states_a_units_name_is_a_leak_checked_against_every_unit() -> None:
    from proctor.protocols.reckon.questions import leaked_names, names_in, redact_names

    units = [
        _fact_unit(
            "head of government", "The head of government of Veyra is the Administrator, Ines Marlow."
        ),
        _fact_unit("Oskar Lind", "Oskar Lind chaired the Veyra Joint Authority from 2041."),
    ]
    assert names_in(units[0].description) == {"Veyra", "Administrator", "Ines", "Marlow"}
    q = "Who leads Veyra's government, was it Ines Marlow, and what did Oskar Lind chair?"
    # Oskar Lind is a subject the question must name (a keyword), Veyra the setting both units state; Ines
    # Marlow is the first unit's answer.
    assert leaked_names(units, q) == {units[0].unit_id: {"Ines", "Marlow"}}
    # Alone, a unit's every name not in its keyword counts (the re-ask may drop the setting).
    assert leaked_names(units[:1], "Who heads the government of Veyra?") == {units[0].unit_id: {"Veyra"}}
    clean = "Who is the head of government, and what did Oskar Lind chair?"
    assert leaked_names(units, clean) == {}
    assert redact_names(q, {"Ines", "Marlow"}) == (
        "Who leads Veyra's government, was it … …, and what did Oskar Lind chair?"
    )


def test_a_gap_to_the_per_unit_baseline_beyond_the_intervals_is_flagged() -> None:
    from proctor.protocols.reckon.run import baseline_gap

    def items(reckon: list[str], base: list[float | None]) -> list[ReckonItem]:
        return [
            ReckonItem.model_construct(status=s, scores={} if b is None else {"judge_with_reference": b})
            for s, b in zip(reckon, base, strict=True)
        ]

    # 30 units: RECKON credits 12, the baseline 27 — far apart; uncovered units and units the baseline did
    # not judge are left out of both.
    far = baseline_gap(
        items(["correct"] * 12 + ["incorrect"] * 18 + ["uncovered"], [1.0] * 27 + [0.0] * 3 + [1.0])
    )
    assert far is not None and far.flagged and far.reckon.n == far.baseline.n == 30
    near = baseline_gap(items(["correct"] * 20 + ["incorrect"] * 10, [1.0] * 22 + [0.0] * 8))
    assert near is not None and not near.flagged
    assert baseline_gap(items(["correct"], [None])) is None
