"""The suite with scripted models: qa + exam over a corpus of two clearly different topics (lighthouses,
cheese); one candidate knows only the lighthouse documents, one knows everything. The knowledge map must
show it, a re-run must come from the cache, and a bad member section must be a UserError naming it."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest
import yaml

from proctor.config import RunConfig, load_config
from proctor.errors import UserError
from proctor.kit.record import load_run
from proctor.models.scripted import register_script
from proctor.protocols.suite.result import MemberRuns, SuiteResult
from proctor.runner import run_config
from proctor.store import RunStore

# topic -> document -> (intro, facts: (subject, attribute, value, wrong values))
DOCS = {
    "lighthouse": {
        "brannock": (
            "The lighthouse at Brannock Point stands on the cliffs above the harbour; its lamp and lens "
            "guide ships past the reef at night, and the keeper climbs the tower stairs at dusk.",
            [
                (
                    "Brannock Point lighthouse",
                    "keeper",
                    "Idris Vell",
                    ["Tomas Reed", "Hana Loft", "Olav Brim"],
                ),
                (
                    "Brannock Point lighthouse",
                    "tower height",
                    "41 metres",
                    ["18 metres", "63 metres", "29 metres"],
                ),
            ],
        ),
        "skerrow": (
            "Skerrow Rock lighthouse is a granite tower on a wave-swept rock; its beacon flashes white over "
            "the shipping lane and its foghorn sounds in storms.",
            [
                ("Skerrow Rock lighthouse", "first lighting year", "1811", ["1766", "1852", "1903"]),
                (
                    "Skerrow Rock lighthouse",
                    "lens maker",
                    "Halden Glassworks",
                    ["Orrin Optics", "Vey & Sons", "Brightwater Co"],
                ),
            ],
        ),
        "corvane": (
            "Corvane Head lighthouse warns sailors off the headland; the lighthouse keepers trim the lamp, "
            "polish the lens and log every passing ship from the lantern room.",
            [
                (
                    "Corvane Head lighthouse",
                    "foghorn name",
                    "Old Moaner",
                    ["Grey Gull", "Bellow Bess", "Storm Crier"],
                ),
                (
                    "Corvane Head lighthouse",
                    "beam range",
                    "23 nautical miles",
                    ["9 nautical miles", "40 nautical miles", "15 nautical miles"],
                ),
            ],
        ),
    },
    "cheese": {
        "marrowdale": (
            "Marrowdale blue cheese is made from cow's milk curds, salted and pierced so that blue mould "
            "veins grow through the creamy paste while the cheese matures.",
            [
                (
                    "Marrowdale blue cheese",
                    "ageing cave",
                    "Hollin Cave",
                    ["Dunmoor Cellar", "Pike Vault", "Ash Grotto"],
                ),
                (
                    "Marrowdale blue cheese",
                    "rind colour",
                    "ash grey",
                    ["butter yellow", "deep orange", "chalk white"],
                ),
            ],
        ),
        "tulvey": (
            "Tulvey curd cheese is a fresh soft cheese: the milk is curdled with rennet, the whey drained, "
            "and the curds pressed lightly into small rounds for the dairy market.",
            [
                (
                    "Tulvey curd cheese",
                    "milk source",
                    "Ferrin goats",
                    ["Holm sheep", "Dale cows", "Marsh buffalo"],
                ),
                (
                    "Tulvey curd cheese",
                    "ripening time",
                    "nine weeks",
                    ["two weeks", "five months", "one year"],
                ),
            ],
        ),
        "quessant": (
            "Quessant washed-rind cheese is a pungent dairy cheese whose rind is washed in brine while the "
            "wheels ripen on spruce shelves; cheesemakers turn each wheel by hand.",
            [
                (
                    "Quessant washed-rind cheese",
                    "brine ingredient",
                    "sea fennel",
                    ["wild garlic", "juniper", "cider"],
                ),
                (
                    "Quessant washed-rind cheese",
                    "wheel weight",
                    "4 kilograms",
                    ["1 kilogram", "11 kilograms", "7 kilograms"],
                ),
            ],
        ),
    },
}
FACTS = [(topic, *fact) for topic, docs in DOCS.items() for _, facts in docs.values() for fact in facts]
ANSWER = {f"What is the {attr} of {subj}?": (topic, value) for topic, subj, attr, value, _ in FACTS}


def _doc(intro: str, facts: list[tuple[str, str, str, list[str]]]) -> str:
    return intro + " " + " ".join(f"The {attr} of {subj} is {value}." for subj, attr, value, _ in facts)


def examiner(messages, params):
    text = messages[-1]["content"]
    found = [(s, a, v, w) for _, s, a, v, w in FACTS if f"The {a} of {s} is {v}." in text]
    if "multiple-choice" in text:
        n = int(re.search(r"Write (\d+) multiple-choice", text).group(1))
        qs = [
            {
                "question": f"What is the {a} of {s}?",
                "correct_answer": v,
                "distractors": w,
                "rationale": "stated",
            }
            for s, a, v, w in found
        ]
        return json.dumps({"questions": qs[:n]})
    if "Write one question" in text and found:
        s, a, v, _ = found[0]
        return json.dumps({"question": f"What is the {a} of {s}?", "answer": v})
    return "I cannot tell."


def _question(text: str) -> str:
    return text.rsplit("Question:", 1)[1].split("\n", 1)[0].strip()


def _candidate(knows: set[str]):
    def reply(messages, params):
        text = messages[-1]["content"]
        topic, value = ANSWER.get(_question(text), (None, None))
        options = dict(re.findall(r"^([A-D])\. (.*)$", text.rsplit("Question:", 1)[1], re.M))
        if options:  # the exam: name a letter
            right = next((k for k, o in options.items() if o == value), "A")
            letter = right if topic in knows else next(k for k in options if k != right)
            return f"The answer is ({letter})."
        return value if topic in knows else "I believe it is unknown."

    return reply


def judge(messages, params):
    text = next(m["content"] for m in messages if m["role"] == "user")
    ref = re.search(r"<reference_answer>\s*(.*?)\s*</reference_answer>", text, re.S).group(1)
    ans = re.search(r"<candidate_answer>\s*(.*?)\s*</candidate_answer>", text, re.S).group(1)
    verdict = "correct" if ref.lower() in ans.lower() else "incorrect"
    return json.dumps({"reason": "compared", "verdict": verdict})


register_script("suite-examiner", examiner)
register_script("suite-lighthouse-only", _candidate({"lighthouse"}))
register_script("suite-all", _candidate({"lighthouse", "cheese"}))
register_script("suite-judge", judge)

CONFIG = {
    "protocol": "suite",
    "name": "kmap",
    "seed": 1,
    "corpus": {"path": "docs", "min_chunk_chars": 10, "max_chunk_chars": 4000},
    "models": {
        "ex": "scripted/suite-examiner",
        "lh": "scripted/suite-lighthouse-only",
        "all": "scripted/suite-all",
        "judge": "scripted/suite-judge",
    },
    "roles": {"examiner": "ex", "judge": "judge"},
    "embedder": "local/all-minilm-l6-v2",
    "candidates": [{"name": "lighthouse-only", "model": "lh"}, {"name": "all-knowing", "model": "all"}],
    "suite": {
        "members": [
            {"protocol": "qa", "qa": {"num_questions": 6, "judges": ["with_reference"]}},
            {
                "protocol": "exam",
                "exam": {
                    "num_questions": 12,
                    "questions_per_call": 2,
                    "labels": "rules",
                    "guessability": False,
                    "filters": {"distractor_source_margin": None, "duplicate_cosine": 0.99},
                    "balance": {"drop_length_cues": False},
                    "irt": {"enabled": False},
                },
            },
        ]
    },
}


def _write(tmp_path: Path, config: dict) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir(exist_ok=True)
    for topic in DOCS.values():
        for name, (intro, facts) in topic.items():
            (docs / f"{name}.md").write_text(_doc(intro, facts) + "\n")
    path = tmp_path / "suite.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


@pytest.fixture
def suite_config(tmp_path: Path) -> Path:
    return _write(tmp_path, CONFIG)


def _topic_of(summary: dict, word: str) -> str:
    hits = [t["topic_id"] for t in summary["topics"]["topics"] if word in t["terms"]]
    assert len(hits) == 1, summary["topics"]
    return hits[0]


def test_knowledge_map_separates_known_and_unknown_topics(suite_config: Path, tmp_path: Path) -> None:
    out = tmp_path / "runs"
    result = run_config(suite_config, out=out, show_progress=False)
    s = result.summary
    # Two topics (k = round(sqrt(6 chunks / 2)) = 2), each the three documents of one subject.
    assert s["topics"]["k"] == 2
    for t in s["topics"]["topics"]:
        assert len(t["chunk_ids"]) == 3
        kinds = {Path(src).stem in DOCS["lighthouse"] for src in t["sources"]}
        assert len(kinds) == 1, t
    light, cheese = _topic_of(s, "lighthouse"), _topic_of(s, "cheese")
    cells = {(c["candidate"], c["topic_id"]): c for c in s["map"]}
    # The lighthouse-only candidate: everything right on lighthouses, nothing on cheese, in both members.
    known = cells[("lighthouse-only", light)]
    unknown = cells[("lighthouse-only", cheese)]
    assert set(known["members"]) == {"qa", "exam"}
    assert known["combined"]["value"] == 1.0 and unknown["combined"]["value"] == 0.0
    assert known["combined"]["n"] == unknown["combined"]["n"] >= 6  # 3 qa + at least 3 exam items
    assert known["members"]["qa"]["n"] == 3 and known["members"]["exam"]["n"] >= 3
    assert known["combined"]["lo"] > 0.6 and unknown["combined"]["hi"] < 0.4
    for topic in (light, cheese):
        assert cells[("all-knowing", topic)]["combined"]["value"] == 1.0
    assert s["disagreements"] == []  # qa and exam agree everywhere
    for m in s["members"]:
        assert m["linkage"]["unlinked"] == 0 and m["linkage"]["linked"] == m["linkage"]["judged"] > 0
    # Each member is a normal run with its own folder and report; the suite has its own folder too.
    runs = {p.name.split("-")[1] for p in out.iterdir() if p.name != result.run_dir.name}
    assert runs == {"qa", "exam"}
    for f in ("results.json", "report.html", "run.sqlite"):
        assert (result.run_dir / f).exists()
    html = (result.run_dir / "report.html").read_text()
    assert "Knowledge map" in html and "data:image/png;base64," in html
    assert "Mastery per topic" in html and "lighthouse-only" in html and "report.html" in html
    usage = s["usage"]
    assert [u["member"] for u in usage["members"]] == ["qa", "exam"]
    assert usage["total"]["calls"] == sum(u["calls"] for u in usage["members"]) > 0
    # The suite's record reads back typed: results.json is the result model; the kit stored the pooled
    # mastery of every cell as a metric, and the members' run folders as an artifact.
    with load_run(result.run_dir) as run:
        typed = run.result
        metrics = run.metrics()
        recorded = run.artifact("suite_members", MemberRuns)
    assert isinstance(typed, SuiteResult) and typed.model_dump(mode="json") == s
    assert typed.member_usage.total.calls == usage["total"]["calls"]
    assert {m.name for m in metrics} == {"mastery.combined"}
    light_name = next(t["name"] for t in s["topics"]["topics"] if t["topic_id"] == light)
    known_metric = next(m for m in metrics if m.subject == f"lighthouse-only @ {light} ({light_name})")
    assert known_metric.value == 1.0 and known_metric.n == known["combined"]["n"]
    assert len(metrics) == len(s["map"]) == 4
    assert recorded is not None and [r.member for r in recorded.runs] == ["qa", "exam"]
    assert all(Path(r.run_dir).is_dir() and r.usage.calls > 0 for r in recorded.runs)


def test_disagreeing_members_are_reported() -> None:
    from proctor.protocols.suite.evidence import Evidence, MemberEvidence
    from proctor.protocols.suite.knowledge_map import build_map
    from proctor.protocols.suite.topics import Topic, TopicModel

    topics = TopicModel(
        k=1,
        k_rule="k = 1",
        topics=[Topic(topic_id="t1", name="x", terms=["x"], chunk_ids=["c1"], sources=[])],
    )
    right = MemberEvidence("a", [Evidence("cand", f"a{i}", ("c1",), True) for i in range(20)])
    wrong = MemberEvidence("b", [Evidence("cand", f"b{i}", ("c1",), False) for i in range(20)])
    loose = MemberEvidence(
        "c",
        [
            Evidence("cand", "c0", ("c1",), False),
            Evidence("cand", "c1", ("c1",), True),
            Evidence("cand", "c2", ("nope",), True),
        ],
    )
    kmap = build_map(topics, ["cand"], {"a": right, "b": wrong, "c": loose})
    assert [(d.lower, d.higher) for d in kmap.disagreements] == [("b", "a")]  # c's 1/2 overlaps both
    assert kmap.cells[0].combined.n == 42 and kmap.cells[0].combined.k == 21
    assert kmap.linkage["c"].unlinked == 1 and kmap.linkage["c"].linked == 2


def test_rerun_is_fully_cached_with_identical_results(suite_config: Path, tmp_path: Path) -> None:
    out = tmp_path / "runs"
    first = run_config(suite_config, out=out, show_progress=False)
    second = run_config(suite_config, out=out, show_progress=False)
    assert first.run_dir != second.run_dir
    with load_run(second.run_dir) as run:
        recorded = run.artifact("suite_members", MemberRuns)
    assert recorded is not None
    members = [Path(m.run_dir) for m in recorded.runs]
    assert len(members) == 2
    for run_dir in members:
        total, cached = (
            sqlite3.connect(run_dir / "run.sqlite")
            .execute("SELECT COUNT(*), SUM(cached) FROM model_calls")
            .fetchone()
        )
        assert total > 0 and cached == total, run_dir
    assert (first.run_dir / "results.json").read_bytes() == (second.run_dir / "results.json").read_bytes()


def _member_store(tmp_path: Path, cfg: RunConfig) -> RunStore:
    """A member's run store with its run record (what `load_run` reads the config from)."""
    store = RunStore(tmp_path / "run.sqlite")
    store.start_run(tmp_path.name, cfg.protocol, cfg.model_dump(mode="json"), cfg.config_hash(), "test")
    return store


def test_bad_member_section_names_the_field(tmp_path: Path) -> None:
    bad = json.loads(json.dumps(CONFIG))
    bad["suite"]["members"][1]["exam"]["num_questions"] = 0
    with pytest.raises(UserError, match=r"suite\.members\[1\]\.exam\.num_questions"):
        load_config(_write(tmp_path, bad))
    bad["suite"]["members"][1]["exam"] = {"num_questons": 3}
    with pytest.raises(UserError, match=r"unknown field 'suite\.members\[1\]\.exam\.num_questons'"):
        load_config(_write(tmp_path, bad))
    bad["suite"]["members"][1] = {"protocol": "nonesuch"}
    with pytest.raises(UserError, match=r"suite\.members\[1\].*unknown protocol 'nonesuch'"):
        load_config(_write(tmp_path, bad))


def test_member_without_a_required_role_is_a_user_error(tmp_path: Path) -> None:
    bad = json.loads(json.dumps(CONFIG))
    bad["roles"] = {"judge": "judge"}
    with pytest.raises(UserError, match=r"suite\.members\[0\] \(qa\): roles\.examiner is required"):
        run_config(_write(tmp_path, bad), out=tmp_path / "runs", show_progress=False)
    # Refused before anything is written: no member ran, no run folder was made.
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_cli_exit_2_on_bad_member(tmp_path: Path) -> None:
    import subprocess
    import sys

    bad = json.loads(json.dumps(CONFIG))
    bad["suite"]["members"][0]["qa"]["num_questions"] = -1
    r = subprocess.run(
        [sys.executable, "-m", "proctor.cli.main", "run", str(_write(tmp_path, bad))],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "suite.members[0].qa.num_questions" in r.stderr


def test_demo_config_validates() -> None:
    from importlib import resources

    from proctor.config_paths import config_dir
    from proctor.kit.registry import get_protocol
    from proctor.protocols.suite.members import member_configs

    path = get_protocol("suite").demo_config
    assert path is not None
    data = str(resources.files("proctor") / "data")
    raw = yaml.safe_load(path.read_text().replace("${PROCTOR_DATA}", data))
    with config_dir(path.parent):
        cfg = RunConfig.model_validate(raw)
    members = member_configs(cfg)
    assert [m.protocol for m in members] == ["qa", "exam", "interview", "reckon"]
    assert all(m.cache_dir == cfg.cache_dir and m.candidates == cfg.candidates for m in members)


def test_resume_continues_the_members_and_the_suite(suite_config: Path, tmp_path: Path) -> None:
    out = tmp_path / "runs"
    first = run_config(suite_config, out=out, show_progress=False)
    again = run_config(suite_config, out=out, resume=True, show_progress=False)
    assert again.run_dir == first.run_dir
    assert len(list(out.iterdir())) == 3  # qa, exam, the suite: no new folder
    assert again.summary["map"] == first.summary["map"]


def test_reckon_evidence_reads_judged_units_on_their_chunks(tmp_path: Path) -> None:
    from proctor.protocols.reckon.run import ReckonItem
    from proctor.protocols.reckon.units import KnowledgeUnit
    from proctor.protocols.suite.evidence import member_evidence

    cfg = RunConfig.model_validate(
        {
            "protocol": "reckon",
            "corpus": {"path": "docs"},
            "models": {"m": "scripted/x"},
            "roles": {"examiner": "m", "judge": "m"},
            "candidates": [{"name": "cand", "model": "m"}],
        }
    )
    store = _member_store(tmp_path, cfg)
    for uid, chunks in (("u1", ["c1"]), ("u2", ["c1", "c2"]), ("u3", [])):
        unit = KnowledgeUnit(
            unit_id=uid, type="fact", keyword=uid, description="d", chunk_id=None, chunk_ids=chunks
        )
        store.put_item(uid, KnowledgeUnit.KIND, unit.model_dump(mode="json"))
    for uid, status in (("u1", "correct"), ("u2", "incorrect"), ("u3", "uncovered")):
        item = ReckonItem(
            item_id=f"{uid}@cand",
            candidate="cand",
            unit_id=uid,
            keyword=uid,
            unit_type="fact",
            cluster=None,
            status=status,
            round=1,
            times_asked=1,
            history=[],
            question_id=None,
            question_type=None,
            excerpt=None,
            reason=None,
            baseline_answer_key=None,
            scores={},
        )
        store.put_item(item.item_id, ReckonItem.KIND, item.model_dump(mode="json"))
    store.close()
    with load_run(tmp_path) as run:
        ev = member_evidence(run)
    assert [(e.item, e.chunk_ids, e.correct) for e in ev.items] == [
        ("u1@cand", ("c1",), True),
        ("u2@cand", ("c1", "c2"), False),
    ]
    assert ev.unjudged == 1  # the uncovered unit has no verdict


def test_exam_pipelines_map_to_candidates_by_identity(tmp_path: Path) -> None:
    """A grid cell with a candidate's model, retriever and k replaces the candidate's own pipeline
    (the exam grades one of them); it still counts for the candidate. Other cells stay out of the map."""
    from proctor.protocols.exam.result import PipelineSpec
    from proctor.protocols.suite.evidence import _exam_subjects

    pipes = [
        {"name": "m/closed_book/icl0", "model": "m", "retriever": "closed_book", "k": 3, "icl": 0},
        {"name": "m/closed_book/icl1", "model": "m", "retriever": "closed_book", "k": 3, "icl": 1},
        {"name": "m/bm25/icl0", "model": "m", "retriever": "bm25", "k": 3, "icl": 0},
        {"name": "rag/icl0", "model": "m", "retriever": "bm25", "k": 1, "icl": 0},
        {"name": "svc", "model": "", "retriever": "own", "k": 0, "icl": 0},
    ]
    cfg = RunConfig.model_validate(
        {
            "protocol": "exam",
            "corpus": {"path": "docs"},
            "models": {"m": "scripted/x"},
            "roles": {"examiner": "m"},
            "candidates": [
                {"name": "closed", "model": "m"},
                {"name": "rag", "model": "m", "retriever": "bm25", "k": 1},
                {"name": "svc", "python": "x:y"},
            ],
        }
    )
    of, others = _exam_subjects([PipelineSpec(**p, factors={}) for p in pipes], cfg)
    assert of == {"m/closed_book/icl0": "closed", "rag/icl0": "rag", "svc": "svc"}
    assert others == ["m/closed_book/icl1", "m/bm25/icl0"]


def test_interview_evidence_reads_base_answers_on_their_chunks(tmp_path: Path) -> None:
    from proctor.protocols.interview.answers import JUDGE, InterviewAnswer
    from proctor.protocols.interview.base import BaseQuestion
    from proctor.protocols.suite.evidence import member_evidence

    cfg = RunConfig.model_validate(
        {
            "protocol": "interview",
            "corpus": {"path": "docs"},
            "models": {"m": "scripted/x"},
            "roles": {"examiner": "m", "judge": "m"},
            "candidates": [{"name": "cand", "model": "m"}],
            "interview": {"from_run": "runs/exam"},
        }
    )
    store = _member_store(tmp_path, cfg)
    for qid, chunks, choices in (("q1", ["c1"], ["A", "B"]), ("q2", ["c2"], []), ("q3", ["c3"], [])):
        q = BaseQuestion(
            question_id=qid, question="?", choices=choices, answer_index=0 if choices else None, answer="A",
            difficulty="easy", difficulty_source="file", chunk_ids=chunks,
        )  # fmt: skip
        store.put_item(qid, BaseQuestion.KIND, q.model_dump(mode="json"))

    def answer(key: str, qid: str, stage: str, correct: bool | None) -> None:
        a = InterviewAnswer(
            candidate="cand", question_id=qid, question="?", reference_answer="A", answer="x", em=0.0, f1=0.0,
            stage=stage, variant=None, batch=0, round=0, difficulty="easy", correct=correct,
        )  # type: ignore[arg-type]  # fmt: skip
        store.put_item(key, InterviewAnswer.KIND, a.model_dump(mode="json"))

    answer("a1", "q1", "base", True)  # multiple choice: the letter decides
    answer("a2", "q2", "base", None)  # short answer: the judge decides
    store.put_judgment("a2", JUDGE, verdict="incorrect", score=0.0, reason="r")
    answer("a3", "q3", "base", None)  # short answer whose judgment failed: unjudged
    answer("a4", "q1", "validation", True)  # not a base question: left out
    store.close()
    with load_run(tmp_path) as run:
        ev = member_evidence(run)
    assert ev.supported
    assert [(e.item, e.chunk_ids, e.correct) for e in ev.items] == [
        ("a1", ("c1",), True),
        ("a2", ("c2",), False),
    ]
    assert ev.unjudged == 1


def test_interview_member_is_seeded_by_the_exam_member(tmp_path: Path) -> None:
    """`seed_from: exam`: the interview's base questions are the suite's exam items (its `from_run` is the
    exam member's run folder), and its base answers count in the knowledge map."""
    config = json.loads(json.dumps(CONFIG))
    config["suite"]["members"].append(
        {"protocol": "interview", "seed_from": "exam", "interview": {"rounds": 0, "batch_size": 3}}
    )
    result = run_config(_write(tmp_path, config), out=tmp_path / "runs", show_progress=False)
    members = {m["member"]: m for m in result.summary["members"]}
    assert members["interview"]["in_map"]
    exam_dir = next((tmp_path / "runs").glob("kmap-exam-*"))
    interview_dir = next((tmp_path / "runs").glob("kmap-interview-*"))
    run_cfg = json.loads(
        sqlite3.connect(interview_dir / "run.sqlite").execute("SELECT config_json FROM runs").fetchone()[0]
    )
    assert run_cfg["settings"]["from_run"] == str(exam_dir)
    assert members["interview"]["linkage"]["linked"] > 0
    # The lighthouse-only candidate answers the exam's lighthouse items right and the cheese items wrong.
    lh = [c for c in result.summary["map"] if c["candidate"] == "lighthouse-only"]
    by_topic = {c["topic_id"]: c["members"].get("interview") for c in lh}
    assert by_topic[_topic_of(result.summary, "lighthouse")]["value"] == 1.0
    assert by_topic[_topic_of(result.summary, "cheese")]["value"] == 0.0


@pytest.mark.parametrize(
    ("member", "message"),
    [
        ({"protocol": "interview", "seed_from": "nope"}, "not an earlier member"),
        ({"protocol": "qa", "seed_from": "exam"}, "reads no other run"),
        ({"protocol": "interview", "seed_from": "exam", "interview": {"from_run": "x"}}, "not both"),
    ],
)
def test_seed_from_mistakes_name_the_field(tmp_path: Path, member: dict, message: str) -> None:
    config = json.loads(json.dumps(CONFIG))
    config["suite"]["members"].append(member)
    with pytest.raises(UserError, match=message):
        load_config(_write(tmp_path, config))
