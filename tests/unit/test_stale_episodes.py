"""A change marks the episodes that state the old value stale (#36): their weight drops, so
a present-tense recall ranks them below the current fact, and they stay recallable."""

from __future__ import annotations

from strata.extract.base import Candidate
from strata.extract.rules import RuleExtractor
from strata.layers.episodic import EpisodeStore
from strata.layers.semantic import STALE_WEIGHT, FactStore
from strata.models import Collection, MemoryKind, Role, Scope, Turn
from strata.stores.embedders import HashEmbedder
from strata.testing.fake_vectors import FakeVectorStore

U = Scope(tenant="t", user="u")


def _said(facts: FactStore, episodes: EpisodeStore, text: str, session: str,
          speaker: str | None = None) -> list[Candidate]:
    turn = Turn(turn_id=f"{session}:1", session_id=session, user_id="u", role=Role.USER,
                content=text, metadata={"speaker": speaker} if speaker else {})
    cands = RuleExtractor().extract([turn])
    for cand in cands:
        if cand.kind is MemoryKind.FACT and cand.key:
            facts.apply(U, cand)
        elif cand.kind is MemoryKind.EPISODE:
            episodes.apply(U, cand)
    return cands


def _weights(store: FakeVectorStore) -> dict[str, float]:
    return {r.text: float(r.payload.get("weight", 1.0))
            for r in store.query(Collection.EPISODES, U, None, 100)}


def _stores() -> tuple[FakeVectorStore, FactStore, EpisodeStore]:
    store = FakeVectorStore()
    store.ensure_collections(64)
    return store, FactStore(store, HashEmbedder(64)), EpisodeStore(store, HashEmbedder(64))


def test_a_move_makes_the_old_city_s_episode_stale_and_not_the_move_itself() -> None:
    store, facts, episodes = _stores()
    _said(facts, episodes, "I live in Denver, in a small flat near the park.", "s1")
    _said(facts, episodes, "I had a lovely lunch with my team at the office today.", "s1b")
    _said(facts, episodes, "Big news: I moved from Denver to Austin last month.", "s2")
    weights = _weights(store)
    assert weights["I live in Denver, in a small flat near the park."] == STALE_WEIGHT
    assert weights["Big news: I moved from Denver to Austin last month."] == 1.0
    assert weights["I had a lovely lunch with my team at the office today."] == 1.0
    [old] = [r for r in store.query(Collection.EPISODES, U, None, 100) if "flat" in r.text]
    assert old.payload["metadata"]["stale_key"] == "location.home"


def test_a_chinese_move_makes_the_old_city_s_episode_stale() -> None:
    store, facts, episodes = _stores()
    _said(facts, episodes, "我住在成都，租了一套离公司很近的小房子。", "s1")
    _said(facts, episodes, "跟你说一下，我搬到杭州了。", "s2")
    assert _weights(store)["我住在成都，租了一套离公司很近的小房子。"] == STALE_WEIGHT


def test_another_person_s_episode_is_not_made_stale_by_my_move() -> None:
    store, facts, episodes = _stores()
    _said(facts, episodes, "I live in Denver, in a small flat near the park.", "s1", "Ann")
    _said(facts, episodes, "Denver is where I live too, right by the river.", "s1", "Bob")
    _said(facts, episodes, "I moved to Austin last month, new job and all.", "s2", "Ann")
    weights = _weights(store)
    assert weights["I live in Denver, in a small flat near the park."] == STALE_WEIGHT
    assert weights["Denver is where I live too, right by the river."] == 1.0


def test_without_a_change_nothing_is_stale() -> None:
    store, facts, episodes = _stores()
    _said(facts, episodes, "I live in Denver, in a small flat near the park.", "s1")
    _said(facts, episodes, "I live in Denver and I love the mountains nearby.", "s2")
    assert set(_weights(store).values()) == {1.0}
