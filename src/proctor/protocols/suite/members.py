"""From a suite config to its members' run configs: each member is an ordinary run config of its protocol
with the suite's corpus, models, embedder, candidates, seed, call cache and budget."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from proctor.config import RunConfig, _describe_errors
from proctor.errors import UserError
from proctor.kit.registry import MemberPlan, get_protocol
from proctor.protocols.suite.config import Config, Member

# What a member does not take from the suite (the suite's gates are on its own metrics).
SHARED_EXCLUDE = {"protocol", "name", "roles", "settings", "gates"}


def member_where(i: int, m: Member) -> str:
    return f"suite.members[{i}] ({m.label})"


def member_config(cfg: RunConfig, i: int, m: Member) -> RunConfig:
    """The run config of member `i`. Roles are the suite's `roles` that the member's protocol has, then
    the member's own `roles` over them; a required role left out is a UserError naming the member."""
    protocol = get_protocol(m.protocol)
    declared = {r.name for r in protocol.roles}
    roles = {k: v for k, v in cfg.roles.items() if k in declared} | m.roles
    where = member_where(i, m)
    missing = protocol.missing_role(roles, m.settings if m.settings is not None else protocol.settings())
    if missing:
        raise UserError(f"{where}: {missing}. Add it to the suite's `roles` or to the member's `roles`.")
    shared: dict[str, Any] = cfg.model_dump(mode="json", exclude=SHARED_EXCLUDE)
    # Candidates as objects: one given in code (a function, an object with `answer()`) stays itself.
    shared["candidates"] = [c.model_dump() for c in cfg.candidates]
    settings = m.settings.model_dump(mode="json") if m.settings is not None else {}
    data = {
        **shared,
        "protocol": m.protocol,
        "name": f"{cfg.run_name}-{m.label}"[:64],
        "roles": roles,
        m.protocol: settings,
    }
    try:
        return RunConfig.model_validate(data)
    except ValidationError as e:
        raise UserError(f"{where}: invalid member config: {_describe_errors(e)}.") from None


def member_configs(cfg: RunConfig) -> list[RunConfig]:
    """Every member's run config, in order; config mistakes surface before any member runs."""
    settings = cfg.settings
    if not isinstance(settings, Config):
        raise TypeError("member_configs needs a suite config")
    if not cfg.embedder:
        raise UserError(
            "embedder: a suite's knowledge map clusters the corpus's chunk embeddings into topics, so it "
            "needs `embedder` (e.g. `embedder: local/all-minilm-l6-v2`)."
        )
    return [member_config(cfg, i, m) for i, m in enumerate(settings.members)]


def check_members(cfg: RunConfig, *, reach_servers: bool = True) -> list[RunConfig]:
    """Every member's run config with everything it reads checked (corpus, models and their servers,
    candidates, embedder: `proctor.runner.check_inputs`), so a mistake anywhere in the suite stops it
    before its first member makes a call."""
    from proctor.runner import check_inputs

    configs = member_configs(cfg)
    settings = cfg.settings
    assert isinstance(settings, Config)
    for i, (m, mcfg) in enumerate(zip(settings.members, configs, strict=True)):
        try:
            check_inputs(mcfg, reach_servers=reach_servers)
        except UserError as e:
            raise UserError(f"{member_where(i, m)}: {e}") from None
    return configs


def member_plans(cfg: RunConfig) -> list[MemberPlan]:
    """The members for a dry run, in order, each checked like a real run checks them (`check_members`)."""
    settings = cfg.settings
    assert isinstance(settings, Config)
    configs = check_members(cfg, reach_servers=False)
    return [MemberPlan(m.label, mcfg, m.seed_from) for m, mcfg in zip(settings.members, configs, strict=True)]
