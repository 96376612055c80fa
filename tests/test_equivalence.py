"""The deterministic equivalence rules: each decides "correct" only when sure; the negative cases go to
the LLM (None)."""

from __future__ import annotations

import pytest

from proctor.judging.equivalence import (
    decide,
    missing_quantities,
    name_missing,
    nothing_beyond_question,
    other_name,
    quantities,
    veto,
)


@pytest.mark.parametrize(
    ("answer", "reference", "method"),
    [
        ("The Moot of Forty.", "moot of forty", "normalised_match"),
        ("The Copper Hall, a former warehouse.", "the Copper Hall", "contains_reference"),
        ("It is run by Tarnvik Lines from the north pier.", "Tarnvik Lines", "contains_reference"),
        ("It opened in 1887 after a public vote.", "1887", "numeric_equivalent"),
        ("seven", "7", "numeric_equivalent"),
        ("The ridge is 2,450 metres high.", "2450 m", "numeric_equivalent"),
        ("about 120 kilometres", "roughly 120 km", "numeric_equivalent"),
        ("roughly 25 percent of them", "about one in four", "numeric_equivalent"),
        ("a quarter of the fleet", "25%", "numeric_equivalent"),
        ("It was signed on March 12, 1887.", "12 March 1887", "same_date"),
        # Conversions between units of one dimension (within 2 %: writers round converted values).
        ("roughly 211 miles", "about 340 kilometres", "numeric_equivalent"),
        ("roughly 138 feet", "42 metres", "numeric_equivalent"),
        ("once a fortnight", "every 14 days", "numeric_equivalent"),
        ("within a week", "seven days", "numeric_equivalent"),
        ("half an hour", "30 minutes", "numeric_equivalent"),
        ("roughly a third of an hour", "about 20 minutes", "numeric_equivalent"),
        ("No less than half a day before the storm arrives.", "at least 12 hours", "numeric_equivalent"),
        ("every other year", "every two years", "numeric_equivalent"),
        ("roughly seven pieces in ten", "about 70 percent", "numeric_equivalent"),
        ("3 out of 5 households", "60 percent", "numeric_equivalent"),
        ("Six parts black sand to two parts kelp ash to one part crushed shell.", "6 : 2 : 1", "same_ratio"),
        # Areas and volumes; a unit in several words; a hyphen between a number and its unit.
        ("About 517 square feet.", "48 square metres", "numeric_equivalent"),
        ("4.8 hectares", "48,000 m²", "numeric_equivalent"),
        ("As much as about 158 US gallons.", "up to 600 litres", "numeric_equivalent"),
        ("A fortnight.", "a two-week voyage", "numeric_equivalent"),
        ("two-thirds of the catch", "two thirds", "numeric_equivalent"),
        # Times of day, written as digits, with am/pm or in words.
        ("Half past six in the morning.", "06:30", "same_time"),
        ("half past six", "06:30", "same_time"),  # no am/pm: either reading
        ("At 6.30am.", "06:30", "same_time"),
        ("quarter to seven in the evening", "18:45", "same_time"),
        ("at 9 pm", "21:00", "same_time"),
        # The reference written out among other numbers, not hedged or negated just before.
        ("The 2021 census counted 41,300 inhabitants, of whom 18,000 in the capital.", "41,300",
         "contains_reference"),
        ("Up to 480 passengers, along with 120 cars.", "up to 480", "contains_reference"),
        ("It was 1923 — not 1936, when the office was created.", "1923", "contains_reference"),
        # Temperatures across scales; spans in several units; a rate's "a year"; idioms for numbers.
        ("About 212 °F.", "100 °C", "numeric_equivalent"),
        ("roughly 50 degrees Fahrenheit", "10 °C", "numeric_equivalent"),
        ("About 1,830 °F.", "1,000 °C", "numeric_equivalent"),  # 1,832 °F, rounded to the tens
        ("Thirty-eight days.", "38 days", "numeric_equivalent"),
        ("A day and five hours.", "29 hours", "numeric_equivalent"),
        ("41.5 minutes", "41 minutes 30 seconds", "numeric_equivalent"),
        ("It takes nine and a half hours.", "9 h 30 min", "numeric_equivalent"),
        ("an hour and a half", "90 minutes", "numeric_equivalent"),
        ("38 cm a year, most of it in autumn.", "380 millimetres", "numeric_equivalent"),
        ("Half a dozen years.", "six years", "numeric_equivalent"),
        ("Biennially.", "every two years", "numeric_equivalent"),
        ("Fortnightly.", "every 14 days", "numeric_equivalent"),
        ("two decades", "20 years", "numeric_equivalent"),
        ("About 386 square miles.", "1,000 square kilometres", "numeric_equivalent"),
        # A number word as the reference, among other numbers.
        ("Seven judges sit on it, and they retire at 70.", "seven", "contains_reference"),
        # Several quantities, the same ones in the same order.
        ("About 33 feet long and 10 feet wide.", "10 metres long and 3 metres wide", "numeric_equivalent"),
        ("Whenever winds above 50 km/h or gusts above 80 km/h are forecast.",
         "wind above 50 km/h or gusts above 80 km/h", "numeric_equivalent"),
    ],
)  # fmt: skip
def test_rules_decide_when_sure(answer: str, reference: str, method: str) -> None:
    decision = decide(answer, reference)
    assert decision is not None and decision.method == method


@pytest.mark.parametrize(
    ("answer", "reference"),
    [
        ("It is not the Copper Hall.", "the Copper Hall"),  # negation just before the phrase
        ("Either the Copper Hall or the Tin Hall.", "the Copper Hall"),  # alternatives
        ("The Copper Hall / the Tin Hall", "the Copper Hall"),
        ("The Marrow Current brings warm water from the west.", "the Ostrel Current"),  # near-miss name
        ("The ferry company is Island Express", "Tarnvik Lines"),  # a confident invention
        ("about half", "about one in four"),  # a different share
        ("The ridge is 2,540 metres high.", "2450 m"),  # wrong number, right unit
        ("roughly 150 miles", "about 340 kilometres"),  # a wrong conversion
        ("an hour", "30 minutes"),  # a different span
        ("not half an hour", "30 minutes"),  # negated
        ("two parts sand to six parts ash to one part shell", "6 : 2 : 1"),  # the terms in another order
        ("Six rowers.", "six rowers and a steerer"),  # the number, but part of the reference is missing
        ("every other month", "every two years"),  # another unit of time that does not convert
        ("2450 feet", "2450 m"),  # right number, wrong unit
        ("It opened in 1887 or 1888.", "1887"),  # several numbers
        ("It did not open in 1887.", "1887"),  # negated
        ("It was signed on 13 March 1887.", "12 March 1887"),  # another day
        ("About 600 square feet.", "48 square metres"),  # a wrong conversion
        ("About 517 feet.", "48 square metres"),  # a length for an area
        ("About 158 gallons.", "up to 600 litres"),  # US or imperial: a fifth apart, not sure
        ("About 158 imperial gallons.", "up to 600 litres"),  # the other gallon: 718 litres
        ("12 acres", "about 5 hectares"),  # 4.86 ha: beyond the rounding allowed
        ("6:30 pm", "06:30"),  # the evening, not the morning
        ("half past seven", "06:30"),  # another time
        ("It does not leave at half past six.", "06:30"),  # negated
        ("It takes 6:30 hours.", "06:30"),  # a duration, not a time of day
        ("Maybe 2017, maybe 2019; I can't say which.", "2017"),  # hedged between numbers
        ("Possibly 1874, but I'd say 1847 is more likely.", "1874"),
        ("Somewhere between 1880 and 1887.", "1887"),  # a range
        ("It was 1888, not 1887.", "1887"),  # negated just before
        ("", "1887"),
        ("About 200 °F.", "100 °C"),  # 93 °C: a wrong conversion (rounding stays within 2 %)
        ("About 1,810 °F.", "1,000 °C"),  # 988 °C
        ("Thirty-nine days.", "38 days"),
        ("It surely didn't open as early as 1887; that was the vote.", "1887"),  # negated in its clause
        ("Nobody says seven; it has never had seven judges, but nine.", "seven"),
        ("A day and seven hours.", "29 hours"),  # 31 hours
        ("4.1 cm a year", "410 millimetres"),  # a tenth of it
        ("It did not take nine and a half hours.", "9 h 30 min"),  # negated
        ("every second month", "every two years"),  # months are not years
        ("About 10 feet long and 33 feet wide.", "10 metres long and 3 metres wide"),  # in the other order
        ("About 33 feet long.", "10 metres long and 3 metres wide"),  # one of two quantities
        ("33 feet long, 10 feet wide and 7 feet high", "10 metres long and 3 metres wide"),  # one more
    ],
)
def test_negative_cases_go_to_the_llm(answer: str, reference: str) -> None:
    assert decide(answer, reference) is None


def test_quantities_read_number_words_fractions_and_units() -> None:
    assert [(q.value, q.unit) for q in quantities("one in four")] == [(0.25, "share")]
    assert [(q.value, q.unit) for q in quantities("2,450 metres")] == [(2450.0, "m")]
    assert [(q.value, q.unit) for q in quantities("3 million people")] == [(3e6, "people")]


def test_qa_with_equivalence_rules_decides_without_judge_calls(tmp_path, monkeypatch) -> None:
    """qa.equivalence_rules: answers holding the reference are judged by the rule (method recorded on the
    judgment), with no judge call; without the option every answer goes to the LLM judge."""
    import json
    import sqlite3

    from proctor.runner import run_config
    from proctor.testing.mock_server import MockServer

    monkeypatch.setenv("PROCTOR_CACHE_DIR", str(tmp_path / "cache"))

    words = ["amber", "basalt", "cobalt", "dune", "ember", "fjord"]

    def reply(body: dict) -> str:
        text = next(m["content"] for m in body["messages"] if m["role"] == "user")
        if "Reference text" in text:
            word = words[sum(map(ord, text)) % len(words)]
            # The question does not state its answer (such questions are dropped).
            return json.dumps(
                {
                    "question": f"Which harbour is entry {words.index(word)} of the list?",
                    "answer": f"the {word} harbour",
                }
            )
        if "<candidate_answer>" in text:
            return json.dumps({"reason": "compared", "verdict": "correct"})
        word = next((w for i, w in enumerate(words) if f"entry {i} of" in text), "unknown")
        return f"It is the {word} harbour, as recorded."

    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(4):
        (docs / f"d{i}.md").write_text(f"# Topic {i}\n\n" + f"Statement {i} about the topic. " * 12)
    with MockServer(reply=reply) as server:
        results = {}
        for rules in (False, True):
            cfg = tmp_path / f"qa-{rules}.yaml"
            cfg.write_text(
                f"protocol: qa\ncorpus: {{path: docs, min_chunk_chars: 50, max_chunk_chars: 4000}}\n"
                f"models: {{m: {{spec: openai/mock, base_url: {server.base_url}}}}}\n"
                f"roles: {{examiner: m, judge: m}}\ncandidates: [{{name: a, model: m}}]\n"
                f"qa: {{num_questions: 4, judges: [with_reference], "
                f"equivalence_rules: {str(rules).lower()}}}\n"
            )
            run = run_config(cfg, out=tmp_path / "runs", show_progress=False)
            con = sqlite3.connect(run.run_dir / "run.sqlite")
            judge_calls = con.execute("SELECT COUNT(*) FROM model_calls WHERE role='judge'").fetchone()[0]
            methods = [
                json.loads(d)["method"]
                for (d,) in con.execute("SELECT data FROM judgments WHERE judge='llm_with_reference'")
            ]
            results[rules] = (judge_calls, methods, run.summary["candidates"]["a"]["accuracy_with_reference"])
            exported = [json.loads(line) for line in (run.run_dir / "items.jsonl").read_text().splitlines()]
            answers = [r for r in exported if r["kind"] == "answer"]
            assert {r["judge.llm_with_reference.method"] for r in answers} == set(methods)
            html = (run.run_dir / "report.html").read_text()
            assert "Who decided the verdicts" in html and f"<td><code>{methods[0]}</code></td>" in html
    assert results[False][0] == 4 and results[False][1] == ["llm"] * 4
    assert results[True][0] == 0 and results[True][1] == ["contains_reference"] * 4
    assert results[True][2]["value"] == results[False][2]["value"] == 1.0


@pytest.mark.parametrize(
    ("answer", "reference", "vetoed"),
    [
        ("The temperature is lower than on the mainland.", "Water boils at 91 °C, not at 100 °C.", True),
        ("They were first sold about 10 degrees later.", "Steam-kettles were first sold in 1958.", True),
        ("Water boils at 91 degrees there.", "Water boils at 91 °C, not at 100 °C.", False),
        ("An egg takes seven minutes.", "A soft-boiled egg takes 7 minutes.", False),
        ("roughly 25 percent", "about one in four", False),
        ("The number is 14.", "A dozen means fourteen fish, not twelve.", False),
        ("It was melted at 1,420 degrees.", "The batch is melted at 1420 °C for ten hours.", False),
        # No number in the reference (a pronoun "one" is not one): the guard has nothing to require.
        ("Almost every home has a pressure cooker.", "Almost every household owns one.", False),
        ("It is called storm green.", "Its colour is known as storm green.", False),
        # Another year, another number in the same unit (or both without one): sure.
        ("The crown granted it in 1578.", "1587", True),
        ("By about 12 percent.", "22 percent", True),
        ("Longer than 5 cm.", "longer than 50 cm", True),
        ("About 58.", "about 85", True),
        ("Every five years.", "every four years", True),
        ("The salt tax is two skell.", "The salt tax is nine pennocks.", True),
        ("The text does not say.", "23", True),
        ("The Orrinsford Institute.", "the Orrinsford Institute, in 1937", True),
        # A quantity with a unit needs an answer that speaks of its dimension ("two cities" is no time).
        ("The difference is due to the latitude of the two cities.", "An egg takes 7 minutes.", True),
        ("It is lower than on the mainland, as the two towns differ.", "Water boils at 91 °C.", True),
        # Written another way — words, other units, spans: left to the LLM.
        ("Nine hundred barrels of salted fish a year.", "900 barrels of salt fish", False),
        ("thirty-eight km", "38 kilometres", False),
        ("half an hour", "30 minutes", False),
        ("once a fortnight", "every 14 days", False),
        ("190 mm", "19 centimetres", False),
        ("1.092 km", "1,092 metres", False),
    ],
)
def test_quantity_guard_vetoes_only_answers_without_the_references_numbers(
    answer: str, reference: str, vetoed: bool
) -> None:
    decision = missing_quantities(answer, reference)
    assert (decision is not None) == vetoed
    if decision is not None:
        assert decision.method == "reference_quantity_missing"


@pytest.mark.parametrize(
    ("answer", "reference", "method"),
    [
        ("Maren Oakhill", "Maren Oakhalt", "reference_term_missing"),  # near spelling
        ("Harlsbury", "Harlsby", "reference_term_missing"),
        ("They call it the fog months.", "the grey months", "reference_term_missing"),  # one word off
        ("Dunmere, Orrinsford or Kettle Point.", "Dunmere", "alternatives_listed"),
        ("The crown granted it in 1578.", "1587", "reference_quantity_missing"),
        # Not sure: left to the LLM.
        ("Nothing; children ride at no charge.", "free", None),  # a paraphrase shares no word
        ("Maren Oakhalt, the first director.", "Maren Oakhalt", None),
        ("The Marrow Current brings warm water.", "the Ostrel Current", "reference_term_missing"),  # swapped
        # The reference's words said otherwise: a compound split up, a word derived from a root, reworded.
        ("Water from the sea.", "seawater", None),
        ("The wind that usually blows from the west.", "the prevailing westerly wind", None),
        ("The Drumm family.", "Ansel Drumm", None),  # the other word left out, none put in its place
        # Only a neighbour that could name something counts as put in the missing word's place.
        ("Where the River Tarn runs into the sea.", "at the mouth of the River Tarn", None),
        (
            "It faces into the wind that mostly blows in from the north.",
            "the prevailing northerly wind",
            None,
        ),
        ("At the source of the River Tarn.", "at the mouth of the River Tarn", "reference_term_missing"),
        ("It is neither blue nor red but storm green.", "storm green", None),  # negated alternatives
        ("The Skerry lighthouse and its keepers.", "the longest serving keeper of the light on Skerry", None),
    ],
)
def test_veto_is_sure_or_silent(answer: str, reference: str, method: str | None) -> None:
    decision = veto(answer, reference)
    assert (decision.method if decision else None) == method


@pytest.mark.parametrize(
    ("answer", "reference", "method"),
    [
        # A part of a reference that lists short items is missing.
        ("Black sand and kelp ash.", "black sand, kelp ash and crushed seashell", "reference_part_missing"),
        ("Six rowers.", "six rowers and a steerer", "reference_part_missing"),
        ("gutter, then a sand filter", "gutter, settling tank, sand filter, then ultraviolet treatment",
         "reference_part_missing"),
        # One of the numbers of a short several-number reference is missing.
        ("It dropped to roughly 6,500.", "it fell from about 9,000 to about 6,500",
         "reference_quantity_missing"),
        ("Sustained winds above 65 km/h.", "sustained wind above 65 km/h or gusts above 90 km/h",
         "reference_quantity_missing"),
        # Negative cases: the guard stays silent.
        ("crushed shells, black sands and ash of kelp", "black sand, kelp ash and crushed seashell", None),
        ("thirty-four hundred", "3,400", None),  # a comma inside a number is not a list
        ("nine and a half hours", "9 hours 30 minutes", None),  # one span in two units
        # A sentence stating a fact with side numbers is not a several-number answer.
        ("It was melted at 1,420 degrees.", "The batch is melted at 1420 °C for ten hours.", None),
        ("91 degrees", "91 °C, not 100 °C", None),  # the other number is a contrast
        ("100 degrees, as anywhere.", "91 °C, not 100 °C", "reference_quantity_missing"),  # the ruled-out one
        ("91 °C, where the mainland has 100 °C.", "lower: 91 °C instead of 100 °C", None),
        # A part stated as the same quantity in another unit is there; a missing part still is not.
        ("A fortnight sailing round the island.", "around the island, for two weeks", None),
        ("A fortnight in port.", "around the island, for two weeks", "reference_part_missing"),
        # A reference that is itself a choice: an answer naming the same choice offers no alternatives.
        ("Either winds above 50 km/h or gusts above 80 km/h.", "wind above 50 km/h or gusts above 80 km/h",
         None),
        # The right amount in a currency the reference does not use.
        ("$12 each way.", "12 skell", "reference_quantity_missing"),
        ("About 12 euros.", "12 skell", "reference_quantity_missing"),
        ("12 skell each way.", "12 skell", None),
        # A range around the reference's number commits to neither end.
        ("Somewhere between 60 and 90, I'd guess nearer 90.", "about 60", "alternatives_listed"),
        ("between 60 and 90 people", "between 60 and 90", None),
    ],
)  # fmt: skip
def test_guards_for_partial_answers(answer: str, reference: str, method: str | None) -> None:
    decision = veto(answer, reference)
    assert (decision.method if decision else None) == method


QUESTION = (
    "What are the uses of tidal glass, and how does it shape older houses in Orrinsford? Also tell me about "
    "the dozen at the fish market. Then tell me what else you know about these."
)


@pytest.mark.parametrize(
    ("answer", "reference", "vetoed"),
    [
        # Echoes of the question: nothing of the reference that the question did not already say.
        ("Older houses in Orrinsford are shaped by tidal glass.", "Older houses in Orrinsford have windows "
         "of thin tidal glass, which give their rooms a greenish light.", True),
        ("A dozen is a dozen fish.", "At the fish market, a dozen means fourteen fish.", True),
        ("Tidal glass is used in construction.", "Tidal glass is best known for bottles and bowls.", True),
        # Something beyond the question: a word (by stem) or a number of the reference.
        ("Their windows are thin and give a green light.", "Older houses in Orrinsford have windows of "
         "thin tidal glass, which give their rooms a greenish light.", False),
        ("A dozen there is 14 fish.", "At the fish market, a dozen means fourteen fish.", False),
        ("Mostly bowls.", "Tidal glass is best known for bottles and bowls.", False),
        # A wrong statement beyond the question is the judge's business, not this guard's.
        ("It is known for bottles made in 1990.", "Tidal glass is best known for bottles and bowls.", False),
        # The question gives the whole reference away: nothing left to require.
        ("Tidal glass shapes older houses.", "Tidal glass shapes older houses in Orrinsford.", False),
    ],
)  # fmt: skip
def test_nothing_beyond_the_question(answer: str, reference: str, vetoed: bool) -> None:
    decision = nothing_beyond_question(answer, reference, QUESTION)
    assert (decision is not None) == vetoed


@pytest.mark.parametrize(
    ("answer", "reference", "question", "method"),
    [
        # A confident guess that names something else: the question does not give it, the reference's
        # words are absent.
        ("The capital is Bramholt.", "Orrinsford", "Which town is the capital?", "other_name"),
        ("Bramholt.", "Orrinsford", "Which town is the capital?", "other_name"),  # a bare name opens it
        ("The ferry is run by North Sea Lines.", "the state ferry company of Teskavar",
         "Who runs the Sellin ferry?", "other_name"),
        # The question asks for a name; the answer describes instead, or names nothing of the reference.
        ("The warden is the head of the fog service.", "Hanne Cortwell",
         "What is the name of the current Fog Warden?", "reference_name_missing"),
        ("It is called the krone.", "skell", "What is the currency called?", "reference_name_missing"),
        ("They are the town's water stores.", "the Hundred Cisterns", "What are the cisterns called?",
         "reference_name_missing"),
        # Negative cases: the reference's name is there, or the answer describes without naming another
        # and the question does not ask for the name.
        ("It is called skell.", "skell", "What is the currency called?", None),
        ("Cortwell — Hanne, I think.", "Hanne Cortwell", "What is the name of the current Fog Warden?",
         None),
        ("The largest town, on the south coast.", "Orrinsford", "Which town is the capital?", None),
        ("The island's only research body, in the capital.", "the Orrinsford Institute",
         "Which organisation measured it?", None),
        ("It is the Orrinsford Institute, near Dunmere Quay.", "the Orrinsford Institute",
         "Which organisation measured it?", None),
        ("Every two years, in June.", "every two years", "How often does the Midfell choir meet?", None),
    ],
)  # fmt: skip
def test_name_guards(answer: str, reference: str, question: str, method: str | None) -> None:
    decision = veto(answer, reference, question)
    assert (decision.method if decision else None) == method
    # Without the question the name guards do not run: they cannot tell what the question gave away.
    without = veto(answer, reference)
    assert without is None or without.method not in ("other_name", "reference_name_missing")
    if method == "reference_name_missing":
        not_asked = question.replace("the name of ", "").replace("called", "like")
        assert name_missing(answer, reference, not_asked) is None
    if method == "other_name":
        assert other_name(answer, reference, f"{question} {answer}") is None  # the question gave it


def test_a_unit_added_through_the_table_alone_is_read_in_values_ranges_and_conversions() -> None:
    """One `Unit` row (a made-up unit with names, an abbreviation and a factor to metres, and its square)
    is all it takes: values, hyphens, ranges of several quantities, conversions, square spellings and the
    quantity guard's dimension words all come from the table."""
    from proctor.judging.equivalence import Unit, units_added

    furlong = Unit("fur", ("furlong", "furlongs"), ("fur",), "length", 201.168)
    square = Unit("sqfur", (), ("sqfur",), "area", 201.168**2, square_of="fur")
    assert [q.unit for q in quantities("3 furlongs")] == [None]  # unknown before
    with units_added(furlong, square):
        assert [(q.value, q.unit) for q in quantities("3 furlongs")] == [(3.0, "fur")]
        assert [(q.value, q.unit) for q in quantities("a 3-furlong race")] == [(3.0, "fur")]
        assert [(q.value, q.unit) for q in quantities("2 fur to 4 fur")] == [(2.0, "fur"), (4.0, "fur")]
        assert [(q.value, q.unit) for q in quantities("2 square furlongs")] == [(2.0, "sqfur")]
        # Conversions: 3 furlongs is 603.5 m; a range in the same order; a wrong conversion is not sure.
        assert decide("about 603 metres", "3 furlongs").method == "numeric_equivalent"  # type: ignore[union-attr]
        assert decide("between 402 m and 805 m", "between 2 furlongs and 4 furlongs") is not None
        assert decide("between 805 m and 402 m", "between 2 furlongs and 4 furlongs") is None
        assert decide("about 700 metres", "3 furlongs") is None
        assert decide("about 8 hectares", "2 square furlongs") is not None  # 8.09 ha
        # The guard knows its dimension: an answer speaking of time states no length; of furlongs, it may.
        assert missing_quantities("several hours", "3 furlongs") is not None
        assert missing_quantities("several furlongs", "3 furlongs") is None
        assert missing_quantities("It is 5 furlongs.", "3 furlongs") is not None  # another number, same unit
    assert [q.unit for q in quantities("3 furlongs")] == [None]  # the table is back as it was


def test_rules_and_guards_are_named_and_language_keyed() -> None:
    """Every rule and guard has a stable unique name (the method its decisions record), English as its
    language and a docstring saying what it is sure of; an unknown language is refused, not read as
    English."""
    from proctor.judging.equivalence import EXTRA_GUARDS, GUARD_METHODS, GUARDS, RULES

    rules, guards = RULES["en"], GUARDS["en"] + EXTRA_GUARDS["en"]
    assert len({r.name for r in rules}) == len(rules) and len({g.name for g in guards}) == len(guards)
    assert all(x.language == "en" and "sure" in x.doc.lower() for x in (*rules, *guards))
    assert set(GUARD_METHODS) == {g.name for g in guards}
    decision = decide("It opened in 1887 after a public vote.", "1887")
    assert decision is not None and decision.method in {r.name for r in rules}
    with pytest.raises(ValueError, match="language"):
        decide("1887", "1887", language="xx")


@pytest.mark.parametrize(
    ("answer", "reference", "question", "method"),
    [
        # The answer's only overlap with the reference is what the question already says: not credited.
        ("the Varsland economy", "Varsland", "Which country is the one where the Varsland economy is based?",
         None),
        ("Varsland", "Varsland", "Which country is the one where the Varsland economy is based?", None),
        ("In 1887, as the question says.", "1887", "Was the 1887 charter signed in 1887?", None),
        # A right answer that shares a word with the question is still credited.
        ("The Copper Hall hosts it.", "the Copper Hall", "Which hall hosts the Moot of Forty?",
         "contains_reference"),
        ("It opened in 1887, after the vote.", "1887", "When did the hall open after the vote?",
         "numeric_equivalent"),
        ("Aud Tennick led them.", "Aud Tennick", "Who led the families from Varsland?", "contains_reference"),
    ],
)  # fmt: skip
def test_rules_do_not_credit_an_answer_that_only_repeats_the_question(
    answer: str, reference: str, question: str, method: str | None
) -> None:
    decision = decide(answer, reference, question)
    assert (decision.method if decision else None) == method
    assert decide(answer, reference) is not None  # without the question the rules would credit it
