"""The rule-based extractor (Chinese and English): facts, intents and episodes from user turns.

Only what the *user* says becomes a candidate; assistant turns are context, never facts.
Hedged statements ("maybe", "可能", "打算") get a low confidence, so the ConflictResolver
parks them in the observation area until they are confirmed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from strata.extract.base import Candidate, Intent
from strata.layers.summarize import split_sentences
from strata.models import MemoryKind, Provenance, Role, Source, Turn
from strata.tokens import count_tokens

__all__ = ["RuleExtractor", "detect_intent", "is_hedged", "speaker_of"]

MIN_EPISODE_TOKENS = 6
_END = r"(?=[,.!?;，。！？；]|$| and | but | now| with| because)"
_ZEND = r"(?=[，。！？；,.!?;]|$|了|的时候)"


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str]
    key: str           # may contain {0}: the normalized first group
    value: str | None  # None: the first group is the value
    confidence: float = 0.85


def _en(regex: str, key: str, value: str | None = None, conf: float = 0.85) -> _Rule:
    return _Rule(re.compile(regex, re.I), key, value, conf)


def _zh(regex: str, key: str, value: str | None = None, conf: float = 0.85) -> _Rule:
    return _Rule(re.compile(regex), key, value, conf)


_OCCUPATION = r"(?:师|员|生|者|家|经理|工程师|老师|医生|律师|设计师|总监|主管|创始人)"
FACT_RULES: list[_Rule] = [
    _en(r"\bmy name is ([A-Z][\w'-]+(?: [A-Z][\w'-]+)?)", "identity.name"),
    _en(r"\bcall me ([A-Z][\w'-]+)", "identity.name"),
    _en(r"\bi(?:'m| am) (\d{1,3}) years? old", "identity.age"),
    _en(r"\bi(?:'m| am) (?:a|an) ([a-z][a-z -]{2,40}?)" + _END, "identity.occupation"),
    _en(r"\bi work (?:as an?|at|for) ([\w &.'-]{2,40}?)" + _END, "work.employer"),
    _en(r"\bi(?:'m| am)? ?(?:currently )?(?:live|living) in ([A-Z][\w .'-]{1,40}?)" + _END,
        "location.home"),
    _en(r"\bi(?:'ve| have)? ?(?:just |recently )?moved to ([A-Z][\w .'-]{1,40}?)" + _END,
        "location.home"),
    _en(r"\bi(?:'m| am) (?:originally )?from ([A-Z][\w .'-]{1,40}?)" + _END, "identity.origin"),
    _en(r"\bi(?:'m| am) allergic to ([\w '-]{2,40}?)" + _END, "constraint.allergy:{0}", "allergic"),
    _en(r"\bi(?:'m| am) (vegetarian|vegan|pescatarian)\b", "constraint.diet"),
    _en(r"\bi (?:don't|do not|never|can't|cannot) eat ([\w '-]{2,30}?)" + _END,
        "constraint.diet:{0}", "does not eat"),
    _en(r"\bmy favou?rite ([a-z]+(?: [a-z]+)?) is ([\w '-]{2,40}?)" + _END, "favorite.{0}", "{1}"),
    _en(r"\bi (?:really |absolutely )?(?:hate|dislike|can't stand|don't like|do not like) "
        r"([\w '-]{2,40}?)" + _END, "preference:{0}", "dislikes"),
    _en(r"\bi (?:really |absolutely )?(?:like|love|enjoy|adore|prefer) ([\w '-]{2,40}?)" + _END,
        "preference:{0}", "likes"),
    _en(r"\b(?:i|we) (?:have |'ve )?decided (?:to |on )?([\w ,'-]{3,60}?)" + _END,
        "decision:{0}", "decided"),
    _en(r"\b(?:project|codename|code name)(?: is| called| named)? \"?([A-Z][\w-]{1,30})",
        "project.codename"),
    _en(r"\bi(?:'m| am)? ?(?:might|may|maybe|probably|planning to|thinking (?:about|of)|going to)"
        r" ?(?:be )?(quit|quitting|leave|leaving) (?:my job|the company|work)", "work.status",
        "leaving the job"),
    _zh(r"我叫([\u4e00-\u9fffA-Za-z]{1,10}?)" + _ZEND, "identity.name"),
    _zh(r"我是(?:一名|一个|个)?([\u4e00-\u9fff]{1,10}?" + _OCCUPATION + r")", "identity.occupation"),
    _zh(r"我(?:现在)?住在([\u4e00-\u9fff]{2,10}?)" + _ZEND, "location.home"),
    _zh(r"我(?:已经)?搬(?:到|去)了?([\u4e00-\u9fff]{2,10}?)" + _ZEND, "location.home"),
    _zh(r"我对([\u4e00-\u9fff\w]{1,10}?)过敏", "constraint.allergy:{0}", "allergic"),
    _zh(r"我(?:不吃|不能吃|忌口)([\u4e00-\u9fff]{1,10}?)" + _ZEND, "constraint.diet:{0}",
        "does not eat"),
    _zh(r"我(?:很|最|特别|比较|非常)?(?:不喜欢|讨厌|不爱)(?:吃|喝|看|玩|听|用)?"
        r"([\u4e00-\u9fff\w]{1,12}?)" + _ZEND, "preference:{0}", "dislikes"),
    _zh(r"我(?:很|最|特别|比较|非常)?(?:喜欢|爱|偏好)(?:吃|喝|看|玩|听|用)?"
        r"([\u4e00-\u9fff\w]{1,12}?)" + _ZEND, "preference:{0}", "likes"),
    _zh(r"我(?:们)?(?:已经)?决定(?:了)?([\u4e00-\u9fff\w]{2,30}?)" + _ZEND, "decision:{0}",
        "decided"),
    _zh(r"项目(?:叫|名叫|名字是|代号是?)([\u4e00-\u9fffA-Za-z0-9-]{1,20}?)" + _ZEND,
        "project.codename"),
    _zh(r"我(?:可能|也许|打算|准备|考虑|想)?(?:下个月|明年|下周|今年|年底)?(离职|辞职|跳槽)", "work.status",
        "leaving the job"),
]

_HEDGE = re.compile(r"\b(maybe|might|may|perhaps|probably|i think i'?ll|planning to|thinking "
                    r"about|not sure)\b|可能|也许|大概|或许|打算|考虑|不确定|说不定", re.I)
_REMEMBER = re.compile(r"记住|记得|别忘|以后都|\bremember\b|\bdon'?t forget\b|\bkeep in mind\b"
                       r"|\bfrom now on\b", re.I)
# a stated change of value ("moved to", "搬到") replaces the old value like an explicit override
_OVERRIDE = re.compile(r"之前说的不算|之前说的作废|刚才说错了|我说错了|更正一下|搬到|搬去|换成|改成|不再|"
                       r"\bmoved to\b|\bswitched to\b|\bno longer\b|\bforget what i said\b|"
                       r"\bscratch that\b|\bi was wrong\b|\bcorrection\b|\bignore what i said\b",
                       re.I)
_FORGET = [
    re.compile(r"(.{2,40}?)(?:的事|这件事|那件事|这个问题|那个问题)?(?:不用管了|不重要了|不用记了|算了吧)"),
    re.compile(r"(?:忘掉|忘了|别记)(.{2,40}?)(?:吧|[，。！]|$)"),
    re.compile(r"\b(?:forget about|never mind|no need to remember|stop remembering|doesn'?t "
               r"matter any ?more[:,]?)\s*(?:the |my |that )?(.{2,60}?)(?=[.!,]|$)", re.I),
    re.compile(r"\b(?:the |my |that )?(.{2,60}?) (?:doesn'?t|does not) matter any ?more", re.I),
]
_TEMPORARY = re.compile(r"\b(today|tonight|right now|at the moment|this time|for now)\b|"
                        r"今天|今晚|现在|这次|暂时|刚刚", re.I)
_PROJECT_TAG = re.compile(r"\b(?:in|for|on) (?:the )?project ([A-Z][\w-]+)|在([\w\u4e00-\u9fff]{1,12}?)项目",
                          re.I)
_EPISODE_TYPES = [
    ("issue", re.compile(r"\b(bug|crash|error|lag|laggy|slow|broken|fail|problem|issue|complain)"
                         r"|卡顿|卡|慢|报错|崩溃|故障|问题|投诉", re.I)),
    ("purchase", re.compile(r"\b(bought|buy|order|ordered|purchase|paid|refund)\b|买了|下单|订单|付款|退款",
                            re.I)),
    ("plan", re.compile(r"\b(plan|planning|going to|will|next week|tomorrow)\b|计划|打算|明天|下周",
                        re.I)),
]
_OBJECT = re.compile(r"(?:order|ticket|invoice|case|订单|工单|发票)\s*(?:号|number|no\.?|#)?\s*[:：#]?\s*"
                     r"([A-Za-z0-9-]{3,24})|#(\d{3,12})\b", re.I)
_NEG = re.compile(r"\b(hate|angry|annoyed|frustrat\w*|terrible|awful|bad|sad|upset|worst)\b|"
                  r"生气|烦|糟糕|难过|失望|差", re.I)
_POS = re.compile(r"\b(love|great|happy|glad|excited|awesome|amazing|thanks|good)\b|"
                  r"开心|高兴|喜欢|满意|感谢|太好了", re.I)


def is_hedged(text: str) -> bool:
    return bool(_HEDGE.search(text))


def detect_intent(text: str) -> Intent:
    """The strongest intent in a user turn: forget > override > remember > none."""
    if any(p.search(text) for p in _FORGET):
        return Intent.FORGET
    if _OVERRIDE.search(text):
        return Intent.OVERRIDE
    if _REMEMBER.search(text):
        return Intent.REMEMBER
    return Intent.NONE


def _norm(value: str) -> str:
    value = re.sub(r"\b(in general|a lot|very much|so much|too)$", "", value.strip(), flags=re.I)
    return re.sub(r"\s+", " ", value.strip(" '\"").lower())


def _tags(sentence: str) -> list[str]:
    match = _PROJECT_TAG.search(sentence)
    if not match:
        return []
    return [f"project:{_norm(match.group(1) or match.group(2))}"]


def speaker_of(turn: Turn) -> str | None:
    """The person who said a turn in a multi-party conversation (``metadata.speaker``)."""
    speaker = turn.metadata.get("speaker")
    if not isinstance(speaker, str):
        return None
    return speaker.strip()[:80] or None


class RuleExtractor:
    """Deterministic, offline extraction of facts, intents and episodes."""

    def extract(self, turns: Sequence[Turn]) -> list[Candidate]:
        out: list[Candidate] = []
        for turn in turns:
            if turn.role is not Role.USER:
                continue  # the assistant's words and guesses are never user facts
            out.extend(self._from_turn(turn))
        return out

    def _from_turn(self, turn: Turn) -> list[Candidate]:
        provenance = Provenance(session_id=turn.session_id, turn_ids=[turn.turn_id])
        intent = detect_intent(turn.content)
        if intent is Intent.FORGET:
            target = next(m.group(1) for p in _FORGET if (m := p.search(turn.content)))
            return [Candidate(kind=MemoryKind.FACT, text=target.strip(), intent=Intent.FORGET,
                              provenance=provenance, event_time=turn.created_at)]
        facts: list[Candidate] = []
        for sentence in split_sentences(turn.content):
            if sentence.rstrip().endswith(("?", "？")):
                continue  # a question states nothing ("what's a book you remember?")
            facts.extend(self._facts(sentence, intent, provenance, turn))
        episodes = self._episode(turn, provenance, has_facts=bool(facts))
        return facts + episodes

    def _facts(self, sentence: str, intent: Intent, provenance: Provenance,
               turn: Turn) -> list[Candidate]:
        found: dict[str, Candidate] = {}
        hedged = is_hedged(sentence)
        for rule in FACT_RULES:
            for match in rule.pattern.finditer(sentence):
                groups = [g for g in match.groups() if g]
                if not groups:
                    continue
                obj = _norm(groups[0])
                try:
                    key = rule.key.format(obj, *(_norm(g) for g in groups[1:]))
                    value = (rule.value.format(*(g.strip() for g in groups))
                             if rule.value and "{" in rule.value
                             else rule.value or groups[0].strip())
                except (IndexError, KeyError):  # a rule whose groups did not all match
                    continue
                if key in found:
                    continue
                found[key] = Candidate(
                    kind=MemoryKind.FACT, key=key, value=value, text=sentence.strip(),
                    confidence=0.45 if hedged else rule.confidence, source=Source.USER_STATED,
                    intent=intent if intent is not Intent.FORGET else Intent.NONE,
                    scope_tags=_tags(sentence), provenance=provenance,
                    event_time=turn.created_at)
        if not found and intent is Intent.REMEMBER and _REMEMBER.search(sentence):
            text = re.sub(r"^(请)?(记住|记得|remember( that)?|don'?t forget( that)?)[:：,，\s]*", "",
                          sentence.strip(), flags=re.I)
            found[f"note:{_norm(text)[:40]}"] = Candidate(
                kind=MemoryKind.FACT, key=f"note:{_norm(text)[:40]}", value=text, text=text,
                confidence=0.9, intent=Intent.REMEMBER, scope_tags=_tags(sentence),
                provenance=provenance, event_time=turn.created_at)
        return list(found.values())

    def _episode(self, turn: Turn, provenance: Provenance, has_facts: bool) -> list[Candidate]:
        text = turn.content.strip()
        kind = next((name for name, p in _EPISODE_TYPES if p.search(text)), None)
        # every substantive user turn is an episode (turn granularity, one turn of
        # provenance); chit-chat is dropped by the quality filter downstream
        if count_tokens(text) < MIN_EPISODE_TOKENS and not has_facts:
            return []
        sentiment = (0.5 if _POS.search(text) else 0.0) - (0.5 if _NEG.search(text) else 0.0)
        obj = _OBJECT.search(text)
        return [Candidate(kind=MemoryKind.EPISODE, text=text, confidence=0.7,
                          episode_type=kind or "event", sentiment=sentiment,
                          business_object=(obj.group(1) or obj.group(2)) if obj else None,
                          provenance=provenance, event_time=turn.created_at,
                          scope_tags=_tags(text), speaker=speaker_of(turn))]

    @staticmethod
    def is_temporary(text: str) -> bool:
        return bool(_TEMPORARY.search(text))
