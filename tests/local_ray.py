"""The tests' local Ray: ``ray.init`` once more when the first start times out.

Ray waits a fixed 30 s for the head's raylet to register (``ray._private.node``, not a
setting); on a loaded machine the raylet has been seen to miss that once, failing every test
of a folder at setup. One retry after a clean ``ray.shutdown()`` is what a user would do.
"""

from __future__ import annotations

import os

import ray

from serve_app.local_ray import PROXY_READY_TIMEOUT_S
from serve_app.request_context import PROXY_CALLBACK

__all__ = ["init_local_ray"]


def init_local_ray(namespace: str) -> None:
    # the proxy's request-id check, as `strata serve` sets it (serve_app/local_ray.py)
    os.environ.setdefault("RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH", PROXY_CALLBACK)
    # and its proxy's ready check (Serve's 5 s was missed at setup under load)
    os.environ.setdefault("RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S", str(PROXY_READY_TIMEOUT_S))
    options = {"address": "local", "num_cpus": 2, "object_store_memory": 256 * 1024 * 1024,
               "namespace": namespace, "include_dashboard": False, "log_to_driver": False}
    try:
        ray.init(**options)
    except Exception as exc:  # Ray raises a plain Exception for the timeout
        if "timed out during startup" not in str(exc):
            raise
        ray.shutdown()
        ray.init(**options)
