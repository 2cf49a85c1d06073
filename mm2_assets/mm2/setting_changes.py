"""Which of a flow's settings differ from MM2's defaults, as `mm2-assets validate` shows them.

A setting differs when its typed value (as the flow resolved it: top-level over default,
`<src>-><tgt>.<key>` over top-level) is not the typed default, so `topics = .*` written out
explicitly is not a change, and `topics = a,b` and `topics = a, b` are the same one. Values are
shown as written in the file, secrets masked (`secrets.mask`).

Pure logic: nothing here imports Dagster, Spark or confluent-kafka.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from mm2_assets.mm2.config import FlowConfig
from mm2_assets.mm2.flow_settings import SETTINGS
from mm2_assets.mm2.secrets import mask

__all__ = ["SettingChange", "setting_changes"]


@dataclass(frozen=True)
class SettingChange:
    """One setting of a flow that is not at its default.

    `set_as` is the key as written in the file (`primary->backup.topics` or `topics`); `value`
    the value written there (masked when secret); `default` the setting's default.
    """

    key: str
    set_as: str
    value: str
    default: str


def setting_changes(flow: FlowConfig, file_properties: Mapping[str, str]) -> list[SettingChange]:
    """The flow's settings whose value differs from the default, in the reference's order.

    `file_properties` are the file's resolved properties (`MM2Config.properties`), used to
    tell a per-flow override from a top-level setting.
    """
    changes: list[SettingChange] = []
    for setting in SETTINGS:
        written = flow.properties.get(setting.key)
        if written is None or setting.parse(written) == setting.parse(setting.default):
            continue
        override = f"{flow.name}.{setting.key}"
        set_as = override if override in file_properties else setting.key
        changes.append(
            SettingChange(
                key=setting.key,
                set_as=set_as,
                value=mask(setting.key, written) or "",
                default=setting.default,
            )
        )
    return changes
