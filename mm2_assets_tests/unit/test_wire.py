"""Heartbeat, OffsetSync and Checkpoint records: golden bytes, round trips, malformed input.

The golden vectors are written out by hand from MM2's schemas (Kafka protocol types: STRING =
INT16 length + UTF-8, big-endian INT16/INT32/INT64), not produced by our encoder.
"""

from __future__ import annotations

import random

import pytest

from mm2_assets.mm2.wire import (
    MAX_STRING_BYTES,
    Checkpoint,
    Heartbeat,
    OffsetAndMetadata,
    OffsetSync,
    TopicPartition,
    WireFormatError,
)

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


def h(text: str) -> bytes:
    """Hex literal with spaces (for readability) to bytes."""
    return bytes.fromhex(text.replace(" ", ""))


# (record, key hex, value hex). Field by field:
GOLDEN: list[tuple[Heartbeat | OffsetSync | Checkpoint, str, str]] = [
    (
        Heartbeat("A", "B", 1),
        # "A": len 0x0001 + 0x41 | "B": len 0x0001 + 0x42
        "0001 41  0001 42",
        # version INT16 0 | timestamp INT64 1
        "0000  0000000000000001",
    ),
    (
        Heartbeat("us-west", "é😀", -2),
        # "us-west" 7 bytes | "é" = c3 a9, "😀" (U+1F600) = f0 9f 98 80 -> 6 bytes
        "0007 75732d77657374  0006 c3a9 f09f9880",
        # version 0 | -2 in two's complement
        "0000  fffffffffffffffe",
    ),
    (
        OffsetSync("t", 0, 5, 7),
        # "t" | partition INT32 0
        "0001 74  00000000",
        # upstreamOffset 5 | offset 7 (offset syncs carry no version header)
        "0000000000000005  0000000000000007",
    ),
    (
        OffsetSync("", -1, INT64_MAX, INT64_MIN),
        # empty topic: length 0, no bytes | partition -1
        "0000  ffffffff",
        "7fffffffffffffff  8000000000000000",
    ),
    (
        Checkpoint("g", "t", 1, 10, 12, ""),
        # group "g" | topic "t" | partition 1
        "0001 67  0001 74  00000001",
        # version 0 | upstreamOffset 10 | offset 12 | metadata "" (length 0)
        "0000  000000000000000a  000000000000000c  0000",
    ),
    (
        Checkpoint("grüße", "S.orders", 65536, -1, 300, "m😀"),
        # "grüße" = 67 72 c3bc c39f 65 (7 bytes) | "S.orders" (8 bytes) | partition 0x00010000
        "0007 6772c3bcc39f65  0008 532e6f7264657273  00010000",
        # version 0 | -1 | 300 = 0x12c | "m😀" = 6d f09f9880 (5 bytes)
        "0000  ffffffffffffffff  000000000000012c  0005 6d f09f9880",
    ),
]


@pytest.mark.parametrize(("record", "key_hex", "value_hex"), GOLDEN)
def test_golden_bytes(
    record: Heartbeat | OffsetSync | Checkpoint, key_hex: str, value_hex: str
) -> None:
    assert record.record_key() == h(key_hex)
    assert record.record_value() == h(value_hex)
    assert type(record).from_record(h(key_hex), h(value_hex)) == record


def test_offset_sync_key_from_the_brief() -> None:
    assert OffsetSync("t", 0, 0, 0).record_key() == h("00 01 74 00 00 00 00")


def test_decoding_accepts_bytearray_and_memoryview() -> None:
    record, key_hex, value_hex = GOLDEN[4]
    decoded = Checkpoint.from_record(bytearray(h(key_hex)), memoryview(h(value_hex)))
    assert decoded == record


class TestRoundTrips:
    @staticmethod
    def random_string(rng: random.Random) -> str:
        """Strings mixing ASCII, Latin-1, CJK, astral emoji; often empty."""
        if rng.random() < 0.15:
            return ""
        pools = [
            [chr(c) for c in range(0x20, 0x7F)],
            [chr(c) for c in range(0xA0, 0x180)],
            [chr(c) for c in range(0x4E00, 0x4E40)],
            [chr(c) for c in range(0x1F600, 0x1F640)],
            ["\x00", "\n", "\t", ".", "_", "-"],
        ]
        return "".join(rng.choice(rng.choice(pools)) for _ in range(rng.randint(1, 40)))

    @staticmethod
    def random_int(rng: random.Random, low: int, high: int) -> int:
        return rng.choice([low, high, 0, -1, 1, rng.randint(low, high), rng.randint(-1000, 1000)])

    def test_random_round_trips(self) -> None:
        rng = random.Random(20240917)
        for _ in range(3000):
            s = self.random_string
            i64 = self.random_int(rng, INT64_MIN, INT64_MAX)
            records = [
                Heartbeat(s(rng), s(rng), i64),
                OffsetSync(
                    s(rng),
                    self.random_int(rng, INT32_MIN, INT32_MAX),
                    i64,
                    self.random_int(rng, INT64_MIN, INT64_MAX),
                ),
                Checkpoint(
                    s(rng),
                    s(rng),
                    self.random_int(rng, INT32_MIN, INT32_MAX),
                    i64,
                    self.random_int(rng, INT64_MIN, INT64_MAX),
                    s(rng),
                ),
            ]
            for record in records:
                key, value = record.record_key(), record.record_value()
                assert type(record).from_record(key, value) == record

    def test_string_length_limit(self) -> None:
        longest = "x" * MAX_STRING_BYTES
        sync = OffsetSync(longest, 0, 0, 0)
        assert OffsetSync.from_record(sync.record_key(), sync.record_value()) == sync
        assert sync.record_key()[:2] == h("7fff")
        # The limit counts UTF-8 bytes, not characters.
        edge = "é" * (MAX_STRING_BYTES // 2) + "x"
        assert len(edge.encode()) == MAX_STRING_BYTES
        OffsetSync(edge, 0, 0, 0).record_key()
        for too_long in ("x" * (MAX_STRING_BYTES + 1), "é" * (MAX_STRING_BYTES // 2 + 1)):
            with pytest.raises(ValueError, match=r"offset-sync\.topic"):
                OffsetSync(too_long, 0, 0, 0).record_key()


class TestConstructionErrors:
    def test_out_of_range_ints(self) -> None:
        with pytest.raises(ValueError, match="partition"):
            OffsetSync("t", INT32_MAX + 1, 0, 0)
        with pytest.raises(ValueError, match="upstream_offset"):
            Checkpoint("g", "t", 0, INT64_MAX + 1, 0)
        with pytest.raises(ValueError, match="timestamp"):
            Heartbeat("A", "B", INT64_MIN - 1)

    def test_wrong_types(self) -> None:
        with pytest.raises(TypeError, match="partition"):
            OffsetSync("t", True, 0, 0)
        with pytest.raises(TypeError, match="metadata"):
            Checkpoint("g", "t", 0, 0, 0, None)  # type: ignore[arg-type]

    def test_unencodable_string(self) -> None:
        with pytest.raises(ValueError, match=r"checkpoint\.consumer_group_id"):
            Checkpoint("\ud800", "t", 0, 0, 0).record_key()


def all_golden_parts() -> list[tuple[type, str, bytes, bytes]]:
    """(record class, part name, the part's bytes, the other part's bytes) for every vector."""
    parts = []
    for record, key_hex, value_hex in GOLDEN:
        parts.append((type(record), "key", h(key_hex), h(value_hex)))
        parts.append((type(record), "value", h(value_hex), h(key_hex)))
    return parts


class TestMalformedInput:
    @pytest.mark.parametrize(("cls", "part", "data", "other"), all_golden_parts())
    def test_every_truncation_fails_naming_the_record(
        self, cls: type, part: str, data: bytes, other: bytes
    ) -> None:
        for cut in range(len(data)):
            prefix = data[:cut]
            with pytest.raises(WireFormatError, match=f"{cls.KIND} record {part}"):
                if part == "key":
                    cls.from_record(prefix, other)
                else:
                    cls.from_record(other, prefix)

    @pytest.mark.parametrize(("cls", "part", "data", "other"), all_golden_parts())
    def test_trailing_bytes_fail(self, cls: type, part: str, data: bytes, other: bytes) -> None:
        with pytest.raises(WireFormatError, match="trailing"):
            if part == "key":
                cls.from_record(data + b"\x00", other)
            else:
                cls.from_record(other, data + b"\x00")

    def test_negative_string_length(self) -> None:
        with pytest.raises(WireFormatError, match="negative"):
            OffsetSync.from_record(h("ffff 00000000"), h("00" * 16))

    def test_invalid_utf8(self) -> None:
        with pytest.raises(WireFormatError, match="UTF-8"):
            Heartbeat.from_record(h("0002 c328  0001 42"), h("0000 0000000000000001"))

    def test_missing_key_or_value(self) -> None:
        with pytest.raises(WireFormatError, match="checkpoint record value is missing"):
            Checkpoint.from_record(h("0001 67 0001 74 00000001"), None)
        with pytest.raises(WireFormatError, match="heartbeat record key is missing"):
            Heartbeat.from_record(None, h("0000 0000000000000001"))

    def test_errors_are_value_errors(self) -> None:
        with pytest.raises(ValueError):
            OffsetSync.from_record(b"", b"")

    def test_negative_version_fails(self) -> None:
        with pytest.raises(WireFormatError, match="version"):
            Heartbeat.from_record(h("0001 41 0001 42"), h("ffff 0000000000000001"))

    def test_newer_versions_read_the_v0_fields_like_mm2(self) -> None:
        hb = Heartbeat.from_record(h("0001 41 0001 42"), h("0001 0000000000000009 cafe"))
        assert hb == Heartbeat("A", "B", 9)
        cp = Checkpoint.from_record(
            h("0001 67 0001 74 00000001"),
            h("0002 000000000000000a 000000000000000c 0000 ffff"),
        )
        assert cp == Checkpoint("g", "t", 1, 10, 12, "")


def test_checkpoint_helpers() -> None:
    cp = Checkpoint("g", "A.t", 3, 10, 12, "meta")
    assert cp.offset_and_metadata() == OffsetAndMetadata(12, "meta")
    assert cp.topic_partition == TopicPartition("A.t", 3)
    assert str(cp.topic_partition) == "A.t-3"
    assert OffsetSync("t", 2, 0, 0).topic_partition == ("t", 2)
