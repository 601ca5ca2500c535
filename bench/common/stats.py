"""Latency series: what one system did at one number of requests in flight."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["LatencySeries", "percentile_ms"]


def percentile_ms(latencies_s: Sequence[float], q: float) -> float:
    """The q-th percentile of latencies given in seconds, in milliseconds (nan if none)."""
    if not latencies_s:
        return float("nan")
    return float(np.percentile(np.asarray(latencies_s, dtype=np.float64) * 1000.0, q))


@dataclass
class LatencySeries:
    """Successful latencies (seconds), errors and wall time of one phase."""

    system: str
    level: int
    latencies: list[float] = field(default_factory=list)
    wall_s: float = 0.0
    errors: int = 0
    error_samples: list[str] = field(default_factory=list)
    stopped: str = ""  # why the phase ended early (time cap, failing fast), if it did

    def ms(self, q: float) -> float:
        return percentile_ms(self.latencies, q)

    @property
    def per_s(self) -> float:
        return len(self.latencies) / self.wall_s if self.wall_s else 0.0

    def error(self, sample: str) -> None:
        self.errors += 1
        if len(self.error_samples) < 5:
            self.error_samples.append(sample[:300])

    def summary(self) -> dict[str, Any]:
        """The figures as plain JSON values (nan → None)."""
        def num(x: float) -> float | None:
            return None if x != x else round(x, 2)

        return {"system": self.system, "level": self.level, "n": len(self.latencies),
                "errors": self.errors, "p50_ms": num(self.ms(50)), "p95_ms": num(self.ms(95)),
                "p99_ms": num(self.ms(99)), "req_per_s": round(self.per_s, 2),
                "wall_s": round(self.wall_s, 2), "stopped": self.stopped or None,
                "error_samples": self.error_samples}
