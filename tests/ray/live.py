"""Helpers of the tests that start the real Serve application (imported by them)."""

from __future__ import annotations

import time

import httpx


def wait_status(url: str, want: int, timeout_s: float = 90) -> httpx.Response:
    """Poll ``url`` until it answers ``want`` (connection errors count as not yet)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            resp = httpx.get(url, timeout=30)
            if resp.status_code == want:
                return resp
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"{url} never answered {want}")
        time.sleep(0.5)
