"""Deployment options every Strata deployment shares."""

from __future__ import annotations

from typing import Any

__all__ = ["STOP_QUICKLY"]

# A stop (SIGTERM, a redeploy) checks for requests in flight every half second and waits for
# them at most 5 s (Serve's defaults: 2 s and 20 s, which made a SIGTERM take ~10 s alone):
# a cut turn is resent by the SDK with its turn_id, and the shard deduplicates it.
STOP_QUICKLY: dict[str, Any] = {"graceful_shutdown_wait_loop_s": 0.5,
                                "graceful_shutdown_timeout_s": 5.0}
