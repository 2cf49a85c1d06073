"""Translate Java Kafka client properties into librdkafka (confluent-kafka) configuration.

MM2 properties files carry Java client settings (`security.protocol`, `sasl.jaas.config`,
`ssl.truststore.location`, `producer.acks`, ...). Every Kafka call in mm2-assets goes through
confluent-kafka, i.e. librdkafka, whose property names and capabilities differ. This module
(names and values) and `client_security` (SSL, SASL) hold the mapping;
`mm2_assets.kafka.clients.translate` applies it:

- names librdkafka shares with Java pass through (`acks`, `linger.ms`, `fetch.max.bytes`, ...),
  some are renamed (`fetch.max.wait.ms` -> `fetch.wait.max.ms`, `sasl.mechanism` ->
  `sasl.mechanisms`), each limited to the client roles that use it;
- security settings are translated by hand: JAAS lines become `sasl.username`/`sasl.password`
  (or the OAUTHBEARER/GSSAPI equivalents), PEM/PKCS#12 stores become librdkafka's `ssl.*`
  locations; JKS stores and custom Java callback classes fail with an explanation, because
  silently dropping them would change how the client authenticates;
- Java-only settings (serializers, interceptors, `max.poll.records`, ...) are dropped and the
  reason is recorded in `ClientTranslation.dropped`;
- `rdkafka.<name>` is our escape hatch: the librdkafka property `<name>` is passed verbatim.

Which properties are client settings and the client roles are MM2 semantics
(`mm2_assets.mm2.client_settings`); secret masking (`mm2_assets.mm2.secrets`) and
`FrozenMapping` (`mm2_assets.mm2.frozen`) have their own modules; this one uses them.
`mm2_assets.kafka.clients` applies it to a flow's clients.

No confluent-kafka import: the translation is plain data; callers hand the dicts to clients.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TypeAlias

from mm2_assets.mm2.client_settings import ROLES, Role
from mm2_assets.mm2.frozen import FrozenMapping
from mm2_assets.mm2.secrets import mask

# Prefix of properties handed to librdkafka verbatim (our extension; MM2 has no equivalent).
RDKAFKA_PASSTHROUGH_PREFIX = "rdkafka."

# ---------------------------------------------------------------------------------------------
# Errors and results
# ---------------------------------------------------------------------------------------------


class ClientPropertyError(ValueError):
    """A Java client property cannot be expressed for librdkafka.

    The message names the property, its (masked) value and the reason;
    `mm2_assets.kafka.clients.check_client_configs` re-raises it as `MM2ConfigError` with the
    file and the cluster/flow it came from.
    """

    def __init__(self, key: str, value: str | None, reason: str) -> None:
        """Record `key`, the masked `value` and `reason`."""
        self.key = key
        self.value = mask(key, value)
        self.reason = reason
        shown = "" if value is None else f"={self.value!r}"
        super().__init__(f"{key}{shown}: {reason}")


@dataclass(frozen=True)
class ClientTranslation:
    """The librdkafka configuration for one client role, and what was left out and why."""

    role: Role
    config: Mapping[str, str]
    dropped: Mapping[str, str] = field(default_factory=lambda: FrozenMapping[str]())

    def as_dict(self) -> dict[str, str]:
        """Return a fresh, mutable copy of `config` to hand to a confluent-kafka client."""
        return dict(self.config)


# ---------------------------------------------------------------------------------------------
# The table of plain properties
# ---------------------------------------------------------------------------------------------

_ALL: frozenset[Role] = frozenset(ROLES)
_PRODUCER: frozenset[Role] = frozenset({"producer"})
_CONSUMER: frozenset[Role] = frozenset({"consumer"})
# confluent-kafka's AdminClient runs on a producer-type handle, so producer-scoped request
# settings apply to it as well.
_PRODUCER_ADMIN: frozenset[Role] = frozenset({"producer", "admin"})

ValueConverter: TypeAlias = Callable[[str, str], str]


@dataclass(frozen=True)
class RenameRule:
    """Java property -> librdkafka `target`, used by `roles`, value optionally converted."""

    target: str
    roles: frozenset[Role] = _ALL
    convert: ValueConverter | None = None


@dataclass(frozen=True)
class DropRule:
    """Java-only property: dropped with `reason`."""

    reason: str


def _socket_buffer(key: str, value: str) -> str:
    # Java uses -1 for "operating system default"; librdkafka uses 0.
    return "0" if value == "-1" else value


def _offset_reset(key: str, value: str) -> str:
    lowered = value.lower()
    if lowered in ("earliest", "latest"):
        return lowered
    if lowered == "none":
        # librdkafka's name for "fail when there is no committed offset".
        return "error"
    if lowered.startswith("by_duration:"):
        raise ClientPropertyError(
            key, value, "by_duration is Java-only; librdkafka has no equivalent"
        )
    raise ClientPropertyError(key, value, "expected earliest, latest or none")


_ASSIGNORS = {
    "org.apache.kafka.clients.consumer.RangeAssignor": "range",
    "org.apache.kafka.clients.consumer.RoundRobinAssignor": "roundrobin",
    "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": "cooperative-sticky",
    "range": "range",
    "roundrobin": "roundrobin",
    "cooperative-sticky": "cooperative-sticky",
}


def _assignors(key: str, value: str) -> str:
    names = [item.strip() for item in value.split(",") if item.strip()]
    unknown = [name for name in names if name not in _ASSIGNORS]
    if unknown:
        raise ClientPropertyError(
            key,
            value,
            f"no librdkafka assignor for {', '.join(unknown)}; "
            "use RangeAssignor, RoundRobinAssignor or CooperativeStickyAssignor",
        )
    return ",".join(dict.fromkeys(_ASSIGNORS[name] for name in names))


def _same(*names: str, roles: frozenset[Role] = _ALL) -> dict[str, RenameRule]:
    return {name: RenameRule(name, roles) for name in names}


_JAVA_SERDE = "Java (de)serializer; confluent-kafka clients exchange raw bytes"
_JAVA_METRICS = "Java client metrics; librdkafka reports through statistics.interval.ms"
_JAVA_PARTITIONER = "Java partitioner; replication writes to explicit partitions"

# Every plain (non-security) property we know, in one readable table.
PROPERTY_TABLE: Mapping[str, RenameRule | DropRule] = {
    # -- common to all clients ------------------------------------------------------------
    **_same(
        "client.id",
        "metadata.max.age.ms",
        "reconnect.backoff.ms",
        "reconnect.backoff.max.ms",
        "retry.backoff.ms",
        "retry.backoff.max.ms",
        "connections.max.idle.ms",
        "socket.connection.setup.timeout.ms",
        "client.dns.lookup",
        "metadata.recovery.strategy",
    ),
    "send.buffer.bytes": RenameRule("socket.send.buffer.bytes", convert=_socket_buffer),
    "receive.buffer.bytes": RenameRule("socket.receive.buffer.bytes", convert=_socket_buffer),
    "request.timeout.ms": RenameRule("request.timeout.ms", _PRODUCER_ADMIN),
    # -- producer ---------------------------------------------------------------------------
    **_same(
        "acks",
        "linger.ms",
        "batch.size",
        "compression.type",
        "enable.idempotence",
        "delivery.timeout.ms",
        "max.in.flight.requests.per.connection",
        "retries",
        "transaction.timeout.ms",
        roles=_PRODUCER,
    ),
    # Java bounds a whole request, librdkafka a message set: the closest knob.
    "max.request.size": RenameRule("message.max.bytes", _PRODUCER),
    # -- consumer ---------------------------------------------------------------------------
    **_same(
        "group.id",
        "group.instance.id",
        "enable.auto.commit",
        "auto.commit.interval.ms",
        "fetch.min.bytes",
        "fetch.max.bytes",
        "max.partition.fetch.bytes",
        "isolation.level",
        "session.timeout.ms",
        "heartbeat.interval.ms",
        "max.poll.interval.ms",
        "check.crcs",
        "allow.auto.create.topics",
        "group.protocol",
        "group.remote.assignor",
        "client.rack",
        roles=_CONSUMER,
    ),
    "fetch.max.wait.ms": RenameRule("fetch.wait.max.ms", _CONSUMER),
    "auto.offset.reset": RenameRule("auto.offset.reset", _CONSUMER, _offset_reset),
    "partition.assignment.strategy": RenameRule(
        "partition.assignment.strategy", _CONSUMER, _assignors
    ),
    # -- Java-only ----------------------------------------------------------------------------
    "key.serializer": DropRule(_JAVA_SERDE),
    "value.serializer": DropRule(_JAVA_SERDE),
    "key.deserializer": DropRule(_JAVA_SERDE),
    "value.deserializer": DropRule(_JAVA_SERDE),
    "interceptor.classes": DropRule("Java interceptors cannot run inside librdkafka"),
    # One id shared by every producer would make them fence one another; each transactional
    # producer gets its own (see mm2.writer_lease).
    "transactional.id": DropRule("mm2-assets sets each transactional producer's own id"),
    "metric.reporters": DropRule(_JAVA_METRICS),
    "metrics.num.samples": DropRule(_JAVA_METRICS),
    "metrics.sample.window.ms": DropRule(_JAVA_METRICS),
    "metrics.recording.level": DropRule(_JAVA_METRICS),
    "auto.include.jmx.reporter": DropRule(_JAVA_METRICS),
    "enable.metrics.push": DropRule(_JAVA_METRICS),
    "max.poll.records": DropRule("Java poll batch size; use Consumer.consume(num_messages=...)"),
    "default.api.timeout.ms": DropRule(
        "Java API default timeout; confluent-kafka takes per-call timeouts"
    ),
    "buffer.memory": DropRule(
        "Java producer memory bound; librdkafka uses queue.buffering.max.kbytes/.messages"
    ),
    "max.block.ms": DropRule("Java send() blocking bound; librdkafka raises BufferError instead"),
    "partitioner.class": DropRule(_JAVA_PARTITIONER),
    "partitioner.ignore.keys": DropRule(_JAVA_PARTITIONER),
    "partitioner.adaptive.partitioning.enable": DropRule(_JAVA_PARTITIONER),
    "partitioner.availability.timeout.ms": DropRule(_JAVA_PARTITIONER),
    "exclude.internal.topics": DropRule("librdkafka never subscribes to internal topics by regex"),
    "socket.connection.setup.timeout.max.ms": DropRule("librdkafka has no maximum setup timeout"),
    "security.providers": DropRule("Java security providers"),
    "internal.leave.group.on.close": DropRule("Java-internal consumer setting"),
}
