"""A fitted model cached on disk, so a process after the first loads it in milliseconds.

The key is a hash of what decides the fit (the training rows, the library's version, the
code of the modules its features come from); a fit under another key is an older version and
is deleted when a new one is written. A read-only or missing cache directory only costs a
fit: nothing fails.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["cache_dir", "cached_fit"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

# what a stale, truncated or foreign pickle raises when it is loaded
_UNREADABLE = (OSError, pickle.UnpicklingError, EOFError, AttributeError, ValueError, TypeError,
               ImportError)


def cache_dir() -> Path:
    """``STRATA_MODEL_CACHE``, else ``~/.cache/strata``."""
    return Path(os.environ.get("STRATA_MODEL_CACHE") or Path.home() / ".cache" / "strata")


def cached_fit(prefix: str, key_parts: list[Any], fit: Callable[[], T],
               valid: Callable[[object], bool]) -> T:
    """The fit cached under ``prefix-<hash of key_parts>.pkl`` if it loads and ``valid``
    accepts it, else ``fit()``, written for the next process (through a temporary file and
    a rename, so a reader never sees half a pickle)."""
    key = hashlib.sha256(json.dumps(key_parts, ensure_ascii=False).encode()).hexdigest()[:16]
    path = cache_dir() / f"{prefix}-{key}.pkl"
    try:
        cached = pickle.loads(path.read_bytes())
        if valid(cached):
            return cached  # type: ignore[no-any-return]  # checked by valid
    except _UNREADABLE:
        pass
    fitted = fit()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.tmp")
        partial.write_bytes(pickle.dumps(fitted))
        os.replace(partial, path)
        for old in path.parent.glob(f"{prefix}-*.pkl"):  # fits of other versions
            if old != path:
                old.unlink(missing_ok=True)
    except OSError as exc:  # a read-only home: fit again next time
        logger.info("%s model not cached (%s)", prefix, exc)
    return fitted
