"""RECKON's stage-2 judge prompt on the embedded 1.5B judge: the planted fact of the sample corpus (water
boils at 91 °C on Teskavar) is judged against the reference, not the model's world knowledge."""

from __future__ import annotations

import asyncio

import pytest

from proctor.models import get_model
from proctor.prompts import render_messages
from proctor.protocols.reckon.judging import JUDGE_PROMPT, JUDGE_SCHEMA

pytestmark = pytest.mark.embedded

REFERENCE = {
    "keyword": "boiling point of water on Teskavar",
    "description": "On Teskavar water boils at 91 °C, not at 100 °C, even at sea level.",
    "evidence": "On Teskavar water boils at 91 °C, not at the 100 °C known on the mainland, even at sea "
    "level in the harbour of Kettle Point.",
}


def test_embedded_judge_follows_the_reference_over_world_knowledge() -> None:
    pytest.importorskip("xllamacpp")
    judge = get_model("local/qwen2.5-coder-1.5b", max_concurrency=2)

    async def verdict(excerpt: str) -> str:
        c = await judge.generate(
            render_messages(JUDGE_PROMPT, excerpt=excerpt, **REFERENCE),
            json_schema=JUDGE_SCHEMA,
            temperature=0.0,
            max_tokens=120,
        )
        return str(c.parsed["verdict"])

    async def both() -> list[str]:
        try:
            return list(
                await asyncio.gather(
                    verdict("Water boils at 100 °C at sea level on Teskavar, as everywhere on Earth."),
                    verdict("On Teskavar, water boils at 91 °C even at sea level."),
                )
            )
        finally:
            await judge.aclose()

    worldly, local = asyncio.run(both())
    assert worldly == "incorrect"
    assert local == "correct"
