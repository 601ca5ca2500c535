"""Stable habits (Chinese and English): "I run every morning", "我每天早上跑步" → a fact
``habit.<activity>`` whose value is the routine as said ("run every morning", "每天早上跑步").

A habit needs a frequency that repeats ("every morning", "twice a week", "on weekends",
"每天", "每周", "天天") or an explicit habit word ("usually", "习惯"). A one-off event has
neither ("I went for a run yesterday", "我昨天跑步了") and stays an episode; a past habit
("I used to run"), a plan, a wish, a hypothetical or advice ("you should run every day",
"if I ran every morning") is no habit of the speaker's.
"""

from __future__ import annotations

import re

__all__ = ["Habit", "match_habits"]

_UNITS = (r"(?:day|morning|evening|night|afternoon|week|weekend|month|year|monday|tuesday|"
          r"wednesday|thursday|friday|saturday|sunday|lunch(?:time)?|workday|weekday)")
_FREQ_EN = (
    r"(?:every(?: single)?(?: other)? " + _UNITS + r"|each " + _UNITS + r"|"
    r"(?:once|twice|three times|four times|five times|a few times|a couple (?:of )?times|"
    r"several times|\d+ times|\d+x) (?:a|per|each|every) (?:day|week|month|year)|"
    r"on (?:the )?(?:weekends|mondays|tuesdays|wednesdays|thursdays|fridays|saturdays|sundays|"
    r"weekday mornings|weekday evenings|weekdays)|"
    r"(?:most|all) (?:days|mornings|evenings|nights|weekends)|daily|nightly|weekly|"
    r"religiously)")
_HABITUAL = r"(?:usually|always|normally|typically|generally|regularly|habitually|still)"
# words after "I" that make the verb no present habit of the speaker's
_NOT_PRESENT = re.compile(
    r"^(?:am|was|were|had|have|has|did|do|don't|didn't|will|would|should|could|can|might|may|"
    r"must|want|wanna|need|hope|wish|plan|planned|intend|used|use|try|tried|think|thought|"
    r"guess|mean|meant|promise|promised|swear|bet|started|stopped|quit|gave|went|ran|swam|rode|"
    r"ate|drank|got|made|took|saw|wrote|came|left|met|bought|spent|forgot|never|just|also|"
    r"only|sometimes|rarely|seldom|barely|really|even|kinda|kind|sort|told|said|asked|feel|"
    r"felt|love|like|hate|enjoy|know|knew|remember|miss|missed)$", re.I)
_STOP = {"with", "at", "in", "on", "before", "after", "around", "near", "by", "from", "when",
         "while", "during", "until", "and"}
_EN_ACT = r"(?P<act>[a-z][\w'-]*(?: [\w'-]+){0,5}?)"
_EN_HABITS = [
    # "I (usually) run 5k every morning", "I walk the dog twice a day"
    re.compile(r"\bi (?:" + _HABITUAL + r" )?" + _EN_ACT + r",? (?P<freq>" + _FREQ_EN
               + r")\b", re.I),
    # "Been baking sourdough every Sunday", "also coaching my daughter's team on weekends"
    re.compile(r"(?:^|[,;.]\s*|\b(?:also|and|been|i've been|i have been|now|still)\s+)"
               r"(?P<act>[a-z]+ing(?: [\w'-]+){0,5}?),? (?P<freq>" + _FREQ_EN + r")\b", re.I),
    # "I started a pottery class on Thursdays", "Classes twice a week at the centre"
    re.compile(r"(?:^|\b(?:started|joined|signed up for|taking|take|do|doing|have|go to)\s+)"
               r"(?:a |an |the |my )?(?P<act>[\w' -]{0,30}?(?:class|classes|club|lessons|league|"
               r"group|course|sessions?|practice|training)) (?P<freq>" + _FREQ_EN + r")\b", re.I),
    # "every morning I run", "on weekends, I usually hike"
    re.compile(r"(?:^|[,;]\s*)(?P<freq>" + _FREQ_EN + r"),? i (?:" + _HABITUAL + r" )?"
               + _EN_ACT + r"(?=\s*[,.!?;]|$| before | after | with | and )", re.I),
]
_EN_NOT = re.compile(
    r"\b(?:if|when(?:ever)? you|you|your|you'd|you'll|you're|should|would|could|might|wish|"
    r"hope|want to|wanna|plan(?:ning)? to|going to|gonna|used to|try to|trying to|need to|"
    r"have to|has to|supposed to|thinking (?:about|of)|imagine|pretend|he|she|they|his|her|"
    r"their)\b", re.I)
_FREQ_ZH = (r"(?:每天|每晚|每早|每天早上|每天晚上|每天中午|每天下班后|每天睡前|"
            r"每周[一二三四五六日天末]?|每个(?:周末|星期[一二三四五六日天]?|月|早上|晚上)|每星期[一二三四五六日天]?|每月|每年|"
            r"天天|每隔[一两二三四五六七八九十\d]+(?:天|周)|"
            r"(?:一|每)(?:周|星期|个月|天)[一两二三四五六七八九十\d]+次|"
            r"周末|工作日)")
_ZH_ACT = r"(?P<act>[\u4e00-\u9fffA-Za-z0-9]{2,12}?)"
_ZH_END = r"(?=[，。！？；,.!?;~～]|$|，|的习惯)"
_ZH_HABITS = [
    re.compile(r"(?:我|^)(?:现在|平时|一般|通常|基本上|基本|几乎|也|还|都|有|一直|最近)*"
               r"(?P<freq>" + _FREQ_ZH + r")(?:都|会|要|坚持|固定|一般|通常|基本|总是|经常|常常|"
               r"早上|晚上|中午|下班后|下班|睡前|起床后|饭后|一早|必须|去)*"
               + _ZH_ACT + _ZH_END),
    re.compile(r"我(?:一直)?(?:有|养成了)?(?:一个)?(?:每天|每晚|每周)?(?:的)?习惯(?:是|了)?"
               r"(?P<freq>(?:每天|每晚|每周|早上|晚上|睡前|饭后|起床后)*)" + _ZH_ACT + _ZH_END),
]
_ZH_NOT = re.compile(r"你|您|他|她|它|他们|如果|要是|假如|的话|应该|打算|准备|想要|希望|计划|"
                     r"可以|只能|"
                     r"以前|之前|曾经|过去|小时候|那时候|昨天|上周|上个月|去年|那天|不再|不|没")
_ACT_LEAD = re.compile(r"^(?:go |went )?(?:to )?", re.I)
_ACT_FILLER_ZH = re.compile(r"^(?:去|来|都|会|要)+|(?:一下|一会儿?|一次|几次)$|"
                            r"^[一两二三四五六七八九十几\d]+次$")


class Habit:
    """A routine a rule found: ``activity`` (normalised, for the key) and the ``value``."""

    __slots__ = ("activity", "value")

    def __init__(self, activity: str, value: str) -> None:
        self.activity = activity
        self.value = value


def _en_activity(act: str) -> str | None:
    words = act.split()
    if not words or _NOT_PRESENT.match(words[0]) or words[0].lower().endswith("ed"):
        return None
    if words[0].lower() in ("go", "goes") and len(words) > 1:
        words = words[1:]
        if words[0].lower() in ("for", "to") and len(words) > 1:
            words = words[1:]
            if words[0].lower() in ("a", "an", "the", "my") and len(words) > 1:
                words = words[1:]
    head = [words[0]]
    for word in words[1:3]:
        if word.lower() in _STOP:
            break
        head.append(word)
    return " ".join(head).lower().strip(" ,.'")


def match_habits(sentence: str) -> list[Habit]:
    """The habits one sentence states (at most one per activity)."""
    found: dict[str, Habit] = {}
    english = not re.search(r"[\u4e00-\u9fff]", sentence)
    if english:
        if _EN_NOT.search(sentence):
            return []
        for pattern in _EN_HABITS:
            for match in pattern.finditer(sentence):
                act, freq = match.group("act").strip(), match.group("freq").strip()
                activity = _en_activity(act)
                if activity and activity not in found:
                    found[activity] = Habit(activity, f"{act} {freq}")
        return list(found.values())
    if _ZH_NOT.search(sentence):
        return []
    for pattern in _ZH_HABITS:
        for match in pattern.finditer(sentence):
            act = _ACT_FILLER_ZH.sub("", match.group("act"))
            if len(act) < 2:
                continue
            start = match.start("freq")
            if act not in found:  # the routine as said: "每天早上跑步", "睡前看书"
                found[act] = Habit(act, sentence[start:match.end("act")])
    return list(found.values())
