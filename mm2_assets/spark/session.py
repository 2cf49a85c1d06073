"""The Spark a copy job runs on: which one (local, a cluster, Spark Connect), with what
settings, started on first use.

`SessionSpec` is the plain description both homes of a session share: the Dagster `spark`
resource (`defs.resources.SparkResource`, whose fields are these) and `mm2-assets follow`,
which runs without Dagster and so does not import it (0.8 s of CPU at start-up).
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mm2_assets.mm2.secrets import HIDDEN
from mm2_assets.mm2.spark_settings import (
    REMOTE_ENV,
    SparkSettings,
    local_slots,
    masked_remote,
    remote_secrets,
)
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


@dataclass(frozen=True)
class SessionSpec:
    """Which Spark session to run in and with what settings (see `SparkResource` for the
    meaning of each field); `start_for_copy()` creates it, or joins the one of this
    process."""

    master: str = "local[*]"
    # A Spark Connect URL with secret parameters holds them `[hidden]` (`masked_remote`):
    # the session reads the real URL when it starts (`remote_url`).
    remote: str | None = None
    app_name: str = "mm2-assets"
    spark_config: Mapping[str, Any] = field(default_factory=dict)
    # The MM2 properties file whose secret values (`mm2assets.spark.conf.*` of secret keys, a
    # Connect URL's token) the session reads when it starts: never kept in a field, which
    # Dagster would show.
    secret_config_file: str | None = None

    @classmethod
    def from_settings(cls, settings: SparkSettings, config_file: Path | None) -> SessionSpec:
        """The session of `settings` (`MM2Config.spark`) of the file `config_file`."""
        remote = settings.remote and masked_remote(settings.remote)
        secret = bool(settings.secret_conf()) or remote != settings.remote
        return cls(
            master=settings.master,
            remote=remote,
            spark_config=settings.public_conf(),
            secret_config_file=str(config_file) if config_file and secret else None,
        )

    def remote_url(self) -> str | None:
        """The Spark Connect server runs use: `remote`, else `$SPARK_REMOTE`, else None; a
        `remote` with hidden secrets is read again, whole, from `$SPARK_REMOTE` or the
        `secret_config_file` (the one whose secrets it hides). Secret: never show it."""
        remote = self.remote or os.environ.get(REMOTE_ENV) or None
        if remote is not None and not remote.startswith("sc://"):
            source = "remote" if self.remote else f"${REMOTE_ENV}"
            raise ValueError(
                f"{source} must be a Spark Connect URL, sc://host:port: {masked_remote(remote)!r}"
            )
        if remote is not None and HIDDEN in remote:
            return self._secret_remote(remote)
        return remote

    def _secret_remote(self, masked: str) -> str:
        """The Connect URL whose shown form is `masked`, from where it was configured."""
        candidates = [os.environ.get(REMOTE_ENV)]
        if self.secret_config_file is not None:
            from mm2_assets.mm2.config import load_mm2_config

            candidates.append(load_mm2_config(self.secret_config_file).spark.remote)
        for candidate in candidates:
            if candidate and masked_remote(candidate) == masked:
                return candidate
        raise ValueError(
            f"the Spark Connect URL {masked} hides a secret that neither ${REMOTE_ENV} nor "
            f"{self.secret_config_file or 'a config file'} (mm2assets.spark.remote) holds now"
        )

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

    def start_for_copy(self) -> Any:
        """What the copy job runs on (see `spark.job`): a Spark Connect session when
        `remote_url()` says so, else a classic SparkContext, created or joined (this process
        has one at most), without the SQL session the copy does not use."""
        conf = self.effective_config()
        remote = conf.pop("spark.remote", None)
        if remote is not None:
            from mm2_assets.spark.connect_session import connect_session

            shown = masked_remote(remote)
            if shown == remote:
                # The server's Python workers get this package from the session (see there).
                return connect_session(remote, conf)
            try:
                return connect_session(remote, conf)
            except Exception as exc:
                # PySpark's errors may quote the URL: the token must not reach a log or the UI.
                message = str(exc).replace(remote, shown)
                for secret in remote_secrets(remote):
                    message = message.replace(secret, HIDDEN)
                raise SparkConnectError(f"Spark Connect {shown}: {message}") from None
        from pyspark import SparkConf, SparkContext

        # Workers must import mm2_assets and confluent_kafka: use this interpreter.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        context = SparkContext.getOrCreate(SparkConf().setAll(list(conf.items())))
        if not conf.get("spark.master", "").startswith("local"):
            from mm2_assets.spark.connect_session import package_zip

            # Executors elsewhere import mm2_assets from this zip, first on their path.
            context.addPyFile(str(package_zip()))
        return context


class SparkConnectError(RuntimeError):
    """Starting a Spark Connect session failed (the message shows the URL without its
    secrets)."""


class LazySession:
    """A `SessionSpec`'s Spark for the copy job (`start_for_copy`), started on first use (by
    whichever thread asks first)."""

    def __init__(self, spec: SessionSpec) -> None:
        self.spec = spec
        self._spark: Any | None = None
        self._lock = threading.Lock()

    def for_copy(self) -> Any:
        """The copy job's Spark, started now if it was not yet."""
        with self._lock:
            if self._spark is None:
                self._spark = self.spec.start_for_copy()
            return self._spark

    def started(self) -> Any | None:
        """What was started, else None (none starts)."""
        return self._spark
