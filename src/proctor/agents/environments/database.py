"""The domain database environment: SQLite built from CSV/JSONL tables plus a small YAML schema, with
generic query tools — `search_entity(name, type)`, `get_entity(id)`, `get_related(id, relation)` — an
optional read-only `sql(query)`, and named aliases a domain may declare (R-Eval's `searchPerson`,
`getCoauthors`, ...). Model output is never evaluated as code; SQL runs on a read-only connection, one
SELECT at a time, with a row and a time limit.

Schema (paths relative to the schema file):

    entities:
      person: {file: persons.csv, id: id, name: name}
      publication: {file: publications.csv, id: id, name: title}
    relations:
      author_of: {from: person, to: publication, file: authorship.csv, columns: [person_id, publication_id]}
    tools:                                   # optional aliases
      searchPerson: {tool: search_entity, type: person}
      getPersonPubs: {tool: get_related, relation: author_of}
    sql: true                                # offer the read-only SQL tool
"""

from __future__ import annotations

import csv
import difflib
import json
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from proctor.agents.tools import Tool, tool
from proctor.errors import UserError

MAX_ROWS = 50
SQL_SECONDS = 2.0
SEARCH_RESULTS = 5


class EntitySpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    file: str
    id: str = "id"
    name: str = "name"


class RelationSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    from_: str = Field(alias="from")
    to: str
    file: str
    columns: tuple[str, str] = Field(description="the columns holding the from-id and the to-id")


class AliasSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tool: Literal["search_entity", "get_entity", "get_related"]
    type: str | None = None
    relation: str | None = None
    description: str | None = None


class Schema(BaseModel):
    model_config = ConfigDict(extra="forbid")
    entities: dict[str, EntitySpec]
    relations: dict[str, RelationSpec] = Field(default_factory=dict)
    tools: dict[str, AliasSpec] = Field(default_factory=dict)
    sql: bool = False


@dataclass(frozen=True)
class Row:
    id: str
    type: str
    name: str
    attributes: dict[str, Any]


def _read_table(path: Path, where: str) -> list[dict[str, Any]]:
    if not path.is_file():
        raise UserError(
            f"{where}: {path} does not exist. Give a CSV or JSONL file relative to the schema file."
        )
    if path.suffix in (".jsonl", ".ndjson"):
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _number(v: Any) -> Any:
    if isinstance(v, str):
        for cast in (int, float):
            try:
                return cast(v)
            except ValueError:
                pass
    return v


class DatabaseEnvironment:
    name = "database"

    def __init__(self, schema: Schema, folder: Path, where: str = "database") -> None:
        self.schema = schema
        self.rows: dict[str, Row] = {}
        self.by_type: dict[str, list[Row]] = {}
        for etype, spec in schema.entities.items():
            table = _read_table(folder / spec.file, f"{where}.entities.{etype}.file")
            for col in (spec.id, spec.name):
                if table and col not in table[0]:
                    raise UserError(
                        f"{where}.entities.{etype}: column '{col}' is not in {spec.file} (columns: "
                        f"{', '.join(table[0])}). Fix the schema's id/name column."
                    )
            for rec in table:
                row = Row(
                    str(rec[spec.id]), etype, str(rec[spec.name]), {k: _number(v) for k, v in rec.items()}
                )
                if row.id in self.rows:
                    raise UserError(
                        f"{where}.entities.{etype}: id '{row.id}' is used twice; ids must be unique."
                    )
                self.rows[row.id] = row
                self.by_type.setdefault(etype, []).append(row)
        self.edges: dict[str, list[tuple[str, str]]] = {}
        for rname, rel in schema.relations.items():
            for end in (rel.from_, rel.to):
                if end not in schema.entities:
                    raise UserError(
                        f"{where}.relations.{rname}: '{end}' is not an entity of the schema "
                        f"({', '.join(schema.entities)})."
                    )
            table = _read_table(folder / rel.file, f"{where}.relations.{rname}.file")
            a, b = rel.columns
            if table and (a not in table[0] or b not in table[0]):
                raise UserError(
                    f"{where}.relations.{rname}.columns: {rel.file} has no column '{a}' or '{b}'."
                )
            self.edges[rname] = [
                (str(r[a]), str(r[b])) for r in table if r.get(a) not in (None, "") and r.get(b)
            ]
        self._db = self._sqlite()

    @classmethod
    def from_schema(cls, path: str | Path) -> DatabaseEnvironment:
        p = Path(path).expanduser()
        if not p.is_file():
            raise UserError(
                f"database: the schema file {p} does not exist. Give a YAML schema (see the README)."
            )
        try:
            schema = Schema.model_validate(yaml.safe_load(p.read_text(encoding="utf-8")))
        except (ValidationError, yaml.YAMLError) as e:
            raise UserError(
                f"{p}: not a valid database schema ({str(e).splitlines()[0]}...). See the README."
            ) from e
        return cls(schema, p.parent, where=str(p))

    def _sqlite(self) -> sqlite3.Connection:
        """One table per entity type (all attributes) and per relation, for the read-only SQL tool."""
        con = sqlite3.connect(":memory:", check_same_thread=False)
        for etype, rows in self.by_type.items():
            cols = list(rows[0].attributes) if rows else ["id"]
            quoted = ", ".join(f'"{c}"' for c in cols)
            marks = ", ".join("?" for _ in cols)
            con.execute(f'CREATE TABLE "{etype}" ({quoted})')
            con.executemany(
                f'INSERT INTO "{etype}" VALUES ({marks})',
                [tuple(r.attributes.get(c) for c in cols) for r in rows],
            )
        for rname, pairs in self.edges.items():
            rel = self.schema.relations[rname]
            a, b = rel.columns if rel.columns[0] != rel.columns[1] else (f"{rel.from_}_id", f"{rel.to}_id_2")
            con.execute(f'CREATE TABLE "{rname}" ("{a}", "{b}")')
            con.executemany(f'INSERT INTO "{rname}" VALUES (?, ?)', pairs)
        con.commit()
        con.execute("PRAGMA query_only = ON")
        return con

    # --- the Python API (exact answers for template questions) ---------------------------------------
    def entity(self, id_: str) -> Row | None:
        return self.rows.get(id_)

    def entities(self, etype: str) -> list[Row]:
        return list(self.by_type.get(etype, []))

    def relations_of(self, etype: str) -> list[str]:
        return [n for n, r in self.schema.relations.items() if etype in (r.from_, r.to)]

    def related(self, id_: str, relation: str) -> list[Row]:
        """Rows linked to `id_` by `relation`, in either direction (as the entity's type allows), in the
        order of the relation's table."""
        row = self.rows[id_]
        rel = self.schema.relations[relation]
        out: list[str] = []
        if row.type == rel.from_:
            out += [b for a, b in self.edges[relation] if a == id_]
        if row.type == rel.to:
            out += [a for a, b in self.edges[relation] if b == id_ and a != id_]
        return [self.rows[i] for i in dict.fromkeys(out) if i in self.rows]

    def search(self, name: str, etype: str | None = None) -> list[tuple[Row, float]]:
        """Rows ranked by name similarity: exact (case-insensitive) first, then containment, then fuzzy."""
        want = name.casefold().strip()
        pool = self.entities(etype) if etype else list(self.rows.values())
        scored = []
        for r in pool:
            have = r.name.casefold()
            s = 2.0 if have == want else 1.0 + len(want) / max(len(have), 1) if want and want in have else 0.0
            s = max(s, difflib.SequenceMatcher(None, want, have).ratio())
            scored.append((r, round(s, 4)))
        scored.sort(key=lambda rs: (-rs[1], rs[0].id))
        return [rs for rs in scored[:SEARCH_RESULTS] if rs[1] >= 0.4]

    # --- tools -----------------------------------------------------------------------------------------
    def tools(self) -> list[Tool]:
        types = ", ".join(self.schema.entities)

        def search_entity(name: str, type: str | None = None) -> str:
            """Find entities by name; returns the best matches with their ids.

            Args:
                name: the name to look for
                type: an entity type to search only
            """
            if type is not None and type not in self.schema.entities:
                return f"Unknown type '{type}'. Types: {types}."
            hits = self.search(name, type)
            if not hits:
                return f"No entity named like '{name}'."
            return json.dumps(
                [{"id": r.id, "type": r.type, "name": r.name} for r, _ in hits], ensure_ascii=False
            )

        def get_entity(id: str) -> str:
            """All attributes of the entity with this id.

            Args:
                id: an entity id from search_entity or get_related
            """
            row = self.rows.get(id)
            if row is None:
                return f"No entity with id '{id}'. Use search_entity to find ids."
            return json.dumps({"type": row.type, **row.attributes}, ensure_ascii=False, default=str)

        def get_related(id: str, relation: str) -> str:
            """Entities linked to this entity by a relation.

            Args:
                id: an entity id
                relation: the relation's name
            """
            row = self.rows.get(id)
            if row is None:
                return f"No entity with id '{id}'. Use search_entity to find ids."
            valid = self.relations_of(row.type)
            if relation not in valid:
                names = ", ".join(valid) or "none"
                return f"'{relation}' is not a relation of a {row.type}. Relations: {names}."
            rows = self.related(id, relation)
            return (
                json.dumps([{"id": r.id, "name": r.name} for r in rows], ensure_ascii=False) if rows else "[]"
            )

        out = [tool(search_entity), tool(get_entity), tool(get_related)]
        base = {t.name: t for t in out}
        for alias, spec in self.schema.tools.items():
            out.append(self._alias(alias, spec, base[spec.tool]))
        if self.schema.sql:
            out.append(tool(self._sql_tool(), name="sql"))
        return out

    def _alias(self, alias: str, spec: AliasSpec, target: Tool) -> Tool:
        """A named domain tool fixing the type or relation of a generic one."""
        fn: Callable[..., str]
        if spec.tool == "search_entity":

            def searched(name: str) -> str:
                return str(target.fn(name=name, type=spec.type))

            fn, doc = searched, f"Find a {spec.type or 'entity'} by name; returns matches with ids."
        elif spec.tool == "get_related":

            def related(id: str) -> str:
                return str(target.fn(id=id, relation=spec.relation))

            fn, doc = related, f"The entities linked by '{spec.relation}' to the entity with this id."
        else:

            def got(id: str) -> str:
                return str(target.fn(id=id))

            fn, doc = got, "All attributes of the entity with this id."
        return tool(fn, name=alias, description=spec.description or doc)

    def _sql_tool(self) -> Any:
        con = self._db

        def sql(query: str) -> str:
            """Run one read-only SQL SELECT on the domain tables (entity types and relations as tables).

            Args:
                query: a single SELECT statement
            """
            q = query.strip().rstrip(";")
            if not q.lower().startswith(("select", "with")) or ";" in q:
                return "Only a single SELECT statement is allowed."
            deadline = time.monotonic() + SQL_SECONDS
            con.set_progress_handler(lambda: 1 if time.monotonic() > deadline else 0, 10_000)
            try:
                cur = con.execute(q)
                rows = cur.fetchmany(MAX_ROWS + 1)
            except sqlite3.Error as e:
                return f"SQL error: {e}"
            finally:
                con.set_progress_handler(None, 0)
            cols = [d[0] for d in cur.description or []]
            more = " (more rows cut)" if len(rows) > MAX_ROWS else ""
            return json.dumps([dict(zip(cols, r, strict=True)) for r in rows[:MAX_ROWS]], default=str) + more

        return sql
