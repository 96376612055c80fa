"""A fictional academic database (scholars, organisations, publications, venues, interests, authorship,
membership, coauthorship), generated deterministically from a seed so that no model can know it — the
shipped demo domain of the rageval protocol. The shipped copy (`proctor/agents/data/academic/`) is seed 0.

    python -m proctor.agents.environments.academic OUT_DIR [--seed N]
"""

from __future__ import annotations

import argparse
import csv
import itertools
from pathlib import Path
from typing import Any

import numpy as np

SHIPPED = Path(__file__).resolve().parent.parent / "data" / "academic"
_ONSET = ["Br", "K", "Th", "V", "Ml", "S", "Dr", "Qu", "T", "Z", "Ph", "G", "L", "N", "R", "Sk"]
_VOWEL = ["a", "e", "i", "o", "u", "ae", "io", "ou", "y"]
_CODA = ["n", "r", "th", "ss", "l", "nd", "m", "x", "v", "sk", ""]
_TOPICS = [
    "tidal acoustics", "lichen chemistry", "fog optics", "kelp genomics", "glacier seismology",
    "salt-marsh ecology", "harbour hydraulics", "basalt weathering", "storm forecasting", "moss physiology",
    "dune morphology", "peat hydrology", "reef sedimentology", "cliff erosion", "brine microbiology",
    "ice-core dating",
]  # fmt: skip
_TITLE_A = ["Toward", "Revisiting", "Measuring", "Modelling", "On", "Mapping", "Rethinking", "Tracing"]
_TITLE_B = ["seasonal", "coastal", "microscale", "long-term", "nocturnal", "layered", "hidden", "transient"]
_CITIES = [
    "Varn",
    "Osk",
    "Tellmar",
    "Druin",
    "Kessaly",
    "Fenholt",
    "Marrowick",
    "Ilverstad",
    "Quell",
    "Sorby",
]
_VENUE = ["Journal", "Transactions", "Proceedings", "Letters", "Review", "Annals", "Bulletin", "Quarterly"]


def _word(rng: np.random.Generator, syllables: int) -> str:
    """An invented word: capitalised onset-vowel-coda syllables."""
    parts = [
        str(rng.choice(_ONSET)) + str(rng.choice(_VOWEL)) + str(rng.choice(_CODA)) for _ in range(syllables)
    ]
    return (parts[0] + "".join(p.lower() for p in parts[1:])).capitalize()


def _name(rng: np.random.Generator, used: set[str]) -> str:
    while True:
        n = f"{_word(rng, 2)} {_word(rng, 2)}"
        if n not in used:
            used.add(n)
            return n


def generate(out: Path, seed: int = 0) -> Path:
    """Write the tables and `schema.yaml` into `out`; returns the schema's path."""
    rng = np.random.default_rng(seed)
    out.mkdir(parents=True, exist_ok=True)
    used: set[str] = set()
    orgs = [
        {
            "id": f"o{i + 1:02d}",
            "name": f"{_word(rng, 2)} Institute of {t.split()[0].title()} Studies",
            "city": c,
        }
        for i, (t, c) in enumerate(zip(_TOPICS[:10], _CITIES, strict=True))
    ]
    interests = [{"id": f"i{i + 1:02d}", "name": t} for i, t in enumerate(_TOPICS)]
    venues = [
        {"id": f"v{i + 1:02d}", "name": f"{v} of {_word(rng, 2)} Science"} for i, v in enumerate(_VENUE)
    ]
    persons = [
        {
            "id": f"p{i + 1:03d}",
            "name": _name(rng, used),
            "born": int(rng.integers(1950, 1995)),
            "position": str(rng.choice(["professor", "lecturer", "researcher", "fellow"])),
        }
        for i in range(60)
    ]
    membership = [
        {"person_id": p["id"], "organisation_id": orgs[int(rng.integers(len(orgs)))]["id"]} for p in persons
    ]
    person_interests = []
    for p in persons:
        for j in sorted(rng.choice(len(interests), size=int(rng.integers(1, 4)), replace=False)):
            person_interests.append({"person_id": p["id"], "interest_id": interests[int(j)]["id"]})
    pubs, authorship = [], []
    titles: set[str] = set()
    for i in range(120):
        while True:
            topic = str(rng.choice(_TOPICS))
            title = f"{rng.choice(_TITLE_A)} {rng.choice(_TITLE_B)} {topic} at {_word(rng, 2)}"
            if title not in titles:
                titles.add(title)
                break
        pub = {
            "id": f"pub{i + 1:03d}",
            "title": title,
            "year": int(rng.integers(1995, 2024)),
            "venue_id": venues[int(rng.integers(len(venues)))]["id"],
            "citations": int(rng.geometric(0.02)),
        }
        pubs.append(pub)
        for pos, a in enumerate(rng.choice(len(persons), size=int(rng.integers(1, 4)), replace=False), 1):
            authorship.append(
                {"person_id": persons[int(a)]["id"], "publication_id": pub["id"], "position": pos}
            )
    by_pub: dict[str, list[str]] = {}
    for a in authorship:
        by_pub.setdefault(str(a["publication_id"]), []).append(str(a["person_id"]))
    pairs = sorted({tuple(sorted(p)) for ids in by_pub.values() for p in itertools.combinations(ids, 2)})
    coauthors = [{"person_id": a, "coauthor_id": b} for a, b in pairs]
    tables: dict[str, list[dict[str, Any]]] = {
        "persons.csv": persons,
        "organisations.csv": orgs,
        "interests.csv": interests,
        "venues.csv": venues,
        "publications.csv": pubs,
        "authorship.csv": authorship,
        "membership.csv": membership,
        "person_interests.csv": person_interests,
        "coauthors.csv": coauthors,
    }
    for name, rows in tables.items():
        with (out / name).open("w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]), lineterminator="\n")
            w.writeheader()
            w.writerows(rows)
    schema = out / "schema.yaml"
    schema.write_text(SCHEMA.format(seed=seed), encoding="utf-8")
    return schema


SCHEMA = """\
# A fictional academic database: python -m proctor.agents.environments.academic OUT --seed {seed}
entities:
  person:
    file: persons.csv
    attributes: {{born: int, position: str}}
  organisation:
    file: organisations.csv
    attributes: {{city: str}}
  publication:
    file: publications.csv
    name: title
    attributes: {{year: int, citations: int}}
  venue: {{file: venues.csv}}
  interest: {{file: interests.csv}}
relations:
  member_of: {{from: person, to: organisation, file: membership.csv, columns: [person_id, organisation_id]}}
  author_of: {{from: person, to: publication, file: authorship.csv, columns: [person_id, publication_id]}}
  published_in: {{from: publication, to: venue, key: venue_id}}
  interested_in: {{from: person, to: interest, file: person_interests.csv, columns: [person_id, interest_id]}}
  coauthor: {{from: person, to: person, file: coauthors.csv, columns: [person_id, coauthor_id]}}
tools:   # R-Eval's AMiner tool names over the generic tools
  searchPerson: {{tool: search_entity, type: person}}
  searchPublication: {{tool: search_entity, type: publication}}
  getCoauthors: {{tool: get_related, relation: coauthor}}
  getPersonInterest: {{tool: get_related, relation: interested_in}}
  getPersonPubs: {{tool: get_related, relation: author_of, fields: [year, citations]}}
  getPublication:
    tool: get_entity
    type: publication
    include: [author_of, published_in]
    description: "A publication's attributes (title, year, citations), its authors and its venue."
  getPersonBasicInfo:
    tool: get_entity
    type: person
    include: [member_of]
    description: "A person's attributes (name, birth year, position) and organisation."
sql: true
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("out", type=Path)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    print(generate(args.out, args.seed))


if __name__ == "__main__":
    main()
