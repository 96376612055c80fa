"""The domain database environment: schema errors name the field, search ranks exact before fuzzy,
relations in both directions, wrong relations and ids become observations, the SQL tool is read-only and
bounded, aliases; the shipped fictional academic database equals the generator's output for seed 0."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from proctor.agents.environments.academic import SHIPPED, generate
from proctor.agents.environments.database import DatabaseEnvironment
from proctor.agents.tools import Toolbox
from proctor.errors import UserError


def _write(folder: Path, schema: str, tables: dict[str, str]) -> Path:
    for name, text in tables.items():
        (folder / name).write_text(text)
    (folder / "schema.yaml").write_text(schema)
    return folder / "schema.yaml"


TABLES = {
    "people.csv": "id,name,born\np1,Ada Verrane,1901\np2,Adam Verran,1950\np3,Hollis Tarn,1930\n",
    "orgs.csv": "id,name\no1,Ambry Institute\n",
    "member.csv": "pid,oid\np1,o1\np2,o1\n",
}
SCHEMA = """
entities:
  person: {file: people.csv}
  org: {file: orgs.csv}
relations:
  member_of: {from: person, to: org, file: member.csv, columns: [pid, oid]}
tools:
  searchPerson: {tool: search_entity, type: person}
sql: true
"""


def test_schema_errors_name_the_field(tmp_path: Path) -> None:
    bad_file = _write(tmp_path, SCHEMA.replace("people.csv", "nobody.csv"), TABLES)
    with pytest.raises(UserError, match=r"entities\.person\.file: .*nobody\.csv does not exist"):
        DatabaseEnvironment.from_schema(bad_file)
    bad_col = _write(
        tmp_path, SCHEMA.replace("{file: people.csv}", "{file: people.csv, name: title}"), TABLES
    )
    with pytest.raises(UserError, match=r"entities\.person: column 'title' is not in people\.csv"):
        DatabaseEnvironment.from_schema(bad_col)
    bad_rel = _write(tmp_path, SCHEMA.replace("to: org", "to: company"), TABLES)
    with pytest.raises(UserError, match=r"relations\.member_of: 'company' is not an entity"):
        DatabaseEnvironment.from_schema(bad_rel)
    with pytest.raises(UserError, match="schema file"):
        DatabaseEnvironment.from_schema(tmp_path / "missing.yaml")


def test_tools_answer_and_refuse(tmp_path: Path) -> None:
    db = DatabaseEnvironment.from_schema(_write(tmp_path, SCHEMA, TABLES))
    box = Toolbox(db.tools())

    def call(tool_name: str, **args: object) -> str:
        return asyncio.run(box.call(tool_name, dict(args))).observation

    hits = json.loads(call("search_entity", name="ada verrane"))
    assert [h["id"] for h in hits][:2] == ["p1", "p2"]  # exact (case-insensitive) first, then the near miss
    # The alias searches persons only: the organisation named exactly so is not among its results.
    alias = call("searchPerson", name="Ambry Institute")
    assert "o1" not in alias
    assert json.loads(call("search_entity", name="Ambry Institute", type="org"))[0]["id"] == "o1"
    assert call("search_entity", name="x", type="planet").startswith("Unknown type 'planet'")
    assert json.loads(call("get_entity", id="p3")) == {
        "type": "person",
        "id": "p3",
        "name": "Hollis Tarn",
        "born": 1930,
    }
    assert [r["id"] for r in json.loads(call("get_related", id="o1", relation="member_of"))] == ["p1", "p2"]
    assert (
        call("get_related", id="p1", relation="coauthor")
        == "'coauthor' is not a relation of a person. Relations: member_of."
    )
    assert call("get_entity", id="zz").startswith("No entity with id 'zz'")
    assert json.loads(call("sql", query="SELECT count(*) AS n FROM person")) == [{"n": 3}]
    for q in (
        "DELETE FROM person",
        "SELECT 1; DROP TABLE person",
        "ATTACH DATABASE 'x' AS y",
        "PRAGMA query_only=OFF",
    ):
        assert call("sql", query=q) == "Only a single SELECT statement is allowed."
    assert call("sql", query="WITH x AS (SELECT 1) DELETE FROM person").startswith(("SQL error", "Only"))
    assert json.loads(call("sql", query="SELECT count(*) AS n FROM person")) == [
        {"n": 3}
    ]  # nothing was deleted
    slow = call(
        "sql", query="WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT max(x) FROM c"
    )
    assert slow.startswith("SQL error: interrupted")
    many = call(
        "sql",
        query="WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 80) SELECT x FROM c",
    )
    assert many.endswith("(more rows cut)") and len(json.loads(many.removesuffix(" (more rows cut)"))) == 50


def test_shipped_academic_database_is_the_generators_seed_0(tmp_path: Path) -> None:
    generate(tmp_path, 0)
    for f in sorted(SHIPPED.iterdir()):
        assert (tmp_path / f.name).read_text() == f.read_text(), f.name
    generate(tmp_path / "again", 0)
    assert (tmp_path / "again" / "persons.csv").read_text() == (tmp_path / "persons.csv").read_text()
    generate(tmp_path / "other", 1)
    assert (tmp_path / "other" / "persons.csv").read_text() != (tmp_path / "persons.csv").read_text()
    db = DatabaseEnvironment.from_schema(SHIPPED / "schema.yaml")
    assert len(db.entities("person")) == 60 and len(db.entities("publication")) == 120
    p = db.entities("person")[0]
    coauthors = db.related(p.id, "coauthor")
    pubs = {r.id for r in db.related(p.id, "author_of")}
    for c in coauthors:  # every coauthor shares a publication
        assert pubs & {r.id for r in db.related(c.id, "author_of")}
