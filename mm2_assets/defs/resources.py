"""Dagster resources shared by every flow's assets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dagster_pyspark import LazyPySparkResource
from pydantic import PrivateAttr

from mm2_assets.mm2.spark_settings import SparkSettings
from mm2_assets.spark.job import is_spark_connect
from mm2_assets.spark.session import SessionSpec


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

    # What the copy job runs on (`for_copy`): on classic Spark a bare SparkContext, until
    # someone asks for `spark_session`.
    _for_copy: Any = PrivateAttr(default=None)

    @classmethod
    def _is_dagster_maintained(cls) -> bool:
        # Ours, built on dagster-pyspark's base: the UI must not say Dagster maintains it.
        return False

    @classmethod
    def from_settings(cls, settings: SparkSettings, config_file: Path | None) -> SparkResource:
        """The resource for `settings` (`MM2Config.spark`) of the file `config_file`."""
        spec = SessionSpec.from_settings(settings, config_file)
        return cls(
            master=spec.master,
            remote=spec.remote,
            spark_config=dict(spec.spark_config),
            secret_config_file=spec.secret_config_file,
        )

    def session_spec(self) -> SessionSpec:
        """The session this resource starts, as Dagster-free settings."""
        return SessionSpec(
            master=self.master,
            remote=self.remote,
            app_name=self.app_name,
            spark_config=dict(self.spark_config),
            secret_config_file=self.secret_config_file,
        )

    def remote_url(self) -> str | None:
        """The Spark Connect server runs use (see `SessionSpec.remote_url`)."""
        return self.session_spec().remote_url()

    def local_slots(self) -> int | None:
        """The task slots of a local session, known before it starts (see
        `SessionSpec.local_slots`)."""
        return self.session_spec().local_slots()

    def effective_config(self) -> dict[str, str]:
        """The Spark settings the session is built with (see `SessionSpec.effective_config`;
        secret values included: never show them)."""
        return self.session_spec().effective_config()

    def for_copy(self) -> Any:
        """What the copy job runs on, started on first use: the session if there is one
        already, else `SessionSpec.start_for_copy` (classic Spark: a SparkContext, without
        the SQL session's start)."""
        if self._spark_session is not None:
            return self._spark_session
        if self._for_copy is None:
            self._for_copy = self.session_spec().start_for_copy()
        return self._for_copy

    def _init_session(self) -> None:
        """Create the SparkSession (or join the one running in this process) unless it exists:
        `spark_session` and `spark_context` call it on first use."""
        if self._spark_session is None:
            from pyspark.sql import SparkSession

            spark = self.for_copy()
            self._spark_session = spark if is_spark_connect(spark) else SparkSession(spark)
