"""Restart back-off: how long to wait before starting work again after it failed in a row.

Pure logic, shared by whatever restarts failed work (the follower run today).
"""

from __future__ import annotations

import random


def restart_delay(failures: int, base: float, cap: float, seed: str) -> float:
    """Seconds to wait after `failures` consecutive failures (0: none, start now).

    Doubles from `base` up to `cap`, with ±20 % jitter so several flows that failed together
    do not restart in step. The jitter is drawn from `seed` (e.g. the failed run's id), so
    every evaluation for the same failure agrees on the same delay.
    """
    if failures <= 0:
        return 0.0
    delay = min(cap, base * 2 ** min(failures - 1, 30))
    return delay * random.Random(seed).uniform(0.8, 1.2)
