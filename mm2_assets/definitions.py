"""The Dagster code location: `Definitions` built from the MM2 configuration."""

from __future__ import annotations

import dagster as dg

defs = dg.Definitions()
