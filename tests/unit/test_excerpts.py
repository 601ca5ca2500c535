"""Excerpts: top_k items share the budget; a cut item keeps its sentences that matter."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from strata.layers.memories import LongTermMemory
from strata.layers.memory_models import MemoryCreate
from strata.layers.summarize import RuleSummarizer
from strata.models import MemoryKind, RecallRequest, Scope
from strata.recall.context import line_cost
from strata.recall.excerpts import GAP, Excerpt, share_budget
from strata.recall.service import RecallService
from strata.settings import Settings
from strata.shard.service import SessionShardService
from strata.stores.embedders import HashEmbedder
from strata.stores.lexical import tokenize
from strata.stores.redis import RedisStore
from strata.testing.fake_vectors import FakeVectorStore
from strata.tokens import count_tokens

EMB = HashEmbedder(64)
U = Scope(tenant="acme", user="u")
HEAD = "[episode 3 Jul 2023] "
LONG = ("Melanie: Wow, Caroline! That's great to hear. I just signed up for a pottery class "
        "yesterday. It's like therapy for me, letting me express myself and get creative. "
        "How have you been lately? [shares a photo: a bowl with a black and white flower "
        "design]")


def excerpt(text: str, query: str, cuttable: bool = True, turns: bool = False,
            sources: frozenset[object] = frozenset()) -> Excerpt:
    return Excerpt(HEAD, text, set(tokenize(query)), tokenize, cuttable=cuttable, turns=turns,
                   sources=sources)


def test_items_that_fit_whole_stay_whole() -> None:
    items = [excerpt(LONG, "pottery"), excerpt("Caroline: I started the piano.", "pottery")]
    room = sum(line_cost(e.whole) for e in items)
    assert share_budget(items, room, line_cost, 10) == [e.whole for e in items]


def test_a_cut_keeps_the_sentence_with_the_query_terms_in_order() -> None:
    cut = excerpt(LONG, "When did Melanie sign up for a pottery class?").fit(30, line_cost)
    assert line_cost(cut) <= 30
    assert cut.startswith(HEAD + "Melanie: ")
    assert "I just signed up for a pottery class yesterday." in cut
    assert "How have you been lately?" not in cut and GAP in cut


def test_a_cut_of_two_turns_keeps_a_sentence_of_each() -> None:
    pair = excerpt(LONG + "\nCaroline: Pottery sounds lovely. I play the piano. It calms me.",
                   "piano", turns=True)
    cut = pair.fit(0, line_cost)  # the minimum
    lines = cut[len(HEAD):].split("\n")
    assert [ln.split(":")[0] for ln in lines] == ["Melanie", "Caroline"]
    assert "I play the piano." in lines[1]


def test_the_top_k_fit_where_whole_items_would_not() -> None:
    items = [excerpt(LONG, "pottery class") for _ in range(10)]
    room = 5 * line_cost(LONG + HEAD)  # half of them whole
    lines = share_budget(items, room, line_cost, 10)
    assert all(line is not None for line in lines)
    assert sum(line_cost(line) for line in lines if line) <= room
    assert lines[0] == items[0].whole  # the best item first gets what it needs
    assert all("pottery class" in (line or "") for line in lines)


def test_an_uncuttable_item_is_whole_or_the_lowest_ranked_are_left_out() -> None:
    note = excerpt(LONG + "\n[the user's correction 1 Aug 2023] It was a ceramics class.",
                   "pottery", cuttable=False)
    assert note.fit(0, line_cost) == note.whole
    lines = share_budget([note, excerpt(LONG, "pottery")], line_cost(note.whole) + 5,
                         line_cost, 10)
    assert lines == [note.whole, None]


def test_an_item_too_long_even_cut_is_passed_over_not_the_ones_after_it() -> None:
    unbroken = excerpt("Melanie: " + " ".join(f"pottery word{i}" for i in range(120)),
                       "pottery")  # no sentence to cut at
    short = [excerpt(f"Caroline: I tried pottery {n} times.", "pottery") for n in range(4)]
    lines = share_budget([unbroken, *short], 100, line_cost, 5)
    assert lines[0] is None and all(line is not None for line in lines[1:])


def test_an_item_from_turns_a_placed_item_shows_is_left_out_unless_that_one_was_not() -> None:
    pair = excerpt(LONG + "\nCaroline: Lovely.", "pottery", turns=True,
                   sources=frozenset({"s1:1", "s1:2"}))
    again = excerpt("Melanie: I signed up for a pottery class.", "pottery",
                    sources=frozenset({"s1:1"}))
    assert share_budget([pair, again], 1000, line_cost, 10) == [pair.whole, None]
    unbroken = excerpt("Melanie: " + " ".join(f"pottery word{i}" for i in range(120)),
                       "pottery", sources=frozenset({"s1:1"}))  # too long: passed over
    assert share_budget([unbroken, again], 60, line_cost, 10) == [None, again.whole]


def test_a_turn_whose_only_words_are_an_ellipsis_is_still_shown() -> None:
    pair = excerpt("Melanie: I went to pottery class. It was long. Very long indeed.\n"
                   "Caroline: …", "pottery", turns=True)
    assert pair.fit(0, line_cost).endswith("\nCaroline: …")


def test_chinese_sentences_are_cut_at_their_stops() -> None:
    text = "我住在北京。上个月我搬到上海了！你最近怎么样？我们下周见面吧。"
    cut = excerpt(text, "搬到哪里了").fit(12, line_cost)
    assert "上个月我搬到上海了！" in cut and "你最近怎么样？" not in cut


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([LONG, "Caroline: Sure.", "Nate: I played chess. We won 3.5 "
                                 "games. It was fun!", "Gina: 我的店开张了。很开心！"]),
                min_size=1, max_size=12),
       st.integers(min_value=0, max_value=400), st.integers(min_value=1, max_value=12))
def test_the_room_and_the_count_always_hold(texts: list[str], room: int, count: int) -> None:
    lines = share_budget([excerpt(t, "chess pottery 店") for t in texts], room, line_cost,
                         count)
    placed = [line for line in lines if line is not None]
    assert len(lines) == len(texts) and len(placed) <= count
    assert sum(map(line_cost, placed)) <= room
    if line_cost(excerpt(texts[0], "chess pottery 店").fit(0, line_cost)) <= room:
        assert lines[0] is not None  # the best item is in whenever its shortest cut fits


def test_recall_fills_top_k_from_long_memories_within_the_budget(
        redis_store: RedisStore) -> None:
    vectors = FakeVectorStore()
    vectors.ensure_collections(64)
    shard = SessionShardService(0, Settings(), redis_store, RuleSummarizer(),
                                longterm=lambda: LongTermMemory(vectors, EMB))
    for text in (
            "The pottery class on Monday was about glazes. My hands were blue for hours "
            "afterwards, and the cat would not stop sniffing them. Anyway, how are you?",
            "Our pottery class moved to the old bakery in Porto. The ovens there are huge, the "
            "rent is cheap, and there is parking for everyone. Did I tell you that already?",
            "I paid 120 euros for ten weeks of pottery class. My sister thinks that is a lot "
            "of money for bowls nobody uses. She may be right, but I love it.",
            "Gave my first pottery class piece to grandma yesterday. She cried a little and "
            "put it on the shelf next to grandpa's photo. That meant so much to me.",
            "The teacher of the pottery class is a retired engineer named Bruno. He measures "
            "everything twice and laughs at his own jokes. We all adore him.",
            "Skipped pottery class this week because of the storm. The trains were cancelled "
            "and the roads flooded near the river. Hopefully next week works."):
        shard.create_memory(U, MemoryCreate(kind=MemoryKind.EPISODE, text=text))
    query = "pottery class"
    request = RecallRequest(user_id="u", query=query, layers=["episodes"], top_k=6,
                            budget_tokens=150)
    resp = RecallService(vectors).recall(U, request, EMB.encode([query])[0].tolist())
    assert count_tokens(resp.context) <= 150
    assert len(resp.items) == 6  # three whole ones would have filled the budget
    assert resp.context.count("pottery class") == 6 and GAP in resp.context
