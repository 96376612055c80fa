"""The domain database environment: an SQLite database built from CSV/JSONL tables and a small YAML schema,
with generic query tools — `search_entity(name, type)`, `get_entity(id)`, `get_related(id, relation)` —
an optional read-only `sql(query)`, and named aliases a domain may declare (R-Eval's `searchPerson`,
`getCoauthors`, ...). Model output is never evaluated as code: the tools take plain values, and SQL runs on
a separate read-only connection (query_only, an authorizer that allows reading only, no ATTACH), one
SELECT at a time, with a row limit and a time limit.

Protocols use the Python API (`entities`, `entity`, `related`, `query`, `search`) to compute gold answers
exactly from the same database the agent queries.

Schema (paths relative to the schema file):

    entities:
      person:
        file: persons.csv                # CSV with a header, or JSONL (one object per line)
        id: id                           # default "id"; ids are unique across the whole database
        name: name                       # default "name": what search_entity matches
        attributes: {born: int, position: str}   # optional; default every column, types inferred
      publication: {file: publications.csv, name: title}
      venue: {file: venues.csv}
    relations:
      author_of: {from: person, to: publication, file: authorship.csv, columns: [person_id, publication_id]}
      published_in: {from: publication, to: venue, key: venue_id}   # a column of the from-entity's file
    tools:                               # optional aliases with domain names
      searchPerson: {tool: search_entity, type: person}
      getPersonPubs: {tool: get_related, relation: author_of, fields: [year]}
      getPublication: {tool: get_entity, type: publication, include: [published_in]}
    sql: true                            # offer the read-only SQL tool (or {max_rows: 50, seconds: 2})

Every entity type and every relation is an SQL table of the same name; a relation's table holds its two
id columns (the link table's column names, or `<from>_id` and the key column).
"""

from __future__ import annotations

import contextlib
import csv
import difflib
import hashlib
import importlib
import json
import os
import re
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from proctor.agents.tools import Tool, ToolRefusal, tool
from proctor.errors import UserError

BUILD_VERSION = "1"  # part of the cache key: bump when the database layout changes
SEARCH_RESULTS = 5
AttrType = Literal["str", "int", "float", "bool"]
_SQL_TYPE: dict[str, str] = {"str": "TEXT", "int": "INTEGER", "float": "REAL", "bool": "BOOLEAN"}
_FROM_SQL: dict[str, AttrType] = {"TEXT": "str", "INTEGER": "int", "REAL": "float", "BOOLEAN": "bool"}
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_GENERIC = ("search_entity", "get_entity", "get_related", "sql")


class QueryError(ToolRefusal, ValueError):
    """A request the database cannot answer as asked (unknown id, type or relation; a refused SQL query).
    Inside a tool it is a refused call (the caller's mistake, not a fault of the database): the model's
    observation, with the valid choices named — for an id, the search tool that returns ids."""


# --- the schema ------------------------------------------------------------------------------------------


class EntitySpec(BaseModel):
    """One entity table: its file, its id and name columns, and optionally its typed attributes."""

    model_config = ConfigDict(extra="forbid")
    file: str
    id: str = "id"
    name: str = "name"
    attributes: dict[str, AttrType] | None = Field(
        None, description="attribute columns and their types; default: every column, types inferred"
    )


class RelationSpec(BaseModel):
    """A link between two entity types: a link table (`file` + `columns`, many-to-many) or a `key` column
    of the from-entity's own file (many-to-one)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    from_: str = Field(alias="from")
    to: str
    file: str | None = None
    columns: tuple[str, str] | None = Field(
        None, description="the link table's columns holding the from-id and the to-id"
    )
    key: str | None = Field(None, description="a column of the from-entity's file holding the to-id")

    @model_validator(mode="after")
    def _one_form(self) -> RelationSpec:
        if (self.file is None) == (self.key is None):
            raise ValueError(
                "give either `file` (a link table, with `columns`) or `key` (a column of the "
                "from-entity's file), not both or neither"
            )
        if self.key is not None and self.columns is not None:
            raise ValueError("`columns` belongs to a link table (`file`); a `key` relation has none")
        if self.file is not None and self.columns is None and self.from_ == self.to:
            raise ValueError("a relation from an entity type to itself needs `columns: [<from>, <to>]`")
        return self

    def link_columns(self) -> tuple[str, str]:
        return self.columns or (f"{self.from_}_id", f"{self.to}_id")


class AliasSpec(BaseModel):
    """A domain-named tool over a generic one, with its type or relation fixed."""

    model_config = ConfigDict(extra="forbid")
    tool: Literal["search_entity", "get_entity", "get_related"]
    type: str | None = Field(None, description="search_entity / get_entity: the entity type it takes")
    relation: str | None = Field(None, description="get_related: the relation it follows")
    fields: list[str] = Field(
        default_factory=list, description="get_related: attributes shown with each related entity"
    )
    include: list[str] = Field(
        default_factory=list, description="get_entity: relations whose linked entities are shown too"
    )
    description: str | None = None

    @model_validator(mode="after")
    def _fits(self) -> AliasSpec:
        if self.tool == "get_related" and self.relation is None:
            raise ValueError("a get_related alias needs `relation`")
        if self.tool != "get_related" and (self.relation is not None or self.fields):
            raise ValueError("`relation` and `fields` belong to get_related aliases")
        if self.tool != "get_entity" and self.include:
            raise ValueError("`include` belongs to get_entity aliases")
        if self.tool == "get_related" and self.type is not None:
            raise ValueError("a get_related alias takes its types from its relation; drop `type`")
        return self


class SqlSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    max_rows: int = Field(50, ge=1, le=10_000)
    seconds: float = Field(2.0, gt=0, le=60)


class Schema(BaseModel):
    model_config = ConfigDict(extra="forbid")
    entities: dict[str, EntitySpec] = Field(min_length=1)
    relations: dict[str, RelationSpec] = Field(default_factory=dict)
    tools: dict[str, AliasSpec] = Field(default_factory=dict)
    sql: bool | SqlSpec = False

    @field_validator("entities", "relations", "tools")
    @classmethod
    def _identifiers(cls, v: dict[str, Any]) -> dict[str, Any]:
        bad = [k for k in v if not _IDENT.match(k)]
        if bad:
            raise ValueError(f"{', '.join(bad)}: names must be identifiers (letters, digits, _)")
        return v

    @model_validator(mode="after")
    def _distinct(self) -> Schema:
        both = set(self.entities) & set(self.relations)
        if both:
            raise ValueError(
                f"{', '.join(sorted(both))}: an entity type and a relation share a name (both "
                "become SQL tables); rename one"
            )
        clash = set(self.tools) & set(_GENERIC)
        if clash:
            raise ValueError(f"tools: {', '.join(sorted(clash))} is a generic tool's name; choose another")
        return self

    @property
    def sql_limits(self) -> SqlSpec | None:
        return None if self.sql is False else SqlSpec() if self.sql is True else self.sql


# --- typed rows ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    """One entity: its id, type, display name and every column of its table (typed, id and name too)."""

    id: str
    type: str
    name: str
    attributes: dict[str, Any]


@dataclass(frozen=True)
class Match:
    """A search hit: the row and its score (1.0 exact name; then all words, substring, fuzzy)."""

    row: Row
    score: float


@dataclass(frozen=True)
class _Relation:
    name: str
    from_: str
    to: str
    a: str  # the table's from-id column
    b: str  # the table's to-id column


# --- reading the files -----------------------------------------------------------------------------------


class _Table:
    """A CSV/JSONL file's records and column names, raw (strings from CSV, JSON values from JSONL)."""

    def __init__(self, path: Path, where: str, display: str) -> None:
        self.display = display
        self.path = path
        if not path.is_file():
            raise UserError(
                f"{where}: {display} does not exist (looked in {path.parent}). Give a CSV file with a "
                "header row or a JSONL file, relative to the schema file."
            )
        self.records: list[dict[str, Any]] = []
        if path.suffix.lower() in (".jsonl", ".ndjson"):
            cols: dict[str, None] = {}
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError as e:
                    raise UserError(
                        f"{where}: {display} line {n} is not JSON ({e.msg}). Fix the line."
                    ) from e
                if not isinstance(rec, dict):
                    raise UserError(
                        f"{where}: {display} line {n} is not a JSON object. Write one object per line."
                    )
                cols.update(dict.fromkeys(rec))
                self.records.append(rec)
            self.columns = list(cols)
        else:
            with path.open(newline="", encoding="utf-8-sig") as f:
                reader = csv.DictReader(f)
                self.records = list(reader)
                self.columns = list(reader.fieldnames or [])

    def need(self, column: str, where: str, role: str) -> None:
        if column not in self.columns:
            raise UserError(
                f"{where}: column '{column}' ({role}) is not in {self.display} (its columns: "
                f"{', '.join(self.columns) or 'none'}). Fix the schema or the file's header."
            )


def _blank(v: Any) -> bool:
    return v is None or (isinstance(v, str) and not v.strip())


def _infer(values: list[Any]) -> AttrType:
    """The narrowest type every non-blank value fits: bool (JSON only), int, float, else str."""
    present = [v for v in values if not _blank(v)]
    if not present:
        return "str"
    if all(isinstance(v, bool) for v in present):
        return "bool"
    if any(isinstance(v, bool | list | dict) for v in present):
        return "str"
    kinds: tuple[AttrType, ...] = ("int", "float")
    for kind in kinds:
        try:
            for v in present:
                _convert(v, kind)
        except (ValueError, TypeError, OverflowError):
            continue
        return kind
    return "str"


_TRUE, _FALSE = {"true", "yes", "1", "t", "y"}, {"false", "no", "0", "f", "n"}


def _convert(v: Any, kind: AttrType) -> Any:
    """A raw cell as `kind` (None for a blank cell); ValueError when it does not fit."""
    if _blank(v):
        return None
    if kind == "str":
        if isinstance(v, list | dict):
            return json.dumps(v, ensure_ascii=False)
        return str(v).strip()
    if kind == "bool":
        if isinstance(v, bool):
            return v
        s = str(v).strip().casefold()
        if s in _TRUE or s in _FALSE:
            return s in _TRUE
        raise ValueError
    if isinstance(v, bool):
        raise ValueError
    if kind == "int":
        if isinstance(v, float):
            if not v.is_integer():
                raise ValueError
            return int(v)
        return int(v.strip() if isinstance(v, str) else v)
    return float(v.strip() if isinstance(v, str) else v)


# --- the environment -------------------------------------------------------------------------------------


class DatabaseEnvironment:
    """A domain database: the tools an agent uses, and the Python API protocols use for gold answers."""

    name = "database"

    def __init__(
        self, schema: Schema, con: sqlite3.Connection, *, where: str = "database", path: Path | None = None
    ) -> None:
        """Wrap an SQLite connection laid out by `_build` (use `from_schema`)."""
        self.schema = schema
        self.where = where
        self.path = path  # the cache file, or None for an in-memory database
        self._db = con
        self._lock = threading.Lock()
        self._sql_con: sqlite3.Connection | None = None
        self._types: dict[str, dict[str, AttrType]] = {}
        for etype in schema.entities:
            info = con.execute(f'PRAGMA table_info("{etype}")').fetchall()
            self._types[etype] = {str(c[1]): _FROM_SQL.get(str(c[2]), "str") for c in info}
        self._relations: dict[str, _Relation] = {}
        for rname, rel in schema.relations.items():
            a, b = (str(c[1]) for c in con.execute(f'PRAGMA table_info("{rname}")').fetchall())
            self._relations[rname] = _Relation(rname, rel.from_, rel.to, a, b)
        self._names: list[tuple[str, str, str, str]] = []  # (id, type, name, normalised name), file order
        for etype, spec in schema.entities.items():
            for id_, nm in con.execute(f'SELECT "{spec.id}", "{spec.name}" FROM "{etype}" ORDER BY rowid'):
                self._names.append((str(id_), etype, str(nm or ""), _norm(str(nm or ""))))
        self._type_of = {id_: etype for id_, etype, _, _ in self._names}
        self._tools: list[Tool] | None = None

    @classmethod
    def from_schema(cls, path: str | Path, *, cache_dir: str | Path | None = None) -> DatabaseEnvironment:
        """Read a YAML schema and its tables into SQLite — in memory, or (with `cache_dir`) into a file
        named by the content hash of the schema and its tables, built once and reopened read-only."""
        p = Path(path).expanduser()
        if not p.is_file():
            raise UserError(
                f"database: the schema file {p} does not exist. Give the path of a YAML database schema "
                "(see proctor.agents.environments.database)."
            )
        where = str(p)
        try:
            raw = yaml.safe_load(p.read_text(encoding="utf-8"))
        except yaml.YAMLError as e:
            raise UserError(f"{where}: not valid YAML ({str(e).splitlines()[0]}). Fix the syntax.") from e
        try:
            schema = Schema.model_validate(raw)
        except ValidationError as e:
            problems = "; ".join(
                f"{'.'.join(str(x) for x in err['loc']) or 'schema'}: "
                f"{err['msg'].removeprefix('Value error, ')}"
                for err in e.errors()
            )
            raise UserError(
                f"{where}: not a valid database schema — {problems}. Fix these fields (the schema format "
                "is described in proctor.agents.environments.database)."
            ) from e
        _check_references(schema, where)
        if cache_dir is None:
            con = sqlite3.connect(":memory:", check_same_thread=False)
            _build(con, schema, p.parent, where)
            con.execute("PRAGMA query_only = ON")
            return cls(schema, con, where=where)
        folder = Path(cache_dir).expanduser()
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / f"db-{_fingerprint(schema, p.parent, where)}.sqlite"
        if not target.is_file():
            fd, tmp = tempfile.mkstemp(dir=folder, suffix=".building")
            os.close(fd)
            try:
                con = sqlite3.connect(tmp)
                try:
                    _build(con, schema, p.parent, where)
                finally:
                    con.close()
                os.replace(tmp, target)  # atomic: a concurrent reader sees the whole file or none
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
        return cls(schema, _read_only(target), where=where, path=target)

    def close(self) -> None:
        for con in (self._db, self._sql_con):
            if con is not None:
                con.close()

    # --- the Python API (exact answers for template questions) -------------------------------------------

    @property
    def types(self) -> list[str]:
        return list(self.schema.entities)

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        """Rows of a trusted query (protocol code, never model output) as column -> value dicts."""
        with self._lock:
            cur = self._db.execute(sql, tuple(params))
            cols = [d[0] for d in cur.description or []]
            return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]

    def _rows(self, etype: str, where: str = "", params: Sequence[Any] = ()) -> list[Row]:
        spec, types = self.schema.entities[etype], self._types[etype]
        out = []
        for rec in self.query(f'SELECT * FROM "{etype}" {where}', params):
            attrs = {k: bool(v) if types.get(k) == "bool" and v is not None else v for k, v in rec.items()}
            out.append(Row(str(attrs[spec.id]), etype, str(attrs[spec.name] or ""), attrs))
        return out

    def entities(self, etype: str) -> list[Row]:
        """Every entity of a type, in its file's order."""
        if etype not in self.schema.entities:
            raise QueryError(f"unknown entity type '{etype}'; the types are {', '.join(self.types)}")
        return self._rows(etype, "ORDER BY rowid")

    def entity(self, id_: str) -> Row | None:
        """The entity with this id, or None."""
        etype = self._type_of.get(id_)
        if etype is None:
            return None
        return self._rows(etype, f'WHERE "{self.schema.entities[etype].id}" = ?', (id_,))[0]

    def relations_of(self, etype: str) -> list[str]:
        """The relations an entity of this type takes part in (either end)."""
        return [n for n, r in self._relations.items() if etype in (r.from_, r.to)]

    def describe_relation(self, relation: str) -> str:
        r = self._relations[relation]
        return f"{relation} ({r.from_} -> {r.to})"

    def related(self, id_: str, relation: str) -> list[Row]:
        """Entities linked to `id_` by `relation`, from either end, in the relation table's order, each
        once. A relation that does not touch the entity's type links nothing (an empty list)."""
        rel = self._relations.get(relation)
        if rel is None:
            raise QueryError(f"unknown relation '{relation}'; the relations are {', '.join(self._relations)}")
        etype = self._type_of.get(id_)
        if etype is None:
            raise QueryError(f"no entity has the id '{id_}'")
        ids: list[str] = []
        if etype == rel.from_:
            sql = f'SELECT "{rel.b}" AS x FROM "{relation}" WHERE "{rel.a}" = ? ORDER BY rowid'
            ids += [str(r["x"]) for r in self.query(sql, (id_,))]
        if etype == rel.to:
            sql = f'SELECT "{rel.a}" AS x FROM "{relation}" WHERE "{rel.b}" = ? ORDER BY rowid'
            ids += [str(r["x"]) for r in self.query(sql, (id_,))]
        out = []
        for other in dict.fromkeys(i for i in ids if i != id_ or rel.from_ != rel.to):
            row = self.entity(other)
            if row is not None:
                out.append(row)
        return out

    def search(self, name: str, etype: str | None = None, limit: int = SEARCH_RESULTS) -> list[Match]:
        """Entities ranked by name: the exact name (case and punctuation aside) first, then names holding
        every word asked, then names containing the text, then fuzzy matches; weak matches are dropped."""
        if etype is not None and etype not in self.schema.entities:
            raise QueryError(f"unknown entity type '{etype}'; the types are {', '.join(self.types)}")
        want = _norm(name)
        if not want:
            return []
        scored = [
            (score, i)
            for i, (_, t, _, have) in enumerate(self._names)
            if (etype is None or t == etype) and (score := _score(want, have)) > 0
        ]
        scored.sort(key=lambda si: (-si[0], si[1]))
        out = []
        for score, i in scored[:limit]:
            row = self.entity(self._names[i][0])
            if row is not None:
                out.append(Match(row, round(score, 3)))
        return out

    def tables(self) -> dict[str, list[str]]:
        """SQL table -> its columns (entity types and relations), for the SQL tool's description."""
        out = {t: list(cols) for t, cols in self._types.items()}
        out.update({n: [r.a, r.b] for n, r in self._relations.items()})
        return out

    # --- tools -----------------------------------------------------------------------------------------

    def tools(self) -> list[Tool]:
        """The generic tools, the schema's aliases, and `sql` if the schema offers it. Stateless, so one
        list serves every session."""
        if self._tools is None:
            self._tools = self._make_tools()
        return list(self._tools)

    def id_source(self, etype: str | None) -> str:
        """The search tool whose results give ids of `etype`: the schema's search alias for that type,
        else `search_entity`. Errors and descriptions name it, so that a model passing a name where an id
        is expected learns which call gives the id."""
        for name, spec in self.schema.tools.items():
            if spec.tool == "search_entity" and etype is not None and spec.type == etype:
                return name
        return "search_entity"

    def _get(self, id_: str, want_type: str | None = None, usual_type: str | None = None) -> Row:
        """The entity with this id (of `want_type` when given); else a refusal naming the search tool that
        gives ids — of `want_type`, or of `usual_type` (the type a relation alias usually starts from)."""
        key = id_.strip().strip("\"'`")
        row = self.entity(key)
        if row is None:  # ids are case-sensitive, but a model's casing slip should not cost a step
            folded = [i for i in self._type_of if i.casefold() == key.casefold()]
            row = self.entity(folded[0]) if len(folded) == 1 else None
        if row is None:
            of = want_type or usual_type
            example = next((i for i, t, _, _ in self._names if of in (None, t)), "none")
            what = f"a {want_type}'s id" if want_type else "an id"
            raise QueryError(
                f"no entity has the id '{id_}': pass {what}, not a name. Call "
                f"{self.id_source(of)}(name) first; each of its results has an 'id' "
                f"(for example '{example}')."
            )
        if want_type is not None and row.type != want_type:
            raise QueryError(
                f"'{row.id}' is a {row.type}, not a {want_type}; pass the id of a {want_type} "
                f"(from {self.id_source(want_type)})"
            )
        return row

    def _related_json(self, row: Row, relation: str, fields: Sequence[str] = ()) -> list[dict[str, Any]]:
        valid = self.relations_of(row.type)
        if relation not in valid:
            listed = ", ".join(self.describe_relation(r) for r in valid) or "none"
            raise QueryError(
                f"'{relation}' is not a relation of a {row.type} ('{row.id}'). The relations of a "
                f"{row.type} are: {listed}."
            )
        return [
            {"id": r.id, "name": r.name, **{f: r.attributes[f] for f in fields if f in r.attributes}}
            for r in self.related(row.id, relation)
        ]

    def _entity_json(self, row: Row, include: Sequence[str] = ()) -> dict[str, Any]:
        out: dict[str, Any] = {"id": row.id, "type": row.type}
        out.update({k: v for k, v in row.attributes.items() if v is not None and k not in out})
        for rel in include:
            if rel in self.relations_of(row.type):
                out[rel] = self._related_json(row, rel)
        return out

    def _make_tools(self) -> list[Tool]:
        types = ", ".join(self.types)
        relations = "; ".join(self.describe_relation(r) for r in self._relations) or "none"

        def search_entity(name: str, type: str | None = None) -> list[dict[str, Any]]:
            """Find entities by name.

            Args:
                name: the name (or part of it) to look for
                type: only entities of this type
            """
            return [
                {"id": m.row.id, "type": m.row.type, "name": m.row.name, "score": m.score}
                for m in self.search(name, type)
            ]

        def get_entity(id: str) -> dict[str, Any]:
            """All attributes of an entity.

            Args:
                id: an entity id from search_entity or get_related
            """
            return self._entity_json(self._get(id))

        def get_related(id: str, relation: str) -> list[dict[str, Any]]:
            """Entities linked to an entity by a relation.

            Args:
                id: an entity id
                relation: the relation's name
            """
            return self._related_json(self._get(id), relation)

        out = [
            tool(
                search_entity,
                description=f"Find entities by name (fuzzy); returns the best matches with "
                f"ids, best first. Types: {types}.",
            ),
            tool(
                get_entity,
                description="All attributes of the entity with this id (from search_entity, not a name).",
            ),
            tool(
                get_related,
                description=f"Entities linked to an entity by a relation, with ids and names "
                f"(either direction); pass an id from search_entity, not a name. Relations: {relations}.",
            ),
        ]
        out += [self._alias(name, spec) for name, spec in self.schema.tools.items()]
        limits = self.schema.sql_limits
        if limits is not None:
            out.append(self._sql_tool(limits))
        return out

    def _alias(self, alias: str, spec: AliasSpec) -> Tool:
        """A domain-named tool with one argument, its type or relation fixed by the schema."""
        fn: Callable[..., Any]
        id_hint = ""  # what a tool taking an id says about where ids come from
        if spec.tool == "search_entity":
            etype = spec.type

            def search(name: str) -> list[dict[str, Any]]:
                """Args:
                name: the name (or part of it) to look for
                """
                return [
                    {"id": m.row.id, "name": m.row.name, "score": m.score} for m in self.search(name, etype)
                ]

            fn, doc = (
                search,
                f"Find a {etype or 'entity'} by name (fuzzy); returns the best matches with ids.",
            )
        elif spec.tool == "get_related":
            assert spec.relation is not None
            rel, fields = spec.relation, tuple(spec.fields)
            from_type = self._relations[rel].from_

            def related(id: str) -> list[dict[str, Any]]:
                """Args:
                id: an entity id
                """
                return self._related_json(self._get(id, usual_type=from_type), rel, fields)

            r = self._relations[rel]
            doc = f"The {r.to} entities linked by '{rel}' to a {r.from_} (or the reverse), with ids."
            id_hint = f"Pass a {r.from_}'s id from {self.id_source(r.from_)}, not a name."
            fn = related
        else:
            etype, include = spec.type, tuple(spec.include)

            def get(id: str) -> dict[str, Any]:
                """Args:
                id: an entity id
                """
                return self._entity_json(self._get(id, etype), include)

            fn, doc = get, f"All attributes of the {etype or 'entity'} with this id."
            id_hint = f"Pass {f'a {etype}' if etype else 'an'} id from {self.id_source(etype)}, not a name."
        fn.__name__ = alias
        described = spec.description or doc
        return tool(fn, name=alias, description=f"{described} {id_hint}" if id_hint else described)

    def _sql_tool(self, limits: SqlSpec) -> Tool:
        listed = "; ".join(f"{t}({', '.join(c)})" for t, c in self.tables().items())

        def sql(query: str) -> Any:
            """Run one read-only SQL SELECT.

            Args:
                query: a single SELECT (or WITH ... SELECT) statement
            """
            return self.run_sql(query, limits)

        return tool(
            sql,
            description=f"Run one read-only SQLite SELECT; at most {limits.max_rows} rows, "
            f"{limits.seconds:g} s. Tables: {listed}.",
        )

    def _reader(self) -> sqlite3.Connection:
        """The SQL tool's own connection: read-only (query_only, or mode=ro for a cache file) and guarded
        by an authorizer that allows reading only — so no write, ATTACH or PRAGMA reaches the database."""
        if self._sql_con is None:
            if self.path is not None:
                con = _read_only(self.path)
            else:
                con = sqlite3.connect(":memory:", check_same_thread=False)
                self._db.backup(con)
                con.execute("PRAGMA query_only = ON")
            con.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, 1_000_000)
            con.setlimit(sqlite3.SQLITE_LIMIT_SQL_LENGTH, 20_000)
            con.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
            allowed = {
                sqlite3.SQLITE_SELECT,
                sqlite3.SQLITE_READ,
                sqlite3.SQLITE_FUNCTION,
                sqlite3.SQLITE_RECURSIVE,
            }
            con.set_authorizer(
                lambda action, *_: sqlite3.SQLITE_OK if action in allowed else sqlite3.SQLITE_DENY
            )
            self._sql_con = con
        return self._sql_con

    def run_sql(self, query: str, limits: SqlSpec | None = None) -> Any:
        """A model's SQL: one SELECT on the read-only connection, cut at `max_rows` rows and stopped after
        `seconds`. Returns the rows (column -> value), with a note when rows were cut; QueryError else."""
        limits = limits or self.schema.sql_limits or SqlSpec()
        text = query.strip()
        while text.endswith(";"):
            text = text[:-1].rstrip()
        if not re.match(r"(?is)^\(*\s*(select|with)\b", text):
            raise QueryError("only a single SELECT statement is allowed (the database is read-only)")
        deadline = time.monotonic() + limits.seconds
        with self._lock:
            con = self._reader()
            con.set_progress_handler(lambda: 1 if time.monotonic() > deadline else 0, 5_000)
            try:
                cur = con.execute(text)
                rows = cur.fetchmany(limits.max_rows + 1)
            except (sqlite3.Warning, sqlite3.Error) as e:  # 3.11 reports several statements as a Warning
                raise _sql_problem(e, limits) from e
            finally:
                con.set_progress_handler(None, 0)
        cols = [d[0] for d in cur.description or []]
        out: list[dict[str, Any]] = [dict(zip(cols, r, strict=True)) for r in rows[: limits.max_rows]]
        if len(rows) > limits.max_rows:
            return json.dumps(out, ensure_ascii=False, default=str) + (
                f" (only the first {limits.max_rows} rows; narrow the query or use LIMIT/OFFSET)"
            )
        return out


def _sql_problem(e: Exception, limits: SqlSpec) -> QueryError:
    """What the model is told about a refused or failed query: the rule it broke, or SQLite's message."""
    msg = str(e)
    if "one statement" in msg:
        return QueryError("only a single SELECT statement is allowed; send one at a time")
    if "interrupted" in msg:
        return QueryError(
            f"the query ran longer than {limits.seconds:g} s and was stopped; narrow it (WHERE, LIMIT) or "
            "avoid unbounded recursion"
        )
    if "not authorized" in msg:
        return QueryError("only reading the tables is allowed (no writes, ATTACH, PRAGMA or schema changes)")
    return QueryError(f"SQL error: {msg}")


# --- building ---------------------------------------------------------------------------------------------


def _check_references(schema: Schema, where: str) -> None:
    """Relations and aliases name entity types, relations and attributes the schema has."""
    known = ", ".join(schema.entities)
    for rname, rel in schema.relations.items():
        for end, field in ((rel.from_, "from"), (rel.to, "to")):
            if end not in schema.entities:
                raise UserError(
                    f"{where}: relations.{rname}.{field}: '{end}' is not an entity type of the schema (they "
                    f"are: {known}). Name one of them or add the entity."
                )
    for alias, spec in schema.tools.items():
        if spec.type is not None and spec.type not in schema.entities:
            raise UserError(
                f"{where}: tools.{alias}.type: '{spec.type}' is not an entity type (they are: {known})."
            )
        for named in [spec.relation, *spec.include]:
            if named is not None and named not in schema.relations:
                raise UserError(
                    f"{where}: tools.{alias}: '{named}' is not a relation of the schema (they are: "
                    f"{', '.join(schema.relations) or 'none'})."
                )
        if spec.relation is not None:
            target = schema.entities[schema.relations[spec.relation].to]
            bad = [f for f in spec.fields if target.attributes is not None and f not in target.attributes]
            if bad:
                raise UserError(
                    f"{where}: tools.{alias}.fields: {', '.join(bad)} is not an attribute of "
                    f"{schema.relations[spec.relation].to} (declared: {', '.join(target.attributes or {})})."
                )


def _files(schema: Schema) -> list[tuple[str, str]]:
    """(field, file) for every table file the schema names."""
    out = [(f"entities.{t}.file", e.file) for t, e in schema.entities.items()]
    out += [(f"relations.{n}.file", r.file) for n, r in schema.relations.items() if r.file is not None]
    return out


def _fingerprint(schema: Schema, folder: Path, where: str) -> str:
    """The cache key: the build version, the schema's content and the bytes of every table file."""
    h = hashlib.sha256(BUILD_VERSION.encode())
    h.update(schema.model_dump_json(by_alias=True).encode())
    for field, name in sorted(set(_files(schema))):
        path = folder / name
        if not path.is_file():
            raise UserError(
                f"{where}: {field}: {name} does not exist (looked in {folder}). Give a CSV or "
                "JSONL file relative to the schema file."
            )
        h.update(f"\0{name}\0".encode())
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()[:24]


def _read_only(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{quote(str(path.resolve()))}?mode=ro", uri=True, check_same_thread=False)


def _build(con: sqlite3.Connection, schema: Schema, folder: Path, where: str) -> None:
    """Load every table into `con`: typed entity tables (id primary key) and indexed relation tables.
    Every problem in the data is a UserError naming the schema field, the file and the fix."""
    tables: dict[str, _Table] = {}
    ids: dict[str, str] = {}  # id -> entity type
    keys_of = {
        t: [r.key for r in schema.relations.values() if r.from_ == t and r.key] for t in schema.entities
    }
    for etype, spec in schema.entities.items():
        field = f"{where}: entities.{etype}"
        table = _Table(folder / spec.file, f"{field}.file", spec.file)
        tables[etype] = table
        table.need(spec.id, f"{field}.id", "the id")
        table.need(spec.name, f"{field}.name", "the name")
        for key in keys_of[etype]:
            rname = next(n for n, r in schema.relations.items() if r.from_ == etype and r.key == key)
            table.need(key, f"{where}: relations.{rname}.key", f"the key of {rname}")
        if spec.attributes is not None:
            for col in spec.attributes:
                table.need(col, f"{field}.attributes.{col}", "an attribute")
            cols = list(dict.fromkeys([spec.id, spec.name, *spec.attributes, *keys_of[etype]]))
        else:
            cols = table.columns
        fixed: dict[str, AttrType] = {
            spec.id: "str",
            spec.name: "str",
            **dict.fromkeys(keys_of[etype], "str"),
        }
        types: dict[str, AttrType] = {
            c: fixed.get(c) or (spec.attributes or {}).get(c) or _infer([r.get(c) for r in table.records])
            for c in cols
        }
        values = []
        for n, rec in enumerate(table.records, 2 if table.path.suffix.lower() == ".csv" else 1):
            row = []
            for c in cols:
                try:
                    row.append(_convert(rec.get(c), types[c]))
                except (ValueError, TypeError):
                    raise UserError(
                        f"{field}.attributes.{c}: {spec.file} row {n} has {rec.get(c)!r}, not a {types[c]}. "
                        f"Fix the value, or declare the attribute as str."
                    ) from None
            id_ = row[0]
            if id_ is None:
                raise UserError(
                    f"{field}.id: {spec.file} row {n} has no id in column '{spec.id}'. Every "
                    "entity needs one."
                )
            if id_ in ids:
                raise UserError(
                    f"{field}.id: the id '{id_}' ({spec.file} row {n}) is already used by a {ids[id_]}; ids "
                    "must be unique across the whole database (prefix them per type, e.g. p1, o1)."
                )
            ids[id_] = etype
            values.append(row)
        decl = ", ".join(
            f'"{c}" {_SQL_TYPE[types[c]]}' + (" PRIMARY KEY" if c == spec.id else "") for c in cols
        )
        con.execute(f'CREATE TABLE "{etype}" ({decl})')
        con.executemany(f'INSERT INTO "{etype}" VALUES ({", ".join("?" for _ in cols)})', values)
        con.execute(f'CREATE INDEX "{etype}__name" ON "{etype}" ("{spec.name}")')
        for key in keys_of[etype]:
            con.execute(f'CREATE INDEX "{etype}__{key}" ON "{etype}" ("{key}")')
    for rname, rel in schema.relations.items():
        field = f"{where}: relations.{rname}"
        if rel.key is not None:
            spec = schema.entities[rel.from_]
            a, b = f"{rel.from_}_id", rel.key
            if a == b:
                b = f"{rel.to}_ref"
            pairs = [(rec.get(spec.id), rec.get(rel.key)) for rec in tables[rel.from_].records]
            display, first = schema.entities[rel.from_].file, 2
        else:
            assert rel.file is not None
            link = _Table(folder / rel.file, f"{field}.file", rel.file)
            a, b = rel.link_columns()
            link.need(a, f"{field}.columns", f"the {rel.from_} id")
            link.need(b, f"{field}.columns", f"the {rel.to} id")
            pairs = [(rec.get(a), rec.get(b)) for rec in link.records]
            display, first = rel.file, 2 if link.path.suffix.lower() == ".csv" else 1
        kept: dict[tuple[str, str], None] = {}
        for n, (x, y) in enumerate(pairs, first):
            if _blank(x) or _blank(y):
                continue  # no link on this row
            sx, sy = str(x).strip(), str(y).strip()
            for value, etype in ((sx, rel.from_), (sy, rel.to)):
                if ids.get(value) != etype:
                    found = f"a {ids[value]}" if value in ids else "no entity"
                    raise UserError(
                        f"{field}: {display} row {n} links '{value}', which is {found}, not a {etype}. "
                        "Fix the row or the relation's from/to."
                    )
            kept[(sx, sy)] = None
        con.execute(f'CREATE TABLE "{rname}" ("{a}" TEXT, "{b}" TEXT)')
        con.executemany(f'INSERT INTO "{rname}" VALUES (?, ?)', list(kept))
        con.execute(f'CREATE INDEX "{rname}__a" ON "{rname}" ("{a}")')
        con.execute(f'CREATE INDEX "{rname}__b" ON "{rname}" ("{b}")')
    con.commit()


# --- name matching ------------------------------------------------------------------------------------------


def _norm(s: str) -> str:
    """Case, punctuation and spacing aside: the words of a name, lower case, one space apart."""
    return " ".join(re.findall(r"\w+", s.casefold()))


def _fuzzy_backend() -> Callable[[str, str], float]:
    """rapidfuzz's WRatio when it is installed (faster, better on reordered words); else difflib."""
    try:
        fuzz: Any = importlib.import_module("rapidfuzz.fuzz")
    except ImportError:
        return _difflib_ratio
    return lambda a, b: float(fuzz.WRatio(a, b)) / 100.0


def _difflib_ratio(want: str, have: str) -> float:
    """The best of: whole strings, words sorted, and the query against each run of as many words."""
    ratio = difflib.SequenceMatcher(None, want, have).ratio()
    ratio = max(
        ratio,
        difflib.SequenceMatcher(None, " ".join(sorted(want.split())), " ".join(sorted(have.split()))).ratio(),
    )
    words, k = have.split(), len(want.split())
    for i in range(max(len(words) - k + 1, 0)):
        ratio = max(ratio, 0.95 * difflib.SequenceMatcher(None, want, " ".join(words[i : i + k])).ratio())
    return ratio


_FUZZY = _fuzzy_backend()
FUZZY_MIN = 0.6


def _score(want: str, have: str) -> float:
    """Tiers that never overlap: exact 1.0; every word asked is a word of the name 0.9-0.99; the text
    inside the name 0.8-0.89; fuzzy similarity (>= FUZZY_MIN) below 0.8; else 0."""
    if want == have:
        return 1.0
    if not have:
        return 0.0
    share = min(len(want) / len(have), 1.0)
    if set(want.split()) <= set(have.split()):
        return 0.9 + 0.09 * share
    if len(want) >= 3 and want in have:
        return 0.8 + 0.09 * share
    ratio = _FUZZY(want, have)
    return 0.79 * ratio if ratio >= FUZZY_MIN else 0.0
