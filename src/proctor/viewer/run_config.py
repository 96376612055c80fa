"""The run page's resolved config, as the YAML a user would write: the protocol's options under the
protocol's name (the store keeps them as `settings`). Configs name environment variables, never secrets."""

from __future__ import annotations

from typing import Any

import yaml

from proctor.store.record import RunRecord


def config_yaml(run: RunRecord) -> str | None:
    """The config the run resolved and stored when it started, as YAML; None when it stored none."""
    data: Any = run.config_data()
    if not isinstance(data, dict):
        return None
    data = dict(data)
    section = data.pop("settings", None)
    if section is not None and isinstance(data.get("protocol"), str):
        data[data["protocol"]] = section
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, default_flow_style=False)
