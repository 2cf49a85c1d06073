"""A Dagster Component for one mm2.properties file, so a code location can serve several.

In a dg project's defs folder, each instance is a `defs.yaml`:

```yaml
type: mm2_assets.component.MM2Component
attributes:
  properties: dr.properties  # relative to this defs.yaml's folder
```

and builds the same assets, checks, sensors and jobs for that file's flows as the single-file
code location (`mm2_assets.definitions`), through the same functions. Loading never contacts a
cluster.

One code location has one `spark` resource (Dagster resolves resource keys per location), so
the files of one location must agree on their `mm2assets.spark.*` settings: equal settings
share one resource object, which is what lets Dagster merge the components' Definitions.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated

import dagster as dg

from mm2_assets.code_location import build_definitions, load_config
from mm2_assets.defs.resources import SparkResource

# Equal Spark resources across the components of a process, by their settings. Dagster merges
# the Definitions of a defs folder's components and refuses two *different objects* under one
# resource key (`Definitions.merge` compares identity), even when their settings are equal:
# handing out one object per settings makes equal ones merge, and leaves unequal ones to
# Dagster's conflict error, since a location can only run one `spark` resource.
_SHARED_SPARK: dict[str, SparkResource] = {}


def _shared_spark(resource: SparkResource) -> SparkResource:
    """The first resource built with `resource`'s settings (the resource itself if new)."""
    # The fields are plain data (strings, a dict of strings), so their JSON is a faithful key;
    # sorted, so two files listing the same Spark settings in another order still agree.
    key = json.dumps(resource.model_dump(), sort_keys=True)
    return _SHARED_SPARK.setdefault(key, resource)


def _resolve_properties(context: dg.ResolutionContext, value: str | None) -> str | None:
    """A YAML `properties` value as an absolute path, relative to the YAML file's folder."""
    # Relative to the defs.yaml, not to the working directory: `dg`, `dagster dev` and a
    # deployed code server each start in a different folder.
    return None if value is None else str(context.resolve_source_relative_path(value))


class MM2Component(dg.Component, dg.Resolvable, dg.Model):
    """The assets, checks, sensors and jobs of every enabled flow of one mm2.properties file.

    `properties` is the file's path, relative to the `defs.yaml` that declares the component
    (or absolute); unset, it is `$MM2_CONFIG`, else the packaged demo configuration, as for the
    single-file code location `mm2_assets.definitions`. Several instances in one defs folder
    serve several files side by side; their flows (`source->target` cluster aliases) must be
    distinct, since a flow's asset keys, sensors and jobs are named after it.
    """

    properties: Annotated[
        str | None,
        dg.Resolver(
            _resolve_properties,
            model_field_type=str,
            description=(
                "Path of the mm2.properties file, relative to this YAML file's folder "
                "(default: $MM2_CONFIG, else the packaged demo configuration)."
            ),
            examples=["mm2.properties"],
        ),
    ] = None

    def build_defs(self, context: dg.ComponentLoadContext) -> dg.Definitions:
        """The Definitions of the file's flows, with its `spark` resource (shared when equal).

        A bad or missing file raises MM2ConfigError naming the file, the key and the fix.
        """
        config = load_config(Path(self.properties) if self.properties else None)
        spark = _shared_spark(SparkResource.from_settings(config.spark, config.source_path))
        # The component's folder names its shared sensors: unique within the defs folder.
        name = re.sub(r"[^A-Za-z0-9_]", "_", context.path.name)
        return build_definitions(config, spark, name=name)
