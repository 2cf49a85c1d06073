"""The driver's follower liveness when the target cannot be read: unknown, never dead (the
verdict itself: `test_writer_lease.py`; on brokers: `integration/test_follower_liveness.py`)."""

from __future__ import annotations

from pathlib import Path

from mm2_assets.defs.replication.follower import FollowerLiveness, follower_holder
from mm2_assets.kafka.clients import load_checked_config
from mm2_assets.mm2.writer_lease import Holder, LeaseWatch, first_record

DEMO_CONFIG = Path(__file__).resolve().parents[2] / "mm2_assets" / "demo.properties"


def test_a_follower_is_not_judged_dead_while_the_target_is_unreachable() -> None:
    flow = load_checked_config(DEMO_CONFIG).flows[0]
    holder = Holder("a1", "elsewhere", 7, follower_holder("r1"))
    watch = LeaseWatch(flow.mm2assets_writer_lease_timeout_ms / 1000)
    watch.observe(first_record(flow.name).taken_by(holder, 1, now=0.0), now=0.0)
    # Its record seen an hour ago: were it read the same now, the run would be dead.
    liveness = FollowerLiveness(flow, watch.state(), 3600.0, readable=False)
    assert liveness.alive("r1") is None
    assert liveness.note == "follower liveness unknown: the target cluster is unreachable"
    # And the next tick starts the count over.
    assert liveness.state is None
