"""The Dagster code location: `Definitions` built from the MM2 configuration.

The configuration file is `$MM2_CONFIG`, or the packaged demo config (two local clusters)
when unset (`code_location.load_definitions`). To serve several files from one code location,
use `mm2_assets.component.MM2Component` in a dg project's defs folder.
"""

from __future__ import annotations

from mm2_assets.code_location import build_definitions, load_config, load_definitions

__all__ = ["build_definitions", "defs", "load_config", "load_definitions"]

defs = load_definitions()
