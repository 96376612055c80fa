"""Label files name a reckon item by its own id (`<unit_id>@<candidate>`, what `reckon.human_labels` reads);
the store keys items by the kit's key. Import maps the one to the other, export writes the own id back."""

from __future__ import annotations

import json
from pathlib import Path

from proctor.store import RunStore
from proctor.store.labels import LabelStore
from proctor.store.record import RunRecord
from proctor.viewer.labels import export_lines, parse_lines, resolve_item_ids


def test_reckon_labels_round_trip_through_the_kit_keys(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "run.sqlite")
    store.start_run("r", "reckon", {}, "h", "0")
    store.put_item("reckon_item_0a1b", "reckon_item", {"item_id": "ku_1@alice", "candidate": "alice"})
    store.put_item("answer_9f", "answer", {"candidate": "bob"})
    store.close()
    text = "\n".join(
        [
            json.dumps({"candidate": "alice", "unit_id": "ku_1", "label": "correct"}),
            json.dumps({"item_id": "answer_9f", "label": "incorrect"}),
            json.dumps({"item_id": "ku_9@nobody", "label": "unsure"}),
        ]
    )
    with RunRecord(tmp_path) as run:
        labels = resolve_item_ids(run, parse_lines(text, "ana"))
        assert [lab.item_id for lab in labels] == ["reckon_item_0a1b", "answer_9f", "ku_9@nobody"]
        with LabelStore(tmp_path) as ls:
            ls.import_labels(labels)
            rows = ls.current()
        own = run.item_ids_of_keys(lab.item_key for lab in rows)
    exported = {json.loads(line)["item_id"] for line in export_lines(rows, own)}
    assert exported == {"ku_1@alice", "answer_9f", "ku_9@nobody"}
