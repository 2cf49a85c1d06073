"""Unit tests for the Java -> librdkafka client property translation."""

from __future__ import annotations

from pathlib import Path

import pytest

from mm2_assets.kafka.clients import translate
from mm2_assets.mm2.client_properties import PROPERTY_TABLE, ClientPropertyError
from mm2_assets.mm2.client_security import parse_jaas_config
from mm2_assets.mm2.frozen import FrozenMapping
from mm2_assets.mm2.secrets import HIDDEN

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
OAUTH = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
SECRET = 'pa$$-w0rd;with="quotes"'
PLAIN_SECRET = "pa$$w0rd"
SYSTEM_CA = Path("/etc/ssl/certs/ca-certificates.crt")


def sasl_ssl(**extra: str) -> dict[str, str]:
    """A SASL_SSL SCRAM-SHA-512 Java client config plus `extra` (underscores become dots)."""
    props = {
        "bootstrap.servers": "k1:9093, k2:9093",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": f'{SCRAM} required username="mm2" password="s3cret";',
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": "/etc/kafka/ca.pem",
    }
    props.update({key.replace("_", "."): value for key, value in extra.items()})
    return props


# --- SASL --------------------------------------------------------------------------------------


def test_scram_over_sasl_ssl() -> None:
    assert translate(sasl_ssl(), "producer").as_dict() == {
        "security.protocol": "sasl_ssl",
        "bootstrap.servers": "k1:9093,k2:9093",
        "ssl.ca.location": "/etc/kafka/ca.pem",
        "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": "mm2",
        "sasl.password": "s3cret",
    }


def test_plain_jaas_with_escapes_comments_and_newlines() -> None:
    escaped = SECRET.replace("\\", "\\\\").replace('"', '\\"')
    jaas = (
        f"{PLAIN}   REQUIRED\n"
        "   // the service account\n"
        '   username="svc-mm2"\n'
        f'   /* rotated monthly */ password="{escaped}"\n'
        "   ;"
    )
    config = translate(
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.jaas.config": jaas,
        },
        "admin",
    ).as_dict()
    assert config["sasl.username"] == "svc-mm2"
    assert config["sasl.password"] == SECRET
    assert config["sasl.mechanisms"] == "PLAIN"
    assert config["security.protocol"] == "sasl_plaintext"


def test_jaas_unquoted_values_and_option_order() -> None:
    entry = parse_jaas_config(f"{SCRAM} required password=pw username=u extra_1=x;")
    assert entry.login_module == SCRAM
    assert entry.control_flag == "required"
    assert dict(entry.options) == {"password": "pw", "username": "u", "extra_1": "x"}


@pytest.mark.parametrize(
    ("jaas", "reason"),
    [
        (f'{SCRAM} required username="u" password="{PLAIN_SECRET}"', "missing ';'"),
        (f'{SCRAM} required username="u" password="{PLAIN_SECRET}"; {PLAIN} required;', "2 login"),
        (f'{SCRAM} username="u" password="{PLAIN_SECRET}";', "control flag"),
        (f'{SCRAM} required username="u" password "{PLAIN_SECRET}";', "malformed option"),
        (f'{SCRAM} required username="u" password="{PLAIN_SECRET};', "unterminated quote"),
        ("", "0 login modules"),
    ],
)
def test_malformed_jaas_fails_without_echoing_it(jaas: str, reason: str) -> None:
    with pytest.raises(ClientPropertyError) as info:
        parse_jaas_config(jaas)
    assert reason in str(info.value)
    assert info.value.key == "sasl.jaas.config"
    assert "pa$$" not in str(info.value)


@pytest.mark.parametrize(
    ("jaas", "reason"),
    [
        (f'{SCRAM} required username="u";', "missing option password="),
        (f'{OAUTH} required username="u" password="p";', "PlainLoginModule or ScramLoginModule"),
        (f'{SCRAM} required username="u" password="p" tokenauth=true;', "delegation tokens"),
    ],
)
def test_scram_jaas_must_carry_username_and_password(jaas: str, reason: str) -> None:
    with pytest.raises(ClientPropertyError, match=reason):
        translate(sasl_ssl(sasl_jaas_config=jaas), "consumer")


def test_sasl_without_jaas_or_with_unknown_mechanism_fails() -> None:
    props = sasl_ssl()
    del props["sasl.jaas.config"]
    with pytest.raises(ClientPropertyError, match=r"needs sasl\.jaas\.config"):
        translate(props, "admin")
    with pytest.raises(ClientPropertyError) as info:
        translate(sasl_ssl(sasl_mechanism="SCRAM-SHA-1"), "admin")
    assert info.value.key == "sasl.mechanism"
    assert info.value.value == "SCRAM-SHA-1"


def test_oauthbearer_oidc_client_credentials() -> None:
    config = translate(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.oauthbearer.token.endpoint.url": "https://idp.example.com/token",
            "sasl.login.callback.handler.class": (
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
            ),
            "sasl.jaas.config": (
                f'{OAUTH} required clientId="mm2" clientSecret="cs" scope="kafka" '
                'extension_logicalCluster="lkc-1" extension_identityPoolId="pool-2";'
            ),
        },
        "consumer",
    ).as_dict()
    assert config == {
        "security.protocol": "sasl_ssl",
        "sasl.mechanisms": "OAUTHBEARER",
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.token.endpoint.url": "https://idp.example.com/token",
        "sasl.oauthbearer.client.id": "mm2",
        "sasl.oauthbearer.client.secret": "cs",
        "sasl.oauthbearer.scope": "kafka",
        "sasl.oauthbearer.extensions": "logicalCluster=lkc-1,identityPoolId=pool-2",
    }


def test_oauthbearer_unsecured_jwt_and_unsupported_forms() -> None:
    base = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER"}
    config = translate(
        {**base, "sasl.jaas.config": f'{OAUTH} required unsecuredLoginStringClaim_sub="admin";'},
        "admin",
    ).as_dict()
    assert config["enable.sasl.oauthbearer.unsecure.jwt"] == "true"
    assert config["sasl.oauthbearer.config"] == "principal=admin"
    with pytest.raises(ClientPropertyError, match="OIDC"):
        translate({**base, "sasl.jaas.config": f"{OAUTH} required;"}, "admin")
    with pytest.raises(ClientPropertyError, match="OAuthBearerLoginCallbackHandler"):
        translate(
            {
                **base,
                "sasl.oauthbearer.token.endpoint.url": "https://idp/token",
                "sasl.login.callback.handler.class": "com.example.MyHandler",
                "sasl.jaas.config": f'{OAUTH} required clientId="a" clientSecret="b";',
            },
            "admin",
        )


def test_gssapi_keytab_mapping() -> None:
    config = translate(
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.kerberos.service.name": "kafka",
            "sasl.jaas.config": (
                "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true "
                'storeKey=true keyTab="/etc/security/mm2.keytab" principal="mm2@EXAMPLE.COM";'
            ),
        },
        "producer",
    ).as_dict()
    assert config["sasl.mechanisms"] == "GSSAPI"  # Java's default mechanism
    assert config["sasl.kerberos.keytab"] == "/etc/security/mm2.keytab"
    assert config["sasl.kerberos.principal"] == "mm2@EXAMPLE.COM"
    assert config["sasl.kerberos.service.name"] == "kafka"


def test_custom_java_sasl_classes_are_refused() -> None:
    with pytest.raises(ClientPropertyError) as info:
        translate(sasl_ssl(sasl_client_callback_handler_class="com.example.Handler"), "admin")
    assert info.value.key == "sasl.client.callback.handler.class"
    assert "cannot run in librdkafka" in info.value.reason


def test_java_login_tuning_is_dropped_with_reason() -> None:
    result = translate(sasl_ssl(sasl_login_refresh_window_factor="0.8"), "admin")
    assert "sasl.login.refresh.window.factor" not in result.config
    assert "librdkafka" in result.dropped["sasl.login.refresh.window.factor"]


def test_a_shared_transactional_id_is_dropped_with_reason() -> None:
    """One id for every producer would make heartbeats, checkpoints and copy tasks fence one
    another; each transactional producer has its own."""
    result = translate({"transactional.id": "mm2-txn"}, "producer")
    assert "transactional.id" not in result.config
    assert "own id" in result.dropped["transactional.id"]


# --- SSL ---------------------------------------------------------------------------------------


def test_pem_truststore_and_pkcs12_keystore() -> None:
    result = translate(
        {
            "security.protocol": "SSL",
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": "/tls/ca.pem",
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": "/tls/client.p12",
            "ssl.keystore.password": "ks-pw",
            "ssl.key.password": "key-pw",
            "ssl.endpoint.identification.algorithm": "",
        },
        "consumer",
    )
    assert dict(result.config) == {
        "security.protocol": "ssl",
        "ssl.ca.location": "/tls/ca.pem",
        "ssl.keystore.location": "/tls/client.p12",
        "ssl.keystore.password": "ks-pw",
        "ssl.endpoint.identification.algorithm": "none",
    }
    assert "ssl.keystore.password" in result.dropped["ssl.key.password"]


def test_pem_keystore_file_and_inline_pem() -> None:
    from_file = translate(
        {
            "security.protocol": "SSL",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": "/tls/client.pem",
            "ssl.key.password": "kp",
            "ssl.endpoint.identification.algorithm": "HTTPS",
        },
        "producer",
    ).as_dict()
    assert from_file["ssl.key.location"] == "/tls/client.pem"
    assert from_file["ssl.certificate.location"] == "/tls/client.pem"
    assert from_file["ssl.key.password"] == "kp"
    assert from_file["ssl.endpoint.identification.algorithm"] == "https"
    inline = translate(
        {
            "security.protocol": "SSL",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.key": "-----BEGIN PRIVATE KEY-----...",
            "ssl.keystore.certificate.chain": "-----BEGIN CERTIFICATE-----...",
            "ssl.truststore.type": "PEM",
            "ssl.truststore.certificates": "-----BEGIN CERTIFICATE-----ca",
        },
        "producer",
    ).as_dict()
    assert inline["ssl.key.pem"].startswith("-----BEGIN PRIVATE KEY")
    assert inline["ssl.certificate.pem"].startswith("-----BEGIN CERTIFICATE")
    assert inline["ssl.ca.pem"] == "-----BEGIN CERTIFICATE-----ca"


@pytest.mark.parametrize(
    ("props", "key", "needle"),
    [
        (
            {"ssl.truststore.type": "JKS", "ssl.truststore.location": "/t.jks"},
            "ssl.truststore.type",
            "keytool -exportcert",
        ),
        (
            {"ssl.truststore.location": "/t.jks"},  # no type: Java's default JKS
            "ssl.truststore.location",
            "no ssl.truststore.type, so JKS",
        ),
        (
            {"ssl.truststore.type": "PKCS12", "ssl.truststore.location": "/t.p12"},
            "ssl.truststore.type",
            "openssl pkcs12",
        ),
        (
            {"ssl.keystore.type": "JKS", "ssl.keystore.location": "/k.jks"},
            "ssl.keystore.type",
            "keytool -importkeystore",
        ),
        (
            {"ssl.keystore.location": "/k.jks"},
            "ssl.keystore.location",
            "keytool -importkeystore",
        ),
        (
            {"ssl.endpoint.identification.algorithm": "ldap"},
            "ssl.endpoint.identification.algorithm",
            'expected "" or https',
        ),
        (
            {"ssl.engine.factory.class": "com.example.Engine"},
            "ssl.engine.factory.class",
            "custom Java SSL engine",
        ),
    ],
)
def test_ssl_settings_librdkafka_cannot_honour(
    props: dict[str, str], key: str, needle: str
) -> None:
    with pytest.raises(ClientPropertyError) as info:
        translate({"security.protocol": "SSL", **props}, "admin")
    assert info.value.key == key
    assert needle in info.value.reason


def test_plaintext_ignores_ssl_and_sasl_settings() -> None:
    result = translate(
        {
            "bootstrap.servers": "k:9092",
            "ssl.truststore.location": "/t.jks",
            "sasl.jaas.config": "not even parsed",
        },
        "admin",
    )
    assert dict(result.config) == {"bootstrap.servers": "k:9092"}
    assert "PLAINTEXT" in result.dropped["ssl.truststore.location"]
    assert "sasl.jaas.config" in result.dropped


def test_unknown_security_protocol() -> None:
    with pytest.raises(ClientPropertyError, match="expected one of PLAINTEXT"):
        translate({"security.protocol": "TLS"}, "admin")


# --- plain properties --------------------------------------------------------------------------


def test_role_scoping_renames_and_java_only_drops() -> None:
    java = {
        "client.id": "mm2",
        "acks": "all",
        "enable.idempotence": "true",
        "linger.ms": "5",
        "request.timeout.ms": "30000",
        "fetch.max.wait.ms": "250",
        "fetch.max.bytes": "1048576",
        "isolation.level": "read_committed",
        "receive.buffer.bytes": "-1",
        "max.request.size": "2000000",
        "key.serializer": "org.apache.kafka.common.serialization.ByteArraySerializer",
        "value.deserializer": "org.apache.kafka.common.serialization.ByteArrayDeserializer",
        "max.poll.records": "500",
        "interceptor.classes": "com.example.Interceptor",
        "some.custom.class": "com.example.X",
        "totally.unknown": "1",
        "rdkafka.statistics.interval.ms": "5000",
    }
    producer = translate(java, "producer")
    consumer = translate(java, "consumer")
    admin = translate(java, "admin")
    assert dict(producer.config) == {
        "client.id": "mm2",
        "acks": "all",
        "enable.idempotence": "true",
        "linger.ms": "5",
        "request.timeout.ms": "30000",
        "socket.receive.buffer.bytes": "0",
        "message.max.bytes": "2000000",
        "statistics.interval.ms": "5000",
    }
    assert dict(consumer.config) == {
        "client.id": "mm2",
        "fetch.wait.max.ms": "250",
        "fetch.max.bytes": "1048576",
        "isolation.level": "read_committed",
        "socket.receive.buffer.bytes": "0",
        "statistics.interval.ms": "5000",
    }
    assert admin.config["request.timeout.ms"] == "30000"
    assert "acks" not in admin.config
    assert "not used by a consumer client" in consumer.dropped["acks"]
    assert "consume(num_messages" in consumer.dropped["max.poll.records"]
    assert "serializer" in producer.dropped["key.serializer"]
    assert "interceptors" in producer.dropped["interceptor.classes"]
    assert "Java class" in producer.dropped["some.custom.class"]
    assert "rdkafka.<name>" in producer.dropped["totally.unknown"]


def test_offset_reset_and_assignors() -> None:
    assert translate({"auto.offset.reset": "NONE"}, "consumer").as_dict() == {
        "auto.offset.reset": "error"
    }
    assert translate({"auto.offset.reset": "latest"}, "consumer").as_dict() == {
        "auto.offset.reset": "latest"
    }
    with pytest.raises(ClientPropertyError) as info:
        translate({"auto.offset.reset": "by_duration:PT1H"}, "consumer").as_dict()
    assert (info.value.key, info.value.value) == ("auto.offset.reset", "by_duration:PT1H")
    strategies = (
        "org.apache.kafka.clients.consumer.RangeAssignor, "
        "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"
    )
    assert translate({"partition.assignment.strategy": strategies}, "consumer").as_dict() == {
        "partition.assignment.strategy": "range,cooperative-sticky"
    }
    with pytest.raises(ClientPropertyError, match="StickyAssignor"):
        translate(
            {"partition.assignment.strategy": "org.apache.kafka.clients.consumer.StickyAssignor"},
            "consumer",
        ).as_dict()


def test_bad_role() -> None:
    with pytest.raises(ValueError, match="role must be one of"):
        translate({}, "streams")  # type: ignore[arg-type]


# --- secrets -----------------------------------------------------------------------------------


def test_translations_and_errors_never_show_secrets() -> None:
    result = translate(sasl_ssl(), "producer")
    assert result.config["sasl.password"] == "s3cret"
    assert "s3cret" not in repr(result)
    assert f"'sasl.password': '{HIDDEN}'" in repr(result)
    with pytest.raises(ClientPropertyError) as info:
        translate(sasl_ssl(ssl_keystore_type="JKS", ssl_keystore_location="/k.jks",
                           ssl_keystore_password="ks-s3cret"), "admin")  # fmt: skip
    assert "ks-s3cret" not in str(info.value)
    error = ClientPropertyError("ssl.keystore.password", "ks-s3cret", "reason")
    assert str(error) == "ssl.keystore.password='[hidden]': reason"


def test_frozen_mapping_is_immutable_and_masks() -> None:
    frozen = FrozenMapping({"sasl.password": "pw", "linger.ms": "5"})
    with pytest.raises(TypeError):
        frozen["linger.ms"] = "6"  # type: ignore[index]
    assert repr(frozen) == "{'sasl.password': '[hidden]', 'linger.ms': '5'}"
    assert frozen == {"sasl.password": "pw", "linger.ms": "5"}
    assert hash(frozen) == hash(FrozenMapping({"linger.ms": "5", "sasl.password": "pw"}))


# --- librdkafka accepts what we produce --------------------------------------------------------


def test_every_renamed_property_is_known_to_librdkafka() -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    names = {rule.target for rule in PROPERTY_TABLE.values() if hasattr(rule, "target")}
    for name in sorted(names):
        try:
            # Many values are invalid for most properties; only an unknown *name* matters.
            confluent_kafka.Producer({name: "not-a-valid-value"})
        except confluent_kafka.KafkaException as exc:
            assert "No such configuration property" not in str(exc), name


@pytest.mark.skipif(not SYSTEM_CA.exists(), reason="needs the system CA bundle as a PEM file")
def test_librdkafka_clients_accept_translated_configs() -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    admin_module = pytest.importorskip("confluent_kafka.admin")
    java = sasl_ssl(
        bootstrap_servers="127.0.0.1:1",
        ssl_truststore_location=str(SYSTEM_CA),
        client_id="mm2-test",
        acks="all",
        enable_idempotence="true",
        linger_ms="5",
        compression_type="zstd",
        fetch_max_wait_ms="100",
        isolation_level="read_committed",
        auto_offset_reset="earliest",
        enable_auto_commit="false",
        group_id="mm2-test",
    )
    producer = confluent_kafka.Producer(translate(java, "producer").as_dict())
    assert producer.flush(0) == 0
    consumer = confluent_kafka.Consumer(translate(java, "consumer").as_dict())
    consumer.close()
    # Construction is the check: librdkafka rejects unknown names and invalid values here.
    admin_module.AdminClient(translate(java, "admin").as_dict())
