"""A Spark Connect token in `mm2assets.spark.remote` never reaches the UI: a real
`dagster-webserver` over the project's definitions shows the `spark` resource's remote with the
token `[hidden]`, and neither its GraphQL answers nor its log hold the token."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mm2_assets.mm2.config import CONFIG_ENV
from mm2_assets_tests.dagster_dev import DagsterDev

pytestmark = pytest.mark.integration

TOKEN = "sc-t0ken-never-shown"

GRAPHQL_RESOURCES = """
query {
  repositoriesOrError {
    ... on RepositoryConnection {
      nodes {
        name
        allTopLevelResourceDetails {
          name
          description
          configuredValues { key value type }
        }
      }
    }
  }
}
"""


def test_the_connect_token_is_hidden_in_the_ui(write_mm2_config, tmp_path: Path) -> None:
    # An unreachable server: what the UI shows does not need one.
    config = write_mm2_config(f"mm2assets.spark.remote = sc://127.0.0.1:9/;token={TOKEN}\n")
    home = tmp_path / "dagster_home"
    home.mkdir()
    log = tmp_path / "webserver.log"
    server = DagsterDev.start(
        {CONFIG_ENV: str(config), "DAGSTER_HOME": str(home)}, log, webserver_only=True
    )
    try:
        answer = json.dumps(server.graphql(GRAPHQL_RESOURCES))
    finally:
        assert server.stop() == {}, "the webserver left processes behind"
    # Not vacuous: the spark resource's remote is there, masked.
    assert "sc://127.0.0.1:9/;token=[hidden]" in answer, answer[:2000]
    assert TOKEN not in answer
    assert TOKEN not in log.read_text()
    for path in home.rglob("*"):
        if path.is_file():
            assert TOKEN.encode() not in path.read_bytes(), f"the token is stored in {path}"
