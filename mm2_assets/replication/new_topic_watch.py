"""Watching lanes that just moved to a recreated topic until their consumer fetches from it.

A source topic deleted and recreated at once under a running copy moves its lanes to the new
topic's start, with a fresh consumer (`Copier._assign`). Under load, in most full runs of
the test suite, that consumer fetched nothing of the new topic for minutes when the
follower's re-layout came within seconds of the recreation (issue 47): no record, no end of
partition, no error, while the source's log grew; librdkafka's cause was not found. So a
lane that moved is watched for `WATCH_S`: when its consumer has told it nothing for
`QUIET_S` while the source holds records past its position (or the consumer cannot even say
where the log ends), the consumer is replaced; after `RENEWALS` replacements the attempt
fails and starts over with new clients.

Pure bookkeeping (`NewTopicWatches`); the copy loop asks the source's high watermark and
replaces the consumer.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

WATCH_S = 120.0
"""How long after a lane moved to a recreated topic its fetches are watched."""
QUIET_S = 5.0
"""How long a watched lane may hear nothing while records wait before its consumer counts as
stuck: a working consumer answers an assignment within a fetch round (the follower's fetch
wait is 0.5 s)."""
RENEWALS = 3
"""Consumers replaced for one watch before the attempt gives up and starts over."""

Key = tuple[str, int]


class Verdict(Enum):
    """What the copy loop does for a watched lane now."""

    WAIT = "wait"
    """Nothing yet: not quiet long enough to ask the source (or no longer watched)."""
    ASK = "ask"
    """Quiet for `QUIET_S`: ask the source's high watermark, then call `stuck` or `idle`."""


@dataclass
class _Watch:
    until: float
    since: float
    position: int
    renewals: int = 0


class NewTopicWatches:
    """The watched lanes of one copy task, by (source topic, partition)."""

    def __init__(self) -> None:
        self._watches: dict[Key, _Watch] = {}

    def __bool__(self) -> bool:
        return bool(self._watches)

    def watched(self) -> list[Key]:
        """The watched lanes' keys."""
        return list(self._watches)

    def moved(self, key: Key, position: int, now: float) -> None:
        """The lane `key` moved to a recreated topic at `position`: watch it from `now`."""
        self._watches[key] = _Watch(until=now + WATCH_S, since=now, position=position)

    def assigned(self, key: Key, position: int, now: float) -> None:
        """The lane was assigned (again) at `position`: its quiet time starts over."""
        watch = self._watches.get(key)
        if watch is not None:
            watch.since, watch.position = now, position

    def heard(self, key: Key, now: float) -> None:
        """The consumer told the lane it reached the end of its partition: its quiet time
        starts over (records arriving later must still be fetched)."""
        watch = self._watches.get(key)
        if watch is not None:
            watch.since = now

    def verdict(self, key: Key, position: int | None, now: float) -> Verdict:
        """What to do for the watched lane at `position` (None: the lane is gone or done).
        A lane that copied records (its position moved), is gone, or is past its watch is no
        longer watched."""
        watch = self._watches.get(key)
        if watch is None:
            return Verdict.WAIT
        if position is None or position != watch.position or now >= watch.until:
            del self._watches[key]
            return Verdict.WAIT
        return Verdict.ASK if now - watch.since >= QUIET_S else Verdict.WAIT

    def idle(self, key: Key, now: float) -> None:
        """The source holds nothing past the lane's position: quiet is no stall; ask again
        `QUIET_S` from now."""
        watch = self._watches.get(key)
        if watch is not None:
            watch.since = now

    def stuck(self, key: Key) -> bool:
        """The source holds records past the quiet lane's position: its consumer is to be
        replaced. False when `RENEWALS` replacements did not help (the attempt must start
        over)."""
        watch = self._watches[key]
        watch.renewals += 1
        return watch.renewals <= RENEWALS
