"""Dagster resources shared by every flow's assets."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from dagster_pyspark import LazyPySparkResource

from mm2_assets.mm2.spark_settings import SparkSettings, local_slots
from mm2_assets.spark.class_archive import driver_java_options

# The Python daemon of local sessions (it forks their Python workers).
PYTHON_DAEMON_MODULE = "mm2_assets.spark.python_daemon"
# Local-mode settings: quiet, no UI port, Python workers from this interpreter.
LOCAL_SPARK_DEFAULTS: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.memory": "1g",
    "spark.sql.shuffle.partitions": "4",
    "spark.python.worker.reuse": "true",
    # The copy task's modules are imported once per session, not once per Python worker.
    "spark.python.daemon.module": PYTHON_DAEMON_MODULE,
}

JAVA_OPTIONS_KEY = "spark.driver.extraJavaOptions"
# PySpark's own variable for a Spark Connect server (`sc://host:port`), honoured here so a
# deployment moves its runs onto a server without a code change.
REMOTE_ENV = "SPARK_REMOTE"


class SparkResource(LazyPySparkResource):
    """dagster-pyspark's lazy PySpark resource: the session starts on first use.

    `master` defaults to `local[*]`; set `remote` (e.g. `sc://spark-connect:15002`), or
    `$SPARK_REMOTE` when `remote` is unset, to run the same job through Spark Connect (for
    example the server of `mm2-assets spark connect up`), or `master` to a cluster URL.
    `spark_config` adds or overrides Spark settings. Runs that need no Spark work (nothing
    lagging) never pay the session start-up. `from_settings` builds it from the MM2 file's
    `mm2assets.spark.*` settings (`MM2Config.spark`).

    Outside local mode the session ships this process's `mm2_assets` to the executors as a
    zip (`SparkContext.addPyFile`), so they run the driver's code, as on any real cluster.
    """

    master: str = "local[*]"
    remote: str | None = None
    app_name: str = "mm2-assets"
    spark_config: dict[str, Any] = {}
    # The MM2 properties file whose secret `mm2assets.spark.conf.*` values the session adds
    # when it starts: Dagster shows a resource's config in its UI, so they are never in it.
    secret_config_file: str | None = None

    @classmethod
    def _is_dagster_maintained(cls) -> bool:
        # Ours, built on dagster-pyspark's base: the UI must not say Dagster maintains it.
        return False

    @classmethod
    def from_settings(cls, settings: SparkSettings, config_file: Path | None) -> SparkResource:
        """The resource for `settings` (`MM2Config.spark`) of the file `config_file`."""
        return cls(
            master=settings.master,
            remote=settings.remote,
            spark_config=settings.public_conf(),
            secret_config_file=str(config_file) if config_file and settings.secret_conf() else None,
        )

    def remote_url(self) -> str | None:
        """The Spark Connect server runs use: `remote`, else `$SPARK_REMOTE`, else None."""
        remote = self.remote or os.environ.get(REMOTE_ENV) or None
        if remote is not None and not remote.startswith("sc://"):
            source = "remote" if self.remote else f"${REMOTE_ENV}"
            raise ValueError(f"{source} must be a Spark Connect URL, sc://host:port: {remote!r}")
        return remote

    def _secret_config(self) -> dict[str, str]:
        if self.secret_config_file is None:
            return {}
        from mm2_assets.mm2.config import load_mm2_config

        return load_mm2_config(self.secret_config_file).spark.secret_conf()

    def local_slots(self) -> int | None:
        """The task slots of a local session, known before it starts (`local[N]`: N); None
        for any other session or when the Spark settings choose the parallelism."""
        chosen = {"spark.master", "spark.default.parallelism"} & set(self.spark_config)
        if self.remote_url() or chosen or not self.master.startswith("local"):
            return None
        return local_slots(self.master)

    def effective_config(self) -> dict[str, str]:
        """The Spark settings the session is built with (secret values included: never show
        them; `SparkSettings.masked_conf` does that)."""
        conf: dict[str, str] = {"spark.app.name": self.app_name}
        user = {k: str(v) for k, v in self.spark_config.items()}
        user.update(self._secret_config())
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

    def _init_session(self) -> None:
        """Create the SparkSession (or join the one running in this process) unless it exists:
        `spark_session` and `spark_context` call it on first use."""
        if self._spark_session is None and self.remote_url():
            from mm2_assets.spark.connect_session import connect_session

            conf = self.effective_config()
            # The server's Python workers get this package from the session (see there).
            self._spark_session = connect_session(conf.pop("spark.remote"), conf)
        if self._spark_session is None:
            from pyspark.sql import SparkSession

            # Workers must import mm2_assets and confluent_kafka: use this interpreter.
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
            builder = SparkSession.builder
            config = self.effective_config()
            for key, value in config.items():
                builder = builder.config(key, value)
            session = builder.getOrCreate()
            if not config.get("spark.master", "").startswith("local"):
                from mm2_assets.spark.connect_session import package_zip

                # Executors elsewhere import mm2_assets from this zip, first on their path.
                session.sparkContext.addPyFile(str(package_zip()))
            self._spark_session = session

    def started_session(self) -> Any | None:
        """The session if one was started through this resource, else None (none starts)."""
        return self._spark_session
