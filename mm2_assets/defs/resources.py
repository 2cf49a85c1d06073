"""Dagster resources shared by every flow's assets."""

from __future__ import annotations

import os
import sys
from typing import Any

from dagster_pyspark import PySparkResource
from pydantic import PrivateAttr

from mm2_assets.spark.class_archive import driver_java_options

# Local-mode settings: quiet, no UI port, Python workers from this interpreter.
LOCAL_SPARK_DEFAULTS: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.memory": "1g",
    "spark.sql.shuffle.partitions": "4",
    "spark.python.worker.reuse": "true",
}

JAVA_OPTIONS_KEY = "spark.driver.extraJavaOptions"


class SparkResource(PySparkResource):
    """Dagster's PySpark resource, with the session started on first use.

    `master` defaults to `local[*]`; set `remote` (e.g. `sc://spark-connect:15002`) to run the
    same job through Spark Connect, or `master` to a cluster URL. `spark_config` adds or
    overrides Spark settings. Runs that need no Spark work (nothing lagging) never pay the
    session start-up.
    """

    master: str = "local[*]"
    remote: str | None = None
    app_name: str = "mm2-assets"
    spark_config: dict[str, Any] = {}
    _session: Any = PrivateAttr(default=None)

    def setup_for_execution(self, context: Any) -> None:
        """Nothing at run start: the session starts lazily in `spark_session`."""

    def effective_config(self) -> dict[str, str]:
        """The Spark settings the session is built with."""
        conf: dict[str, str] = {"spark.app.name": self.app_name}
        user = {k: str(v) for k, v in self.spark_config.items()}
        if self.remote:
            conf["spark.remote"] = self.remote
        else:
            conf["spark.master"] = self.master
            if self.master.startswith("local"):
                conf.update(LOCAL_SPARK_DEFAULTS)
                # Faster driver JVM start; the user's own options are kept, after ours.
                user[JAVA_OPTIONS_KEY] = driver_java_options(user.get(JAVA_OPTIONS_KEY, ""))
        conf.update(user)
        return conf

    @property
    def spark_session(self) -> Any:
        """The SparkSession, created (or joined, if one runs in this process) on first use."""
        if self._session is None:
            from pyspark.sql import SparkSession

            # Workers must import mm2_assets and confluent_kafka: use this interpreter.
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
            builder = SparkSession.builder
            for key, value in self.effective_config().items():
                builder = builder.config(key, value)
            self._session = builder.getOrCreate()
        return self._session
