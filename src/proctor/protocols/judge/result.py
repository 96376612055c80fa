"""The judge protocol's result: how many rows were graded and how, the share judged correct, and the judge
card when rows carry human labels."""

from __future__ import annotations

from typing import Annotated

from proctor.estimates import Estimate
from proctor.kit.result import OmitNone, Result
from proctor.protocols.judge.card import JudgeCard


class JudgeResult(Result):
    rows: int
    judged: int
    judge_errors: int
    labelled: int
    # Share of the judged rows the judge called correct.
    accuracy: Estimate
    decided_without_call: Estimate
    # Judged rows per deciding method (rule names, guard names, llm).
    methods: dict[str, int]
    card: Annotated[JudgeCard | None, OmitNone()] = None
