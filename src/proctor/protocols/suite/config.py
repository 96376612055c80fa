"""The `suite:` section of a run config: the member protocols, run in order over the suite's corpus,
models and candidates, and the topic model of the knowledge map."""

from __future__ import annotations

import re
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializationInfo,
    SerializeAsAny,
    SerializerFunctionWrapHandler,
    create_model,
    model_serializer,
    model_validator,
)

SUITE = "suite"


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Member(Strict):
    """One member run: `{protocol: exam, exam: {...}}`; the section named after the protocol holds its
    options, exactly as in a config of that protocol alone."""

    protocol: str = Field(description="the member's protocol: qa, exam, reckon, ... (not suite)")
    name: str | None = Field(
        None,
        pattern=r"^[A-Za-z0-9_.-]{1,64}$",
        description="the member's label and run-name suffix (default: its protocol); unique in the suite",
    )
    roles: dict[str, str] = Field(
        default_factory=dict,
        description="roles for this member only, over the suite's `roles` (e.g. another judge)",
    )
    seed_from: str | None = Field(
        None,
        description="the label of an earlier member whose run folder becomes this member's `from_run` "
        "(an interview's base questions from the suite's exam, with IRT difficulty when it was calibrated)",
    )
    settings: SerializeAsAny[BaseModel] | None = Field(
        None,
        description="not a YAML key: the member's options go under its protocol's name (`exam: {...}`), "
        "validated by that protocol; `proctor options <protocol>` lists them",
    )

    @model_validator(mode="before")
    @classmethod
    def _section(cls, data: Any) -> Any:
        """Validate the section named after the protocol with that protocol's own config class, so an
        error names `members[i].<protocol>.<option>`."""
        if not isinstance(data, dict) or not isinstance(data.get("protocol"), str):
            return data
        from proctor.kit.registry import protocol_config_class

        name = data["protocol"]
        if name == SUITE:
            raise ValueError("a suite cannot be a member of a suite")
        if "settings" in data:
            raise ValueError(f"unknown field 'settings' — put the member's options under `{name}:`")
        try:
            section_cls = protocol_config_class(name)
        except ValueError as e:
            raise ValueError(str(e)) from None
        # `protocol` also names the section, so the model is made per protocol (a valid identifier).
        shape: type[BaseModel] = create_model(  # type: ignore[call-overload]
            f"Member_{re.sub(r'[^A-Za-z0-9_]', '_', name)}",
            __config__=ConfigDict(extra="forbid"),
            protocol=(str, ...),
            name=(str | None, None),
            roles=(dict[str, str], {}),
            **{name: (section_cls, None)},
        )
        seed_from = data.get("seed_from")
        if seed_from is not None:
            if "from_run" not in section_cls.model_fields:
                raise ValueError(
                    f"seed_from: a {name} member reads no other run (no `from_run`); remove `seed_from`"
                )
            section = data.get(name)
            if isinstance(section, dict) and section.get("from_run") is not None:
                raise ValueError(f"give `seed_from` or `{name}.from_run`, not both")
            # A stand-in until the seeding member has run; the suite sets the real folder then.
            data = {**data, name: {**(section or {}), "from_run": f"(run folder of member {seed_from})"}}
        checked: Any = shape.model_validate({k: v for k, v in data.items() if k != "seed_from"})
        section_value = getattr(checked, name)
        return {
            "protocol": name,
            "name": checked.name,
            "roles": checked.roles,
            "seed_from": seed_from,
            "settings": section_value if section_value is not None else section_cls(),
        }

    @model_serializer(mode="wrap")
    def _as_written(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> Any:
        """Dumped as a config file holds it (`{protocol: exam, exam: {...}}`), so a stored suite config
        reads back (`load_run`, `--resume`); a seeded member's stand-in `from_run` is left out."""
        data = handler(self)
        if not isinstance(data, dict) or "settings" not in data:
            return data
        section = data.pop("settings")
        if self.seed_from is not None and isinstance(section, dict):
            section = {k: v for k, v in section.items() if k != "from_run"}
        data[self.protocol] = section
        return data

    @property
    def label(self) -> str:
        return self.name or self.protocol


class TopicsConfig(Strict):
    """The topic model of the knowledge map: k-means on the chunk embeddings (the run's `embedder`),
    each topic named by its top TF-IDF terms."""

    k: int | None = Field(
        None, ge=1, le=1000, description="number of topics; default round(sqrt(chunks / 2)), at least 1"
    )
    top_terms: int = Field(3, ge=1, le=10, description="TF-IDF terms that name each topic")


class Config(Strict):
    """A suite: several protocols run one after the other over one corpus, one candidate set and one
    call cache, each as its own run (folder, report); then a knowledge map of candidates x topics from
    every member's judged items."""

    members: list[Member] = Field(
        min_length=1,
        description="the member runs, in order: each `{protocol: <name>, <name>: {its options}}`, "
        "optionally with `name` and `roles`",
    )
    topics: TopicsConfig = Field(default_factory=TopicsConfig, description="the topic model")

    @model_validator(mode="after")
    def _unique_labels(self) -> Config:
        seen: set[str] = set()
        for i, m in enumerate(self.members):
            if m.label in seen:
                raise ValueError(
                    f"members[{i}]: a second member labelled '{m.label}'; give it its own `name`"
                )
            if m.seed_from is not None and m.seed_from not in seen:
                raise ValueError(
                    f"members[{i}].seed_from: '{m.seed_from}' is not an earlier member's label "
                    f"(earlier: {', '.join(sorted(seen)) or 'none'}); members run in order"
                )
            seen.add(m.label)
        return self
