"""The memory inspector in a real browser: log in, find a memory written through the API, edit
it, see the edit in a recall, delete it (confirmed), see it gone from the list and from recall;
knowledge and queue views; a screenshot of every main view; nothing of another tenant shown.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect
from ui_harness import Strata, Watched

# the tiers it needs: Chromium on a live Strata (conftest's `server`: Ray, embedded Redis)
pytestmark = [pytest.mark.browser, pytest.mark.ray, pytest.mark.redis]

ADMIN, AGENT, OTHER = "acme-admin-key", "acme-agent-key", "globex-admin-key"
PLANNER, COACH = "acme-planner-key", "acme-coach-key"
POLICY_V1 = ("Returns are accepted within 14 days of delivery if the item is unused. " * 5 +
             "\n\n" + "Express shipping costs 9 euros and arrives the next day. " * 5)
POLICY_V2 = POLICY_V1.replace("14 days", "30 days")


def arrange(server: Strata) -> str:
    """Through the API: a fact of ann (acme), one of zed (globex), a versioned document."""
    made = server.call("POST", "/v1/users/ann/memories", ADMIN, {
        "kind": "fact", "key": "favourite_drink", "value": "green tea",
        "text": "My favourite drink is green tea", "source": "user_stated"})
    assert made.status_code == 200, made.text
    server.call("POST", "/v1/users/ann/memories", ADMIN, {
        "kind": "episode", "text": "Ann planned a cycling trip to Porto in May"})
    server.call("POST", "/v1/users/zed/memories", OTHER, {
        "kind": "fact", "key": "favourite_drink", "value": "globex secret sauce"})
    for text in (POLICY_V1, POLICY_V2):
        imported = server.call("POST", "/v1/knowledge/documents", ADMIN, {
            "documents": [{"doc_id": "shop/returns", "title": "Returns policy", "text": text}]})
        assert imported.status_code == 200, imported.text
    server.call("POST", "/v1/sessions/s1/turns", ADMIN,
                {"user_id": "ann", "role": "user", "content": "I moved to Lisbon last year"})
    server.call("POST", "/v1/sessions/s1/close", ADMIN, {"user_id": "ann"})
    return str(made.json()["memory"]["id"])


def log_in(page: Page, server: Strata, key: str) -> None:
    page.goto(f"{server.base}/ui/")
    page.fill("#api-key", key)
    page.click("#login-button")
    expect(page.locator("#app")).to_be_visible()


def pick(page: Page, user: str) -> None:
    page.select_option("#user-select", user)
    expect(page.locator("#status-line")).to_have_text(re.compile(rf"^\d+ memor(y|ies) of {user}$"))


def recall(page: Page, query: str) -> None:
    page.click(".tab[data-view=recall]")
    page.fill("#recall-query", query)
    page.click("#recall-run")
    expect(page.locator("#recall-context")).to_be_visible()


def test_find_edit_recall_delete_in_the_browser(server: Strata, page: Watched,
                                                screenshots: Path) -> None:
    fact_id = arrange(server)
    pg = page.page

    # login: a wrong key is refused and shows nothing
    pg.goto(f"{server.base}/ui/")
    expect(pg.locator("#api-key")).to_be_visible()
    expect(pg.locator("#logout")).to_be_hidden()
    pg.screenshot(path=screenshots / "1-login.png")
    pg.fill("#api-key", "not-a-key")
    pg.click("#login-button")
    expect(pg.locator("#login-error")).to_contain_text("refused")
    expect(pg.locator("#app")).to_be_hidden()
    log_in(pg, server, ADMIN)
    expect(pg.locator("#who-tenant")).to_have_text("acme")

    # the user list is the tenant's: ann, never globex's zed
    expect(pg.locator("#user-select option[value=ann]")).to_have_count(1)
    expect(pg.locator("#user-select option[value=zed]")).to_have_count(0)

    # the memory written through the API, with status, confidence, source, provenance
    pick(pg, "ann")
    row = pg.locator(f"#memories tr[data-memory-id='{fact_id}']")
    expect(row).to_contain_text("green tea")
    expect(row.locator(".badge")).to_have_text("active")
    expect(row).to_contain_text("user_stated")
    expect(pg.locator("#memories")).to_contain_text("cycling trip to Porto")
    pg.screenshot(path=screenshots / "2-memories.png", full_page=True)

    # edit: a fact's new value becomes a new version; the old one is superseded
    row.get_by_role("button", name="Edit").click()
    expect(pg.locator("#edit-dialog")).to_be_visible()
    pg.fill("#edit-value", "black coffee")
    pg.click("#edit-save")
    expect(pg.locator("#edit-dialog")).to_be_hidden()
    expect(row.locator(".badge")).to_have_text("superseded")
    current = pg.locator("#memories tr[data-status=active]", has_text="black coffee")
    expect(current).to_have_count(1)
    expect(current).to_contain_text("My favourite drink is black coffee")
    new_id = current.get_attribute("data-memory-id")
    assert new_id and new_id != fact_id

    # history: both versions
    current.get_by_role("button", name="History").click()
    versions = pg.locator("#history tbody tr")
    expect(versions).to_have_count(2)
    expect(pg.locator("#history")).to_contain_text("green tea")
    expect(pg.locator("#history")).to_contain_text("black coffee")
    pg.screenshot(path=screenshots / "3-history.png", full_page=True)
    pg.click("#history-back")

    # the edit is what recall now returns
    recall(pg, "what is my favourite drink?")
    context = pg.locator("#recall-context")
    expect(context).to_contain_text("black coffee")
    expect(context).not_to_contain_text("green tea")
    expect(pg.locator("dd[data-field=route]")).to_have_text("personal")
    candidate = pg.locator(f"tr[data-candidate-id='{new_id}']")
    expect(candidate).to_have_class("included")
    expect(pg.locator(f"tr[data-item-id='{new_id}']")).to_contain_text("session edit-")
    expect(pg.locator("#recall-candidates thead")).to_contain_text("similarity")
    pg.screenshot(path=screenshots / "4-recall.png", full_page=True)

    # delete: cancelling keeps it; confirming deletes every version
    pg.click(".tab[data-view=memories]")
    current = pg.locator(f"#memories tr[data-memory-id='{new_id}']")
    current.get_by_role("button", name="Delete").click()
    expect(pg.locator("#confirm-dialog")).to_be_visible()
    pg.click("#confirm-cancel")
    expect(pg.locator("#confirm-dialog")).to_be_hidden()
    expect(current).to_have_count(1)
    current.get_by_role("button", name="Delete").click()
    expect(pg.locator("#confirm-text")).to_contain_text("black coffee")
    pg.click("#confirm-delete")
    expect(pg.locator(f"#memories tr[data-memory-id='{new_id}']")).to_have_count(0)
    expect(pg.locator(f"#memories tr[data-memory-id='{fact_id}']")).to_have_count(0)
    expect(pg.locator("#memories")).not_to_contain_text("black coffee")
    expect(pg.locator("#memories")).to_contain_text("cycling trip to Porto")
    listed = server.call("GET", "/v1/users/ann/memories?kind=fact", ADMIN).json()["memories"]
    assert all(m["key"] != "favourite_drink" for m in listed)

    # and recall no longer has it
    recall(pg, "what is my favourite drink?")
    expect(pg.locator("#recall-context")).not_to_contain_text("black coffee")
    expect(pg.locator(f"tr[data-candidate-id='{new_id}']")).to_have_count(0)
    expect(pg.locator("#recall-result")).not_to_contain_text("green tea")

    # a status edit (active → cold), and the status filter
    pg.click(".tab[data-view=memories]")
    trip = pg.locator("#memories tr", has_text="cycling trip to Porto")
    trip.get_by_role("button", name="Edit").click()
    pg.select_option("#edit-status", "cold")
    pg.click("#edit-save")
    expect(trip.locator(".badge")).to_have_text("cold")
    pg.select_option("#filter-status", "cold")
    pg.click("#memory-filters button[type=submit]")
    expect(pg.locator("#status-line")).to_have_text("1 memory of ann")
    expect(pg.locator("#memories tbody tr")).to_have_count(1)

    # knowledge: the document with both versions and their statuses
    pg.click(".tab[data-view=knowledge]")
    doc = pg.locator("tr[data-doc-id='shop/returns']")
    expect(doc).to_contain_text("1, 2")
    expect(doc).to_contain_text("deprecated")
    doc.get_by_role("button", name="shop/returns").click()
    expect(pg.locator("#knowledge-doc")).to_contain_text("30 days")
    pg.screenshot(path=screenshots / "5-knowledge.png", full_page=True)

    # queues: depth and lag per long-term queue, all tenants' totals for an admin key
    pg.click(".tab[data-view=queues]")
    expect(pg.locator("tr[data-queue]")).to_have_count(2)
    expect(pg.locator("#queues thead")).to_contain_text("backlog (all)")
    pg.screenshot(path=screenshots / "6-queues.png", full_page=True)

    assert page.errors == []  # no script error, no CSP violation
    assert all(u.startswith(server.base) for u in page.urls), "the page left its origin"


def test_another_tenant_sees_only_its_own(server: Strata, page: Watched) -> None:
    server.call("POST", "/v1/users/zed/memories", OTHER, {
        "kind": "fact", "key": "home", "value": "Springfield"})
    server.call("POST", "/v1/users/zed/memories", OTHER, {
        "kind": "episode", "text": "<img src=x onerror=alert(1)> zed <b>shouted</b>"})
    server.call("POST", "/v1/users/ann/memories", ADMIN, {
        "kind": "fact", "key": "home", "value": "Lisbon"})
    pg = page.page
    log_in(pg, server, OTHER)
    expect(pg.locator("#who-tenant")).to_have_text("globex")
    expect(pg.locator("#user-select option[value=zed]")).to_have_count(1)
    expect(pg.locator("#user-select option[value=ann]")).to_have_count(0)
    # stored text is shown as text, never run as markup
    pick(pg, "zed")
    expect(pg.locator("#memories")).to_contain_text("<img src=x onerror=alert(1)> zed <b>")
    expect(pg.locator("#memories img, #memories td b", has_text="shouted")).to_have_count(0)
    expect(pg.locator("#memories img")).to_have_count(0)
    # typing another tenant's user id resolves inside the key's tenant: nothing of acme's ann
    pg.fill("#user-input", "ann")
    pg.click("#user-go")
    expect(pg.locator("#status-line")).to_have_text("0 memories of ann")
    pg.click(".tab[data-view=knowledge]")
    expect(pg.locator("#knowledge")).to_contain_text("No documents")
    assert page.errors == []


def test_agent_key_sees_tenant_queues_only_and_logout_forgets_the_key(
        server: Strata, page: Watched) -> None:
    pg = page.page
    log_in(pg, server, AGENT)
    pg.click(".tab[data-view=queues]")
    expect(pg.locator("tr[data-queue]")).to_have_count(2)
    expect(pg.locator("#queues thead")).not_to_contain_text("backlog (all)")
    pg.click("#logout")
    expect(pg.locator("#login-view")).to_be_visible()
    expect(pg.locator("#logout")).to_be_hidden()
    assert pg.evaluate("sessionStorage.getItem('strata.apiKey')") is None
    pg.reload()
    expect(pg.locator("#app")).to_be_hidden()


def test_context_and_visibility_are_shown_and_edited(server: Strata, page: Watched,
                                                     screenshots: Path) -> None:
    """A memory's project / business line and who sees it, in the list and in the edit
    dialog: the planner shares its private note with the coach, the coach then sees it."""
    note = server.call("POST", "/v1/users/max/memories", PLANNER, {
        "kind": "episode", "text": "Max's knee hurts after long runs",
        "visibility": "private", "context": "marathon"})
    assert note.status_code == 200, note.text
    note_id = note.json()["memory"]["id"]
    server.call("POST", "/v1/users/max/memories", PLANNER, {
        "kind": "episode", "text": "Max runs every morning"})
    pg = page.page

    log_in(pg, server, COACH)  # the other agent: the private note is not there
    expect(pg.locator("#who-role")).to_have_text("agent coach")
    pick(pg, "max")
    expect(pg.locator("#memories")).to_contain_text("Max runs every morning")
    expect(pg.locator(f"#memories tr[data-memory-id='{note_id}']")).to_have_count(0)
    pg.click("#logout")

    log_in(pg, server, PLANNER)
    pick(pg, "max")
    row = pg.locator(f"#memories tr[data-memory-id='{note_id}']")
    expect(row.locator("td.context")).to_have_text("marathon")
    expect(row.locator("td.visibility")).to_have_text("private · planner")
    pg.screenshot(path=screenshots / "7-visibility.png", full_page=True)
    row.get_by_role("button", name="Edit").click()
    expect(pg.locator("#edit-context")).to_have_value("marathon")
    expect(pg.locator("#edit-visibility")).to_have_value("private")
    pg.fill("#edit-context", "Berlin Marathon")
    pg.select_option("#edit-visibility", "agents")
    pg.fill("#edit-shared-with", "coach")
    pg.click("#edit-save")
    expect(pg.locator("#edit-dialog")).to_be_hidden()
    expect(row.locator("td.context")).to_have_text("berlin-marathon")
    expect(row.locator("td.visibility")).to_have_text("agents: planner, coach")
    # filtered by context
    pg.fill("#filter-context", "berlin-marathon")
    pg.click("#memory-filters button[type=submit]")
    expect(pg.locator("#status-line")).to_have_text("1 memory of max")
    pg.click("#logout")

    log_in(pg, server, COACH)  # now shared with the coach, who cannot change who sees it
    pick(pg, "max")
    row = pg.locator(f"#memories tr[data-memory-id='{note_id}']")
    expect(row).to_contain_text("knee hurts")
    row.get_by_role("button", name="Edit").click()
    pg.select_option("#edit-visibility", "shared")
    pg.click("#edit-save")
    expect(pg.locator("#edit-error")).to_contain_text("only the agent that learned")
    assert page.errors == []
