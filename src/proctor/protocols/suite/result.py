"""The suite's result: the topics, the knowledge map (per candidate x topic, each member's mastery and the
pooled one), where members disagree, how each member's items reached the map, and each member's spend.

The kit stores the pooled mastery of every cell as the metric `mastery.combined` (subject `candidate @
topic (name)`), the members' run folders and full usage as the artifact `suite_members`, and the rest as
results.json.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, model_validator

from proctor.estimates import Estimate
from proctor.kit.result import Artifact, Metric, Part, Result
from proctor.protocols.suite.knowledge_map import Cell, Disagreement, Linkage
from proctor.protocols.suite.topics import TopicModel


class MemberEntry(Part):
    """One member as the map sees it: what "correct" means for it, whether it gives evidence, and how its
    items reached the map (`not_mapped`: its subjects that are no suite candidate, e.g. exam grid cells)."""

    member: str
    protocol: str
    measure: str
    in_map: bool
    linkage: Linkage
    not_mapped: list[str]


class Spend(Part):
    """What a member's calls cost at the configured prices (cache hits included), so results.json is the
    same whether the replies came from the servers or the cache."""

    calls: int = 0
    errors: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0


class MemberSpend(Spend):
    member: str


class SuiteUsage(Part):
    members: list[MemberSpend] = Field(default_factory=list)
    total: Spend = Field(default_factory=Spend)


class MemberUsage(Spend):
    """A member's calls with what only this run's machine knows: cache hits and the cost actually spent
    (calls not answered from the cache)."""

    cache_hits: int = 0
    spent_usd: float = 0.0


class MemberRun(Part):
    """A member's run: its folder, its calls, and its headline table and warnings as it reported them."""

    member: str
    protocol: str
    run_dir: str
    usage: MemberUsage
    headline: list[dict[str, str]] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)


class MemberRuns(Part):
    runs: list[MemberRun] = Field(default_factory=list)

    def by_member(self) -> dict[str, MemberRun]:
        return {r.member: r for r in self.runs}


class Mastery(Part):
    """The pooled mastery of one cell (the metric the kit stores)."""

    combined: Annotated[Estimate, Metric("mastery.combined")]


class SuiteResult(Result):
    topics: TopicModel
    members: list[MemberEntry]
    map: list[Cell]
    disagreements: list[Disagreement]
    # results.json keeps the suite's `usage` (per member and total); the kit's per-model usage of the suite
    # itself stays empty — a suite makes no model calls of its own.
    member_usage: SuiteUsage = Field(default_factory=SuiteUsage)
    # The members' run folders and full usage (cache hits, spent cost): they differ between re-runs, so
    # they are kept out of results.json (read back with `run.artifact("suite_members", MemberRuns)`).
    runs: Annotated[MemberRuns, Artifact("suite_members")] = Field(default_factory=MemberRuns)
    # `candidate @ topic (name)` -> pooled mastery, derived from `map` and `topics`: the metrics.
    mastery: dict[str, Mastery] = Field(default_factory=dict, exclude=True)

    @model_validator(mode="before")
    @classmethod
    def _usage_from_json(cls, data: Any) -> Any:
        """results.json's `usage` is the suite's per-member usage (read back into `member_usage`)."""
        if isinstance(data, dict) and isinstance(data.get("usage"), dict) and "members" in data["usage"]:
            data = {k: v for k, v in data.items() if k != "usage"} | {"member_usage": data["usage"]}
        return data

    @model_validator(mode="after")
    def _mastery(self) -> SuiteResult:
        names = {t.topic_id: t.name for t in self.topics.topics}
        self.mastery = {
            f"{c.candidate} @ {c.topic_id} ({names[c.topic_id]})": Mastery(combined=c.combined)
            for c in self.map
        }
        return self

    def _lean(self, data: dict[str, Any]) -> dict[str, Any]:
        data = super()._lean(data)
        if "member_usage" in data:
            data["usage"] = data.pop("member_usage")
        return data

    def cell(self, candidate: str, topic_id: str) -> Cell:
        return next(c for c in self.map if c.candidate == candidate and c.topic_id == topic_id)

    def candidates(self) -> list[str]:
        return list(dict.fromkeys(c.candidate for c in self.map))

    def topic_names(self) -> dict[str, str]:
        return {t.topic_id: t.name for t in self.topics.topics}
