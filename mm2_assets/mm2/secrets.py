"""Which Kafka configuration values are secret, and how they are shown: `[hidden]`.

The rule is written once for the whole project (config model, client translation, topic
configs, error messages): secrets are a property of Kafka configuration *names*.

Pure logic: nothing here imports Dagster, Spark or confluent-kafka.
"""

from __future__ import annotations

import re

__all__ = ["HIDDEN", "is_secret_key", "mask"]

# What Kafka's own Password type prints instead of a secret value.
HIDDEN = "[hidden]"

_SECRET_WORDS = ("password", "secret", "jaas.config", "token", "credential", "user.info")
# Locations, URLs and types name *where* a secret lives, not the secret itself; keeping them
# readable makes errors about them actionable.
_NOT_SECRET_SUFFIXES = (".location", ".url", ".type", ".path")
# Webhook URLs carry their token in the URL itself (Slack-style incoming webhooks).
_SECRET_SUFFIXES = ("webhook.url",)
# Inline PEM private keys: Java `ssl.keystore.key`, librdkafka `ssl.key.pem` / `ssl_key`.
_PRIVATE_KEY = re.compile(r"(?:^|[._])ssl[._](?:keystore[._])?key(?:[._]pem)?$")
# A value that is only a config-provider reference (`${file:/x:pw}`) reveals no secret.
_REFERENCE_ONLY = re.compile(r"\$\{[^}]*\}")


def is_secret_key(key: str) -> bool:
    """Return True when the value of config `key` must never be shown.

    The rule, written once for the whole project: a key is secret when it names an inline
    private key (`ssl.keystore.key`, `ssl.key.pem`), or contains one of `password`, `secret`,
    `jaas.config`, `token`, `credential`, `user.info` -- unless it ends in `.location`, `.url`,
    `.type` or `.path` (those point at a secret; they are not one), and webhook URLs (their
    token is part of the URL, e.g. `mm2assets.alert.webhook.url`). Works for Java names, MM2
    prefixed names (`primary.consumer.sasl.jaas.config`) and librdkafka names
    (`sasl.password`, `sasl.oauthbearer.client.secret`).
    """
    lowered = key.lower()
    if _PRIVATE_KEY.search(lowered) or lowered.endswith(_SECRET_SUFFIXES):
        return True
    if lowered.endswith(_NOT_SECRET_SUFFIXES):
        return False
    return any(word in lowered for word in _SECRET_WORDS)


def mask(key: str, value: str | None) -> str | None:
    """Return `value` as it may be displayed for config `key`: `[hidden]` when secret.

    Unresolved config-provider references (`${env:KAFKA_PASSWORD}`) are shown as they are:
    they name where the secret comes from, which is what an error about them needs.
    """
    if value is None or not is_secret_key(key):
        return value
    if _REFERENCE_ONLY.fullmatch(value.strip()):
        return value
    return HIDDEN
