"""What a user turn asks of memory (Chinese and English): remember, override, forget, nothing.

Forgetting wins over everything else: "forget my project codename, it is no longer relevant"
is a forget, not a remember of the codename. A forget phrase needs a target ("forget the
Tokyo trip"); "forget it" or "never mind" alone dismisses a request and is no intent at all.
A retraction without a target ("之前说的不算", "forget what I said") followed by a new value
is an override of that value.
"""

from __future__ import annotations

import re
from functools import lru_cache

from pydantic import BaseModel

from strata.extract.base import Intent

__all__ = [
    "ForgetPhrase",
    "detect_intent",
    "find_forget",
    "has_override",
    "has_remember",
    "is_acknowledgement",
    "is_declaration",
    "is_hedged",
    "is_question",
    "is_reminder",
    "stated_part",
    "strip_request",
    "unhedged",
]

_REQ = (r"(?:(?:please|pls|can you|could you|would you|will you|you can|you may|you should|"
        r"you need to|just|so|and|also|oh|now|i want you to|i need you to|i'd like you to)\s+)*")
_LEAD = r"(?:^|[,;:.!—-]\s*)"
_EN_T = r"(?P<t>[^,.;!?\n]{2,60})"
_ZH_T = r"(?P<t>[^。！？!?，,；;\n]{1,40}?)"

_REMEMBER = re.compile(
    _LEAD + _REQ + r"(?:remember|keep in mind|make a note|take a note|note down|note that|"
    r"jot (?:this |that |it )?down|write (?:this|that|it) down|save this)\b|"
    + _LEAD + _REQ + r"(?:don'?t|do not) forget\b|"
    r"\b(?:for future reference|for the record|going forward|from now on|so you (?:remember|"
    r"know))\b|"
    r"(?<![没未])记住|(?:^|[，,：:]|请|要|一定要|千万|麻烦|你)记得|别忘了|不要忘了|别忘记|"
    r"帮我记|替我记|给我记|(?<![我他她])记(?:一下|下来|着)|备注|"
    r"(?:^|[，,])(?:以后|今后|往后|下次|从现在起|从今以后)[^。！？?]{0,12}?"
    r"(?:都|别|不要|一律|请|记得|总是|统一)", re.I)
_OVERRIDE = re.compile(
    r"\b(?:forget|ignore|disregard) what i (?:said|told you)\b(?! about)|\bscratch that\b|"
    r"\bi was wrong\b|\bcorrection\b|\bi misspoke\b|\bno longer\b|\bany ?more\b|"
    r"\b(?:moved|relocated|switched|started|joined|stopped|quit|gave up)\b|"
    r"\bgot an? (?:new )?(?:job|offer|position)\b|(?<!right )\bnow\b(?! on\b)|,\s*not\s+\w|"
    r"之前说的不算|之前说的作废|说错了|更正|纠正一下|搬到|搬去|搬家|换成|改成|改用|改喝|改吃|"
    r"不再|换工作|跳槽|入职|不在[^，。]{1,10}(?:上班|工作)了|(?:现在|已经)不[^，。]{1,6}了|[，,]不是",
    re.I)
_FORGET_EN = [
    # "ignore the typo" is no forget request: ignore/disregard need "what I said about"
    re.compile(_LEAD + _REQ + r"(?:forget\s+(?:about\s+)?(?:what (?:i|we) (?:said|told you|"
               r"mentioned) about\s+|(?:everything|anything) about\s+)?|(?:disregard|ignore)\s+"
               r"(?:what (?:i|we) (?:said|told you|mentioned) about|(?:everything|anything) "
               r"(?:i said )?about)\s+)" + _EN_T, re.I),
    re.compile(r"\bnever ?mind\s+(?:about\s+)?" + _EN_T, re.I),
    re.compile(r"\b(?:stop remembering|no need to (?:remember|keep)|(?:you )?don'?t need to "
               r"remember)\s+" + _EN_T, re.I),
    re.compile(r"\b(?:delete|erase|remove|clear|drop|wipe)\s+(?:what you know|what you remember"
               r"|whatever you know|anything you know|everything you know|the notes?|the "
               r"memory|your notes?|any notes?|the records?|your memory)\s+(?:about|of|on|"
               r"regarding)\s+" + _EN_T, re.I),
    re.compile(r"(?:^|[,;:.!]\s*)" + r"(?P<t>[^,.;!?\n]{2,60}?)(?:\s+(?:is|are|was|were)|'s|'re)"
               r"\s+no longer\s+(?:relevant|important|needed|an issue|a problem|a concern|a thing|"
               r"happening)", re.I),
    re.compile(r"(?:^|[,;:.!]\s*)" + r"(?P<t>[^,.;!?\n]{2,60}?)\s+(?:doesn'?t|does not|don'?t|"
               r"do not)\s+matter\s+any ?more", re.I),
]
_FORGET_ZH = [
    re.compile(r"之前(?:说|提|讲)的" + r"(?P<t>[^。！？!?，,；;\n]{0,30}?)(?:就|也)?(?:不算|作废)"),
    re.compile(r"把" + _ZH_T + r"(?:给)?(?:忘掉|忘了|删掉|删了|删除|清除|去掉)"),
    re.compile(r"(?:别|不要|不用|无需)再?(?:提|记|记着|记住)(?:起)?"
               r"(?P<t>[^。！？!?，,；;\n]{2,40}?)了?(?:[。！!，,]|$)"),
    re.compile(r"(?:(?<![我他她又总老常都是])忘掉|(?:^|[，,：:]|请|你就|帮我|就)忘记)" + _ZH_T
               + r"(?:吧|[。！!，,]|$)"),
    re.compile(r"不用(?:再)?管" + r"(?P<t>[^。！？!?，,；;\n]{2,30}?)了"),
    re.compile(r"(?P<t>[^。！？!?；;\n]{1,40}?)(?:你就|就|也|已经)?(?:不用管了|不用管它了|不重要了|不用记了|"
               r"算了吧|作废了|不算了|不算数了|没关系了|(?:别|不要|不用)再提了|忘了吧|忘掉吧)"),
]
_PRONOUN = re.compile(r"^(?:it|that|this|them|all|everything|it all|that one|what|what i said|"
                      r"what i told you|这|那|它|这个|那个|这些|那些|我说的|刚才说的|这事|那事|"
                      r"这件事|那件事|)$", re.I)
_DISMISSIVE = re.compile(r"\b(?:is|are|was|'s) no longer (?:relevant|important|needed)|"
                         r"\bdoesn'?t matter any ?more|不重要了|不用管了|不算了", re.I)
_TARGET_LEAD = re.compile(r"^(?:(?:the|my|our|that|this|about|your)\s+(?=.{3})|关于|上次|之前|"
                          r"以前|刚才|我之前说的|之前说的|我说的|说的|那个|这个|那件|这件|那条|这条|你就|就|我的(?=.{3}))+",
                          re.I)
_TARGET_TAIL = re.compile(r"(?:\s+(?:thing|stuff|business|part|issue)|\s+i (?:mentioned|told "
                          r"you about|said)(?: earlier| before)?|\s+too|\s+please|"
                          r"(?:的)?(?:事情|事|这件事|那件事|这个问题|那个问题|那条记录|这条记录|记录|那个|这个)|"
                          r"已经|就|也|你|吧|了|[，,\s])+$", re.I)
_HEDGE = re.compile(r"\b(maybe|might|may|perhaps|probably|possibly|i think i'?ll|i guess|"
                    r"i suppose|planning to|thinking about|not sure)\b|"
                    r"可能|也许|大概|或许|好像|似乎|打算|考虑|不确定|说不定", re.I)
_DECLARATION = re.compile(
    r"\bmy (?:[a-z'-]+ ){0,3}(?:is|are)\s+(?!not\b|so\b|too\b|very\b|really\b|pretty\b|"
    r"kind of\b|a bit\b|going\b|getting\b|killing\b)[\w\"'“]|"
    r"我(?:的|[\u4e00-\u9fff]{1,4}的)[\u4e00-\u9fffA-Za-z]{1,8}(?:是|叫|为)(?!不是|什么|谁|哪)",
    re.I)
# what a hedged sentence states once the doubt is taken out ("I may be allergic to X" →
# "I am allergic to X"; "我可能搬到上海" → "我搬到上海"); the doubt stays in the confidence
_UNHEDGE = [
    (re.compile(r"\b(?:maybe|perhaps|probably|possibly)\b,?\s*", re.I), ""),
    (re.compile(r"\bi (?:guess|suppose)\s+(?:that\s+)?", re.I), ""),
    (re.compile(r"\bi(?:'m| am) not sure (?:if|whether|but)\s+", re.I), ""),
    (re.compile(r"\bi (?:might|may|could) be (?=\w+ing\b)(?:moving|relocating)\b", re.I),
     "I moved"),
    (re.compile(r"\bi (?:might|may|could|will|'ll) (?:move|relocate)\b", re.I), "I moved"),
    (re.compile(r"\bi(?:'m| am) (?:planning|thinking about|considering) (?:to )?"
                r"(?:move|moving|relocat(?:e|ing))\b", re.I), "I moved"),
    (re.compile(r"\bi (?:might|may|could) be\b", re.I), "I am"),
    (re.compile(r"\bi (?:might|may|could) (?=\w)", re.I), "I "),
    (re.compile(r"可能|也许|大概|或许|好像|似乎|说不定"), ""),
    (re.compile(r"(?:打算|考虑|准备)(?=搬)"), ""),
]
_REQUEST_FRAME = re.compile(r"^(?:please\s+)?(?:can|could|would|will) you (?:please )?(?:remember"
                            r"|note|keep|forget|make a note|write|save|jot|stop|delete|erase)",
                            re.I)
_EN_QUESTION = re.compile(r"^(?:do|does|did|is|are|was|were|can|could|would|will|should|what|"
                          r"where|when|who|whom|whose|why|how|which|have|has)\b", re.I)
_ZH_QUESTION = re.compile(r"(?:吗|呢|么|没有)[。！!]?$|^你.*(?:什么|怎么|哪|谁|多少|几点)")
_ACK = re.compile(
    r"\b(?:ok(?:ay)?|kk?|sure(?: thing)?|yes|yeah|yep|yup|nope|thanks|thank you|thx|ty|cool|"
    r"nice|great|awesome|perfect|fine|alright|all right|got it|gotcha|sounds (?:good|great)|"
    r"good|noted|lol|lmao|ha(?:ha)+|hehe|understood|right|exactly|indeed|wow|oh|ah|hmm+|mhm|"
    r"uh-huh|bye|see you|np|no problem|no worries|will do|of course|a lot|so much|very much|"
    r"that helped|that helps|that works|to me|for that|you|me)\b|"
    r"好的|好吧|好嘞|好滴|好|行吧|行|嗯+|哦+|噢|啊|呀|哈+|嘿+|嘻+|呵+|谢谢|感谢|多谢|收到|明白了?|"
    r"知道了|了解|没问题|可以的?|对+|是的|没事|就这样吧?|谢啦|辛苦了|[啦呢哟哇嘛咯喔]|[!！.。,，~～?？…\s]|"
    r"[\U0001F300-\U0001FAFF\u2600-\u27BF]", re.I)


class ForgetPhrase(BaseModel):
    """A forget phrase in a turn and what it targets (None: a pronoun or nothing)."""

    target: str | None


def _clean_target(raw: str) -> str | None:
    target = raw.strip(" ,，。.!！\"'")
    for _ in range(3):  # leading and trailing fillers can nest ("关于…的事，")
        target = _TARGET_TAIL.sub("", _TARGET_LEAD.sub("", target)).strip(" ,，。.!！\"'")
    if not target or _PRONOUN.match(target):
        return None
    if len(target) < 2 and not re.search(r"[\u4e00-\u9fff]", target):
        return None
    return target


def find_forget(text: str) -> ForgetPhrase | None:
    """The first forget phrase with a target; a dismissive one without a target; or None."""
    dismissive = False
    for pattern in [*_FORGET_EN, *_FORGET_ZH]:
        for match in pattern.finditer(text):
            target = _clean_target(match.group("t"))
            # "never mind, I found it" targets nothing; "forget that I live in Boston" does
            if target and (not re.match(r"^(?:i|we|i'm|we're)\b", target, re.I)
                           or re.match(r"\s*that\s", match.group("t"), re.I)):
                return ForgetPhrase(target=target)
            dismissive = dismissive or bool(_DISMISSIVE.search(match.group(0)))
    return ForgetPhrase(target=None) if dismissive else None


@lru_cache(maxsize=1024)
def detect_intent(text: str) -> Intent:
    """The strongest intent in a user turn: forget > override > remember > none. Cached: a
    turn's path asks it of the same text up to three times (the gate, the detector's rules,
    the extractor)."""
    if find_forget(text) is not None:
        return Intent.FORGET
    if _OVERRIDE.search(text):
        return Intent.OVERRIDE
    if _REMEMBER.search(text):
        return Intent.REMEMBER
    return Intent.NONE


def has_override(text: str) -> bool:
    """A correction or a stated change ("scratch that", "moved to", "不再", "换成")."""
    return bool(_OVERRIDE.search(text))


def has_remember(text: str) -> bool:
    """An explicit request to keep something ("make a note that…", "帮我记一下")."""
    return bool(_REMEMBER.search(text))


def is_hedged(text: str) -> bool:
    """Said with doubt ("maybe", "可能"): a low-confidence statement."""
    return bool(_HEDGE.search(text))


def is_declaration(text: str) -> bool:
    """A statement that names one of the user's attributes ("my project codename is Falcon",
    "我的项目代号是青鸟", "我女儿的生日是五月八号"): told so that it is known, so it is learned
    at once, like an explicit "remember"."""
    return bool(_DECLARATION.search(text)) and not is_hedged(text)


def unhedged(text: str) -> str:
    """What a hedged sentence would state without its doubt (the text itself otherwise)."""
    if not is_hedged(text):
        return text
    for pattern, replacement in _UNHEDGE:
        text = pattern.sub(replacement, text)
    return text


def is_question(sentence: str) -> bool:
    """A question states nothing ("what's a book you remember?"); a polite request does."""
    text = sentence.strip()
    if _REQUEST_FRAME.match(text):
        return False
    if text.endswith(("?", "？")):
        return True
    english = not re.search(r"[\u4e00-\u9fff]", text)
    return bool((english and _EN_QUESTION.match(text)) or _ZH_QUESTION.search(text))


def is_acknowledgement(text: str) -> bool:
    """Nothing but acknowledgement, thanks or laughter ("sure thing", "ok thanks", "哈哈哈")."""
    return bool(text.strip()) and not _ACK.sub("", text).strip()


_REMEMBER_LEAD = re.compile(
    r"^(?:(?:please|pls|just|and|also|oh|so|can you|could you|i want you to|i need you to|"
    r"you should|note|remember|keep in mind|make a note|take a note|note down|jot (?:this |that "
    r"|it )?down|write (?:this|that|it) down|save this|for future reference|for the record|"
    r"going forward|from now on|just so you (?:know|remember)|so you (?:know|remember)|"
    r"(?:don'?t|do not) forget|this|that|of this|of that)\b[\s:：,，-]*)+|"
    r"^(?:请|麻烦|你要|你|千万|一定要|帮我|替我|给我)*(?:记住|记得|别忘了|不要忘了|别忘记|记一下|记下来|记着|"
    r"记下|备注一下|备注)[\s:：,，]*", re.I)


def strip_request(sentence: str) -> str:
    """The content of a remember request: "Make a note that X." → "X."."""
    return _REMEMBER_LEAD.sub("", sentence.strip()).strip() or sentence.strip()


# "remember to bring the games", "don't forget to send me the recipe", "remember, it takes
# time", "记得多喝水", "别忘了准备礼物": a reminder or advice to the listener, not a request to
# keep something (a note needs the speaker's own information: "remember that I …")
_REMINDER = re.compile(
    r"^\s*(?:(?:and|oh|also|just|pls|please|so|but|hey)\s+)*(?:remember|(?:don'?t|do not|never)"
    r" forget|make sure|be sure)\b(?:\s+to\b|\s*[,!—-]|\s+(?!(?:that\s+)?(?:i|my|me|we|our)\b)"
    r"(?:it|this|you|your|he|she|they|the)\b)|"
    r"(?:^|[，,])\s*(?:记得|别忘了|不要忘了|别忘记|千万别忘了?)(?![我跟帮给替])", re.I)
# a statement with a tag ("I'm allergic to cats, remember?") or told as news ("did I tell
# you my mom moved in with us?") still states what it says
_TAG = re.compile(r"[,，]?\s*(?:remember|right|you know|ok|okay|lol|haha|记得吧|对吧|你知道的)"
                  r"\s*[?？]+\s*$", re.I)
_NEWS = re.compile(r"^\s*(?:did i (?:ever |already )?(?:tell|mention to) (?:you|u)|guess what|"
                   r"have i told you|did you hear)\b[,:]?\s*(?:that\s+)?", re.I)


def is_reminder(sentence: str) -> bool:
    """A reminder or advice to the listener ("remember to …", "记得…"): no note is made."""
    return bool(_REMINDER.search(sentence))


def stated_part(sentence: str) -> str:
    """What a sentence states once a tag question or a news frame is taken off ("I'm
    allergic to cats, remember?" → "I'm allergic to cats."); the sentence otherwise."""
    text = sentence.strip()
    tagged = _TAG.search(text)
    if tagged and tagged.start() > 0:
        text = text[:tagged.start()].rstrip() + "."
    news = _NEWS.match(text)
    if news and news.end() < len(text):
        text = text[news.end():].rstrip("?？ ") + "."
    return text
