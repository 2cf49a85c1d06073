"""A Spark Connect URL's secrets (`;token=...`) never reach resource config, a description, a
config error or a session error, and the session still gets the whole URL."""

from __future__ import annotations

from pathlib import Path

import pytest

from mm2_assets.mm2.config import load_mm2_config
from mm2_assets.mm2.errors import MM2ConfigError
from mm2_assets.mm2.spark_settings import masked_remote, remote_secrets, spark_settings
from mm2_assets.spark.session import SessionSpec

TOKEN = "s3cr3t-connect-token"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("sc://h:15002", "sc://h:15002"),
        ("sc://h:15002/;use_ssl=true", "sc://h:15002/;use_ssl=true"),
        (f"sc://h:15002/;token={TOKEN}", "sc://h:15002/;token=[hidden]"),
        (f"sc://h/;user_id=x;token={TOKEN};use_ssl=true", "sc://h/;user_id=x;token=[hidden];use_ssl=true"),
        ("sc://h/;password=pw-value;session_id=abc", "sc://h/;password=[hidden];session_id=abc"),
    ],
)  # fmt: skip
def test_masked_remote_hides_only_secret_parameters(url: str, shown: str) -> None:
    assert masked_remote(url) == shown
    assert all(secret not in shown for secret in remote_secrets(url))


def test_the_session_shows_the_masked_url_and_starts_with_the_whole_one(tmp_path: Path) -> None:
    config = tmp_path / "mm2.properties"
    config.write_text(
        "clusters = a, b\na.bootstrap.servers = x:1\nb.bootstrap.servers = y:1\n"
        f"mm2assets.spark.remote = sc://connect:15002/;token={TOKEN}\n"
    )
    settings = load_mm2_config(config, environ={}).spark
    assert TOKEN not in settings.describe()
    spec = SessionSpec.from_settings(settings, config)
    assert spec.remote == "sc://connect:15002/;token=[hidden]"
    assert TOKEN not in repr(spec)
    # Read again from the file when the session starts.
    assert spec.remote_url() == f"sc://connect:15002/;token={TOKEN}"


def test_a_bad_remote_names_the_key_without_the_token() -> None:
    with pytest.raises(MM2ConfigError) as raised:
        spark_settings({"mm2assets.spark.remote": f"http://h/;token={TOKEN}"}, "f.properties")
    assert "mm2assets.spark.remote" in str(raised.value)
    assert TOKEN not in str(raised.value)
