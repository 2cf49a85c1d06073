"""MM2's heartbeat, offset-sync and checkpoint records, byte-compatible with Apache Kafka 4.x.

The records use Kafka protocol struct types (`org.apache.kafka.common.protocol.types.Type`):
STRING = INT16 byte length (0..32767) + UTF-8 bytes; INT16/INT32/INT64 = big-endian two's
complement. Layouts, as written by MM2 4.3 (`Heartbeat`, `OffsetSync`, `Checkpoint`):

- Heartbeat key: STRING sourceClusterAlias, STRING targetClusterAlias;
  value: INT16 version (0), INT64 timestamp.
- OffsetSync key: STRING topic, INT32 partition;
  value: INT64 upstreamOffset, INT64 offset (no version header).
- Checkpoint key: STRING group, STRING topic, INT32 partition;
  value: INT16 version (0), INT64 upstreamOffset, INT64 offset, STRING metadata.

Decoding a versioned value with a version above 0 reads the version-0 fields and ignores the
rest, as MM2 does (it always applies the v0 schema). Everything else that is not exactly the
schema (truncation, trailing bytes, negative lengths, invalid UTF-8) raises WireFormatError.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import NamedTuple, Self

CURRENT_VERSION = 0
"""The value-schema version MM2 4.x writes for heartbeats and checkpoints."""

BytesLike = bytes | bytearray | memoryview
"""Raw record keys and values as handed over by Kafka clients."""

MAX_STRING_BYTES = 32767
"""Kafka's STRING type limit (Short.MAX_VALUE bytes of UTF-8)."""

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_INT32_RANGE = (-(2**31), 2**31 - 1)
_INT64_RANGE = (-(2**63), 2**63 - 1)


class WireFormatError(ValueError):
    """Bytes that are not a valid MM2 record (the message names the record kind and part)."""


class TopicPartition(NamedTuple):
    """A topic name and partition number (Java: `org.apache.kafka.common.TopicPartition`)."""

    topic: str
    partition: int

    def __str__(self) -> str:
        """`topic-partition`, as Java's TopicPartition prints."""
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    """A committed consumer offset and its metadata string (Java: `OffsetAndMetadata`)."""

    offset: int
    metadata: str = ""


def _check_int(kind: str, name: str, value: int, bounds: tuple[int, int]) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{kind}.{name} must be an int, got {type(value).__name__}")
    low, high = bounds
    if not low <= value <= high:
        raise ValueError(f"{kind}.{name}={value} is outside [{low}, {high}]")


def _check_str(kind: str, name: str, value: str) -> None:
    if not isinstance(value, str):
        raise TypeError(f"{kind}.{name} must be a str, got {type(value).__name__}")


def _encode_string(kind: str, name: str, value: str) -> bytes:
    try:
        raw = value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"{kind}.{name} is not encodable as UTF-8 ({exc})") from exc
    if len(raw) > MAX_STRING_BYTES:
        raise ValueError(
            f"{kind}.{name} is {len(raw)} UTF-8 bytes; Kafka's STRING type allows at most "
            f"{MAX_STRING_BYTES}"
        )
    return _INT16.pack(len(raw)) + raw


class _Reader:
    """Sequential reader over one record key or value; errors name the record kind and part."""

    def __init__(self, data: BytesLike | None, kind: str, part: str) -> None:
        if data is None:
            raise WireFormatError(f"{kind} record {part} is missing (null)")
        self._data = bytes(data)
        self._pos = 0
        self._kind = kind
        self._part = part

    def _fail(self, reason: str) -> WireFormatError:
        return WireFormatError(
            f"malformed {self._kind} record {self._part} at byte {self._pos}: {reason} "
            f"({len(self._data)} bytes: {self._data[:64].hex()}"
            f"{'...' if len(self._data) > 64 else ''})"
        )

    def _take(self, size: int, what: str) -> bytes:
        end = self._pos + size
        if end > len(self._data):
            raise self._fail(
                f"truncated {what}: need {size} bytes, {len(self._data) - self._pos} left"
            )
        chunk = self._data[self._pos : end]
        self._pos = end
        return chunk

    def int16(self, what: str) -> int:
        return int(_INT16.unpack(self._take(2, what))[0])

    def int32(self, what: str) -> int:
        return int(_INT32.unpack(self._take(4, what))[0])

    def int64(self, what: str) -> int:
        return int(_INT64.unpack(self._take(8, what))[0])

    def string(self, what: str) -> str:
        length = self.int16(f"{what} length")
        if length < 0:
            raise self._fail(f"{what} length {length} cannot be negative")
        raw = self._take(length, what)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self._fail(f"{what} is not valid UTF-8 ({exc.reason})") from exc

    def end(self) -> None:
        if self._pos != len(self._data):
            raise self._fail(f"{len(self._data) - self._pos} unexpected trailing bytes")

    def version(self) -> int:
        version = self.int16("version")
        if version < 0:
            raise self._fail(f"version {version} cannot be negative")
        return version


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """A heartbeat MM2 emits from a source to a target cluster (Java: `Heartbeat`)."""

    source_cluster_alias: str
    target_cluster_alias: str
    timestamp: int

    KIND = "heartbeat"

    def __post_init__(self) -> None:
        """Validate field types and ranges so encoding cannot fail on them later."""
        _check_str(self.KIND, "source_cluster_alias", self.source_cluster_alias)
        _check_str(self.KIND, "target_cluster_alias", self.target_cluster_alias)
        _check_int(self.KIND, "timestamp", self.timestamp, _INT64_RANGE)

    def record_key(self) -> bytes:
        """STRING sourceClusterAlias, STRING targetClusterAlias. Java: `recordKey()`."""
        return _encode_string(
            self.KIND, "source_cluster_alias", self.source_cluster_alias
        ) + _encode_string(self.KIND, "target_cluster_alias", self.target_cluster_alias)

    def record_value(self) -> bytes:
        """INT16 version (0), INT64 timestamp. Java: `recordValue()`."""
        return _INT16.pack(CURRENT_VERSION) + _INT64.pack(self.timestamp)

    @classmethod
    def from_record(cls, key: BytesLike | None, value: BytesLike | None) -> Self:
        """Decode a heartbeat record. Java: `Heartbeat.deserializeRecord`."""
        key_reader = _Reader(key, cls.KIND, "key")
        source = key_reader.string("sourceClusterAlias")
        target = key_reader.string("targetClusterAlias")
        key_reader.end()
        value_reader = _Reader(value, cls.KIND, "value")
        version = value_reader.version()
        timestamp = value_reader.int64("timestamp")
        if version == CURRENT_VERSION:
            value_reader.end()
        return cls(source, target, timestamp)


@dataclass(frozen=True, slots=True)
class OffsetSync:
    """Upstream offset `upstream_offset` of `topic`/`partition` landed at `downstream_offset`.

    Java: `OffsetSync` (written by MirrorSourceTask to `mm2-offset-syncs.<target>.internal`).
    """

    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int

    KIND = "offset-sync"

    def __post_init__(self) -> None:
        """Validate field types and ranges so encoding cannot fail on them later."""
        _check_str(self.KIND, "topic", self.topic)
        _check_int(self.KIND, "partition", self.partition, _INT32_RANGE)
        _check_int(self.KIND, "upstream_offset", self.upstream_offset, _INT64_RANGE)
        _check_int(self.KIND, "downstream_offset", self.downstream_offset, _INT64_RANGE)

    @property
    def topic_partition(self) -> TopicPartition:
        """The upstream topic-partition this sync is about."""
        return TopicPartition(self.topic, self.partition)

    def record_key(self) -> bytes:
        """STRING topic, INT32 partition. Java: `recordKey()`."""
        return _encode_string(self.KIND, "topic", self.topic) + _INT32.pack(self.partition)

    def record_value(self) -> bytes:
        """INT64 upstreamOffset, INT64 offset (no version header). Java: `recordValue()`."""
        return _INT64.pack(self.upstream_offset) + _INT64.pack(self.downstream_offset)

    @classmethod
    def from_record(cls, key: BytesLike | None, value: BytesLike | None) -> Self:
        """Decode an offset-sync record. Java: `OffsetSync.deserializeRecord`."""
        key_reader = _Reader(key, cls.KIND, "key")
        topic = key_reader.string("topic")
        partition = key_reader.int32("partition")
        key_reader.end()
        value_reader = _Reader(value, cls.KIND, "value")
        upstream = value_reader.int64("upstreamOffset")
        downstream = value_reader.int64("offset")
        value_reader.end()
        return cls(topic, partition, upstream, downstream)


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A consumer group's upstream offset translated to the target cluster (Java: `Checkpoint`).

    `topic`/`partition` name the *downstream* (remote) topic-partition, as MM2 writes them to
    `<source>.checkpoints.internal` on the target.
    """

    consumer_group_id: str
    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int
    metadata: str = ""

    KIND = "checkpoint"

    def __post_init__(self) -> None:
        """Validate field types and ranges so encoding cannot fail on them later."""
        _check_str(self.KIND, "consumer_group_id", self.consumer_group_id)
        _check_str(self.KIND, "topic", self.topic)
        _check_int(self.KIND, "partition", self.partition, _INT32_RANGE)
        _check_int(self.KIND, "upstream_offset", self.upstream_offset, _INT64_RANGE)
        _check_int(self.KIND, "downstream_offset", self.downstream_offset, _INT64_RANGE)
        _check_str(self.KIND, "metadata", self.metadata)

    @property
    def topic_partition(self) -> TopicPartition:
        """The downstream topic-partition this checkpoint is for."""
        return TopicPartition(self.topic, self.partition)

    def offset_and_metadata(self) -> OffsetAndMetadata:
        """The offset to commit for the group on the target. Java: `offsetAndMetadata()`."""
        return OffsetAndMetadata(self.downstream_offset, self.metadata)

    def record_key(self) -> bytes:
        """STRING group, STRING topic, INT32 partition. Java: `recordKey()`."""
        return (
            _encode_string(self.KIND, "consumer_group_id", self.consumer_group_id)
            + _encode_string(self.KIND, "topic", self.topic)
            + _INT32.pack(self.partition)
        )

    def record_value(self) -> bytes:
        """INT16 version (0), INT64 upstreamOffset, INT64 offset, STRING metadata.

        Java: `recordValue()`.
        """
        return (
            _INT16.pack(CURRENT_VERSION)
            + _INT64.pack(self.upstream_offset)
            + _INT64.pack(self.downstream_offset)
            + _encode_string(self.KIND, "metadata", self.metadata)
        )

    @classmethod
    def from_record(cls, key: BytesLike | None, value: BytesLike | None) -> Self:
        """Decode a checkpoint record. Java: `Checkpoint.deserializeRecord`."""
        key_reader = _Reader(key, cls.KIND, "key")
        group = key_reader.string("group")
        topic = key_reader.string("topic")
        partition = key_reader.int32("partition")
        key_reader.end()
        value_reader = _Reader(value, cls.KIND, "value")
        version = value_reader.version()
        upstream = value_reader.int64("upstreamOffset")
        downstream = value_reader.int64("offset")
        metadata = value_reader.string("metadata")
        if version == CURRENT_VERSION:
            value_reader.end()
        return cls(group, topic, partition, upstream, downstream, metadata)
