"""The inspector's tenant-scoped reports: the user list and the queue backlog (real Redis)."""

from __future__ import annotations

from serve_app.inspector import EXTRACTOR_GROUP, queue_report, tenant_users
from strata.stores.keys import parse_scope_key
from strata.stores.redis import QUEUE_HIGH, QUEUE_LOW, RedisStore


def test_tenant_users_never_lists_another_tenant() -> None:
    registry = [parse_scope_key(k) for k in
                ["acme:ann", "acme:bob", "acme2:eve", "globex:ann", "globex:zed"]]
    assert tenant_users(registry, "acme") == ["ann", "bob"]  # not acme2's eve
    assert tenant_users(registry, "globex", q="ZE") == ["zed"]
    assert tenant_users(registry, "initech") == []


def test_queue_report_counts_only_the_tenant_and_its_lag(redis_store: RedisStore) -> None:
    redis_store.queues.ensure_group(QUEUE_LOW, EXTRACTOR_GROUP)
    first = redis_store.queues.enqueue(QUEUE_LOW, {"type": "extract_session", "tenant": "acme",
                                            "user_id": "ann"})
    redis_store.queues.enqueue(QUEUE_LOW, {"type": "extract_session", "tenant": "acme",
                                    "user_id": "bob"})
    redis_store.queues.enqueue(QUEUE_LOW, {"type": "extract_session", "tenant": "globex",
                                    "user_id": "zed"})
    redis_store.queues.consume(QUEUE_LOW, EXTRACTOR_GROUP, "c1", count=1)  # in flight, not acked
    now = int(first.split("-")[0]) / 1000 + 12.5
    agent = {r["queue"]: r for r in queue_report(redis_store.queues, "acme", False, now_s=now)}
    low = agent[QUEUE_LOW]
    assert low["backlog"] == 2 and low["lag_s"] == 12.5
    assert low["by_user"] == {"ann": 1, "bob": 1} and low["by_type"] == {"extract_session": 2}
    assert "system" not in low and agent[QUEUE_HIGH]["backlog"] == 0
    admin = {r["queue"]: r for r in queue_report(redis_store.queues, "acme", True, now_s=now)}
    assert admin[QUEUE_LOW]["system"] == {"length": 3, "pending": 1, "undelivered": 2,
                                          "backlog": 3, "lag_s": 12.5}
    redis_store.queues.ack(QUEUE_LOW, EXTRACTOR_GROUP, [first])  # acknowledged entries are gone
    after = {r["queue"]: r for r in queue_report(redis_store.queues, "acme", False, now_s=now)}
    assert after[QUEUE_LOW]["by_user"] == {"bob": 1}
