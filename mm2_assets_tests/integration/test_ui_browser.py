"""The Dagster UI in a real browser: what a user sees of the demo flow under `dagster dev`.

One `dagster dev` (webserver + daemon, its own DAGSTER_HOME, a free port) serves the demo
config pointed at the session's clusters, after the demo's own steps (`demo seed` data, one
`mm2-assets replicate` pass). Headless Chromium from Debian's `chromium` package, driven by
Playwright through its executable path (never a downloaded browser), then looks at the page:
the asset graph with its lineage edges, `replicated_topics`' partitions with their metadata, the
checks, the sensors, and a materialization launched by clicking Materialize. The tests share
the server and the browser and run in file order; the last one stops `dagster dev` and asserts
no process of it is left.

Screenshots go to `$MM2_ASSETS_SCREENSHOTS` (docs/screenshots/ holds a committed set), else to
`.mm2-assets/ui-screenshots/` (git-ignored), so a CI run leaves the tree clean.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from playwright.sync_api import sync_playwright

from mm2_assets.definitions import build_definitions
from mm2_assets.defs.health.verdicts import CHECK_CHECKPOINTS, CHECK_LAG, CHECK_TARGET_TOPICS
from mm2_assets.defs.run_requests import FLOW_TAG, WORK_FOLLOW, WORK_TAG
from mm2_assets.demo import DEMO_TOPICS, demo_properties, seed
from mm2_assets.kafka.clients import load_checked_config
from mm2_assets.local.launcher import LocalCluster
from mm2_assets.mm2.config import FlowConfig
from mm2_assets_tests.cli_helpers import ROOT, run_cli
from mm2_assets_tests.dagster_dev import DagsterDev
from mm2_assets_tests.dagster_internals import latest_check_passed
from mm2_assets_tests.integration.test_follower import wait_for
from mm2_assets_tests.kafka_helpers import Rec, produce

pytestmark = [
    pytest.mark.integration,
    # docs/ui.md: how its screenshots were made.
    pytest.mark.docs_command(
        "MM2_ASSETS_SCREENSHOTS=docs/screenshots .venv/bin/python -m pytest "
        "mm2_assets_tests/integration/test_ui_browser.py"
    ),
]

CHROMIUM = Path("/usr/bin/chromium")
"""Debian's chromium (scripts/setup.sh installs it)."""
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    # Without these chromium keeps calling home, which on a closed network only costs CPU.
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TIMEOUT_MS = 90_000  # a loaded 2-core machine: the UI's queries can take tens of seconds
RECORDS_PER_TOPIC = 200
SCREENSHOTS = Path(os.environ.get("MM2_ASSETS_SCREENSHOTS") or ROOT / ".mm2-assets/ui-screenshots")


class DemoUI:
    """What the tests share: the flow, the running server, its instance and a browser page."""

    def __init__(
        self, config: Path, flow: FlowConfig, server: DagsterDev, home: Path, page
    ) -> None:
        self.config = config
        self.flow = flow
        self.server = server
        self.home = home
        self.page = page

    def open(self, path: str) -> None:
        """Go to `path` of the UI."""
        self.page.goto(f"{self.server.url}{path}")

    def shot(self, name: str) -> None:
        """Save a screenshot of the page as `<name>.png`."""
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(SCREENSHOTS / f"{name}.png"))


@pytest.fixture(scope="module")
def ui(
    kafka_clusters: dict[str, LocalCluster], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DemoUI]:
    """The demo as `scripts/demo.sh` serves it (seed, one pass, `dagster dev`), on the session's
    clusters, with a Chromium page on it."""
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: run scripts/setup.sh (installs Debian's chromium)")
    work = tmp_path_factory.mktemp("ui")
    config = work / "mm2.properties"
    # The demo's topics only: the demo's `topics = .*` would replicate every other test's
    # topics on the shared clusters too (dozens of partitions on the page, and some that are
    # meant to fail, such as records over the target's size limit).
    config.write_text(
        demo_properties(
            kafka_clusters["primary"].bootstrap_servers, kafka_clusters["backup"].bootstrap_servers
        ).replace("\ntopics = .*\n", f"\ntopics = {'|'.join(DEMO_TOPICS)}\n")
    )
    flow = load_checked_config(config).flows[0]
    assert flow.topics.matches("orders") and not flow.topics.matches("other")
    seed(flow, RECORDS_PER_TOPIC)
    home = work / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    env = {"DAGSTER_HOME": str(home), "MM2_CONFIG": str(config)}
    replicated = run_cli("replicate", "--config", str(config), env=env)
    assert replicated.returncode == 0, replicated.stdout + replicated.stderr
    # Dagster's freshness daemon judges every 30 s; every 2 s keeps the freshness test short.
    server = DagsterDev.start(
        {**env, "FRESHNESS_DAEMON_INTERVAL_SECONDS": "2"}, work / "dagster-dev.log"
    )
    try:
        with sync_playwright() as playwright:
            context = playwright.chromium.launch_persistent_context(
                str(work / "chromium-profile"),
                executable_path=str(CHROMIUM),
                headless=True,
                args=CHROMIUM_ARGS,
                viewport={"width": 1600, "height": 1000},
            )
            # Dagster's "join the community" dialog would cover the page on first visit.
            context.add_init_script("localStorage.setItem('communityNux', 'true')")
            context.set_default_timeout(TIMEOUT_MS)
            try:
                yield DemoUI(config, flow, server, home, context.new_page())
            finally:
                context.close()
    finally:
        server.stop()


def test_asset_graph_shows_every_asset_of_the_flow_with_its_lineage(ui: DemoUI) -> None:
    flow = ui.flow
    # What the definitions declare (source topics, replicated topics, topic configs,
    # checkpoints, synced group offsets, heartbeats) is what the page must draw.
    graph = build_definitions(load_checked_config(ui.config)).resolve_asset_graph()
    keys = [key for key in graph.get_all_asset_keys() if key.path[0] == flow.key]
    names = sorted(key.path[-1] for key in keys)
    declared = {(up.path[-1], key.path[-1]) for key in keys for up in graph.get(key).parent_keys}
    ui.open(f"/locations/mm2_assets/asset-groups/{flow.key}")
    for name in names:
        ui.page.locator(f"foreignObject [data-tooltip='{name}']").first.wait_for()
    # Attached, not "visible": a straight edge has an empty bounding box.
    ui.page.locator("svg path[marker-end]").first.wait_for(state="attached")
    drawn = ui.page.evaluate(GRAPH_JS)
    boxes = {n["name"]: n for n in drawn["nodes"]}
    assert sorted(boxes) == names
    edges = {_edge(path, boxes) for path in drawn["edges"]}
    assert edges == {
        ("source_topics", "replicated_topics"),
        ("source_topics", "topic_configs"),
        ("replicated_topics", "checkpoints"),
        ("checkpoints", "synced_group_offsets"),
    }
    assert edges == declared  # the page draws Dagster's lineage, nothing more or less
    assert len(names) == 6 and "heartbeats" in names
    ui.page.wait_for_function("() => !document.body.innerText.includes('Loading')")
    ui.shot("1-asset-graph")


GRAPH_JS = """() => ({
  nodes: [...document.querySelectorAll('foreignObject')]
    .filter(f => f.querySelector('[data-tooltip]'))
    .map(f => ({name: f.querySelector('[data-tooltip]').getAttribute('data-tooltip'),
                x: +f.getAttribute('x'), y: +f.getAttribute('y'),
                w: +f.getAttribute('width'), h: +f.getAttribute('height')})),
  edges: [...document.querySelectorAll('svg path[marker-end]')].map(p => p.getAttribute('d')),
})"""
"""The asset nodes (name and box) and the lineage edges (SVG paths) the graph draws."""


def _edge(path: str, boxes: dict[str, dict]) -> tuple[str, str]:
    """(from, to) of an edge drawn as `path`: the node whose right side it leaves and the one
    whose left side its arrow reaches (Dagster draws left to right)."""
    numbers = [float(n) for n in re.findall(r"-?\d+(?:\.\d+)?", path)]
    (x1, y1), (x2, y2) = numbers[:2], numbers[-2:]

    def at(x: float, y: float, side: str) -> str:
        hits = [
            name
            for name, b in boxes.items()
            if abs((b["x"] + b["w"] if side == "right" else b["x"]) - x) <= 12
            and b["y"] <= y <= b["y"] + b["h"]
        ]
        assert len(hits) == 1, f"edge {path}: {side} end at ({x}, {y}) touches {hits}"
        return hits[0]

    return at(x1, y1, "right"), at(x2, y2, "left")


def _metadata_value(page, key: str) -> str:
    """The value shown next to metadata entry `key` in the asset page's metadata table."""
    cell = page.locator(f"xpath=//tr[td[normalize-space()='{key}']]/td[2]").first
    cell.wait_for()
    return cell.inner_text().strip()


def test_replicated_topics_has_a_partition_per_topic_with_its_last_materialization(
    ui: DemoUI,
) -> None:
    flow = ui.flow
    ui.open(f"/assets/{flow.key}/replicated_topics?view=partitions")
    for topic in DEMO_TOPICS:
        ui.page.get_by_text(topic, exact=True).first.wait_for()
    shown = ui.page.evaluate(PARTITIONS_JS)
    instance = dg.DagsterInstance.from_config(str(ui.home))
    registered = set(instance.get_dynamic_partitions(f"{flow.key}__topics"))
    # The follower may register a topic (heartbeats, once it exists) after the page loaded.
    assert set(DEMO_TOPICS) <= set(shown) <= registered
    # Green: materialized (the pass copied every demo topic).
    assert {shown[t] for t in DEMO_TOPICS} == {"var(--color-accent-green)"}
    ui.page.get_by_text("orders", exact=True).first.click()
    # The pass's total: every demo topic, plus the `heartbeats` topic when other tests on the
    # session's clusters wrote heartbeats (MM2 replicates heartbeats topics whatever the topic
    # filter says); this topic's own share is in the tables below.
    records_copied = int(_metadata_value(ui.page, "records_copied"))
    assert records_copied >= RECORDS_PER_TOPIC * len(DEMO_TOPICS)
    assert int(_metadata_value(ui.page, "remaining_lag_records")) == 0
    # The per-partition table of the pass: orders' 6 partitions, 200 records in all.
    rows = ui.page.locator("xpath=//tr[count(td)=6][td[1][normalize-space()='orders']]")
    assert rows.count() == DEMO_TOPICS["orders"][0]
    copied = [int(rows.nth(i).locator("td").nth(4).inner_text()) for i in range(rows.count())]
    assert sum(copied) == RECORDS_PER_TOPIC
    ui.shot("2-replicated-topics-partition")
    # The pass's per-topic table: this topic's share of the run.
    topic_row = ui.page.locator("xpath=//tr[count(td)=4][td[1][normalize-space()='orders']]")
    assert [c.strip() for c in topic_row.first.locator("td").all_inner_texts()] == [
        "orders",
        "primary.orders",
        str(RECORDS_PER_TOPIC),
        "0",
    ]
    topic_row.first.scroll_into_view_if_needed()
    ui.shot("2-replicated-topics-partition-tables")


PARTITIONS_JS = """() => Object.fromEntries(
  [...document.querySelectorAll('div[data-tooltip] > div[title]')]
    .map(d => [d.title, d.parentElement.nextElementSibling.style.background]))"""
"""Partition name → the colour of its status dot, as the partitions view lists them."""


@pytest.mark.parametrize(
    ("asset", "check"),
    [
        ("replicated_topics", CHECK_LAG),
        ("replicated_topics", CHECK_TARGET_TOPICS),
        ("checkpoints", CHECK_CHECKPOINTS),
    ],
)
def test_checks_show_their_status(ui: DemoUI, asset: str, check: str) -> None:
    instance = dg.DagsterInstance.from_config(str(ui.home))
    key = dg.AssetCheckKey(dg.AssetKey([ui.flow.key, asset]), check)
    # The replicate pass may leave a check planned only: the first evaluation is the driver's first
    # tick's, or the follower run's as it starts.
    wait_for(f"an evaluation of {check}", lambda: latest_check_passed(instance, key) is not None)
    ui.open(f"/assets/{ui.flow.key}/{asset}?view=checks&checkDetail={check}")
    ui.page.get_by_text("Execution history", exact=True).click()
    # The newest evaluation first: the driver's (a sensor tick) or the follower run's. On a
    # loaded machine `checkpoint_freshness` may rightly fail (the pass's checkpoints grew older
    # than 3 intervals before the follower's first): the page must show what Dagster holds.
    status = ui.page.locator("xpath=//tbody/tr[1]/td[1]").first
    status.wait_for()
    latest_passed = latest_check_passed(instance, key)
    shown = status.inner_text().strip()
    assert shown in ("Passed", "Failed")
    # The demo's group `billing` is there to be checkpointed: a check that saw no group is wrong.
    description = ui.page.locator("xpath=//tbody/tr[1]/td[4]").first.inner_text()
    assert "no consumer group" not in description
    assert (shown == "Passed") == latest_passed
    ui.shot(f"3-check-{check}")


CHECKS_QUERY = """
query Checks($path: [String!]!) {
  assetNodeOrError(assetKey: {path: $path}) {
    ... on AssetNode {
      assetChecksOrError {
        ... on AssetChecks { checks { name executionForLatestMaterialization { runId status } } }
      }
    }
  }
}
"""
"""What the asset page's checks list shows of each check: its execution against the asset's
latest materialization (null: "Not evaluated")."""


def _checks_list(ui: DemoUI, asset: str) -> dict[str, dict | None]:
    node = ui.server.graphql(CHECKS_QUERY, {"path": [ui.flow.key, asset]})["assetNodeOrError"]
    checks = node["assetChecksOrError"]["checks"]
    return {c["name"]: c["executionForLatestMaterialization"] for c in checks}


def _materializations(instance: dg.DagsterInstance, key: dg.AssetKey, run_id: str) -> set[int]:
    """The storage ids of `key`'s latest materializations by run `run_id`."""
    records = instance.fetch_materializations(key, limit=100).records
    return {r.storage_id for r in records if r.run_id == run_id}


def test_the_checks_list_shows_the_follower_runs_verdicts(ui: DemoUI) -> None:
    """Follow mode: the follower run records the checks' verdicts itself, so the checks list
    shows each one however often the follower materializes (a runless one would read "Not
    evaluated" from the follower's next materialization on)."""
    instance = dg.DagsterInstance.from_config(str(ui.home))
    tags = {FLOW_TAG: ui.flow.key, WORK_TAG: WORK_FOLLOW}
    started = dg.RunsFilter(tags=tags, statuses=[dg.DagsterRunStatus.STARTED])
    wait_for("the follower run", lambda: instance.get_runs(started), 120)
    [follower] = [r.run_id for r in instance.get_runs(started)]

    def shown() -> dict[str, dict | None]:
        return {**_checks_list(ui, "replicated_topics"), **_checks_list(ui, "checkpoints")}

    # Its first evaluation comes as it starts.
    wait_for(
        "the follower run's verdicts",
        lambda: all(e and e["runId"] == follower for e in shown().values()),
        90,
        shown,
    )
    # Then it materializes every topic it copies, and the checkpoints on their interval.
    key = dg.AssetKey([ui.flow.key, "replicated_topics"])
    before = _materializations(instance, key, follower)
    for topic in DEMO_TOPICS:
        now_ms = int(time.time() * 1000)
        produce(ui.flow.source.bootstrap_servers, topic, [Rec(0, b"k", b"v", (), now_ms)])
    wait_for(
        "the follower's materializations",
        lambda: len(_materializations(instance, key, follower) - before) >= len(DEMO_TOPICS),
        60,
    )
    checks = shown()
    assert set(checks) == {CHECK_LAG, CHECK_TARGET_TOPICS, CHECK_CHECKPOINTS}
    for name, execution in checks.items():
        assert execution is not None, f"{name} reads 'Not evaluated'"
        assert execution["status"] in ("SUCCEEDED", "FAILED"), execution
        # The driver recorded none beside it: the follower run's is the newest.
        assert execution["runId"] == follower, (name, execution)


def test_sensors_are_running(ui: DemoUI) -> None:
    defs = build_definitions(load_checked_config(ui.config))
    expected = sorted(s.name for s in defs.sensors or [])
    ui.open("/automation")
    # The switches render off until each sensor's state has loaded.
    with contextlib.suppress(PlaywrightTimeout):
        ui.page.wait_for_function(
            f"n => Object.values(({SENSOR_SWITCHES_JS})()).filter(v => v === true).length >= n",
            arg=len(expected),
        )
    shown = ui.page.evaluate(SENSOR_SWITCHES_JS)
    assert shown == {name: True for name in expected}
    ui.shot("4-sensors")


SENSOR_SWITCHES_JS = """() => Object.fromEntries([...document.querySelectorAll('[data-index]')]
  .filter(row => row.querySelector('a[href*="/sensors/"]'))
  .map(row => [row.querySelector('a[href*="/sensors/"]').getAttribute('href').split('/').pop(),
               [...row.querySelectorAll('input[type=checkbox]')].pop().checked]))"""
"""Sensor name → whether its on/off switch (the row's last checkbox; the first selects the
row) is on, per row of the automation list."""


def test_materialize_from_the_ui_succeeds(ui: DemoUI) -> None:
    page = ui.page
    key = dg.AssetKey([ui.flow.key, "heartbeats"])
    instance = dg.DagsterInstance.from_config(str(ui.home))
    before = {r.run_id for r in instance.get_runs()}
    ui.open(f"/assets/{ui.flow.key}/heartbeats")
    page.locator("button:has-text('Materialize')").first.click()
    # In follow mode nothing but a user materializes `heartbeats` alone (the follower reports
    # its heartbeats from its own run): the new run of that selection is the click's.
    deadline = time.monotonic() + TIMEOUT_MS / 1000
    launched: list[dg.DagsterRun] = []
    while not launched and time.monotonic() < deadline:
        launched = [
            r for r in instance.get_runs() if r.run_id not in before and r.asset_selection == {key}
        ]
        time.sleep(0.5)  # the run is created by the webserver: nothing in the page to wait on
    assert len(launched) == 1, f"runs launched from the UI: {launched}"
    [run] = launched
    page.goto(f"{ui.server.url}/runs/{run.run_id}")
    page.get_by_text("Success", exact=True).first.wait_for(timeout=180_000)
    page.wait_for_function("() => !document.body.innerText.includes('Loading run logs')")
    ui.shot("5-run-launched-from-the-ui")
    finished = instance.get_run_by_id(run.run_id)
    assert finished is not None and finished.status == dg.DagsterRunStatus.SUCCESS


FRESHNESS_QUERY = """
query Freshness($path: [String!]!) {
  assetNodes(assetKeys: [{path: $path}]) { freshnessStatusInfo { freshnessStatus } }
}
"""
SENSOR_QUERY = """
query Sensor($selector: SensorSelector!) {
  sensorOrError(sensorSelector: $selector) {
    ... on Sensor { sensorState { id status ticks(limit: 1) { status } } }
  }
}
"""
STOP_SENSOR = """
mutation Stop($id: String!) { stopSensor(id: $id) { __typename } }
"""
START_SENSOR = """
mutation Start($selector: SensorSelector!) { startSensor(sensorSelector: $selector) { __typename } }
"""
TERMINATE = """
mutation Terminate($runId: String!) { terminateRun(runId: $runId) { __typename } }
"""


def _freshness(ui: DemoUI, asset: str) -> str | None:
    [node] = ui.server.graphql(FRESHNESS_QUERY, {"path": [ui.flow.key, asset]})["assetNodes"]
    info = node["freshnessStatusInfo"]
    return info["freshnessStatus"] if info else None


def _wait_freshness(
    ui: DemoUI,
    asset: str,
    status: str,
    timeout: float,
    instance: dg.DagsterInstance | None = None,
) -> None:
    deadline = time.monotonic() + timeout
    seen = None
    while time.monotonic() < deadline:
        seen = _freshness(ui, asset)
        if seen == status:
            return
        time.sleep(1)  # the freshness daemon evaluates every 2 s here: poll its verdict
    last = ""
    if instance is not None:
        event = instance.get_latest_materialization_event(dg.AssetKey([ui.flow.key, asset]))
        if event is not None:
            ago = time.time() - event.timestamp
            last = f"; last materialized {ago:.0f} s ago by run {event.run_id}"
        last += f"; runs: {_run_statuses(instance)}"
    pytest.fail(f"{asset}'s freshness is {seen}, not {status}, after {timeout} s{last}")


UNFINISHED = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
]


def _run_statuses(instance: dg.DagsterInstance) -> list[tuple[str, str, str]]:
    return [(r.job_name, r.run_id[:8], r.status.value) for r in instance.get_runs(limit=10)]


def _terminate_every_run(ui: DemoUI, instance: dg.DagsterInstance, job: str) -> None:
    """Terminate `job`'s unfinished runs (the follower, and any run the driver requested
    before it was stopped) until none has been left for `QUIET_S`, as an operator who checks
    again would: a driver tick evaluating when its sensor stopped may not show as in flight
    yet, and still requests a follower once it finds none (seen in a suite: a run launched
    7 s after every run was terminated)."""
    deadline = time.monotonic() + 90 + QUIET_S
    asked: dict[str, float] = {}  # run id -> when its termination was last asked for
    answers: list[str] = []
    quiet_since: float | None = None
    while time.monotonic() < deadline:
        unfinished = instance.get_runs(dg.RunsFilter(job_name=job, statuses=UNFINISHED))
        if not unfinished:
            assert asked, f"no run to stop: {_run_statuses(instance)}"
            quiet_since = quiet_since or time.monotonic()
            if time.monotonic() - quiet_since >= QUIET_S:
                return
        else:
            quiet_since = None
        for run in unfinished:
            # Asked again after a while: an answer other than success leaves the run going.
            if time.monotonic() - asked.get(run.run_id, -60.0) >= 15:
                answer = ui.server.graphql(TERMINATE, {"runId": run.run_id})
                answers.append(f"{run.run_id[:8]}: {answer['terminateRun']['__typename']}")
                asked[run.run_id] = time.monotonic()
        time.sleep(1)
    runs = _run_statuses(instance)
    pytest.fail(f"{job} runs unfinished 90 s after their termination: {runs}; answers {answers}")


QUIET_S = 60.0
"""How long no run of the stopped driver's follower may appear before the test goes on: a
sensor tick is bounded by Dagster's 60 s evaluation timeout."""


def test_freshness_turns_red_when_the_sensors_stop_and_green_again(ui: DemoUI) -> None:
    """With the driver sensor stopped and its follower run terminated (from the UI's API, as
    an operator's clicks do), nothing reports heartbeats: their freshness policy fails on
    Dagster's side alone, and passes again once the sensor runs and restarts the follower."""
    _wait_freshness(ui, "heartbeats", "HEALTHY", 120)
    selector = {
        "repositoryLocationName": "mm2_assets",
        "repositoryName": "__repository__",
        "sensorName": f"{ui.flow.key}__replication_driver",
    }
    state = ui.server.graphql(SENSOR_QUERY, {"selector": selector})["sensorOrError"]
    ui.server.graphql(STOP_SENSOR, {"id": state["sensorState"]["id"]})
    # A tick already evaluating when the sensor stopped still ends, and may request a
    # follower once it finds none: terminate after it, as an operator who waits would.
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        sensor = ui.server.graphql(SENSOR_QUERY, {"selector": selector})["sensorOrError"]
        if all(t["status"] != "STARTED" for t in sensor["sensorState"]["ticks"]):
            break
        time.sleep(1)
    else:
        pytest.fail("the driver's tick in flight did not end within 120 s of its sensor's stop")
    instance = dg.DagsterInstance.from_config(str(ui.home))
    # The stopped driver's follower; the reverse pair's driver runs on (its own heartbeats).
    _terminate_every_run(ui, instance, f"{ui.flow.key}__follower")
    # Heartbeats fail after 3 report intervals, at least Dagster's minute (freshness.py).
    _wait_freshness(ui, "heartbeats", "DEGRADED", 180, instance)
    ui.open(f"/assets/{ui.flow.key}/heartbeats")
    ui.page.wait_for_function("() => !document.body.innerText.includes('Loading')")
    ui.shot("6-freshness-failing")

    ui.server.graphql(START_SENSOR, {"selector": selector})
    _wait_freshness(ui, "heartbeats", "HEALTHY", 240)


def test_dagster_dev_stops_on_ctrl_c_leaving_no_process(ui: DemoUI) -> None:
    running = ui.server.processes()
    assert len(running) >= 3  # dagster dev, its webserver, daemon and code server (and runs)
    left = ui.server.stop()
    assert left == {}, f"still running after Ctrl-C: {left}\n{ui.server.log_tail()}"
    assert ui.server.process.returncode == 0, ui.server.log_tail()
