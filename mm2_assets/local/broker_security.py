"""SASL and TLS for local test brokers: listener settings, SCRAM users and a keytool-made CA.

A secured local cluster listens with SASL_PLAINTEXT on its client port (mechanisms PLAIN,
SCRAM-SHA-256 and SCRAM-SHA-512) and, with TLS, with SASL_SSL on a third port. Every user
given works with all three mechanisms: PLAIN users are listed in the listener's JAAS line,
SCRAM credentials are written into the KRaft bootstrap metadata by Kafka's own storage tool
(`kafka-storage format --add-scram`). Brokers talk to themselves over SASL_PLAINTEXT/PLAIN as a
generated `broker` user. TLS material comes from the JDK's `keytool`: a CA, the broker's
PKCS#12 key store signed by it (SAN 127.0.0.1 and localhost), and the CA certificate as PEM
(`ca.pem`), which is what librdkafka clients trust (`ssl.truststore.type=PEM`).

No authorizer is configured: any authenticated user may do anything, as MM2 needs.
"""

from __future__ import annotations

import os
import secrets
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from mm2_assets.local.runtime import java_executable, require_tool

SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
BROKER_USER = "broker"
CA_FILE = "ca.pem"
CREDENTIALS_FILE = "credentials.properties"
_PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
_SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
# JAAS and the storage tool's `[name=..,password=..]` syntax have no escaping we can rely on.
_FORBIDDEN_CHARACTERS = set('"\\,[]=; \t\n')


class BrokerSecurityError(RuntimeError):
    """Security material for a local broker could not be made; the message says why."""


def _check_credential(what: str, text: str) -> None:
    if not text or _FORBIDDEN_CHARACTERS & set(text):
        # Never echo the text: it may be a password.
        raise BrokerSecurityError(
            f"{what} must be non-empty and free of quotes, backslashes, commas, brackets, "
            "'=', ';' and whitespace"
        )


@dataclass(frozen=True)
class BrokerSecurity:
    """How a local broker authenticates clients.

    `users` maps user names to passwords, each valid for PLAIN and both SCRAM mechanisms;
    `tls` adds a SASL_SSL listener. The inter-broker password is generated per instance.
    """

    users: Mapping[str, str]
    tls: bool = False
    broker_password: str = field(default_factory=lambda: secrets.token_urlsafe(24))

    def __post_init__(self) -> None:
        if not self.users:
            raise BrokerSecurityError("a secured cluster needs at least one SASL user")
        for name, password in self.users.items():
            _check_credential("a SASL user name", name)
            _check_credential(f"the password of SASL user {name!r}", password)
        if BROKER_USER in self.users:
            raise BrokerSecurityError(f"user name {BROKER_USER!r} is reserved for the broker")

    def all_users(self) -> dict[str, str]:
        """Every user the broker knows, its own inter-broker user included."""
        return {BROKER_USER: self.broker_password, **self.users}

    def scram_arguments(self) -> list[str]:
        """`kafka-storage format` arguments that create every user's SCRAM credentials."""
        return [
            f"--add-scram={mechanism}=[name={name},password={password}]"
            for name, password in self.all_users().items()
            for mechanism in SASL_MECHANISMS[1:]
        ]

    def broker_client_config(self) -> dict[str, str]:
        """librdkafka settings of the broker's own user on the SASL_PLAINTEXT port (readiness
        checks)."""
        return {
            "security.protocol": "sasl_plaintext",
            "sasl.mechanisms": "PLAIN",
            "sasl.username": BROKER_USER,
            "sasl.password": self.broker_password,
        }


def generated_users(names: Sequence[str], node_dir: Path | None = None) -> dict[str, str]:
    """A password for each user name: the one in `node_dir`'s credentials file when the user
    is there (its SCRAM credentials were made when that data dir was formatted, and are kept),
    else a fresh random one."""
    previous: dict[str, str] = {}
    if node_dir is not None and (node_dir / CREDENTIALS_FILE).exists():
        for line in (node_dir / CREDENTIALS_FILE).read_text().splitlines():
            key, _, value = line.partition("=")
            if key.endswith(".password"):
                previous[key.removesuffix(".password")] = value
    return {name: previous.get(name) or secrets.token_urlsafe(18) for name in names}


def listener_properties(
    security: BrokerSecurity, port: int, controller_port: int, tls_port: int | None, tls_dir: Path
) -> dict[str, str]:
    """server.properties entries of the secured listeners (they replace the PLAINTEXT ones)."""
    listeners = [f"SASL_PLAINTEXT://127.0.0.1:{port}"]
    if tls_port is not None:
        listeners.append(f"SASL_SSL://127.0.0.1:{tls_port}")
    plain_users = " ".join(f'user_{n}="{p}"' for n, p in security.all_users().items())
    plain_jaas = (
        f'{_PLAIN_MODULE} required username="{BROKER_USER}" '
        f'password="{security.broker_password}" {plain_users};'
    )
    settings = {
        "listeners": ",".join([*listeners, f"CONTROLLER://127.0.0.1:{controller_port}"]),
        "advertised.listeners": ",".join(listeners),
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "sasl.enabled.mechanisms": ",".join(SASL_MECHANISMS),
        "listener.security.protocol.map": (
            "SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT"
        ),
    }
    for listener in ("sasl_plaintext", "sasl_ssl"):
        settings[f"listener.name.{listener}.plain.sasl.jaas.config"] = plain_jaas
        for mechanism in SASL_MECHANISMS[1:]:
            # SCRAM needs no options on the broker, but every enabled mechanism needs an entry.
            settings[f"listener.name.{listener}.{mechanism.lower()}.sasl.jaas.config"] = (
                f"{_SCRAM_MODULE} required;"
            )
    if tls_port is not None:
        settings.update(
            {
                "ssl.keystore.type": "PKCS12",
                "ssl.keystore.location": str(tls_dir / "broker.p12"),
                "ssl.keystore.password": _store_password(tls_dir),
                "ssl.key.password": _store_password(tls_dir),
                "ssl.client.auth": "none",
            }
        )
    return settings


def _store_password(tls_dir: Path) -> str:
    """The key stores' password, generated once per data dir and kept beside them (0600)."""
    path = tls_dir / "store.password"
    if not path.exists():
        tls_dir.mkdir(parents=True, exist_ok=True)
        write_private(path, secrets.token_urlsafe(18))
    return path.read_text().strip()


def write_private(path: Path, text: str) -> None:
    """Write `text` to a file only its owner can read (it holds secrets)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)


def _keytool_executable() -> str:
    # The keytool of the JDK that runs the brokers, else the one on PATH.
    beside_java = Path(java_executable()).parent / "keytool"
    if beside_java.exists():
        return str(beside_java)
    return require_tool("keytool", "make TLS certificates for a local broker")


def _keytool(tls_dir: Path, *args: str) -> None:
    keytool = _keytool_executable()
    proc = subprocess.run(
        [keytool, *args], cwd=tls_dir, capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        # keytool prints no passwords; its own message says what went wrong.
        raise BrokerSecurityError(
            f"keytool {args[0]} failed in {tls_dir}: {(proc.stdout + proc.stderr).strip()}"
        )


def ensure_tls_material(tls_dir: Path) -> Path:
    """Create (once) a CA and a broker key store signed by it in `tls_dir`; returns the CA's PEM
    certificate, the file clients name in `ssl.truststore.location`."""
    ca_pem = tls_dir / CA_FILE
    if ca_pem.exists() and (tls_dir / "broker.p12").exists():
        return ca_pem
    tls_dir.mkdir(parents=True, exist_ok=True)
    password = _store_password(tls_dir)
    store = ("-storetype", "PKCS12", "-storepass", password, "-keypass", password)
    # EC keys: keytool makes them in milliseconds where RSA takes seconds.
    key = ("-keyalg", "EC", "-groupname", "secp256r1", "-validity", "3650")
    san = "SAN=ip:127.0.0.1,dns:localhost"
    for name in ("ca.p12", "broker.p12", "broker.csr", "broker.crt", CA_FILE):
        (tls_dir / name).unlink(missing_ok=True)
    _keytool(tls_dir, "-genkeypair", "-alias", "ca", "-dname", "CN=mm2-assets local CA",
             "-ext", "bc:c", *key, "-keystore", "ca.p12", *store)  # fmt: skip
    _keytool(tls_dir, "-exportcert", "-rfc", "-alias", "ca", "-keystore", "ca.p12",
             "-storepass", password, "-file", CA_FILE)  # fmt: skip
    _keytool(tls_dir, "-genkeypair", "-alias", "broker", "-dname", "CN=localhost", "-ext", san,
             *key, "-keystore", "broker.p12", *store)  # fmt: skip
    _keytool(tls_dir, "-certreq", "-alias", "broker", "-keystore", "broker.p12",
             "-storepass", password, "-file", "broker.csr")  # fmt: skip
    _keytool(tls_dir, "-gencert", "-rfc", "-alias", "ca", "-keystore", "ca.p12",
             "-storepass", password, "-infile", "broker.csr", "-outfile", "broker.crt",
             "-ext", san, "-validity", "3650")  # fmt: skip
    # The chain goes in CA first, so keytool can link the signed certificate to it.
    _keytool(tls_dir, "-importcert", "-noprompt", "-alias", "ca", "-file", CA_FILE,
             "-keystore", "broker.p12", "-storepass", password)  # fmt: skip
    _keytool(tls_dir, "-importcert", "-alias", "broker", "-file", "broker.crt",
             "-keystore", "broker.p12", "-storepass", password)  # fmt: skip
    return ca_pem


def write_credentials_file(node_dir: Path, security: BrokerSecurity) -> Path:
    """`<user>.username` / `<user>.password` lines (0600) for `${file:...}` references in
    mm2.properties; the broker's own user is not in it."""
    path = node_dir / CREDENTIALS_FILE
    lines = [
        f"{name}.username={name}\n{name}.password={pw}\n" for name, pw in security.users.items()
    ]
    write_private(path, "".join(lines))
    return path
