"""Java client security settings (SSL, SASL/JAAS, OAUTHBEARER) as librdkafka configuration.

JAAS lines become `sasl.username`/`sasl.password` (or the OAUTHBEARER/GSSAPI equivalents),
PEM/PKCS#12 stores become librdkafka's `ssl.*` locations; JKS stores and custom Java callback
classes fail with `ClientPropertyError` and an explanation, because silently dropping them
would change how the client authenticates. Used by `mm2_assets.kafka.clients.translate`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from mm2_assets.mm2.client_properties import ClientPropertyError
from mm2_assets.mm2.frozen import FrozenMapping

# ---------------------------------------------------------------------------------------------
# Security: SSL
# ---------------------------------------------------------------------------------------------

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")

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


def translate_ssl(props: Mapping[str, str], out: dict[str, str], dropped: dict[str, str]) -> None:
    """Map Java trust/key stores and hostname verification onto librdkafka's ssl.* settings."""
    _translate_truststore(props, out, dropped)
    _translate_keystore(props, out, dropped)
    _translate_hostname_verification(props, out)
    if "ssl.engine.factory.class" in props:
        raise ClientPropertyError(
            "ssl.engine.factory.class",
            props["ssl.engine.factory.class"],
            "a custom Java SSL engine cannot be used by librdkafka",
        )
    for key, reason in _SSL_DROPPED.items():
        if key in props:
            dropped[key] = reason


def _translate_truststore(
    props: Mapping[str, str], out: dict[str, str], dropped: dict[str, str]
) -> None:
    """Truststore (the CAs we trust) as ssl.ca.location / ssl.ca.pem; Java's default is JKS."""
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


def _translate_keystore(
    props: Mapping[str, str], out: dict[str, str], dropped: dict[str, str]
) -> None:
    """Keystore (client certificate, for mutual TLS): inline PEM, or a PKCS#12/PEM file."""
    ks_key = props.get("ssl.keystore.key")
    ks_chain = props.get("ssl.keystore.certificate.chain")
    ks_location = props.get("ssl.keystore.location")
    if ks_key or ks_chain:
        # Inline PEM key and certificate chain (Java requires ssl.keystore.type=PEM for these).
        if not (ks_key and ks_chain):
            missing = "ssl.keystore.certificate.chain" if ks_key else "ssl.keystore.key"
            raise ClientPropertyError(missing, None, "inline PEM keystores need both key and chain")
        out["ssl.key.pem"] = ks_key
        out["ssl.certificate.pem"] = ks_chain
        key_password = props.get("ssl.key.password")
        if key_password:
            out["ssl.key.password"] = key_password
    elif ks_location:
        _translate_keystore_file(props, ks_location, out, dropped)
    else:
        for key in ("ssl.keystore.password", "ssl.key.password"):
            if key in props:
                dropped[key] = "no client keystore configured"
    if "ssl.keystore.type" in props:
        dropped["ssl.keystore.type"] = "translated into librdkafka's ssl.* locations"


def _translate_keystore_file(
    props: Mapping[str, str], ks_location: str, out: dict[str, str], dropped: dict[str, str]
) -> None:
    """A keystore file at ssl.keystore.location: PKCS#12 or PEM; JKS (Java's default) fails."""
    ks_type = props.get("ssl.keystore.type", "JKS").upper()
    key_password = props.get("ssl.key.password")
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


def _translate_hostname_verification(props: Mapping[str, str], out: dict[str, str]) -> None:
    """Java's "" disables hostname verification, "https" (the default) enables it."""
    algorithm_key = "ssl.endpoint.identification.algorithm"
    if algorithm_key in props:
        algorithm = props[algorithm_key].strip().lower()
        if algorithm == "":
            out[algorithm_key] = "none"
        elif algorithm == "https":
            out[algorithm_key] = "https"
        else:
            raise ClientPropertyError(algorithm_key, props[algorithm_key], 'expected "" or https')


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


# The settings `_translate_oauthbearer` maps: not Java-only, so not reported as dropped.
_OAUTHBEARER_KEYS = (
    "sasl.login.callback.handler.class",
    "sasl.oauthbearer.token.endpoint.url",
    "sasl.oauthbearer.scope",
    "sasl.oauthbearer.client.credentials.client.id",
    "sasl.oauthbearer.client.credentials.client.secret",
)


def translate_sasl(props: Mapping[str, str], out: dict[str, str], dropped: dict[str, str]) -> None:
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
        _translate_password_login(mechanism, jaas, out)
    elif mechanism == "OAUTHBEARER":
        _translate_oauthbearer(props, jaas, out, dropped)
        handled |= set(_OAUTHBEARER_KEYS)
    else:  # GSSAPI
        _translate_gssapi(jaas, out)
    for key in _SASL_PASSTHROUGH:
        if key in props:
            out[key] = props[key]
    _drop_java_only_sasl(props, handled, dropped)


def _translate_password_login(mechanism: str, jaas: JaasEntry | None, out: dict[str, str]) -> None:
    """PLAIN and SCRAM: the username and password of the JAAS entry."""
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


def _translate_gssapi(jaas: JaasEntry | None, out: dict[str, str]) -> None:
    """GSSAPI: the keytab and principal of a Krb5LoginModule entry, if there is one."""
    if jaas is None:
        return
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


def _drop_java_only_sasl(
    props: Mapping[str, str], handled: set[str], dropped: dict[str, str]
) -> None:
    """Report the remaining sasl.* settings as Java-only; refuse custom Java SASL classes."""
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
    endpoint = props.get("sasl.oauthbearer.token.endpoint.url")
    if endpoint:
        _translate_oidc(props, jaas.options, endpoint, out)
    elif "unsecuredLoginStringClaim_sub" in jaas.options:
        _translate_unsecured_jwt(jaas.options, out, dropped)
    else:
        raise ClientPropertyError(
            "sasl.jaas.config",
            None,
            "OAUTHBEARER maps to librdkafka only for OIDC (sasl.oauthbearer.token.endpoint.url "
            "with clientId/clientSecret) or the unsecured JWT (unsecuredLoginStringClaim_sub)",
        )


def _translate_oidc(
    props: Mapping[str, str], options: Mapping[str, str], endpoint: str, out: dict[str, str]
) -> None:
    """OIDC client credentials from Kafka's built-in login handler: librdkafka's method=oidc.

    The JAAS options win over the sasl.oauthbearer.* properties, as in Kafka."""
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


def _translate_unsecured_jwt(
    options: Mapping[str, str], out: dict[str, str], dropped: dict[str, str]
) -> None:
    """Kafka's unsecured JWS (test setups) as librdkafka's unsecure JWT builder."""
    out["enable.sasl.oauthbearer.unsecure.jwt"] = "true"
    settings = [f"principal={options['unsecuredLoginStringClaim_sub']}"]
    if "unsecuredLoginLifetimeSeconds" in options:
        settings.append(f"lifeSeconds={options['unsecuredLoginLifetimeSeconds']}")
    out["sasl.oauthbearer.config"] = " ".join(settings)
    # Other claims have no librdkafka counterpart: say so rather than drop them silently.
    other = sorted(
        name
        for name in options
        if name.startswith("unsecuredLogin")
        and name not in ("unsecuredLoginStringClaim_sub", "unsecuredLoginLifetimeSeconds")
    )
    if other:
        dropped["sasl.jaas.config"] = f"unsecured JWT options not mapped: {', '.join(other)}"
