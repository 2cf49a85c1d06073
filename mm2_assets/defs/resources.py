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
# PySpark's own variable for a Spark Connect server (`sc://host:port`), honoured here so a
# deployment moves its runs onto a server without a code change.
REMOTE_ENV = "SPARK_REMOTE"


class SparkResource(PySparkResource):
    """Dagster's PySpark resource, with the session started on first use.

    `master` defaults to `local[*]`; set `remote` (e.g. `sc://spark-connect:15002`), or
    `$SPARK_REMOTE` when `remote` is unset, to run the same job through Spark Connect (for
    example the server of `mm2-assets spark connect up`), or `master` to a cluster URL.
    `spark_config` adds or overrides Spark settings. Runs that need no Spark work (nothing
    lagging) never pay the session start-up.
    """

    master: str = "local[*]"
    remote: str | None = None
    app_name: str = "mm2-assets"
    spark_config: dict[str, Any] = {}
    _session: Any = PrivateAttr(default=None)

    def setup_for_execution(self, context: Any) -> None:
        """Nothing at run start: the session starts lazily in `spark_session`."""

    def remote_url(self) -> str | None:
        """The Spark Connect server runs use: `remote`, else `$SPARK_REMOTE`, else None."""
        remote = self.remote or os.environ.get(REMOTE_ENV) or None
        if remote is not None and not remote.startswith("sc://"):
            source = "remote" if self.remote else f"${REMOTE_ENV}"
            raise ValueError(f"{source} must be a Spark Connect URL, sc://host:port: {remote!r}")
        return remote

    def effective_config(self) -> dict[str, str]:
        """The Spark settings the session is built with."""
        conf: dict[str, str] = {"spark.app.name": self.app_name}
        user = {k: str(v) for k, v in self.spark_config.items()}
        remote = self.remote_url()
        if remote:
            conf["spark.remote"] = remote
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
        if self._session is None and self.remote_url():
            from mm2_assets.spark.connect_session import connect_session

            conf = self.effective_config()
            # The server's Python workers get this package from the session (see there).
            self._session = connect_session(conf.pop("spark.remote"), conf)
        if self._session is None:
            from pyspark.sql import SparkSession

            # Workers must import mm2_assets and confluent_kafka: use this interpreter.
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
            builder = SparkSession.builder
            for key, value in self.effective_config().items():
                builder = builder.config(key, value)
            self._session = builder.getOrCreate()
        return self._session
