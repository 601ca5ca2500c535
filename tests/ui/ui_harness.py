"""What the inspector's browser tests share: the running server and a watched page."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx
from playwright.sync_api import Page

from strata.settings import Settings


@dataclass
class Strata:
    """A running Strata and a small HTTP helper for arranging data through the API."""

    base: str
    settings: Settings

    def call(self, method: str, path: str, key: str, body: Any = None) -> httpx.Response:
        return httpx.request(method, f"{self.base}{path}", json=body, timeout=60,
                             headers={"Authorization": f"Bearer {key}"})


@dataclass
class Watched:
    """A page plus what it did: console errors (CSP violations land here) and requests."""

    page: Page
    errors: list[str]
    urls: list[str]
