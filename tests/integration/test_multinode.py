"""The knowledge import job and the decay sweep on a 2-node local Ray cluster, with work on
both nodes (run in a subprocess so its cluster never meets the other tests' Ray)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

# the tiers it needs: a 2-node local Ray cluster and an embedded Redis, in a subprocess
pytestmark = [pytest.mark.cluster, pytest.mark.ray, pytest.mark.redis]


def test_jobs_spread_over_two_nodes() -> None:
    script = Path(__file__).with_name("multinode_scenario.py")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=600, cwd=Path(__file__).resolve().parents[2])
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(result["nodes"]) == 2
    assert result["sweep_users"] == 12
    assert len(result["sweep_nodes"]) == 2, result  # shards on both nodes swept users
    assert result["import_ok"] and result["import_added"] > 0
    assert len(result["import_nodes"]) == 2, result  # embedding actors ran on both nodes
