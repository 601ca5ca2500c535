"""The rule extractor's edge cases, one test each, in Chinese and English: forget phrasings
over remember ones, dismissals, moves and stated changes superseding old facts, what a value
is (the thing, not the time), secrets never stored, summaries keeping amounts and decisions,
acknowledgements that are not episodes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from strata.conflict import Action
from strata.extract.base import Candidate, Intent
from strata.extract.filters import WriteFilter
from strata.extract.rules import RuleExtractor, detect_intent
from strata.extract.worker import ExtractionWorker
from strata.layers.memories import LongTermMemory
from strata.layers.semantic import FactStore
from strata.layers.summarize import RuleSummarizer
from strata.models import MemoryKind, MemoryStatus, Role, Scope, Turn
from strata.settings import Settings
from strata.shard.service import SessionShardService
from strata.stores.embedders import HashEmbedder
from strata.stores.redis import RedisStore
from strata.testing.fake_vectors import FakeVectorStore
from strata.tokens import count_tokens

U = Scope(tenant="t", user="u")
NOW = datetime(2026, 6, 15, 12, 0, tzinfo=UTC)


def _turn(text: str, n: int = 1, role: Role = Role.USER, session: str = "s") -> Turn:
    return Turn(turn_id=f"{session}:{n}", session_id=session, user_id="u", role=role,
                content=text, created_at=NOW)


def _extract(*texts: str) -> list[Candidate]:
    return RuleExtractor().extract([_turn(t, i) for i, t in enumerate(texts)])


def _facts(text: str) -> dict[str, Candidate]:
    return {c.key: c for c in _extract(text) if c.kind is MemoryKind.FACT and c.key}


@pytest.fixture
def facts() -> FactStore:
    store = FakeVectorStore()
    store.ensure_collections(64)
    return FactStore(store, HashEmbedder(64))


def _apply(facts: FactStore, text: str, session: str) -> list[Action]:
    return [facts.apply(U, c).decision.action for c in RuleExtractor().extract(
        [_turn(text, session=session)]) if c.kind is MemoryKind.FACT and c.key]


# -- forgetting wins -------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "target"), [
    ("Forget my project codename, it is no longer relevant.", "project codename"),
    ("Never mind the budget thing.", "budget"),
    ("The staging cluster is no longer relevant.", "staging cluster"),
    ("上次那个卡顿的问题不用管了。", "卡顿"),
    ("之前说的那个预算不算了。", "预算"),
    ("别再提我前男友了。", "前男友"),
    ("把出差计划忘掉吧。", "出差计划"),
    ("Please forget that I live in Boston.", "I live in Boston"),  # a clause as the target
    ("Forget that I work at Acme, it is no longer relevant.", "I work at Acme"),
])
def test_forget_phrasing_wins_over_remember(text: str, target: str) -> None:
    assert detect_intent(text) is Intent.FORGET
    found = _extract(text)
    assert [c.intent for c in found] == [Intent.FORGET]  # no remember, no episode
    assert target in found[0].text


@pytest.mark.parametrize("text", [
    "Forget it, I'll do it myself.", "Never mind.", "Never mind, I found it.",
    "I always forget where I park.",
    "我总是忘了带钥匙。", "算了，我自己来。", "Do you remember where I live?",
])
def test_dismissals_and_recollections_are_no_intent(text: str) -> None:
    assert detect_intent(text) is Intent.NONE


def test_a_target_less_dismissal_forgets_the_previous_statement() -> None:
    found = _extract("My gym is FitLife on Main.", "That's no longer relevant.")
    forget = [c for c in found if c.intent is Intent.FORGET]
    assert [c.text for c in forget] == ["My gym is FitLife on Main."]


def _shard_with_memory(redis_store: RedisStore) -> tuple[LongTermMemory, SessionShardService]:
    """A session shard whose long-term memory is an in-memory store."""
    vectors = FakeVectorStore()
    vectors.ensure_collections(64)
    lt = LongTermMemory(vectors, HashEmbedder(64))
    return lt, SessionShardService(0, Settings(), redis_store, RuleSummarizer(),
                                   longterm=lambda: lt)


def test_remembered_codename_is_forgotten_at_turn_time(redis_store: RedisStore) -> None:
    lt, shard = _shard_with_memory(redis_store)
    first = shard.append_turn(U, "s1", "user", "Remember this: my project codename is Falcon.")
    assert first.intents.remembered
    assert lt.facts.current(U, "project.codename").value == "Falcon"  # type: ignore[union-attr]
    ack = shard.append_turn(U, "s1", "user",
                            "Forget my project codename, it is no longer relevant.")
    assert ack.intents.forgotten and not ack.intents.remembered


def test_forgetting_a_stated_home_does_not_state_it_again(redis_store: RedisStore) -> None:
    # the forget sentence names the fact it retracts; it must not be written back as current
    lt, shard = _shard_with_memory(redis_store)
    shard.append_turn(U, "s1", "user", "Remember this: I live in Boston.")
    assert lt.facts.current(U, "location.home").value == "Boston"  # type: ignore[union-attr]
    ack = shard.append_turn(U, "s1", "user", "Please forget that I live in Boston.")
    assert ack.intents.forgotten and not ack.intents.remembered
    assert all(v.weight == 0.0 for v in lt.facts.versions(U, "location.home"))


# -- changes ---------------------------------------------------------------------------------
def test_a_move_in_chinese_supersedes_the_old_home(facts: FactStore) -> None:
    assert Action.INSERT in _apply(facts, "我住在北京，在一家做跨境电商的公司上班。", "s1")
    assert _apply(facts, "告诉你个消息，我上个月搬到上海了。", "s2") == [Action.SUPERSEDE]
    current = facts.current(U, "location.home")
    assert current is not None and current.value == "上海"
    assert [v.status for v in facts.history(U, current.id)] == [MemoryStatus.SUPERSEDED,
                                                               MemoryStatus.ACTIVE]


def test_the_session_end_replay_keeps_the_new_home(redis_store: RedisStore) -> None:
    """The move is written at turn time; replaying the session must not revive 北京."""
    lt, shard = _shard_with_memory(redis_store)
    shard.append_turn(U, "s1", "user", "我住在北京，在一家做跨境电商的公司上班。")
    moved = shard.append_turn(U, "s1", "user", "告诉你个消息，我上个月搬到上海了。")
    assert moved.intents.remembered
    shard.close(U, "s1")
    while ExtractionWorker(redis_store.queues, redis_store.sessions, RuleExtractor(),
                           lt.writer.write, "w").run_once():
        pass
    assert lt.facts.current(U, "location.home").value == "上海"  # type: ignore[union-attr]


@pytest.mark.parametrize(("text", "key", "value"), [
    ("I moved to Lisbon last year.", "location.home", "Lisbon"),
    ("I switched to oat milk.", "preference.drink:oat milk", "oat milk"),
    ("I no longer eat red meat.", "constraint.diet:red meat", "does not eat"),
    ("I started a new job at Initech.", "work.employer", "Initech"),
    ("我换工作了，现在在腾讯上班。", "work.employer", "腾讯"),
    ("我把咖啡换成绿茶了。", "preference.drink:绿茶", "绿茶"),
    ("我不再吃牛肉了。", "constraint.diet:牛肉", "does not eat"),
    ("我已经跳槽到阿里巴巴了。", "work.employer", "阿里巴巴"),
])
def test_stated_changes_override(text: str, key: str, value: str) -> None:
    fact = _facts(text)[key]
    assert (fact.value, fact.intent) == (value, Intent.OVERRIDE)


def test_an_override_replaces_the_value(facts: FactStore) -> None:
    _apply(facts, "我住在北京。", "s1")
    assert _apply(facts, "之前说的不算，我住在深圳。", "s2") == [Action.SUPERSEDE]
    assert facts.current(U, "location.home").value == "深圳"  # type: ignore[union-attr]


# -- values ----------------------------------------------------------------------------------
def test_codename_value_is_the_name() -> None:
    fact = _facts("Remember this: my project codename is Falcon.")["project.codename"]
    assert (fact.value, fact.intent) == ("Falcon", Intent.REMEMBER)
    assert _facts("我的项目代号是猎鹰。")["project.codename"].value == "猎鹰"


@pytest.mark.parametrize(("text", "days"), [
    ("I moved to Lisbon last year", 365), ("I moved to Lisbon two years ago", 730),
    ("I moved to Lisbon in 2021", None), ("我去年搬到了里斯本。", 365),
    ("我三个月前搬到了里斯本。", 90),
])
def test_the_time_phrase_is_the_event_time_not_the_value(text: str, days: int | None) -> None:
    fact = _facts(text)["location.home"]
    assert fact.value in ("Lisbon", "里斯本")
    expected = NOW - timedelta(days=days) if days else NOW.replace(year=2021, month=1, day=1)
    assert fact.event_time == expected


@pytest.mark.parametrize(("text", "key", "value"), [
    ("Also I like jazz music.", "preference.music:jazz music", "jazz music"),
    ("I hate horror movies.", "preference.movie:horror movies", "dislikes horror movies"),
    ("我喜欢听爵士乐。", "preference.music:爵士乐", "爵士乐"),
    ("我讨厌吃香菜。", "preference.food:香菜", "不喜欢香菜"),
])
def test_a_preference_value_is_the_thing(text: str, key: str, value: str) -> None:
    assert _facts(text)[key].value == value


# -- explicit remember -----------------------------------------------------------------------
@pytest.mark.parametrize("text", [
    "Make a note that the client prefers calls after 3pm.",
    "For future reference, the staging server is called Juniper.",
    "帮我记一下，周五下午三点要和客户开会。",
    "下次别再推荐日料了。",
    "记住：我的项目代号是青龙。",
])
def test_explicit_remember_phrasings(text: str) -> None:
    assert detect_intent(text) is Intent.REMEMBER
    assert any(c.intent is Intent.REMEMBER and c.key for c in _extract(text))


def test_a_stated_codename_is_a_fact() -> None:
    assert _facts("我的项目代号是青龙。")["project.codename"].value == "青龙"


# -- secrets ---------------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "secret"), [
    ("The password for my bank is Tr0ub4dor&3 and I always forget it.", "Tr0ub4dor&3"),
    ("wifi pwd: sunflower2024!", "sunflower2024!"),
    ("Remember the key sk_live_51HqLyjWDarjtT1zdp7dcXyZ9aB3 for billing.",
     "sk_live_51HqLyjWDarjtT1zdp7dcXyZ9aB3"),
    ("Remember my maps key AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY",
     "AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY"),
    ("Remember: wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY is our AWS secret.",
     "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
    ("记住，我住在朝阳区望京SOHO A座1203室。", "1203"),
    ("帮我记一下，家里wifi密码：abc88888", "abc88888"),
])
def test_secrets_never_reach_any_stored_field(text: str, secret: str) -> None:
    kept = WriteFilter().apply(_extract(text)).kept
    for cand in kept:
        fields = [cand.text, cand.key or "", cand.value or "", *cand.scope_tags, *cand.parts,
                  cand.business_object or "", cand.speaker or ""]
        assert all(secret.lower() not in f.lower() for f in fields), cand


def test_a_lower_cased_secret_in_a_key_or_tag_is_caught() -> None:
    key = "AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY"
    leaky = Candidate(kind=MemoryKind.FACT, key=f"note:my key is {key.lower()}", value="x",
                      text=f"My key is {key}", confidence=0.9, intent=Intent.REMEMBER)
    assert WriteFilter().apply([leaky]).kept == []
    tagged = Candidate(kind=MemoryKind.EPISODE, text="I paid the invoice for project Hydra",
                       scope_tags=["project:hydra", "token:sk_live_abcdefghij123456"],
                       business_object="sk_live_abcdefghij123456")
    kept = WriteFilter().apply([tagged]).kept[0]
    assert kept.scope_tags == ["project:hydra"] and kept.business_object is None


# -- summaries and acknowledgements ----------------------------------------------------------
FILLER = ["ok, sounds good", "Sure thing!", "Haha yes I think so too.", "Okay cool.",
          "Thanks Bob, that was really helpful.", "I'm not sure, what do you think?",
          "Yeah, I agree with you completely on this one.", "Right, makes sense.",
          "Hmm, let me think about it for a moment.", "Great, thanks a lot for the help!",
          "哈哈哈", "好的好的", "嗯嗯，我明白你的意思了", "That's interesting, tell me more.",
          "I see what you mean.", "Cool cool.", "Alright then.", "Good point!", "No worries.",
          "OK let's move on.", "Sounds like a plan!", "行", "收到，谢谢", "你觉得呢？"]


@pytest.mark.parametrize("batch", [1, 25])
def test_summary_keeps_amounts_and_dates_and_drops_filler(batch: int) -> None:
    turns = [_turn("The budget for this project is 50000 yuan, and the deadline is March 3rd.")]
    turns += [_turn(text, i + 2, Role.ASSISTANT if i % 2 else Role.USER)
              for i, text in enumerate(FILLER)]
    assert len(turns) == 25
    summary = ""
    for start in range(0, len(turns), batch):  # turn by turn, as the window evicts, or at once
        summary = RuleSummarizer().summarize(summary, turns[start:start + batch], 60)
    assert "50000 yuan" in summary and "March 3rd" in summary
    assert not any(text in summary for text in ("Sure thing", "Haha", "哈哈", "Thanks Bob"))
    assert count_tokens(summary) <= 60


def test_summary_keeps_decisions_and_constraints() -> None:
    turns = [_turn("We decided to go with the blue logo."), _turn("ok", 2),
             _turn("我们必须在周五之前上线。", 3), _turn("好的", 4)]
    summary = RuleSummarizer().summarize("", turns, 200)
    assert "blue logo" in summary and "周五之前上线" in summary
    assert "好的" not in summary


@pytest.mark.parametrize("text", ["sure thing", "ok thanks", "哈哈哈", "行", "Got it, thanks!",
                                  "好的，谢谢", "嗯嗯，知道了", "okay!! 👍"])
def test_acknowledgements_are_not_episodes(text: str) -> None:
    assert [c for c in _extract(text) if c.kind is MemoryKind.EPISODE] == []
    ack = Candidate(kind=MemoryKind.EPISODE, text=text, confidence=0.7)
    assert WriteFilter().apply([ack]).kept == []


def test_a_real_event_is_still_an_episode() -> None:
    assert any(c.kind is MemoryKind.EPISODE for c in _extract(
        "The checkout page crashed twice this morning when I paid."))
