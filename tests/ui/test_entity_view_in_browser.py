"""The entity view in a real browser (#38): open the Entities tab, see the entities of
memories written through the API with their links, open one and see its memories newest
first, rename it, delete another, forget a third — each checked in the page and through the
API — with a screenshot of each step; another tenant's key sees none of it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect
from ui_harness import Strata, Watched

pytestmark = [pytest.mark.browser, pytest.mark.ray, pytest.mark.redis]

ADMIN, OTHER = "acme-admin-key", "globex-admin-key"
USER = "eve"
TAMPA = "I took my dog Max to the beach in Tampa last weekend."
PARK = "Every morning Max runs to the park near the house."
VIOLIN = "I started learning the violin this spring."


def arrange(server: Strata) -> None:
    for text, session in ((TAMPA, "s1"), (PARK, "s2"), (VIOLIN, "s2")):
        made = server.call("POST", f"/v1/users/{USER}/memories", ADMIN,
                           {"kind": "episode", "text": text, "session_id": session})
        assert made.status_code == 200, made.text


def row(pg: Page, name: str):  # type: ignore[no-untyped-def]
    return pg.locator(f"#entities tr[data-entity-name='{name}']")


def api_names(server: Strata) -> set[str]:
    resp = server.call("GET", f"/v1/users/{USER}/entities", ADMIN)
    assert resp.status_code == 200, resp.text
    return {e["name"] for e in resp.json()["entities"]}


def open_entities(pg: Page, server: Strata, key: str) -> None:
    pg.goto(f"{server.base}/ui/")
    pg.fill("#api-key", key)
    pg.click("#login-button")
    expect(pg.locator("#app")).to_be_visible()
    pg.click(".tab[data-view=entities]")
    pg.fill("#user-input", USER)
    pg.click("#user-go")


def test_browse_rename_delete_and_forget_entities(server: Strata, page: Watched,
                                                  screenshots: Path) -> None:
    arrange(server)
    pg = page.page
    open_entities(pg, server, ADMIN)
    expect(pg.locator("#status-line")).to_have_text(
        re.compile(rf"^\d+ of \d+ entities of {USER} \(from 3 memories\)$"))
    max_row = row(pg, "Max")
    expect(max_row.locator(".mentions")).to_have_text("2")
    expect(max_row.locator("td").nth(1)).to_have_text("pet")
    expect(row(pg, "Tampa").locator(".links")).to_contain_text("Florida → United States")
    pg.screenshot(path=screenshots / "entities-1-list.png", full_page=True)

    # one entity: its memories across sessions, newest first
    max_row.locator(".entity-open").click()
    mentions = pg.locator("#entity-detail tr[data-memory-id]")
    expect(mentions).to_have_count(2)
    expect(mentions.nth(0)).to_contain_text(PARK)
    expect(mentions.nth(1)).to_contain_text(TAMPA)
    expect(pg.locator("#entity-summary dd[data-field=mentions]")).to_have_text(
        "2 memories in 2 session(s)")
    pg.screenshot(path=screenshots / "entities-2-detail.png", full_page=True)

    # rename
    max_row.locator(".entity-edit").click()
    expect(pg.locator("#entity-dialog")).to_be_visible()
    pg.fill("#entity-name", "Maxie the beagle")
    pg.screenshot(path=screenshots / "entities-3-rename.png")
    pg.click("#entity-save")
    expect(pg.locator("#entity-dialog")).to_be_hidden()
    expect(row(pg, "Maxie the beagle")).to_have_count(1)
    expect(row(pg, "Max")).to_have_count(0)
    expect(row(pg, "Maxie the beagle")).to_contain_text("also Max")
    assert "Maxie the beagle" in api_names(server)

    # delete one: it leaves the view, its memory stays
    row(pg, "violin").locator(".entity-delete").click()
    expect(pg.locator("#entity-confirm-dialog")).to_be_visible()
    expect(pg.locator("#entity-confirm-title")).to_contain_text("violin")
    pg.screenshot(path=screenshots / "entities-4-delete.png")
    pg.click("#entity-confirm-ok")
    expect(row(pg, "violin")).to_have_count(0)
    expect(pg.locator("#status-line")).to_have_text("Deleted the entity violin")
    assert "violin" not in api_names(server)
    listed = server.call("GET", f"/v1/users/{USER}/memories", ADMIN).json()["memories"]
    assert VIOLIN in {m["text"] for m in listed}

    # cancelling a forget changes nothing; confirming hides the memories that name it
    row(pg, "park").locator(".entity-forget").click()
    pg.click("#entity-confirm-cancel")
    expect(row(pg, "park")).to_have_count(1)
    row(pg, "park").locator(".entity-forget").click()
    pg.click("#entity-confirm-ok")
    expect(pg.locator("#status-line")).to_contain_text("Forgot 1 memories naming park")
    expect(row(pg, "park")).to_have_count(0)
    expect(row(pg, "Maxie the beagle").locator(".mentions")).to_have_text("1")
    forgets = server.call("GET", f"/v1/users/{USER}/forgets", ADMIN).json()["forgets"]
    assert [f["target"] for f in forgets] == ["park"] and forgets[0]["state"] == "undoable"
    pg.screenshot(path=screenshots / "entities-5-after.png", full_page=True)
    assert page.errors == [], page.errors


def test_another_tenant_sees_no_entities_of_this_user(server: Strata, page: Watched) -> None:
    arrange(server)
    pg = page.page
    open_entities(pg, server, OTHER)
    expect(pg.locator("#entities")).to_contain_text("No entities")
    expect(pg.locator("#entities tr[data-entity-id]")).to_have_count(0)
    assert page.errors == [], page.errors
