"""The domain database environment: schema errors name the field and the fix; search ranks exact, then
all-words, then substring, then fuzzy, with a type filter; entities and relations on hand-checked rows
(typed attributes, link tables, key columns, a self-relation in both directions); wrong relations, ids
and types become observations naming the valid choices; the SQL tool is read-only, one SELECT, bounded in
rows and time; aliases; the content-hashed cache file; and the fictional academic database: deterministic
for a seed, and the shipped copy is the generator's seed-0 output."""

from __future__ import annotations

import asyncio
import itertools
import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from proctor.agents.environments import database
from proctor.agents.environments.academic import SHIPPED, generate
from proctor.agents.environments.database import DatabaseEnvironment, QueryError
from proctor.agents.tools import Toolbox, ToolCall
from proctor.errors import UserError

TABLES = {
    "people.csv": "id,name,born,active\np1,Ada Verrane,1901,yes\np2,Adam Verran,1950,no\n"
    "p3,Hollis Tarn,1930,yes\np4,Verrane Holt,1977,\n",
    "orgs.jsonl": '{"id": "o1", "name": "Ambry Institute", "founded": 1862, "public": true}\n\n'
    '{"id": "o2", "name": "Tarn College", "founded": 1901, "public": false}\n',
    "papers.csv": (
        "id,title,year,venue\nx1,On Tides,1990,v1\nx2,Fog and Light,2001,v1\nx3,Tides Again,2005,\n"
    ),
    "venues.csv": "id,name\nv1,Letters of Tides\n",
    "member.csv": "pid,oid\np1,o1\np2,o1\np3,o2\n",
    "authors.csv": "person_id,paper_id\np1,x1\np2,x1\np1,x2\np3,x3\np1,x1\n",  # a duplicate row
    "coauthor.csv": "a,b\np1,p2\n",
}
SCHEMA = """
entities:
  person: {file: people.csv, attributes: {born: int, active: bool}}
  org: {file: orgs.jsonl}
  paper: {file: papers.csv, name: title}
  venue: {file: venues.csv}
relations:
  member_of: {from: person, to: org, file: member.csv, columns: [pid, oid]}
  author_of: {from: person, to: paper, file: authors.csv}
  published_in: {from: paper, to: venue, key: venue}
  coauthor: {from: person, to: person, file: coauthor.csv, columns: [a, b]}
tools:
  searchPerson: {tool: search_entity, type: person}
  getPersonPapers: {tool: get_related, relation: author_of, fields: [year]}
  getPaper: {tool: get_entity, type: paper, include: [published_in, author_of]}
sql: {max_rows: 2, seconds: 0.3}
"""


def _write(folder: Path, schema: str = SCHEMA, **changes: str) -> Path:
    for name, text in {**TABLES, **changes}.items():
        (folder / name).write_text(text)
    (folder / "schema.yaml").write_text(schema)
    return folder / "schema.yaml"


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> DatabaseEnvironment:
    monkeypatch.setattr(
        database, "_FUZZY", database._difflib_ratio
    )  # the same ranking with or without rapidfuzz
    return DatabaseEnvironment.from_schema(_write(tmp_path))


def call(db: DatabaseEnvironment, tool_name: str, /, **args: Any) -> ToolCall:
    return asyncio.run(Toolbox(db.tools()).call(tool_name, args))


def result(db: DatabaseEnvironment, tool_name: str, /, **args: Any) -> Any:
    c = call(db, tool_name, **args)
    assert c.error is None, c.error
    return json.loads(c.result or "")


def error(db: DatabaseEnvironment, tool_name: str, /, **args: Any) -> str:
    c = call(db, tool_name, **args)
    assert c.error is not None and c.result is None, c
    # A request the database cannot answer as asked is the caller's mistake: a refused call (the model
    # reads the message itself), never a tool fault.
    assert c.error.startswith("refused: ") and c.observation == c.error.removeprefix("refused: ")
    return c.error


# --- schema errors -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new", "changes", "message"),
    [
        ("people.csv, attributes", "nobody.csv, attributes", {}, r"entities\.person\.file: nobody\.csv does not exist"),  # noqa: E501
        ("{file: venues.csv}", "{file: venues.csv, name: label}", {},
         r"entities\.venue\.name: column 'label' \(the name\) is not in venues\.csv \(its columns: id, name\)"),  # noqa: E501
        ("active: bool", "height: float", {}, r"entities\.person\.attributes\.height: column 'height'"),
        ("columns: [pid, oid]", "columns: [pid, org]", {}, r"relations\.member_of\.columns: column 'org'"),
        ("key: venue", "key: venue_id", {}, r"relations\.published_in\.key: column 'venue_id'"),
        ("to: org", "to: company", {}, r"relations\.member_of\.to: 'company' is not an entity type .*person, org"),  # noqa: E501
        ("key: venue", "key: venue, file: papers.csv", {}, r"relations\.published_in: give either `file`"),
        ("relation: author_of", "relation: wrote", {}, r"tools\.getPersonPapers: 'wrote' is not a relation"),
        ("type: paper", "type: book", {}, r"tools\.getPaper\.type: 'book' is not an entity type"),
        ("searchPerson", "get_entity", {}, r"tools: get_entity is a generic tool's name"),
        ("sql:", "colour: blue\nsql:", {}, r"colour: Extra inputs are not permitted"),
        ("", "", {"people.csv": "id,name,born,active\np1,Ada,c. 1900,yes\n"},
         r"entities\.person\.attributes\.born: people\.csv row 2 has 'c\. 1900', not a int"),
        ("", "", {"venues.csv": "id,name\np1,Letters\n"}, r"the id 'p1' .* is already used by a person; ids must be unique"),  # noqa: E501
        ("", "", {"member.csv": "pid,oid\np1,o1\np9,o1\n"},
         r"relations\.member_of: member\.csv row 3 links 'p9', which is no entity, not a person"),
        ("", "", {"member.csv": "pid,oid\np1,x1\n"}, r"links 'x1', which is a paper, not a org"),
        ("", "", {"orgs.jsonl": '{"id": "o1", "name": "A"}\n[1, 2]\n'}, r"orgs\.jsonl line 2 is not a JSON object"),  # noqa: E501
    ],
)  # fmt: skip
def test_schema_errors_name_the_field_and_the_fix(
    tmp_path: Path, old: str, new: str, changes: dict[str, str], message: str
) -> None:
    path = _write(tmp_path, SCHEMA.replace(old, new, 1) if old else SCHEMA, **changes)
    with pytest.raises(UserError, match=message) as e:
        DatabaseEnvironment.from_schema(path)
    assert str(path) in str(e.value) and "\n" not in str(e.value)


def test_a_missing_schema_file_or_bad_yaml_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"the schema file .*missing\.yaml does not exist"):
        DatabaseEnvironment.from_schema(tmp_path / "missing.yaml")
    with pytest.raises(UserError, match="not valid YAML"):
        DatabaseEnvironment.from_schema(_write(tmp_path, "entities: [unclosed"))


# --- search --------------------------------------------------------------------------------------------


def test_search_ranks_exact_then_all_words_then_substring_then_fuzzy(db: DatabaseEnvironment) -> None:
    hits = result(db, "search_entity", name="ada verrane")  # case aside, it is p1's exact name
    assert hits[0] == {"id": "p1", "type": "person", "name": "Ada Verrane", "score": 1.0}
    assert hits[1]["id"] == "p2" and hits[1]["score"] < 0.8  # "Adam Verran": fuzzy only
    assert [h["id"] for h in result(db, "search_entity", name="Verrane")][:3] == ["p1", "p4", "p2"]
    ada = result(db, "search_entity", name="Ada")  # a word of p1's name; only inside p2's "Adam"
    assert [h["id"] for h in ada][:2] == ["p1", "p2"] and ada[0]["score"] >= 0.9 > ada[1]["score"] >= 0.8
    assert result(db, "search_entity", name="Hollis Tran")[0]["id"] == "p3"  # a typo still finds him
    assert result(db, "search_entity", name="qqqqzzzz") == []


def test_search_filters_by_type_and_names_the_types(db: DatabaseEnvironment) -> None:
    assert {h["id"] for h in result(db, "search_entity", name="Tides")} == {"x1", "x3", "v1"}
    assert [h["id"] for h in result(db, "search_entity", name="Tides", type="venue")] == ["v1"]
    assert [h["id"] for h in result(db, "searchPerson", name="Tarn")] == ["p3"]  # not Tarn College
    assert "unknown entity type 'book'; the types are person, org, paper, venue" in error(
        db, "search_entity", name="Tides", type="book"
    )


# --- entities and relations ----------------------------------------------------------------------------


def test_get_entity_returns_typed_attributes(db: DatabaseEnvironment) -> None:
    assert result(db, "get_entity", id="p1") == {
        "id": "p1", "type": "person", "name": "Ada Verrane", "born": 1901, "active": True
    }  # fmt: skip
    assert result(db, "get_entity", id="p4") == {
        "id": "p4",
        "type": "person",
        "name": "Verrane Holt",
        "born": 1977,
    }
    assert result(db, "get_entity", id=" 'O2' ") == {  # quotes and casing slips forgiven
        "id": "o2", "type": "org", "name": "Tarn College", "founded": 1901, "public": False
    }  # fmt: skip
    assert result(db, "get_entity", id="x1") == {
        "id": "x1", "type": "paper", "title": "On Tides", "year": 1990, "venue": "v1"
    }  # fmt: skip
    assert "no entity has the id 'zz9'" in error(db, "get_entity", id="zz9")
    assert "invalid_arguments" in (call(db, "get_entity", ident="p1").error or "")


def test_get_related_both_directions(db: DatabaseEnvironment) -> None:
    assert result(db, "get_related", id="p1", relation="member_of") == [
        {"id": "o1", "name": "Ambry Institute"}
    ]
    assert result(db, "get_related", id="o1", relation="member_of") == [
        {"id": "p1", "name": "Ada Verrane"}, {"id": "p2", "name": "Adam Verran"}
    ]  # fmt: skip
    assert [r["id"] for r in result(db, "get_related", id="p1", relation="author_of")] == [
        "x1",
        "x2",
    ]  # deduped
    assert result(db, "get_related", id="p2", relation="coauthor") == [{"id": "p1", "name": "Ada Verrane"}]
    assert result(db, "get_related", id="p1", relation="coauthor") == [{"id": "p2", "name": "Adam Verran"}]
    assert [r["id"] for r in result(db, "get_related", id="v1", relation="published_in")] == ["x1", "x2"]
    assert result(db, "get_related", id="x3", relation="published_in") == []  # a blank key links nothing


def test_a_wrong_relation_is_an_observation_naming_the_valid_ones(db: DatabaseEnvironment) -> None:
    msg = error(db, "get_related", id="p1", relation="published_in")
    assert "'published_in' is not a relation of a person ('p1')" in msg
    assert "member_of (person -> org), author_of (person -> paper), coauthor (person -> person)" in msg
    assert "no entity has the id 'q1'" in error(db, "get_related", id="q1", relation="member_of")


def test_python_api_gives_typed_rows(db: DatabaseEnvironment) -> None:
    people = db.entities("person")
    assert [r.id for r in people] == ["p1", "p2", "p3", "p4"]
    assert people[0].attributes == {"id": "p1", "name": "Ada Verrane", "born": 1901, "active": True}
    assert people[3].attributes["active"] is None
    assert [r.name for r in db.related("o1", "member_of")] == ["Ada Verrane", "Adam Verran"]
    assert db.related("x1", "member_of") == []  # a relation that does not touch papers links nothing
    with pytest.raises(QueryError, match="unknown relation 'wrote'"):
        db.related("p1", "wrote")
    with pytest.raises(QueryError, match="unknown entity type"):
        db.entities("book")
    assert db.query("SELECT count(*) AS n FROM author_of") == [{"n": 4}]
    assert db.query("SELECT venue FROM published_in WHERE paper_id = ?", ["x1"]) == [{"venue": "v1"}]
    assert db.entity("nobody") is None and db.relations_of("venue") == ["published_in"]
    with pytest.raises(sqlite3.OperationalError, match=r"readonly|query_only"):
        db._db.execute("DELETE FROM person")


def test_aliases_fix_type_relation_fields_and_include(db: DatabaseEnvironment) -> None:
    box = Toolbox(db.tools())
    assert box.tools["searchPerson"].signature() == "searchPerson(name: str)"
    assert result(db, "getPersonPapers", id="p1") == [
        {"id": "x1", "name": "On Tides", "year": 1990}, {"id": "x2", "name": "Fog and Light", "year": 2001}
    ]  # fmt: skip
    paper = result(db, "getPaper", id="x1")
    assert paper["published_in"] == [{"id": "v1", "name": "Letters of Tides"}]
    assert paper["author_of"] == [{"id": "p1", "name": "Ada Verrane"}, {"id": "p2", "name": "Adam Verran"}]
    assert "'p1' is a person, not a paper" in error(db, "getPaper", id="p1")
    assert "'author_of' is not a relation of a venue" in error(db, "getPersonPapers", id="v1")
    assert set(box.tools) == {
        "search_entity", "get_entity", "get_related", "searchPerson", "getPersonPapers", "getPaper", "sql"
    }  # fmt: skip


def test_a_name_where_an_id_is_expected_names_the_search_tool_that_gives_ids(db: DatabaseEnvironment) -> None:
    box = Toolbox(db.tools())
    # The errors say which call gives the id (the schema's search alias for the type, else search_entity)
    # and show an id of the wanted type; the descriptions say it before the first call.
    msg = error(db, "getPersonPapers", id="Ada Verrane")
    assert "no entity has the id 'Ada Verrane': pass an id, not a name" in msg
    assert "Call searchPerson(name) first" in msg and "'p1'" in msg  # the alias starts from a person
    assert "Call search_entity(name) first" in error(db, "get_related", id="Ada", relation="member_of")
    msg = error(db, "getPaper", id="On Tides")
    assert "pass a paper's id, not a name. Call search_entity(name) first" in msg and "'x1'" in msg
    assert "(from search_entity)" in error(db, "getPaper", id="p1")
    assert box.tools["getPersonPapers"].description.endswith(
        "Pass a person's id from searchPerson, not a name."
    )
    assert box.tools["getPaper"].description.endswith("Pass a paper id from search_entity, not a name.")
    assert "not a name" in box.tools["get_entity"].description
    assert "not a name" in box.tools["get_related"].description
    assert db.id_source("person") == "searchPerson" and db.id_source("paper") == "search_entity"


# --- the SQL tool --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "query",
    [
        "INSERT INTO person (id, name) VALUES ('p9', 'Eve')",
        "UPDATE person SET name = 'Eve'",
        "DROP TABLE person",
        "DELETE FROM person",
        "ATTACH DATABASE '{tmp}/evil.db' AS evil",
        "PRAGMA query_only = OFF",
        "SELECT 1; DROP TABLE person",
        "SELECT 1; SELECT 2",
        "WITH x AS (SELECT 1) DELETE FROM person",
        "WITH x AS (SELECT 1) INSERT INTO venue SELECT 'v9', 'x' FROM x",
        "SELECT * FROM pragma_table_info('person')",
        "CREATE TABLE t (x)",
    ],
)
def test_sql_refuses_anything_but_one_select(db: DatabaseEnvironment, tmp_path: Path, query: str) -> None:
    msg = error(db, "sql", query=query.format(tmp=tmp_path))
    assert "only a single SELECT" in msg or "only reading the tables is allowed" in msg
    assert db.query("SELECT count(*) AS n FROM person") == [{"n": 4}]
    assert result(db, "sql", query="SELECT count(*) AS n FROM person") == [{"n": 4}]
    assert not (tmp_path / "evil.db").exists()


def test_sql_answers_within_row_and_time_limits(db: DatabaseEnvironment) -> None:
    assert result(db, "sql", query="select name from person where born < 1940 order by id;") == [
        {"name": "Ada Verrane"}, {"name": "Hollis Tarn"}
    ]  # fmt: skip
    assert result(db, "sql", query="SELECT ';' AS semicolon") == [{"semicolon": ";"}]
    cut = call(db, "sql", query="SELECT id FROM person ORDER BY id")
    assert cut.result is not None and cut.result.startswith(
        '[{"id": "p1"}, {"id": "p2"}] (only the first 2 rows'
    )
    start = time.perf_counter()
    msg = error(
        db,
        "sql",
        query="WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT max(x) FROM c",
    )
    assert "ran longer than 0.3 s and was stopped" in msg and time.perf_counter() - start < 2.0
    assert "string or blob too big" in error(db, "sql", query="SELECT zeroblob(100000000)")
    assert "no such table: nobody" in error(db, "sql", query="SELECT * FROM nobody")
    assert result(db, "sql", query="SELECT 1 AS one") == [{"one": 1}]  # the connection still works


def test_no_sql_tool_unless_the_schema_offers_it(tmp_path: Path) -> None:
    env = DatabaseEnvironment.from_schema(_write(tmp_path, SCHEMA.split("sql:")[0]))
    assert "sql" not in {t.name for t in env.tools()}


def test_cache_file_is_keyed_by_content_and_read_only(tmp_path: Path) -> None:
    schema, cache = _write(tmp_path), tmp_path / "cache"
    first = DatabaseEnvironment.from_schema(schema, cache_dir=cache)
    assert first.path is not None and first.path.parent == cache and first.path.is_file()
    built = first.path.stat().st_mtime_ns
    again = DatabaseEnvironment.from_schema(schema, cache_dir=cache)
    assert again.path == first.path and again.path.stat().st_mtime_ns == built
    assert [r.id for r in again.related("o1", "member_of")] == ["p1", "p2"]
    assert result(again, "sql", query="SELECT count(*) AS n FROM paper") == [{"n": 3}]
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        again._db.execute("DELETE FROM person")
    (tmp_path / "member.csv").write_text("pid,oid\np1,o2\n")
    changed = DatabaseEnvironment.from_schema(schema, cache_dir=cache)
    assert changed.path != first.path and [r.id for r in changed.related("o2", "member_of")] == ["p1"]
    assert sorted(p.suffix for p in cache.iterdir()) == [".sqlite", ".sqlite"]  # no half-built files left


# --- the fictional academic database -------------------------------------------------------------------


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def test_generator_is_deterministic_and_the_shipped_data_is_seed_0(tmp_path: Path) -> None:
    generate(tmp_path / "a", seed=3)
    generate(tmp_path / "b", seed=3)
    assert _files(tmp_path / "a") == _files(tmp_path / "b")
    generate(tmp_path / "zero", seed=0)
    shipped = _files(SHIPPED)
    assert _files(tmp_path / "zero") == shipped
    assert _files(tmp_path / "a")["persons.csv"] != shipped["persons.csv"]
    assert sum(len(b) for b in shipped.values()) < 300_000


def test_module_entry_point_regenerates(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "proctor.agents.environments.academic", str(tmp_path / "x"), "--seed", "0"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert out.stdout.strip().endswith("schema.yaml") and _files(tmp_path / "x") == _files(SHIPPED)


def test_shipped_academic_database_is_consistent() -> None:
    db = DatabaseEnvironment.from_schema(SHIPPED / "schema.yaml")
    counts = {t: len(db.entities(t)) for t in db.types}
    assert counts == {"person": 60, "organisation": 10, "publication": 120, "venue": 8, "interest": 16}
    assert all(len(db.related(p.id, "member_of")) == 1 for p in db.entities("person"))
    # coauthorship is exactly "shares a publication"
    shared = {
        tuple(sorted(pair))
        for pub in db.entities("publication")
        for pair in itertools.combinations([r.id for r in db.related(pub.id, "author_of")], 2)
    }
    assert {(r["person_id"], r["coauthor_id"]) for r in db.query("SELECT * FROM coauthor")} == shared
    # the Python API agrees with SQL on every person's publications
    for p in db.entities("person"):
        via_sql = db.query("SELECT publication_id FROM author_of WHERE person_id = ? ORDER BY rowid", [p.id])
        assert [r.id for r in db.related(p.id, "author_of")] == [r["publication_id"] for r in via_sql]
    pub = db.entities("publication")[0]
    assert isinstance(pub.attributes["year"], int) and isinstance(pub.attributes["citations"], int)
    # R-Eval's AMiner tool names over the generic tools
    names = {t.name for t in db.tools()}
    assert {"searchPerson", "searchPublication", "getCoauthors", "getPersonInterest", "getPublication",
            "getPersonBasicInfo", "getPersonPubs"} <= names  # fmt: skip
    person = db.entities("person")[0]
    hits = result(db, "searchPerson", name=person.name)
    assert hits[0]["id"] == person.id and hits[0]["score"] == 1.0
    info = result(db, "getPersonBasicInfo", id=person.id)
    assert info["member_of"] == [{"id": r.id, "name": r.name} for r in db.related(person.id, "member_of")]
