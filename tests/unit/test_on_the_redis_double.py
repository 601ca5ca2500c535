"""The Redis ports' consumers run on ``FakeRedis`` as they do on Redis: the shard facade
picks its parts' ports off the double, and the extraction worker takes just the queue and
the session log."""

from __future__ import annotations

from strata.extract.base import Candidate
from strata.extract.rules import RuleExtractor
from strata.extract.worker import GROUP, ExtractionWorker, WriteSummary
from strata.layers.summarize import RuleSummarizer
from strata.models import Scope
from strata.settings import Settings
from strata.shard.service import SessionShardService
from strata.stores.keys import QUEUE_LOW
from strata.testing.fake_redis import FakeRedis

U = Scope(tenant="t", user="u")


def test_a_shard_on_the_double_queues_its_close_and_rebuilds_after_a_restart() -> None:
    double = FakeRedis()
    shard = SessionShardService(0, Settings(), double, RuleSummarizer())
    shard.append_turn(U, "s1", "user", "I'm allergic to peanuts.", turn_id="a")
    shard.append_turn(U, "s1", "assistant", "Noted.")
    restarted = SessionShardService(0, Settings(), double, RuleSummarizer())
    assert restarted.view(U, "s1").turn_count == 2
    assert restarted.append_turn(U, "s1", "user", "again", turn_id="a").duplicate
    assert restarted.close(U, "s1").extraction_job is not None
    assert [p["session_id"] for _, p in double.queues.entries(QUEUE_LOW)] == ["s1"]
    assert restarted.delete_user(U)["session_keys"] == 3  # wal, turn ids, snapshot
    assert double.keys("*t:u*") == ["strata:audit:t:u"]  # only the content-free tombstone


def test_a_dead_workers_job_is_claimed_from_the_doubles_queue() -> None:
    double = FakeRedis()
    shard = SessionShardService(0, Settings(), double, RuleSummarizer())
    shard.append_turn(U, "s1", "user", "My name is Ann Lee.")
    shard.close(U, "s1")
    written: list[list[Candidate]] = []

    def crash(scope: Scope, candidates: list[Candidate]) -> WriteSummary:
        raise RuntimeError("killed mid-job")

    def write(scope: Scope, candidates: list[Candidate]) -> WriteSummary:
        written.append(candidates)
        return WriteSummary()

    ExtractionWorker(double.queues, double.sessions, RuleExtractor(), crash, "dying").run_once()
    assert double.queues.depth(QUEUE_LOW, GROUP).pending == 1
    taker = ExtractionWorker(double.queues, double.sessions, RuleExtractor(), write, "w2",
                             claim_idle_ms=0)
    assert taker.run_once() == 1
    assert any(c.key == "identity.name" for c in written[0])
    assert double.queues.depth(QUEUE_LOW, GROUP).backlog == 0
