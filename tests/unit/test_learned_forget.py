"""Forgets the rules do not read, read by the learned detector at the turn (issue #36), and
the turns that must never forget. The sentences here are this file's own, in no corpus."""

from __future__ import annotations

import pytest

from strata.extract.base import Intent
from strata.extract.intent_model import (
    FORGET_CUE,
    FORGET_SAID,
    Utterance,
    doubted,
    forget_reader,
    forget_target,
    framing_terms,
    packaged_detector,
)
from strata.extract.llm import make_extractor
from strata.extract.rules import RuleExtractor, detect_intent
from strata.layers.memory_models import MemoryCreate
from strata.layers.summarize import RuleSummarizer
from strata.models import MemoryKind, Role, Scope, Turn
from strata.settings import Settings
from strata.shard.service import SessionShardService
from strata.stores.redis import RedisStore

pytest.importorskip("sklearn")

U = Scope(tenant="t", user="u")
NOT_A_RULE = "Wipe the stuff about my ex, Daniel."


def weights(shard: SessionShardService) -> dict[str, float]:
    return {m.text: m.weight for m in shard.longterm.list_items(U, MemoryKind.EPISODE)}


def test_a_forget_no_rule_reads_is_applied_at_its_turn(shard: SessionShardService) -> None:
    for text in ("Daniel, my ex, still texts me on Sundays.", "I adopted a cat named Miso."):
        shard.create_memory(U, MemoryCreate(kind=MemoryKind.EPISODE, text=text))
    assert detect_intent(NOT_A_RULE) is Intent.NONE  # the rules see nothing here
    ack = shard.append_turn(U, "s1", "user", NOT_A_RULE)
    assert len(ack.intents.forgotten) == 1
    assert weights(shard) == {"Daniel, my ex, still texts me on Sundays.": 0.0,
                              "I adopted a cat named Miso.": 1.0}


@pytest.mark.parametrize("text", [
    "Don't forget to book the vet for Miso.",  # a reminder
    "I forgot my umbrella on the bus again.",  # forgetting, in the world
    "Can you forget things I tell you?",  # a question about forgetting
    "My therapist says I should let Daniel go.",  # someone else's advice
    "If I told you to wipe everything, would it be gone for good?",  # a hypothetical
    "We're done with the kitchen, it looks great!",  # done, of something else
])
def test_turns_that_are_not_forget_requests_forget_nothing(
        shard: SessionShardService, text: str) -> None:
    shard.create_memory(U, MemoryCreate(kind=MemoryKind.EPISODE,
                                        text="Daniel, my ex, still texts me on Sundays."))
    shard.create_memory(U, MemoryCreate(kind=MemoryKind.EPISODE,
                                        text="The kitchen renovation and the vet bills."))
    ack = shard.append_turn(U, "s1", "user", text)
    assert ack.intents.forgotten == [], text
    assert set(weights(shard).values()) == {1.0}


def test_with_the_rules_only_the_same_turn_forgets_nothing(
        redis_store: RedisStore, shard: SessionShardService) -> None:
    lt = shard.longterm
    rules_only = SessionShardService(0, Settings(intent_detector="rules"), redis_store,
                                     RuleSummarizer(), longterm=lambda: lt)
    rules_only.create_memory(U, MemoryCreate(kind=MemoryKind.EPISODE,
                                             text="Daniel, my ex, still texts me on Sundays."))
    assert rules_only.append_turn(U, "s1", "user", NOT_A_RULE).intents.forgotten == []


def test_the_turn_that_asked_to_forget_is_not_kept_as_an_event(
        shard: SessionShardService, redis_store: RedisStore) -> None:
    from test_longterm_shard import extract  # the queued extraction, run here

    shard.create_memory(U, MemoryCreate(kind=MemoryKind.EPISODE,
                                        text="Daniel, my ex, still texts me on Sundays."))
    shard.append_turn(U, "s1", "user", NOT_A_RULE)
    shard.append_turn(U, "s1", "user", "Anyway, I started pottery classes on Tuesdays.")
    shard.close(U, "s1")
    extract(shard, redis_store)
    texts = [m.text for m in shard.longterm.list_items(U, MemoryKind.EPISODE) if m.weight > 0]
    assert any("pottery" in t for t in texts)
    assert not any("Daniel" in t for t in texts), texts


def test_the_target_is_what_the_turn_names_or_else_the_turn_before() -> None:
    assert forget_target(NOT_A_RULE, None) == "ex daniel"
    assert forget_target("Please let it go, it's over.", "my landlord kept the deposit") \
        == "my landlord kept the deposit"
    framing = framing_terms()
    assert {"please", "anymore"} <= framing and "daniel" not in framing
    assert FORGET_CUE.search("不用再提了") and not FORGET_CUE.search("我们去爬山")


def test_a_word_of_keeping_gates_a_forget_only_when_it_is_negated() -> None:
    # "keep it up", "keep in mind", "记住" say the opposite of a forget; "no need to keep",
    # "off your notes", "别再提", "莫记了" say one
    for text in ("No prob, Jon! You earned all the kudos. Keep it up!",
                 "keep in mind I'm vegan", "Remember my sister is Ana", "记住我对芒果过敏",
                 "存一下这个地址"):
        assert FORGET_CUE.search(text) and not FORGET_SAID.search(text), text
    for text in ("no need to keep that anymore", "please strike it from your notes",
                 "don't mention my ex again", "I'd rather you didn't hold on to that",
                 "Everything regarding Jonathan from procurement can go.", "别再提了",
                 "离婚的事 一个字都莫再提了", "那句你就当没听过吧", "删了吧",
                 # a removal said in the past participle, thrown out, left out; Chinese ways
                 # of keeping tabs, negated; "as if never said"
                 "I'd like my old address deleted, please", "the gym stuff, throw it out",
                 "leave that out from now on", "别再盯着我体重了", "以后别念叨这事了",
                 "就当我没说", "预算那条撤掉吧"):
        assert FORGET_SAID.search(text), text
    # a negated word of watching is no forget without the negation
    for text in ("帮我盯着点这个价格", "记得跟进一下报销"):
        assert not FORGET_SAID.search(text), text


def test_the_packaged_detector_reads_chinese_forgets_too() -> None:
    reading = packaged_detector().read([Utterance("关于我前任的那些，你都别留着了。")])[0]
    assert reading.intent == "forget"


@pytest.mark.parametrize("text", [
    "Please wipe everything you have on me, I want a clean slate.",
    "把你记得的关于我的所有东西都删了吧，我想重新开始。",
])
def test_a_forget_of_everything_forgets_all_the_user_said_and_no_admin_memory(
        shard: SessionShardService, text: str) -> None:
    for said in ("Daniel, my ex, still texts me on Sundays.", "I adopted a cat named Miso.",
                 "我在杭州做产品经理。"):
        shard.create_memory(U, MemoryCreate(kind=MemoryKind.EPISODE, text=said))
    shard.create_memory(U, MemoryCreate(kind=MemoryKind.EPISODE, source="admin",
                                        text="VIP customer since 2021."))
    ack = shard.append_turn(U, "s1", "user", text)
    assert len(ack.intents.forgotten) == 3
    assert weights(shard) == {"Daniel, my ex, still texts me on Sundays.": 0.0,
                              "I adopted a cat named Miso.": 0.0, "我在杭州做产品经理。": 0.0,
                              "VIP customer since 2021.": 1.0}


def test_a_forget_of_one_person_is_not_a_forget_of_everything(
        shard: SessionShardService) -> None:
    for said in ("Lao Zhou, my former colleague, moved to Chengdu.", "I adopted a cat named Miso."):
        shard.create_memory(U, MemoryCreate(kind=MemoryKind.EPISODE, text=said))
    reading = packaged_detector().read([Utterance("Forget everything about Lao Zhou.")])[0]
    assert (reading.intent, reading.scope) == ("forget", "person")
    ack = shard.append_turn(U, "s1", "user", "Forget everything about Lao Zhou.")
    assert len(ack.intents.forgotten) == 1
    assert weights(shard)["I adopted a cat named Miso."] == 1.0


@pytest.mark.parametrize(("text", "stored"), [
    # the rules read a forget in each; the turn asks, supposes or reports someone's words
    ("Will you forget my address if I ask?", "I moved to the harbour district in May."),
    ("你会把我的地址忘掉吗？", "我住在杭州西湖区。"),
    ("我妈叫我把他忘了", "我和前男友阿杰分手了。"),
])
def test_a_forget_the_rules_read_in_a_doubted_turn_needs_the_model_too(
        shard: SessionShardService, redis_store: RedisStore, text: str, stored: str) -> None:
    assert detect_intent(text) is Intent.FORGET  # the rules alone would forget
    assert doubted(text)
    shard.create_memory(U, MemoryCreate(kind=MemoryKind.EPISODE, text=stored))
    ack = shard.append_turn(U, "s1", "user", text)
    assert ack.intents.forgotten == [], text
    # nor at the session's end: the extraction asks the same detector
    extracted = make_extractor(Settings()).extract(
        [Turn(tenant="t", user_id="u", session_id="s1", turn_id="t1", role=Role.USER,
              content=text)])
    assert not [c for c in extracted if c.intent is Intent.FORGET], text


@pytest.mark.parametrize(("text", "stored"), [
    # plain requests the model scores low (a declaration inside reads as "remember"): the
    # rules' reading stands, as it did before the model
    ("Forget that my codename is Bluefin.", "My codename is Bluefin."),
    ("请忘记我对花生过敏", "我对花生过敏。"),
])
def test_a_plain_forget_the_rules_read_stands_whatever_the_model_says(
        shard: SessionShardService, text: str, stored: str) -> None:
    assert not doubted(text)
    shard.create_memory(U, MemoryCreate(kind=MemoryKind.EPISODE, text=stored))
    ack = shard.append_turn(U, "s1", "user", text)
    assert len(ack.intents.forgotten) == 1, text
    assert RuleExtractor(reads_forget=forget_reader).extract(
        [Turn(tenant="t", user_id="u", session_id="s1", turn_id="t1", role=Role.USER,
              content=text)])[0].intent is Intent.FORGET
