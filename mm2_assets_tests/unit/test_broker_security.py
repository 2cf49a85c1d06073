"""Security settings of local test brokers: what the launcher writes, and what it refuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from mm2_assets.cli import build_parser
from mm2_assets.local.broker_security import (
    BrokerSecurity,
    BrokerSecurityError,
    generated_users,
    listener_properties,
    write_credentials_file,
)


def test_every_user_gets_plain_and_both_scram_mechanisms() -> None:
    security = BrokerSecurity({"alice": "a-pw"}, broker_password="b-pw")

    assert security.scram_arguments() == [
        "--add-scram=SCRAM-SHA-256=[name=broker,password=b-pw]",
        "--add-scram=SCRAM-SHA-512=[name=broker,password=b-pw]",
        "--add-scram=SCRAM-SHA-256=[name=alice,password=a-pw]",
        "--add-scram=SCRAM-SHA-512=[name=alice,password=a-pw]",
    ]
    props = listener_properties(security, 9092, 9093, None, Path("/unused"))
    assert props["listeners"] == "SASL_PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"
    assert props["sasl.enabled.mechanisms"] == "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"
    assert 'user_alice="a-pw"' in props["listener.name.sasl_plaintext.plain.sasl.jaas.config"]
    assert "ssl.keystore.location" not in props


@pytest.mark.parametrize(
    "users",
    [{}, {"alice": 'pw"quote'}, {"alice": "pw,comma"}, {"al ice": "pw"}, {"broker": "pw"}],
)
def test_unusable_users_are_refused_without_echoing_the_password(users) -> None:
    with pytest.raises(BrokerSecurityError) as failure:
        BrokerSecurity(users)
    for password in users.values():
        assert password not in str(failure.value)


def test_kafka_up_takes_sasl_users_and_tls() -> None:
    args = build_parser().parse_args(["kafka", "up", "--sasl-user", "mm2", "--sasl-user", "ops"])
    assert (args.sasl_user, args.tls) == (["mm2", "ops"], False)
    assert build_parser().parse_args(["kafka", "up", "--tls"]).tls
    plain = build_parser().parse_args(["kafka", "up"])
    assert (plain.sasl_user, plain.tls) == (None, False)


def test_a_restart_keeps_the_passwords_its_data_dir_was_formatted_with(tmp_path: Path) -> None:
    """SCRAM credentials live in the formatted data dir, so `kafka up` after `down` must hand
    out the same passwords; new users get fresh ones."""
    write_credentials_file(tmp_path, BrokerSecurity({"mm2": "first-pw"}))

    users = generated_users(["mm2", "ops"], tmp_path)

    assert users["mm2"] == "first-pw"
    assert users["ops"] and users["ops"] != "first-pw"
    assert generated_users(["mm2"])["mm2"] != "first-pw"
