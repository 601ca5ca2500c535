"""Near-identical events aggregate into one episode (seed 002 §5.5), with the packaged
MiniLM: in Chinese its cosine alone cannot tell a rephrasing from an unrelated sentence."""

from __future__ import annotations

from datetime import timedelta

import pytest

from strata.extract.base import Candidate
from strata.extract.exchanges import EXCHANGE
from strata.layers.episodic import EpisodeStore
from strata.models import Collection, MemoryKind, MemoryStatus, Provenance, Scope, utcnow
from strata.stores.embedders import MiniLMEmbedder
from strata.testing.fake_vectors import FakeVectorStore

U = Scope(tenant="t", user="u")


@pytest.fixture(scope="module")
def embedder() -> MiniLMEmbedder:
    return MiniLMEmbedder()


@pytest.fixture
def episodes(embedder: MiniLMEmbedder) -> EpisodeStore:
    store = FakeVectorStore()
    store.ensure_collections(embedder.dim)
    return EpisodeStore(store, embedder)


def event(text: str, n: int, kind: str = "issue", days_ago: float = 0) -> Candidate:
    return Candidate(kind=MemoryKind.EPISODE, text=text, episode_type=kind,
                     provenance=Provenance(session_id=f"s{n}", turn_ids=[f"s{n}:1"]),
                     event_time=utcnow() - timedelta(days=days_ago))


def actions(episodes: EpisodeStore, texts: list[str], **kw: object) -> list[str]:
    return [episodes.apply(U, event(t, n, **kw)).action  # type: ignore[arg-type]
            for n, t in enumerate(texts)]


def test_three_chinese_complaints_in_other_words_are_one_event(episodes: EpisodeStore) -> None:
    assert actions(episodes, ["页面又卡顿了，点什么都没反应。", "页面卡顿，点了半天没反应。",
                              "页面还是卡顿，点什么都没有反应。"]) == ["insert", "merge", "merge"]
    rows = episodes._vectors.query(Collection.EPISODES, U, None, 10)  # type: ignore[arg-type]
    assert len(rows) == 1 and rows[0].payload["metadata"]["count"] == 3


@pytest.mark.parametrize(("first", "second"), [
    ("页面卡顿，点了半天没反应。", "我今天去超市买了苹果和香蕉。"),
    ("I love walking my dog in the park.", "I love walking my cat in the park."),
    ("The app crashed when I opened the camera.", "The app crashed when I paid the bill."),
])
def test_different_events_stay_apart(episodes: EpisodeStore, first: str, second: str) -> None:
    assert actions(episodes, [first, second], kind="event") == ["insert", "insert"]


def test_exchanges_do_not_hide_the_episode_to_merge_with(episodes: EpisodeStore) -> None:
    episodes.apply(U, event("The checkout page is lagging again.", 0))
    for n in range(1, 9):  # exchanges repeating the words crowd the nearest hits
        episodes.apply(U, event("The checkout page is lagging again. Yes it is.", 10 + n)
                       .model_copy(update={"episode_type": EXCHANGE}))
    assert episodes.apply(U, event("The checkout page is lagging again!", 1)).action == "merge"


def test_a_cold_event_that_happens_again_is_active_again(episodes: EpisodeStore) -> None:
    first = episodes.apply(U, event("The checkout page is lagging again.", 0, days_ago=2)).item
    rows = episodes._vectors.get(Collection.EPISODES, U, [first.id])
    cold = rows[0].model_copy(update={"status": MemoryStatus.COLD.value})
    episodes._vectors.upsert(Collection.EPISODES, U, [cold])
    merged = episodes.apply(U, event("The checkout page is lagging again!", 1))
    assert merged.action == "merge" and merged.item.status is MemoryStatus.ACTIVE
