"""What the Dagster catalog shows of a flow's assets: tags, kinds, descriptions in MM2's words."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from mm2_assets.definitions import build_definitions
from mm2_assets.demo import demo_properties
from mm2_assets.mm2.config import load_mm2_config

ASSETS = {  # asset → its kinds and the MM2 words its description uses
    "source_topics": ({"kafka"}, "Topics on cluster 'primary'"),
    "replicated_topics": ({"kafka", "spark"}, "Remote topics on 'backup'"),
    "topic_configs": ({"kafka"}, "KIP-894"),
    "checkpoints": ({"kafka"}, "'primary.checkpoints.internal' on 'backup'"),
    "synced_group_offsets": ({"kafka"}, "KIP-545"),
    "heartbeats": ({"kafka"}, "Heartbeats from 'primary' in 'heartbeats'"),
}


def _specs(tmp_path: Path) -> dict[dg.AssetKey, dg.AssetSpec]:
    path = tmp_path / "mm2.properties"
    path.write_text(demo_properties("127.0.0.1:1", "127.0.0.1:2"))
    defs = build_definitions(load_mm2_config(path))
    return {spec.key: spec for spec in defs.resolve_all_asset_specs()}


def test_every_asset_is_tagged_with_its_flow_and_clusters_and_has_its_kinds(
    tmp_path: Path,
) -> None:
    specs = _specs(tmp_path)
    for name, (kinds, words) in ASSETS.items():
        spec = specs[dg.AssetKey(["primary_to_backup", name])]
        assert spec.tags["mm2/flow"] == "primary_to_backup", name
        assert spec.tags["mm2/source"] == "primary", name
        assert spec.tags["mm2/target"] == "backup", name
        assert spec.kinds == kinds, name
        assert words in (spec.description or ""), name
        assert spec.group_name == "primary_to_backup", name
    # The heartbeat-only pair backup->primary is a flow of its own in the catalog.
    reverse = specs[dg.AssetKey(["backup_to_primary", "heartbeats"])]
    assert {k: v for k, v in reverse.tags.items() if k.startswith("mm2/")} == {
        "mm2/flow": "backup_to_primary",
        "mm2/source": "backup",
        "mm2/target": "primary",
    }


def test_catalog_filters_by_cluster_and_flow(tmp_path: Path) -> None:
    specs = _specs(tmp_path)
    on_backup = {k.to_user_string() for k, s in specs.items() if s.tags["mm2/target"] == "backup"}
    assert on_backup == {f"primary_to_backup/{name}" for name in ASSETS}
    from_backup = {k.to_user_string() for k, s in specs.items() if s.tags["mm2/source"] == "backup"}
    assert from_backup == {"backup_to_primary/heartbeats"}


def test_owners_come_from_the_flow_settings(tmp_path: Path) -> None:
    path = tmp_path / "mm2.properties"
    path.write_text(
        demo_properties("127.0.0.1:1", "127.0.0.1:2")
        + "\nmm2assets.asset.owners = team:platform\n"
        + "primary->backup.mm2assets.asset.owners = dr-oncall@example.com, team:platform\n"
    )
    specs = {s.key: s for s in build_definitions(load_mm2_config(path)).resolve_all_asset_specs()}
    for name in ASSETS:
        spec = specs[dg.AssetKey(["primary_to_backup", name])]
        assert spec.owners == ["dr-oncall@example.com", "team:platform"], name
    assert specs[dg.AssetKey(["backup_to_primary", "heartbeats"])].owners == ["team:platform"]


def test_every_computed_asset_links_to_its_code(tmp_path: Path) -> None:
    """The UI's "View code" opens the function that materializes the asset."""
    package = Path(__file__).resolve().parents[2] / "mm2_assets"
    for key, spec in _specs(tmp_path).items():
        if key.path[-1] == "source_topics":
            continue  # observed, not materialized: no function of ours
        references = spec.metadata["dagster/code_references"].code_references
        assert references, key
        path = Path(references[0].file_path)
        assert path.is_relative_to(package) and path.is_file(), (key, path)
