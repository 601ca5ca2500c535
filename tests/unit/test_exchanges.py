"""Exchanges (two neighbouring user turns): extraction, fused recall, merging, cascades."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone

import pytest

from strata.extract.base import Candidate
from strata.extract.exchanges import EXCHANGE, exchange_candidates
from strata.extract.rules import RuleExtractor
from strata.extract.worker import ExtractionWorker, LongTermWriter
from strata.layers.memories import LongTermMemory
from strata.layers.summarize import RuleSummarizer
from strata.models import (
    Collection,
    MemoryKind,
    Provenance,
    RecallRequest,
    RecordFilter,
    Role,
    Scope,
    SearchHit,
    StoredRecord,
    Turn,
)
from strata.recall.granularity import fuse_granularities
from strata.recall.recipes import RECIPES, without
from strata.recall.service import RecallService
from strata.recall.stages import Stage
from strata.settings import Settings
from strata.shard.service import SessionShardService
from strata.stores.embedders import HashEmbedder
from strata.stores.redis import RedisStore
from strata.testing.fake_vectors import FakeVectorStore

EMB = HashEmbedder(64)
U = Scope(tenant="t", user="u")
ONLY_EXCHANGES = RecordFilter(payload_equals={"metadata.type": EXCHANGE})


def turn(n: int, role: str, text: str, session: str = "s1") -> Turn:
    return Turn(turn_id=f"{session}:{n}", session_id=session, user_id="u", role=Role(role),
                content=text,
                created_at=datetime(2023, 5, 8, tzinfo=timezone.utc))


def test_pairs_consecutive_user_turns_per_session_and_skips_the_assistant() -> None:
    turns = [turn(1, "user", "Did you go to the support group?"),
             turn(2, "assistant", "I am only an assistant guess"),
             turn(3, "user", "Yes, last Friday, it was great."),
             turn(1, "user", "Another session starts here", session="s2"),
             turn(4, "user", "And the parade was fun too.")]
    got = exchange_candidates(turns)
    assert [c.provenance.turn_ids for c in got] == [["s1:1", "s1:3"], ["s1:3", "s1:4"]]
    assert all("assistant" not in c.text for c in got)
    assert got[0].parts == ["Did you go to the support group?", "Yes, last Friday, it was great."]


@pytest.fixture
def written(redis_store: RedisStore) -> tuple[LongTermMemory, FakeVectorStore]:
    """A closed session whose turns were extracted the production way."""
    vectors = FakeVectorStore()
    vectors.ensure_collections(64)
    lt = LongTermMemory(vectors, EMB)
    shard = SessionShardService(0, Settings(), redis_store, RuleSummarizer())
    for text in ["What kind of pottery class did you sign up for last week?",
                 "Wheel throwing on Tuesdays, my first bowl came out lopsided but I love it.",
                 "The weather has been lovely lately and the garden is blooming.",
                 "My card number is 4111 1111 1111 1111 for the booking later today."]:
        shard.append_turn(U, "s1", "user", text)
    shard.close(U, "s1")
    writer = LongTermWriter(lt.facts, lt.episodes)
    ExtractionWorker(redis_store.queues, redis_store.sessions, RuleExtractor(),
                     writer.write, "w").run_once()
    return lt, vectors


def test_exchanges_are_stored_redacted_and_name_their_turns_episodes(written) -> None:  # type: ignore[no-untyped-def]
    _, vectors = written
    exchanges = vectors.query(Collection.EPISODES, U, ONLY_EXCHANGES, 100)
    assert len(exchanges) == 3
    assert not any("4111" in r.text for r in exchanges)
    episode_ids = {r.id for r in vectors.query(Collection.EPISODES, U, RecordFilter(
        payload_not_equals={"metadata.type": EXCHANGE}), 100)}
    first = next(r for r in exchanges if r.payload["provenance"]["turn_ids"] == ["s1:1", "s1:2"])
    assert set(first.payload["metadata"]["members"]) <= episode_ids


def ask(vectors: FakeVectorStore, query: str, recipe: str = "hybrid") -> dict:  # type: ignore[type-arg]
    req = RecallRequest(user_id="u", query=query, top_k=5, layers=["episodes"], debug=True)
    resp = RecallService(vectors).recall(U, req, EMB.encode([query])[0].tolist(),
                                         recipe=RECIPES[recipe])
    return resp.model_dump(mode="json")


def test_a_question_and_its_answer_come_back_as_one_item(written) -> None:  # type: ignore[no-untyped-def]
    _, vectors = written
    resp = ask(vectors, "what pottery class did she sign up for, wheel throwing?")
    top = resp["items"][0]
    assert top["provenance"]["turn_ids"] == ["s1:1", "s1:2"]
    assert top["text"].index("pottery class") < top["text"].index("Wheel throwing")
    parts = resp["debug"]["candidates"][0]["parts"]
    assert {"turn", "exchange", "session", "similarity"} <= parts.keys()
    # the turns-only recipe never merges and never returns an exchange record
    plain = ask(vectors, "what pottery class did she sign up for, wheel throwing?", "turns")
    assert all(len(i["provenance"]["turn_ids"]) == 1 for i in plain["items"])


def test_deleting_an_episode_deletes_the_exchanges_that_repeat_it(written) -> None:  # type: ignore[no-untyped-def]
    lt, vectors = written
    target = next(r for r in vectors.query(Collection.EPISODES, U, RecordFilter(
        payload_not_equals={"metadata.type": EXCHANGE}), 100) if "lopsided" in r.text)
    doomed = lt.delete(U, target.id)
    assert len(doomed) == 3  # the episode and the exchanges before and after it
    left = " ".join(r.text for r in vectors.query(Collection.EPISODES, U, limit=100))
    assert "lopsided" not in left
    assert "lopsided" not in str(ask(vectors, "lopsided bowl wheel throwing"))


def test_the_person_asked_about_comes_first(redis_store: RedisStore) -> None:
    vectors = FakeVectorStore()
    vectors.ensure_collections(64)
    lt = LongTermMemory(vectors, EMB)
    shard = SessionShardService(0, Settings(), redis_store, RuleSummarizer())
    for who, text in [("Melanie", "Melanie: I went camping at the beach with my kids."),
                      ("Caroline", "Caroline: I went camping at the beach with my friends.")]:
        shard.append_turn(U, "s1", "user", text, metadata={"speaker": who})
    shard.close(U, "s1")
    writer = LongTermWriter(lt.facts, lt.episodes)
    ExtractionWorker(redis_store.queues, redis_store.sessions, RuleExtractor(),
                     writer.write, "w").run_once()
    for who in ("Melanie", "Caroline"):
        req = RecallRequest(user_id="u", query=f"Where did {who.lower()} go camping?",
                            layers=["episodes"], debug=True,
                            top_k=1)  # type: ignore[call-arg]
        resp = RecallService(vectors).recall(U, req, EMB.encode([req.query])[0].tolist(),
                                             recipe=RECIPES["hybrid"].model_copy(
                                                 update={"stages": without(Stage.MERGE)}))
        assert resp.items[0].text.startswith(who)
        assert resp.debug is not None and resp.debug["candidates"][0]["parts"]["speaker"] > 0
        assert resp.debug["candidates"][0]["stages"]["speaker_boost"] > 0
        assert "merge" not in resp.debug["stages"]


def test_a_fact_from_a_turn_already_shown_is_not_repeated(written) -> None:  # type: ignore[no-untyped-def]
    lt, vectors = written
    lt.facts.apply(U, Candidate(kind=MemoryKind.FACT, key="hobby.pottery", value="wheel throwing",
                                text="Wheel throwing on Tuesdays", confidence=0.9,
                                provenance=Provenance(session_id="s1", turn_ids=["s1:2"])))
    req = RecallRequest(user_id="u", query="wheel throwing pottery class on Tuesdays", top_k=5,
                        layers=["facts", "episodes"])
    resp = RecallService(vectors).recall(U, req, EMB.encode([req.query])[0].tolist(),
                                         recipe=RECIPES["turns"])
    assert {i.layer for i in resp.items} == {"facts", "episodes"}
    covered: set[str] = set()
    for item in resp.items:  # nothing repeats turns the items before it already showed
        assert not set(item.provenance.turn_ids) <= covered
        covered |= set(item.provenance.turn_ids)


def hit(rid: str, text: str, speaker: str = "", **parts: float) -> SearchHit:
    record = StoredRecord(id=rid, text=text, created_at=1.0, updated_at=1.0, payload={
        "provenance": {"session_id": "s1", "turn_ids": [f"s1:{rid}"]},
        "metadata": {"speaker": speaker}})
    return SearchHit(record=record, score=0.0, parts=parts)


def test_a_turn_with_more_of_the_query_terms_ranks_first() -> None:
    # same raw similarities: the turn that has "class" and "wheel" too beats the one that
    # repeats "pottery"; the speakers' names are not query terms
    query = "Which pottery class did Melanie have, on the wheel?"
    same = {"dense": 0.4, "lexical": 5.0}
    hits = [hit("1", "Melanie: pottery, pottery, I love pottery", "Melanie", **same),
            hit("2", "Melanie: a class on the wheel, pottery", "Melanie", **same)]
    out = fuse_granularities(hits, [], lambda ids: [], query, RECIPES["hybrid"])
    assert [h.record.id for h in out] == ["2", "1"]
    assert out[0].turn is not None and out[1].turn is not None
    assert out[0].turn.coverage == 1.0  # pottery, class, wheel (Melanie is the speaker)
    assert out[1].turn.coverage == 1 / 3
    assert out[0].turn.term("coverage") == RECIPES["hybrid"].coverage_weight
    plain = fuse_granularities(hits, [], lambda ids: [], query, RECIPES["turns"])
    assert plain[0].score == plain[1].score  # the turns-only recipe leaves coverage out
    assert all(h.turn is not None and h.turn.term("coverage") is None for h in plain)


def test_turns_found_only_through_an_exchange_are_scored_on_both_sides() -> None:
    exchange = hit("x", "Melanie: pottery class?\nCaroline: the wheel one", dense=0.5,
                   lexical=4.0)
    exchange.record.payload["metadata"] = {"type": EXCHANGE, "members": ["1", "2"]}
    asked: list[list[str]] = []

    def fetch(ids: list[str]) -> list[SearchHit]:
        asked.append(ids)
        return [hit("1", "Melanie: pottery class?", "Melanie", dense=0.3, lexical=3.0),
                hit("2", "Caroline: the wheel one", "Caroline", dense=0.2, lexical=0.0)]

    out = fuse_granularities([], [exchange], fetch, "pottery class wheel", RECIPES["hybrid"])
    assert asked == [["1", "2"]]
    first = next(h for h in out if h.record.id == "1")
    assert first.turn is not None and first.turn.own > 0.5 * 0.3  # its BM25 counts too


def test_late_interaction_encodes_each_turn_once_and_scores_exchanges_as_unions() -> None:
    # per-query-token maxima: turn 1 matches the first query token, turn 2 the second
    table = {"Melanie: pottery class?": [0.9, 0.1], "Caroline: the wheel one": [0.2, 0.8],
             "Melanie: something else": [0.3, 0.3]}
    calls: list[list[str]] = []

    def late(query: str, texts: Sequence[str]) -> list[list[float]]:
        calls.append(list(texts))
        return [table[t] for t in texts]

    exchange = hit("x", "Melanie: pottery class?\nCaroline: the wheel one", dense=0.1,
                   lexical=0.0)
    exchange.record.payload["metadata"] = {"type": EXCHANGE, "members": ["1", "2"]}
    turns = [hit("1", "Melanie: pottery class?", "Melanie", dense=0.1, lexical=0.0),
             hit("2", "Caroline: the wheel one", "Caroline", dense=0.1, lexical=0.0),
             hit("3", "Melanie: something else", "Melanie", dense=0.9, lexical=0.0)]
    recipe = RECIPES["hybrid"].model_copy(update={"stages": without(Stage.MERGE,
                                                                    Stage.SESSION)})
    out = fuse_granularities(turns, [exchange], lambda ids: [], "pottery wheel", recipe, late)
    assert calls == [[t.record.text for t in turns]]  # the exchange text is not encoded
    by_id = {h.record.id: h for h in out}
    first = by_id["1"].turn
    assert first is not None and first.late == pytest.approx(0.5)
    assert first.exchange == pytest.approx(0.8 * 0.85)  # union: mean(.9, .8)
    # the pooled cosine favoured turn 3; token-level matching puts the pair's turns first
    assert [h.record.id for h in out][-1] == "3"
    pooled = fuse_granularities(turns, [exchange], lambda ids: [], "pottery wheel",
                                recipe.model_copy(update={"stages": without(
                                    Stage.MERGE, Stage.SESSION, Stage.LATE_INTERACTION)}),
                                late)
    assert pooled[0].record.id == "3" and pooled[0].turn is not None
    assert pooled[0].turn.late is None
    # only the shortlist (the first stage's best) is encoded and returned
    calls.clear()
    short = fuse_granularities(turns, [exchange], lambda ids: [], "pottery wheel",
                               recipe.model_copy(update={"late_candidates": 1}), late)
    assert calls == [["Melanie: something else"]]
    assert [h.record.id for h in short] == ["3"]


def test_a_turn_that_tells_outranks_one_that_asks_with_the_same_words() -> None:
    query = "How long has Melanie been practicing art?"
    same = {"dense": 0.5, "lexical": 4.0}
    hits = [hit("ask", "Melanie: Wow! How long have you been practicing art?", "Melanie",
                **same),
            hit("tell", "Melanie: Practicing art for a long time, seven years now. It is calming.",
                "Melanie", **same)]
    out = fuse_granularities(hits, [], lambda ids: [], query, RECIPES["hybrid"])
    assert [h.record.id for h in out] == ["tell", "ask"]
    # the penalty alone: the telling turn's "seven years" would also get the answer boost
    assert out[0].turn is not None
    assert out[0].turn.term("answer_boost") == RECIPES["hybrid"].answer_boost
    neutral = RECIPES["hybrid"].model_copy(update={"stages": without(
        Stage.QUESTION_PENALTY, Stage.ANSWER_BOOST)})
    plain = fuse_granularities(hits, [], lambda ids: [], query, neutral)
    assert plain[0].score == plain[1].score


def test_a_turn_between_two_close_neighbours_is_shown_with_the_one_after_it() -> None:
    before = hit("1", "Melanie: pottery is calming", "Melanie", dense=0.5, lexical=4.0)
    middle = hit("2", "Caroline: pottery sounds lovely, what did you make?", "Caroline",
                 dense=0.55, lexical=4.0)
    after = hit("3", "Melanie: pottery bowl with a flower design", "Melanie", dense=0.45,
                lexical=4.0)
    exchanges = []
    for first, second in ((before, middle), (middle, after)):
        pair = hit(f"x{first.record.id}", f"{first.record.text}\n{second.record.text}",
                   dense=0.5, lexical=4.0)
        pair.record.payload["metadata"] = {"type": EXCHANGE,
                                           "members": [first.record.id, second.record.id]}
        exchanges.append(pair)
    recipe = RECIPES["hybrid"].model_copy(update={"neighbour_ratio": 0.5,
                                                  "question_penalty": 0.0})
    out = fuse_granularities([before, middle, after], exchanges, lambda ids: [], "pottery",
                             recipe)
    assert out[0].record.id == "2"
    assert out[0].record.payload["provenance"]["turn_ids"] == ["s1:2", "s1:3"]
    previous = recipe.model_copy(update={"neighbour_side": -1})
    out = fuse_granularities([before, middle, after], exchanges, lambda ids: [], "pottery",
                             previous)
    assert out[0].record.payload["provenance"]["turn_ids"] == ["s1:1", "s1:2"]
