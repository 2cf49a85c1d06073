"""A class-data-sharing archive of the local Kafka JVMs (brokers and the storage tool).

A local broker spends most of its start-up loading and verifying Kafka's and Scala's classes.
As for the Spark driver (`spark/class_archive.py`), Java 17 dumps the classes one broker loaded
into an archive as it exits (`-XX:ArchiveClassesAtExit`), and later JVMs map it
(`-XX:SharedArchiveFile`, added by the launcher when the archive exists): a pair of brokers
then starts on 2.5 s of CPU instead of 4.1 s, and 1.3 s sooner. `mm2-assets kafka archive`
(run by `scripts/setup.sh`) makes it once per machine, keyed by the JVM build and the Kafka
runtime (`runtime.broker_archive_path`).
"""

from __future__ import annotations

import os
from pathlib import Path

from mm2_assets.local.launcher import KAFKA_JVM_OPTIONS_ENV, LauncherError
from mm2_assets.local.runtime import broker_archive_path, create_class_archive

# One broker that serves what a replication does (a topic, a transaction, a group's commit),
# so the classes of those paths are in the archive; it dumps the archive as it stops.
_DUMP_SCRIPT = """
import sys, tempfile, time
from pathlib import Path
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from mm2_assets.local.launcher import running_clusters

with tempfile.TemporaryDirectory() as tmp, running_clusters(["archive"], Path(tmp)) as clusters:
    bootstrap = clusters["archive"].bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("archive", 1, 1)])["archive"].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "archive"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce("archive", b"record")
    producer.commit_transaction(30)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "archive",
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition("archive", 0, 0)])
    message = consumer.poll(30)
    if message is None or message.error():
        sys.exit(f"no record read back: {message and message.error()}")
    # The group's coordinator may not be ready at first.
    for attempt in range(30):
        try:
            consumer.commit(message, asynchronous=False)
            break
        except KafkaException:
            time.sleep(0.5)
    consumer.close()
    del admin, producer  # before the broker stops: they would log its absence
"""


def ensure_broker_archive(*, force: bool = False, timeout: float = 180) -> Path:
    """Create the archive (a child process starts and stops one broker that writes it as it
    exits); return its path. An existing archive is kept unless `force`."""

    def env(partial: Path) -> dict[str, str]:
        options = f"{os.environ.get(KAFKA_JVM_OPTIONS_ENV, '')} -XX:ArchiveClassesAtExit={partial}"
        return {**os.environ, KAFKA_JVM_OPTIONS_ENV: options.strip()}

    return create_class_archive(
        broker_archive_path(),
        _DUMP_SCRIPT,
        kind="Kafka",
        error=LauncherError,
        env=env,
        force=force,
        timeout=timeout,
    )
