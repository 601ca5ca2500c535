"""What a forget refers to, matched by meaning (#36, ``forget_match.by_meaning``): the user's
memories are ranked against the target and the whole turn, and the best is forgotten when it
clearly wins; a topic or a person takes every memory about it. In English by the packaged
MiniLM's cosines and terms, in Chinese by character bigrams. The names-only matcher (the one
before, ``MatchPolicy(meaning=False)``) is the baseline each case is checked against."""

from __future__ import annotations

import pytest

from strata.layers.forget_match import MatchPolicy, Rival, by_meaning, units
from strata.layers.memories import LongTermMemory
from strata.layers.memory_models import MemoryCreate
from strata.layers.summarize import RuleSummarizer
from strata.models import MemoryKind, Scope
from strata.settings import Settings
from strata.shard.service import SessionShardService
from strata.stores.embedders import HashEmbedder
from strata.stores.ports import Embedder
from strata.stores.redis import RedisStore
from strata.testing.fake_vectors import FakeVectorStore

U = Scope(tenant="t", user="u")
EN_OTHERS = ["I adopted a grey cat named Pixel last spring.",
             "My sister Ana lives in Porto and works night shifts as a nurse.",
             "We repainted the kitchen a pale green over the long weekend."]
ZH_OTHERS = ["我去年春天领养了一只叫小灰的猫。", "我姐姐住在杭州，在医院上夜班当护士。",
             "长周末我们把厨房刷成了浅绿色。"]


def memory(embedder: Embedder, texts: list[str], policy: MatchPolicy | None = None
           ) -> tuple[LongTermMemory, dict[str, str]]:
    vectors = FakeVectorStore()
    vectors.ensure_collections(embedder.dim)
    lt = LongTermMemory(vectors, embedder, forget_policy=policy)
    ids = {t: lt.create(U, MemoryCreate(kind=MemoryKind.EPISODE, text=t))[0].id for t in texts}
    return lt, ids


def forgotten(embedder: Embedder, texts: list[str], target: str, said: str,
              extent: str | None = None, policy: MatchPolicy | None = None) -> set[str]:
    """The texts a forget of ``target`` said in ``said`` hides."""
    lt, ids = memory(embedder, texts, policy)
    gone = lt.forget_matching(U, target, said=said, extent=extent)
    return {t for t, i in ids.items() if i in gone}


def both(embedder: Embedder, texts: list[str], target: str, said: str,
         extent: str | None = None) -> tuple[set[str], set[str]]:
    """(by meaning, names only) on fresh memories each."""
    return (forgotten(embedder, texts, target, said, extent),
            forgotten(embedder, texts, target, said, extent, MatchPolicy(meaning=False)))


# -- English (MiniLM) ------------------------------------------------------------------------
def test_en_a_paraphrased_target_is_matched_by_meaning(minilm: Embedder) -> None:
    locker = "I keep my gym locker code in my phone's notes, it's 4411."
    meaning, names = both(minilm, [locker, *EN_OTHERS], "locker combination number",
                          "Can you erase the locker combination number I gave you?")
    assert meaning == {locker}
    assert names == set()  # one of the target's three terms: names alone miss it


def test_en_a_distractor_sharing_one_word_is_not_forgotten(minilm: Embedder) -> None:
    studio = "The pottery studio I go to on Thursdays is on Elm Road."
    address = "My sister's new address in Porto is near the river."
    meaning, _ = both(minilm, [studio, address, *EN_OTHERS], "the address of the pottery studio",
                      "Wipe the address I gave you for the pottery studio.")
    assert meaning == {studio}


def test_en_a_person_takes_every_memory_about_them(minilm: Embedder) -> None:
    nickname = "Jonah called me Beanpole all through college."
    hiking = "Jonah and I are planning a hiking weekend in May."
    texts = [nickname, hiking, *EN_OTHERS]
    said = "Please don't keep anything from my old roommate Jonah anymore."
    meaning = forgotten(minilm, texts, "old roommate Jonah", said, extent="person")
    assert meaning == {nickname, hiking}
    # read as one memory, neither clearly wins: nothing by meaning (names alone: the same)
    assert forgotten(minilm, texts, "old roommate Jonah", said, extent="one") == set()


def test_en_a_topic_takes_every_memory_about_it(minilm: Embedder) -> None:
    flat = "We viewed a two-bedroom apartment on Baker Lane for 1,900 a month."
    agent = "Marta is the letting agent showing us apartments for the apartment hunt."
    texts = [flat, agent, *EN_OTHERS]
    said = "The apartment hunt is over, drop all of it."
    assert forgotten(minilm, texts, "apartment hunt", said, extent="topic") == {flat, agent}


def test_en_nothing_clearly_best_forgets_nothing(minilm: Embedder) -> None:
    assert forgotten(minilm, EN_OTHERS, "my blood pressure numbers",
                     "Toss my blood pressure numbers.") == set()


# -- Chinese (bigrams; the hash embedder: the packaged model cannot read Chinese) -----------
def test_zh_units_are_bigrams_not_single_characters() -> None:
    assert units("我家地址") == {"家地", "地址"}
    assert units("家") == {"家"}


def test_zh_a_paraphrased_target_is_matched() -> None:
    shoes = "我鞋码是四十二。"
    meaning, names = both(HashEmbedder(64), [shoes, *ZH_OTHERS], "着了 怪怪的",
                          "我鞋码别记着了 怪怪的")
    assert meaning == {shoes}
    assert names == set()  # the rules' target holds none of it


def test_zh_a_distractor_sharing_one_character_is_not_forgotten() -> None:
    address = "关于我家地址——我上周跟你说过，在建国路。"
    kitchen = "长周末我们把家里的厨房刷成了浅绿色。"  # 家, but not 地址
    meaning, _ = both(HashEmbedder(64), [address, kitchen, *ZH_OTHERS[:2]], "家 地 址",
                      "我家地址删掉哈")
    assert meaning == {address}


def test_zh_a_person_and_a_topic_take_every_memory_about_them() -> None:
    cousin = ["我表妹下个月去深圳面试。", "我表妹养了一只柯基。"]
    assert forgotten(HashEmbedder(64), [*cousin, *ZH_OTHERS], "表 妹",
                     "我表妹不想让别人存她的事，所以有关她的你都清一下。",
                     extent="person") == set(cousin)
    house = ["找房的事：看了三套，中介姓李。", "找房预算每月六千以内。"]
    assert forgotten(HashEmbedder(64), [*house, *ZH_OTHERS], "找 房",
                     "找房的事翻篇了 都删了吧", extent="topic") == set(house)


# -- what the matcher never does ---------------------------------------------------------------
def test_the_match_never_forgets_without_a_clear_winner() -> None:
    rivals = [Rival(("my gym locker code is 4411",)), Rival(("my gym locker is number 12",))]
    assert by_meaning("gym locker", "forget the gym locker", "one", rivals) == set()
    assert by_meaning("gym locker", "forget the gym locker", "one", rivals[:1]) == {0}
    assert by_meaning("gym locker", "forget the gym locker", "one", rivals,
                      MatchPolicy(meaning=False)) == set()


@pytest.mark.parametrize(("said", "about"), [
    ("Don't forget to call my sister Ana tomorrow about the Porto trip.",
     "My sister Ana lives in Porto and works night shifts as a nurse."),
    ("I forgot my gym locker code again, so annoying.",
     "The combination on my locker at the fitness club is 4-4-1-1."),
    ("别忘了明天提醒我给姐姐打电话。", "我姐姐住在杭州，在医院上夜班当护士。"),
    ("我又忘了家里的地址怎么写了，哈哈。", "关于我家地址——我上周跟你说过，在建国路。"),
])
def test_a_turn_that_is_no_forget_forgets_nothing(redis_store: RedisStore, minilm: Embedder,
                                                  said: str, about: str) -> None:
    vectors = FakeVectorStore()
    vectors.ensure_collections(minilm.dim)
    lt = LongTermMemory(vectors, minilm)
    shard = SessionShardService(0, Settings(), redis_store, RuleSummarizer(),
                                longterm=lambda: lt)
    for text in (about, *EN_OTHERS[:1]):
        shard.create_memory(U, MemoryCreate(kind=MemoryKind.EPISODE, text=text))
    ack = shard.append_turn(U, "s", "user", said)
    assert ack.intents.forgotten == []
    assert all(m.weight == 1.0 for m in lt.list_items(U, MemoryKind.EPISODE))


def test_the_detectors_extent_reaches_the_match(redis_store: RedisStore,
                                                minilm: Embedder) -> None:
    """Through the turn path: a learned forget of a person hides every memory about them."""
    vectors = FakeVectorStore()
    vectors.ensure_collections(minilm.dim)
    lt = LongTermMemory(vectors, minilm)
    shard = SessionShardService(0, Settings(), redis_store, RuleSummarizer(),
                                longterm=lambda: lt)
    jonah = ["Jonah called me Beanpole all through college.",
             "Jonah and I are planning a hiking weekend in May."]
    for text in (*jonah, *EN_OTHERS):
        shard.create_memory(U, MemoryCreate(kind=MemoryKind.EPISODE, text=text))
    ack = shard.append_turn(U, "s", "user", "Please don't keep anything from my old roommate "
                            "Jonah.")
    hidden = {m.text for m in lt.list_items(U, MemoryKind.EPISODE) if m.weight == 0.0}
    assert hidden == set(jonah) and len(ack.intents.forgotten) == 2
