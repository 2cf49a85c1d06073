"""Translate Java Kafka client properties into librdkafka (confluent-kafka) configuration.

MM2 properties files carry Java client settings (`security.protocol`, `sasl.jaas.config`,
`ssl.truststore.location`, `producer.acks`, ...). Every Kafka call in mm2-assets goes through
confluent-kafka, i.e. librdkafka, whose property names and capabilities differ. This module is
the one place that knows the mapping:

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

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TypeAlias

from mm2_assets.mm2.client_settings import ROLES, Role, is_client_config_name
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
class _Rename:
    """Java property -> librdkafka `target`, used by `roles`, value optionally converted."""

    target: str
    roles: frozenset[Role] = _ALL
    convert: ValueConverter | None = None


@dataclass(frozen=True)
class _Drop:
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


def _same(*names: str, roles: frozenset[Role] = _ALL) -> dict[str, _Rename]:
    return {name: _Rename(name, roles) for name in names}


_JAVA_SERDE = "Java (de)serializer; confluent-kafka clients exchange raw bytes"
_JAVA_METRICS = "Java client metrics; librdkafka reports through statistics.interval.ms"
_JAVA_PARTITIONER = "Java partitioner; replication writes to explicit partitions"

# Every plain (non-security) property we know, in one readable table.
PROPERTY_TABLE: Mapping[str, _Rename | _Drop] = {
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
    "send.buffer.bytes": _Rename("socket.send.buffer.bytes", convert=_socket_buffer),
    "receive.buffer.bytes": _Rename("socket.receive.buffer.bytes", convert=_socket_buffer),
    "request.timeout.ms": _Rename("request.timeout.ms", _PRODUCER_ADMIN),
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
        "transactional.id",
        "transaction.timeout.ms",
        roles=_PRODUCER,
    ),
    # Java bounds a whole request, librdkafka a message set: the closest knob.
    "max.request.size": _Rename("message.max.bytes", _PRODUCER),
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
    "fetch.max.wait.ms": _Rename("fetch.wait.max.ms", _CONSUMER),
    "auto.offset.reset": _Rename("auto.offset.reset", _CONSUMER, _offset_reset),
    "partition.assignment.strategy": _Rename(
        "partition.assignment.strategy", _CONSUMER, _assignors
    ),
    # -- Java-only ----------------------------------------------------------------------------
    "key.serializer": _Drop(_JAVA_SERDE),
    "value.serializer": _Drop(_JAVA_SERDE),
    "key.deserializer": _Drop(_JAVA_SERDE),
    "value.deserializer": _Drop(_JAVA_SERDE),
    "interceptor.classes": _Drop("Java interceptors cannot run inside librdkafka"),
    "metric.reporters": _Drop(_JAVA_METRICS),
    "metrics.num.samples": _Drop(_JAVA_METRICS),
    "metrics.sample.window.ms": _Drop(_JAVA_METRICS),
    "metrics.recording.level": _Drop(_JAVA_METRICS),
    "auto.include.jmx.reporter": _Drop(_JAVA_METRICS),
    "enable.metrics.push": _Drop(_JAVA_METRICS),
    "max.poll.records": _Drop("Java poll batch size; use Consumer.consume(num_messages=...)"),
    "default.api.timeout.ms": _Drop(
        "Java API default timeout; confluent-kafka takes per-call timeouts"
    ),
    "buffer.memory": _Drop(
        "Java producer memory bound; librdkafka uses queue.buffering.max.kbytes/.messages"
    ),
    "max.block.ms": _Drop("Java send() blocking bound; librdkafka raises BufferError instead"),
    "partitioner.class": _Drop(_JAVA_PARTITIONER),
    "partitioner.ignore.keys": _Drop(_JAVA_PARTITIONER),
    "partitioner.adaptive.partitioning.enable": _Drop(_JAVA_PARTITIONER),
    "partitioner.availability.timeout.ms": _Drop(_JAVA_PARTITIONER),
    "exclude.internal.topics": _Drop("librdkafka never subscribes to internal topics by regex"),
    "socket.connection.setup.timeout.max.ms": _Drop("librdkafka has no maximum setup timeout"),
    "security.providers": _Drop("Java security providers"),
    "internal.leave.group.on.close": _Drop("Java-internal consumer setting"),
}

# ---------------------------------------------------------------------------------------------
# Security: SSL
# ---------------------------------------------------------------------------------------------

_SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")

# Java SSL settings that have no librdkafka counterpart but do not change who we trust or who
# we are; dropping them keeps the connection working with librdkafka's (OpenSSL's) defaults.
_SSL_DROPPED = {
    "ssl.protocol": "JSSE protocol name; librdkafka negotiates TLS through OpenSSL",
    "ssl.enabled.protocols": "JSSE protocol list; librdkafka negotiates TLS through OpenSSL",
    "ssl.cipher.suites": "JSSE cipher names differ from OpenSSL's; set rdkafka.ssl.cipher.suites",
    "ssl.provider": "JSSE provider",
    "ssl.keymanager.algorithm": "JSSE key manager",
    "ssl.trustmanager.algorithm": "JSSE trust manager",
    "ssl.secure.random.implementation": "JSSE random source",
}

_JKS_TRUSTSTORE_HELP = (
    "librdkafka cannot read JKS stores; export the CA certificates to PEM, e.g. "
    "`keytool -exportcert -rfc -alias <ca-alias> -keystore truststore.jks -file ca.pem`, then set "
    "ssl.truststore.type=PEM and ssl.truststore.location=ca.pem"
)
_PKCS12_TRUSTSTORE_HELP = (
    "librdkafka reads CA certificates only as PEM; convert with "
    "`openssl pkcs12 -in truststore.p12 -nokeys -out ca.pem`, then set ssl.truststore.type=PEM "
    "and ssl.truststore.location=ca.pem"
)
_JKS_KEYSTORE_HELP = (
    "librdkafka cannot read JKS stores; convert to PKCS#12 with `keytool -importkeystore "
    "-srckeystore keystore.jks -destkeystore keystore.p12 -deststoretype PKCS12`, then set "
    "ssl.keystore.type=PKCS12 and ssl.keystore.location=keystore.p12"
)


def _translate_ssl(props: Mapping[str, str], out: dict[str, str], dropped: dict[str, str]) -> None:
    """Map Java trust/key stores and hostname verification onto librdkafka's ssl.* settings."""
    # Truststore: Java's default store type is JKS.
    ts_type = props.get("ssl.truststore.type", "JKS").upper()
    ts_location = props.get("ssl.truststore.location")
    ts_certificates = props.get("ssl.truststore.certificates")
    if ts_location or ts_certificates:
        # Blame the key the user wrote: the type if set, else the store it qualifies.
        if "ssl.truststore.type" in props:
            blame, blamed = "ssl.truststore.type", props["ssl.truststore.type"]
        elif ts_location:
            blame, blamed = "ssl.truststore.location", ts_location
        else:
            blame, blamed = "ssl.truststore.certificates", None
        implied = "" if "ssl.truststore.type" in props else "no ssl.truststore.type, so JKS: "
        if ts_type == "PEM":
            if ts_location:
                out["ssl.ca.location"] = ts_location
            if ts_certificates:
                out["ssl.ca.pem"] = ts_certificates
        elif ts_type == "JKS":
            raise ClientPropertyError(blame, blamed, implied + _JKS_TRUSTSTORE_HELP)
        elif ts_type in ("PKCS12", "PKCS#12"):
            raise ClientPropertyError(blame, blamed, _PKCS12_TRUSTSTORE_HELP)
        else:
            raise ClientPropertyError(blame, blamed, "expected PEM (or JKS/PKCS12, converted)")
    for key in ("ssl.truststore.type", "ssl.truststore.password"):
        if key in props:
            dropped[key] = "librdkafka reads PEM CA certificates; no store type or password"

    # Keystore (client certificate, for mutual TLS).
    ks_type = props.get("ssl.keystore.type", "JKS").upper()
    ks_location = props.get("ssl.keystore.location")
    ks_key = props.get("ssl.keystore.key")
    ks_chain = props.get("ssl.keystore.certificate.chain")
    key_password = props.get("ssl.key.password")
    if ks_key or ks_chain:
        # Inline PEM key and certificate chain (Java requires ssl.keystore.type=PEM for these).
        if not (ks_key and ks_chain):
            missing = "ssl.keystore.certificate.chain" if ks_key else "ssl.keystore.key"
            raise ClientPropertyError(missing, None, "inline PEM keystores need both key and chain")
        out["ssl.key.pem"] = ks_key
        out["ssl.certificate.pem"] = ks_chain
        if key_password:
            out["ssl.key.password"] = key_password
    elif ks_location:
        if ks_type in ("PKCS12", "PKCS#12"):
            out["ssl.keystore.location"] = ks_location
            if "ssl.keystore.password" in props:
                out["ssl.keystore.password"] = props["ssl.keystore.password"]
            if key_password is not None:
                dropped["ssl.key.password"] = (
                    "librdkafka decrypts the PKCS#12 private key with ssl.keystore.password"
                )
        elif ks_type == "PEM":
            # One PEM file holding key and chain: OpenSSL picks the matching block for each.
            out["ssl.key.location"] = ks_location
            out["ssl.certificate.location"] = ks_location
            if key_password:
                out["ssl.key.password"] = key_password
            if "ssl.keystore.password" in props:
                dropped["ssl.keystore.password"] = "PEM keystores use ssl.key.password only"
        elif "ssl.keystore.type" not in props:
            raise ClientPropertyError(
                "ssl.keystore.location",
                ks_location,
                "no ssl.keystore.type, so JKS: " + _JKS_KEYSTORE_HELP,
            )
        elif ks_type == "JKS":
            raise ClientPropertyError("ssl.keystore.type", ks_type, _JKS_KEYSTORE_HELP)
        else:
            raise ClientPropertyError("ssl.keystore.type", ks_type, "expected PKCS12 or PEM")
    else:
        for key in ("ssl.keystore.password", "ssl.key.password"):
            if key in props:
                dropped[key] = "no client keystore configured"
    if "ssl.keystore.type" in props:
        dropped["ssl.keystore.type"] = "translated into librdkafka's ssl.* locations"

    # Hostname verification: Java's "" disables it, "https" (the default) enables it.
    algorithm_key = "ssl.endpoint.identification.algorithm"
    if algorithm_key in props:
        algorithm = props[algorithm_key].strip().lower()
        if algorithm == "":
            out[algorithm_key] = "none"
        elif algorithm == "https":
            out[algorithm_key] = "https"
        else:
            raise ClientPropertyError(algorithm_key, props[algorithm_key], 'expected "" or https')

    if "ssl.engine.factory.class" in props:
        raise ClientPropertyError(
            "ssl.engine.factory.class",
            props["ssl.engine.factory.class"],
            "a custom Java SSL engine cannot be used by librdkafka",
        )
    for key, reason in _SSL_DROPPED.items():
        if key in props:
            dropped[key] = reason


# ---------------------------------------------------------------------------------------------
# Security: SASL and JAAS
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class JaasEntry:
    """One login module entry of a `sasl.jaas.config` value."""

    login_module: str
    control_flag: str
    options: Mapping[str, str]


_CONTROL_FLAGS = ("required", "requisite", "sufficient", "optional")
_JAAS_TOKEN = re.compile(
    r"""
    (?P<space>\s+)
    | (?P<comment>//[^\n]*|/\*.*?\*/)
    | (?P<string>"(?:[^"\\]|\\.)*")
    | (?P<symbol>[=;])
    | (?P<word>[^\s=;"]+)
    """,
    re.VERBOSE | re.DOTALL,
)
_JAAS_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "b": "\b"}


def _jaas_tokens(text: str, key: str) -> list[tuple[str, str]]:
    tokens: list[tuple[str, str]] = []
    position = 0
    while position < len(text):
        match = _JAAS_TOKEN.match(text, position)
        if match is None:
            # Never echo the text: it holds credentials.
            raise ClientPropertyError(key, None, f"unterminated quote at character {position}")
        position = match.end()
        kind = match.lastgroup or ""
        if kind in ("space", "comment"):
            continue
        token = match.group()
        if kind == "string":
            body = token[1:-1]
            token = re.sub(r"\\(.)", lambda m: _JAAS_ESCAPES.get(m.group(1), m.group(1)), body)
        tokens.append((kind, token))
    return tokens


def parse_jaas_config(text: str, key: str = "sasl.jaas.config") -> JaasEntry:
    """Parse a Kafka client `sasl.jaas.config` value into its single login module entry.

    Grammar (as Kafka's JaasConfig): `<LoginModule> <flag> [name=value ...];` where values are
    bare words or double-quoted strings with backslash escapes; `//` and `/* */` comments are
    allowed. Kafka clients accept exactly one entry, and so do we. Errors never echo the text.
    """
    tokens = _jaas_tokens(text, key)
    entries: list[JaasEntry] = []
    index = 0
    while index < len(tokens):
        module_kind, module = tokens[index]
        if module_kind != "word":
            raise ClientPropertyError(key, None, "expected a login module class name")
        if index + 1 >= len(tokens) or tokens[index + 1][0] != "word":
            raise ClientPropertyError(key, None, f"login module {module} has no control flag")
        flag = tokens[index + 1][1].lower()
        if flag not in _CONTROL_FLAGS:
            raise ClientPropertyError(
                key, None, f"invalid control flag {tokens[index + 1][1]!r} for {module}"
            )
        index += 2
        options: dict[str, str] = {}
        while True:
            if index >= len(tokens):
                raise ClientPropertyError(key, None, f"missing ';' after login module {module}")
            kind, token = tokens[index]
            if kind == "symbol" and token == ";":
                index += 1
                break
            if (
                kind != "word"
                or index + 2 >= len(tokens)
                or tokens[index + 1] != ("symbol", "=")
                or tokens[index + 2][0] not in ("word", "string")
            ):
                raise ClientPropertyError(key, None, f"malformed option in login module {module}")
            options[token] = tokens[index + 2][1]
            index += 3
        entries.append(JaasEntry(module, flag, FrozenMapping(options)))
    if len(entries) != 1:
        raise ClientPropertyError(
            key, None, f"contains {len(entries)} login modules; a Kafka client needs exactly 1"
        )
    return entries[0]


_PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
_SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
_OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
_KRB5_MODULE = "com.sun.security.auth.module.Krb5LoginModule"
# Kafka's built-in OIDC client-credentials handler (current and pre-3.4 package names).
_OAUTH_LOGIN_HANDLERS = (
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler",
)
_SASL_MECHANISMS = ("GSSAPI", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
_SASL_JAVA_ONLY = "Java SASL login setting; librdkafka manages its own login"
_SASL_PASSTHROUGH = (
    "sasl.kerberos.service.name",
    "sasl.kerberos.kinit.cmd",
    "sasl.kerberos.min.time.before.relogin",
)


def _translate_sasl(props: Mapping[str, str], out: dict[str, str], dropped: dict[str, str]) -> None:
    """Map sasl.mechanism + sasl.jaas.config onto librdkafka's sasl.* settings."""
    mechanism = props.get("sasl.mechanism", "GSSAPI").strip().upper()  # Java's default
    if mechanism not in _SASL_MECHANISMS:
        raise ClientPropertyError(
            "sasl.mechanism", mechanism, f"expected one of {', '.join(_SASL_MECHANISMS)}"
        )
    out["sasl.mechanisms"] = mechanism
    jaas_text = props.get("sasl.jaas.config")
    jaas = parse_jaas_config(jaas_text) if jaas_text else None
    handled = {"sasl.mechanism", "sasl.jaas.config", *_SASL_PASSTHROUGH}

    if mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
        if jaas is None:
            raise ClientPropertyError(
                "sasl.jaas.config",
                None,
                f"{mechanism} needs sasl.jaas.config with username and password "
                "(a JVM-wide java.security.auth.login.config is not supported)",
            )
        # Java accepts either module for these mechanisms: both hand the SASL client the
        # username and password; so do we.
        if jaas.login_module not in (_PLAIN_MODULE, _SCRAM_MODULE):
            raise ClientPropertyError(
                "sasl.jaas.config", None, f"{mechanism} needs PlainLoginModule or ScramLoginModule"
            )
        if jaas.options.get("tokenauth", "false").lower() == "true":
            raise ClientPropertyError(
                "sasl.jaas.config", None, "delegation tokens (tokenauth=true) are not supported"
            )
        for option in ("username", "password"):
            if option not in jaas.options:
                raise ClientPropertyError("sasl.jaas.config", None, f"missing option {option}=")
        out["sasl.username"] = jaas.options["username"]
        out["sasl.password"] = jaas.options["password"]
    elif mechanism == "OAUTHBEARER":
        _translate_oauthbearer(props, jaas, out, dropped)
        handled |= {
            "sasl.login.callback.handler.class",
            "sasl.oauthbearer.token.endpoint.url",
            "sasl.oauthbearer.scope",
            "sasl.oauthbearer.client.credentials.client.id",
            "sasl.oauthbearer.client.credentials.client.secret",
        }
    else:  # GSSAPI
        if jaas is not None:
            if jaas.login_module != _KRB5_MODULE:
                raise ClientPropertyError(
                    "sasl.jaas.config",
                    None,
                    "GSSAPI needs com.sun.security.auth.module.Krb5LoginModule",
                )
            # librdkafka logs in with kinit: the keytab and principal are all it needs.
            if "keyTab" in jaas.options:
                out["sasl.kerberos.keytab"] = jaas.options["keyTab"]
            if "principal" in jaas.options:
                out["sasl.kerberos.principal"] = jaas.options["principal"]
    for key in _SASL_PASSTHROUGH:
        if key in props:
            out[key] = props[key]

    for key, value in props.items():
        if not key.startswith("sasl.") or key in handled:
            continue
        if key in ("sasl.client.callback.handler.class", "sasl.login.class") or (
            key == "sasl.login.callback.handler.class"
        ):
            # Custom Java login code decides how the client authenticates: dropping it would
            # silently change credentials, so refuse.
            raise ClientPropertyError(
                key, value, "custom Java SASL classes cannot run in librdkafka"
            )
        dropped[key] = _SASL_JAVA_ONLY


def _translate_oauthbearer(
    props: Mapping[str, str], jaas: JaasEntry | None, out: dict[str, str], dropped: dict[str, str]
) -> None:
    """OAUTHBEARER: OIDC client credentials, or the unsecured JWT used in tests."""
    if jaas is None or jaas.login_module != _OAUTH_MODULE:
        raise ClientPropertyError(
            "sasl.jaas.config",
            None,
            "OAUTHBEARER needs sasl.jaas.config with OAuthBearerLoginModule",
        )
    options = jaas.options
    endpoint = props.get("sasl.oauthbearer.token.endpoint.url")
    if endpoint:
        handler = props.get("sasl.login.callback.handler.class")
        if handler is not None and handler.strip() not in _OAUTH_LOGIN_HANDLERS:
            raise ClientPropertyError(
                "sasl.login.callback.handler.class",
                handler,
                "only Kafka's OAuthBearerLoginCallbackHandler maps to librdkafka (method=oidc)",
            )
        client_id = options.get("clientId") or props.get(
            "sasl.oauthbearer.client.credentials.client.id"
        )
        client_secret = options.get("clientSecret") or props.get(
            "sasl.oauthbearer.client.credentials.client.secret"
        )
        if not client_id or not client_secret:
            raise ClientPropertyError(
                "sasl.jaas.config", None, "OIDC needs clientId and clientSecret options"
            )
        out["sasl.oauthbearer.method"] = "oidc"
        out["sasl.oauthbearer.token.endpoint.url"] = endpoint
        out["sasl.oauthbearer.client.id"] = client_id
        out["sasl.oauthbearer.client.secret"] = client_secret
        scope = options.get("scope") or props.get("sasl.oauthbearer.scope")
        if scope:
            out["sasl.oauthbearer.scope"] = scope
        extensions = {
            name.removeprefix("extension_"): value
            for name, value in options.items()
            if name.startswith("extension_")
        }
        if extensions:
            out["sasl.oauthbearer.extensions"] = ",".join(f"{k}={v}" for k, v in extensions.items())
    elif "unsecuredLoginStringClaim_sub" in options:
        # Kafka's unsecured JWS (test setups) == librdkafka's unsecure JWT builder.
        out["enable.sasl.oauthbearer.unsecure.jwt"] = "true"
        settings = [f"principal={options['unsecuredLoginStringClaim_sub']}"]
        if "unsecuredLoginLifetimeSeconds" in options:
            settings.append(f"lifeSeconds={options['unsecuredLoginLifetimeSeconds']}")
        out["sasl.oauthbearer.config"] = " ".join(settings)
        other = sorted(
            name
            for name in options
            if name.startswith("unsecuredLogin")
            and name not in ("unsecuredLoginStringClaim_sub", "unsecuredLoginLifetimeSeconds")
        )
        if other:
            dropped["sasl.jaas.config"] = f"unsecured JWT options not mapped: {', '.join(other)}"
    else:
        raise ClientPropertyError(
            "sasl.jaas.config",
            None,
            "OAUTHBEARER maps to librdkafka only for OIDC (sasl.oauthbearer.token.endpoint.url "
            "with clientId/clientSecret) or the unsecured JWT (unsecuredLoginStringClaim_sub)",
        )


# ---------------------------------------------------------------------------------------------
# Entry points
# ---------------------------------------------------------------------------------------------


def translate(java_props: Mapping[str, str], role: Role) -> ClientTranslation:
    """Translate Java client properties for a `role` client into librdkafka configuration.

    Raises ClientPropertyError (naming the Java key) for settings librdkafka cannot honour
    without changing security semantics: JKS/PKCS#12 truststores, JKS keystores, custom Java
    SASL/SSL classes, unsupported SASL mechanisms or malformed JAAS lines.
    """
    if role not in ROLES:
        raise ValueError(f"role must be one of {ROLES}, not {role!r}")
    props = {key.strip(): value.strip() for key, value in java_props.items()}
    out: dict[str, str] = {}
    dropped: dict[str, str] = {}

    protocol = props.get("security.protocol", "PLAINTEXT").upper()
    if protocol not in _SECURITY_PROTOCOLS:
        raise ClientPropertyError(
            "security.protocol",
            props["security.protocol"],
            f"expected one of {', '.join(_SECURITY_PROTOCOLS)}",
        )
    if "security.protocol" in props:
        out["security.protocol"] = protocol.lower()
    if "bootstrap.servers" in props:
        # Java accepts "a:1, b:2"; librdkafka wants a plain comma list.
        servers = [server.strip() for server in props["bootstrap.servers"].split(",")]
        out["bootstrap.servers"] = ",".join(server for server in servers if server)

    # As in Java, SSL settings only matter for SSL protocols and SASL settings only for SASL
    # ones: a PLAINTEXT cluster inheriting top-level ssl.* defaults must not fail on them.
    if protocol in ("SSL", "SASL_SSL"):
        _translate_ssl(props, out, dropped)
    else:
        dropped.update(
            {k: f"ignored with security.protocol={protocol}" for k in props if k.startswith("ssl.")}
        )
    if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        _translate_sasl(props, out, dropped)
    else:
        dropped.update(
            {
                k: f"ignored with security.protocol={protocol}"
                for k in props
                if k.startswith("sasl.")
            }
        )

    for key, value in props.items():
        if is_client_config_name(key):  # translated above
            continue
        if key.startswith(RDKAFKA_PASSTHROUGH_PREFIX):
            out[key.removeprefix(RDKAFKA_PASSTHROUGH_PREFIX)] = value
            continue
        rule = PROPERTY_TABLE.get(key)
        if isinstance(rule, _Drop):
            dropped[key] = rule.reason
        elif isinstance(rule, _Rename):
            if role not in rule.roles:
                dropped[key] = f"not used by a {role} client"
                continue
            out[rule.target] = rule.convert(key, value) if rule.convert else value
        elif key.endswith(".class") or key.endswith(".classes"):
            dropped[key] = "Java class; librdkafka cannot load it"
        else:
            dropped[key] = "no known librdkafka equivalent (use rdkafka.<name> to set one directly)"
    return ClientTranslation(role, FrozenMapping(out), FrozenMapping(dropped))
