"""Write-time enrichment: a chat model's keywords for each turn-level episode, embedded and
indexed with its text, never shown as said; off by default, and a failed call writes the
episode as without it."""

from __future__ import annotations

import json

import httpx
import numpy as np
import pytest

from strata.extract.base import Candidate
from strata.extract.enrich import SHOTS, SYSTEM, LLMKeywords, enrich, make_enricher
from strata.extract.exchanges import EXCHANGE
from strata.extract.rules import RuleExtractor
from strata.extract.worker import ExtractionWorker, LongTermWriter, enriched
from strata.layers.episodic import EpisodeStore
from strata.layers.memories import LongTermMemory
from strata.layers.memory_models import MemoryPatch
from strata.layers.semantic import FactStore
from strata.layers.summarize import RuleSummarizer
from strata.models import KEYWORDS, Collection, MemoryKind, Provenance, Scope, embedded_text
from strata.settings import Settings
from strata.shard.service import SessionShardService
from strata.stores.embedders import HashEmbedder
from strata.stores.hot_table import HotTable
from strata.stores.redis import RedisStore
from strata.testing.fake_vectors import FakeVectorStore

U = Scope(tenant="t", user="u")
SAID = "Raj: finally beat Xenoblade on the Switch last night"
WORDS = "video game, gamer, nintendo, console, rpg"


def completion(content: str) -> dict[str, object]:
    return {"id": "c", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": content}}]}


def enricher_with(handler: httpx.MockTransport | None = None, status: int = 200,
                  content: str = WORDS, seen: list[dict[str, object]] | None = None
                  ) -> LLMKeywords:
    def answer(request: httpx.Request) -> httpx.Response:
        if seen is not None:
            seen.append(json.loads(request.content))
        if status != 200:
            return httpx.Response(status, json={"error": "down"})
        return httpx.Response(200, json=completion(content))

    made = make_enricher(Settings(enricher="openai", openai_base_url="http://llm.test/v1",
                                  openai_chat_model="small", openai_retries=0),
                         transport=handler or httpx.MockTransport(answer))
    assert isinstance(made, LLMKeywords)
    return made


class Fixed:
    """An enricher that answers every text with the same words."""

    def __init__(self, words: str = WORDS) -> None:
        self.words = words
        self.asked: list[str] = []

    def keywords(self, text: str) -> str:
        self.asked.append(text)
        return self.words


def episode(text: str = SAID, **extra: object) -> Candidate:
    return Candidate(kind=MemoryKind.EPISODE, text=text,
                     provenance=Provenance(session_id="s", turn_ids=["s:1"]), **extra)


def test_off_by_default() -> None:
    assert make_enricher(Settings()) is None


def test_the_request_holds_the_instructions_the_examples_and_the_text() -> None:
    seen: list[dict[str, object]] = []
    words = enricher_with(content="  video game,\n gamer ", seen=seen).keywords(SAID)
    assert words == "video game, gamer"  # whitespace folded
    [body] = seen
    messages = body["messages"]
    assert isinstance(messages, list)
    assert messages[0] == {"role": "system", "content": SYSTEM}
    assert [m["content"] for m in messages[1:-1]] == [x for shot in SHOTS for x in shot]
    assert messages[-1] == {"role": "user", "content": SAID}
    assert (body["model"], body["temperature"], body["max_tokens"],
            body["frequency_penalty"]) == ("small", 0, 40, 1.0)


def test_a_failed_call_or_an_empty_text_gives_no_keywords() -> None:
    assert enricher_with(status=500).keywords(SAID) == ""
    seen: list[dict[str, object]] = []
    assert enricher_with(seen=seen).keywords("   ") == "" and seen == []


def test_a_long_reply_is_cut() -> None:
    words = enricher_with(content="word, " * 200).keywords(SAID)
    assert 0 < len(words) <= 200


def test_only_turn_level_episodes_are_enriched() -> None:
    fixed = Fixed()
    fact = Candidate(kind=MemoryKind.FACT, text="I live in Leeds", key="location.home",
                     value="Leeds", provenance=Provenance(session_id="s", turn_ids=["s:1"]))
    pair = episode("Raj: hi\nMei: hello", episode_type=EXCHANGE)
    kept = episode("Raj: old", metadata={KEYWORDS: "already"})
    out = enriched(fixed, [fact, pair, episode(), kept])
    assert fixed.asked == [SAID]
    assert [c.metadata.get(KEYWORDS) for c in out] == [None, None, WORDS, "already"]
    assert enrich(fixed, ["a", "b"]) == [WORDS, WORDS]
    assert enriched(Fixed(""), [episode()])[0].metadata.get(KEYWORDS) is None  # none found


def test_an_enriched_episode_embeds_and_indexes_its_keywords_and_keeps_its_text() -> None:
    vectors = FakeVectorStore()
    vectors.ensure_collections(64)
    emb = HashEmbedder(64)
    item = EpisodeStore(vectors, emb).apply(U, enriched(Fixed(), [episode()])[0]).item
    [row] = vectors.query(Collection.EPISODES, U)
    assert row.text == item.text == SAID  # what recall shows is what was said
    assert item.metadata[KEYWORDS] == WORDS
    assert np.allclose(row.vector, emb.encode([f"{SAID}\n{WORDS}"])[0])
    assert not np.allclose(row.vector, emb.encode([SAID])[0])
    assert row.indexed_text == embedded_text(SAID, item.metadata) == f"{SAID}\n{WORDS}"
    # a question's word found only in the keywords reaches it: in the store and the hot table
    assert [h.record.id for h in vectors.search_lexical(Collection.EPISODES, U, "nintendo",
                                                        5)] == [item.id]
    table = HotTable(64)
    table.put(row, row.vector or [], None)
    assert [h.record.id for h in table.search_lexical("nintendo", 5, None)] == [item.id]


def test_editing_the_text_drops_keywords_written_for_the_old_words() -> None:
    vectors = FakeVectorStore()
    vectors.ensure_collections(64)
    emb = HashEmbedder(64)
    layers = LongTermMemory(vectors, emb)
    item = layers.episodes.apply(U, enriched(Fixed(), [episode()])[0]).item
    edited = layers.update(U, item.id, MemoryPatch(text="Raj: finished a novel last night"))
    assert KEYWORDS not in edited.metadata
    [row] = vectors.query(Collection.EPISODES, U)
    assert np.allclose(row.vector, emb.encode(["Raj: finished a novel last night"])[0])


def test_the_worker_writes_keywords_for_the_sessions_turns(redis_store: RedisStore) -> None:
    vectors = FakeVectorStore()
    vectors.ensure_collections(64)
    emb = HashEmbedder(64)
    writer = LongTermWriter(FactStore(vectors, emb), EpisodeStore(vectors, emb))
    shard = SessionShardService(0, Settings(), redis_store, RuleSummarizer())
    shard.append_turn(U, "s1", "user", "Finally beat Xenoblade on the Switch last night!")
    shard.close(U, "s1")
    fixed = Fixed()
    assert ExtractionWorker(redis_store.queues, redis_store.sessions, RuleExtractor(),
                            writer.write, "w1", enricher=fixed).run_once() == 1
    rows = vectors.query(Collection.EPISODES, U)
    enriched_rows = [r for r in rows if r.payload["metadata"].get(KEYWORDS) == WORDS]
    assert enriched_rows and fixed.asked
    assert all("nintendo" not in r.text for r in rows)


@pytest.mark.parametrize("metadata", [{}, {KEYWORDS: ""}, {KEYWORDS: None}, None])
def test_no_keywords_embed_the_text_alone(metadata: object) -> None:
    assert embedded_text(SAID, metadata) == SAID
