"""MM2's copy position as Kafka Connect stores it, read to adopt it when cutting over.

MirrorSourceConnector's tasks commit, per source partition, the upstream offset of the last
record they copied into Connect's offsets topic on the target (dedicated mode:
`mm2-offsets.<source alias>.internal`, MirrorMakerConfig's `offset.storage.topic` default).
The record key is Connect's JSON `["<connector>", {"cluster": <source alias>, "partition": N,
"topic": <topic>}]`, the value `{"offset": N}`; the latest record per key wins and a null
value (tombstone) forgets the key. MM2 resumes one past the committed offset.

The connector is recognised by its source partition's shape (`cluster`, `topic`,
`partition`), not its name: dedicated mode names it `MirrorSourceConnector`, a Connect cluster
whatever the user chose. MirrorCheckpointConnector (`group`, `topic`, `partition`) and
MirrorHeartbeatConnector keys have other shapes and are ignored.

Pure logic: the records are any iterable of (key, value).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

log = logging.getLogger(__name__)


def connect_offsets_topic(source_alias: str) -> str:
    """The Connect offsets topic MM2's dedicated mode uses for flows from `source_alias`."""
    return f"mm2-offsets.{source_alias}.internal"


@dataclass
class ConnectOffsets:
    """The committed MirrorSourceConnector offsets of one source cluster, by partition.

    `offsets` maps (topic, partition) to the upstream offset of the last record MM2 copied;
    `skipped` counts records that are not Connect offset records (bad JSON, other shapes).
    """

    offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    skipped: int = 0

    def resume_offset(self, topic: str, partition: int) -> int | None:
        """Where MM2 would resume `topic`-`partition`: one past its committed offset."""
        committed = self.offsets.get((topic, partition))
        return None if committed is None else committed + 1


def _partition_key(key: bytes, source_alias: str) -> tuple[str, int] | None:
    """(topic, partition) of a Connect offset key of a MirrorSourceConnector task copying
    from `source_alias`; None for other connectors' keys. ValueError when not Connect's."""
    decoded = json.loads(key)
    if (
        not isinstance(decoded, list)
        or len(decoded) != 2
        or not isinstance(decoded[0], str)
        or not isinstance(decoded[1], dict)
    ):
        raise ValueError(f"not a Connect offset key: {key[:200]!r}")
    partition = decoded[1]
    if partition.get("cluster") != source_alias:
        return None
    topic, number = partition.get("topic"), partition.get("partition")
    if not isinstance(topic, str) or not isinstance(number, int) or isinstance(number, bool):
        # A MirrorCheckpointConnector or heartbeat key has other fields: not a copy position.
        return None
    return topic, number


def parse_connect_offsets(
    records: Iterable[tuple[bytes | None, bytes | None]], source_alias: str, *, topic: str
) -> ConnectOffsets:
    """The latest MirrorSourceConnector offset per partition of `source_alias` in `records`
    of Connect offsets topic `topic` (in topic order: latest wins, a tombstone forgets the
    partition). Records that are not Connect offset records are skipped with one warning
    naming `topic`: a stray record must not stop a cut-over, and without its partition's
    position the copy starts where it would have without MM2."""
    out = ConnectOffsets()
    first_error = ""
    for key, value in records:
        try:
            if key is None:
                raise ValueError("no key")
            where = _partition_key(key, source_alias)
            if where is None:
                continue
            if value is None:
                out.offsets.pop(where, None)
                continue
            decoded = json.loads(value)
            offset = decoded.get("offset") if isinstance(decoded, dict) else None
            if not isinstance(offset, int) or isinstance(offset, bool):
                raise ValueError(f"not a Connect offset value: {value[:200]!r}")
            out.offsets[where] = offset
        except (ValueError, UnicodeDecodeError) as exc:
            out.skipped += 1
            first_error = first_error or str(exc)
    if out.skipped:
        log.warning(
            "skipped %d records of %s that are not Kafka Connect offset records (first: %s)",
            out.skipped,
            topic,
            first_error,
        )
    return out
