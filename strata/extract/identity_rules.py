"""The speaker's name and age as people say them when they introduce themselves (Chinese and
English, issue #36): "Derek here", "Hi, I'm Chen Li, 52 years old", "Sam, 34, Aquarius",
"im 19", "I'm seventy-one", "我是志强，开出租的", "叫我周周就好", "我今年六十八了", "我都45了".

Written from the shape of a self-introduction, not from labelled sentences: a name is a
capitalised word (or two) in the place an introduction puts it — after "I'm", "my name's",
"call me", before "here" — that is no word of nationality, faith, mood or time
(``_NOT_NAME``); a Chinese name after 我是 is a word jieba tags as a person's name, not a
relation (二姑, 宝妈). An age is a number from 10 to 99 (digits, English number words,
Chinese numerals) where an introduction puts it: after "I'm" with no unit behind it, before
"years old", after the speaker's name and a comma, after 我 (今年, 都, 才, 已经) ending in 岁,
了 or the clause. What someone else is called or how old they are is left out by the callers
(``life_rules.speakers_part``, questions and hypotheticals dropped).
Keys: ``identity.name``, ``identity.age``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator

from strata.extract.timephrases import zh_number

__all__ = ["match_identity"]

Fact = tuple[str, str, bool]

_UNITS = ("ones|teens|tens|twenties|thirties|forties|fifties|sixties|seventies|eighties|"
          "nineties")
_EN_ONES = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
            "eight": 8, "nine": 9}
_EN_TEENS = {"ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14,
             "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19}
_EN_TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70,
            "eighty": 80, "ninety": 90}
_EN_NUMBER = (r"(?:(?:" + "|".join(_EN_TENS) + r")(?:[- ](?:" + "|".join(_EN_ONES) + r"))?|"
              + "|".join(_EN_TEENS) + r")")
_AGE = r"(?P<age>[1-9]\d|" + _EN_NUMBER + r")"
# what a number after "I'm" counts when it is no age ("I'm 20 minutes away", "I'm 10k down")
_NOT_AGE = (r"(?!\s*(?:%|percent|minutes?|mins?|hours?|hrs?|days?|weeks?|months?|k\b|miles?|km|"
            r"pounds?|lbs?|kgs?|kilos?|dollars?|bucks|quid|grand|euros?|times|people|of\b|"
            r"in\b|out\b|for\b|on\b|pages?|steps?|points?|games?|episodes?|chapters?|feet|ft|"
            r"inches|cm|m\b|degrees|floors?|stops?|" + _UNITS + r"|/|:|\.\d|,\d))")
_ZH_AGE = r"(?P<age>[1-9]\d|[一二三四五六七八九]?十[一二三四五六七八九]?)"
_CAP = r"[A-Z][a-z]+(?:-[A-Z][a-z]+)?"
_NAME = r"(?-i:(?P<name>" + _CAP + r"(?: " + _CAP + r")?))"
_GREETING = (r"(?:(?:hi|hey|hello|hiya|heya|yo|hola|ciao|howdy|ok|okay|so|right|morning|"
             r"evening|good (?:morning|evening|afternoon))\b[^A-Za-z]*(?:(?:all|everyone|"
             r"everybody|guys|folks|there|team|y'all|you two|friends)\b[^A-Za-z]*)?)")
_NOT_NAME = {
    # pronouns, fillers, moods and states that follow "I'm" capitalised
    "I", "He", "She", "It", "We", "They", "The", "And", "But", "So", "Just", "Not", "Still",
    "Also", "Really", "Very", "Sorry", "Fine", "Good", "Great", "Here", "Back", "Done", "Ok",
    "Okay", "Sure", "Home", "Tired", "Busy", "Excited", "Happy", "Glad", "New", "Free",
    "Ready", "Late", "Off", "In", "On", "Out", "Up", "Down", "Going", "Trying", "Thinking",
    "Looking", "Currently", "Planning", "Working", "Living", "Moving", "Learning", "Lol",
    "Haha", "Oh", "My", "Our", "Now", "Today", "Tomorrow", "Yesterday", "Only", "Always",
    "Never", "Both", "Pretty", "Kinda", "Literally", "Officially", "Finally", "Single",
    "Married", "Divorced", "Retired", "Pregnant", "Vegan", "Vegetarian", "Allergic", "Gay",
    "Straight", "Bi", "Trans", "Deaf", "Blind", "Left", "Right", "Male", "Female", "Mom",
    "Mum", "Dad", "Mama", "Papa", "Same", "Me", "You", "Him", "Her", "Nobody", "Anyone",
    "Anybody", "Everyone", "Everybody", "Someone", "Somebody", "Noone", "Nothing",
    # "Looky here", "Over here", "Come here": a place, not who is speaking
    "Look", "Looky", "Lookie", "Lookee", "Over", "Come", "Sit", "Stay", "Wait", "Hold", "Get",
    "Stop", "All", "Everything", "Nowhere", "Somewhere", "There", "Where", "Who", "What",
    # days, months, holidays
    "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday", "January",
    "February", "March", "April", "May", "June", "July", "August", "September", "October",
    "November", "December", "Christmas", "Easter", "Ramadan", "Diwali",
    # faiths and peoples ("I'm Catholic", "I'm British", "I'm Cantonese")
    "Catholic", "Christian", "Muslim", "Jewish", "Hindu", "Buddhist", "Sikh", "Mormon",
    "Atheist", "Agnostic", "Protestant", "Orthodox", "American", "British", "English",
    "Scottish", "Welsh", "Irish", "Canadian", "Australian", "Kiwi", "Chinese", "Japanese",
    "Korean", "Vietnamese", "Thai", "Filipino", "Filipina", "Indian", "Pakistani",
    "Bangladeshi", "Nepali", "Mexican", "Brazilian", "Argentinian", "Colombian", "Chilean",
    "Peruvian", "Cuban", "French", "German", "Italian", "Spanish", "Portuguese", "Dutch",
    "Belgian", "Swiss", "Austrian", "Swedish", "Norwegian", "Danish", "Finnish", "Polish",
    "Czech", "Russian", "Ukrainian", "Greek", "Turkish", "Egyptian", "Nigerian", "Ghanaian",
    "Kenyan", "Ethiopian", "African", "European", "Asian", "Latina", "Latino", "Arab",
    "Persian", "Iranian", "Israeli", "Lebanese", "Malaysian", "Singaporean", "Indonesian",
    "Cantonese", "Taiwanese", "Hongkonger", "Texan", "Londoner", "Aussie", "Brit", "Yank",
    "Northern", "Southern", "Gen", "Team", "Sir", "Madam", "Mr", "Mrs", "Ms", "Dr",
    # star signs ("Aquarius if you care")
    "Aries", "Taurus", "Gemini", "Cancer", "Leo", "Virgo", "Libra", "Scorpio", "Sagittarius",
    "Capricorn", "Aquarius", "Pisces"}
_NAME_AFTER = r"(?=\s*(?:[,.!;:)(—–~-]|$)|\s+(?:here|and|from|btw|by the way|again)\b)"

_EN_NAME = [
    # "my name's Maya", "name's Sol", "call me Jo", "you can call me Dee"
    re.compile(r"(?:\bmy\s+|^\W*|[,.!?;:—–-]\s*)name(?: is|'?s)\s+" + _NAME, re.I),
    re.compile(r"\b(?:i'?m called|i am called|(?:you can |just |people |everyone |they )?"
               r"call me)\s+" + _NAME, re.I),
    # "Hi everyone, I'm Emily!", "hello, I'm Liu Yang,", "yo I'm Kwame", "I am Chen Li, 52"
    re.compile(r"(?:^|[,.!?;:—–-]\s*|\b" + _GREETING + r")\s*(?:i'?m|i am)\s+" + _NAME
               + _NAME_AFTER, re.I),
    # "Derek here", "Hola, Jorge here", "It's Margaret here", "Hi all! Kieran here"
    re.compile(r"^\W*(?:" + _GREETING + r")?\s*(?:(?:it'?s|this is)\s+)?" + _NAME + r"\s+here\b",
               re.I),
    # "Hi, it's Dario.", "hey this is Tom." (after a greeting: "It's Monday" stays out)
    re.compile(r"^\W*" + _GREETING + r"\s*(?:it'?s|this is)\s+" + _NAME + _NAME_AFTER, re.I),
    # "This is Tom. Tom Whitaker." at the start of a turn
    re.compile(r"^\W*this is\s+" + _NAME + r"(?=\s*[.!]|$)", re.I),
]
_EN_AGE = [
    # "I'm 19", "im 19", "I am seventy-one", "I just turned 30", "I'm nearly forty"
    re.compile(r"\b(?:i'?m|im|i am|i just turned|i turned|i'?ve just turned|i'?m turning)\s+"
               r"(?:only |just |now |nearly |almost |about |turning |officially )?"
               + _AGE + r"\b" + _NOT_AGE, re.I),
    # "I am Chen Li, 52 years old", "I'm Maya, 29,"
    re.compile(r"\b(?:i'?m|i am)\s+" + _NAME + r",\s*" + _AGE + r"\b(?:\s*(?:years?|yrs?)"
               r"[\s-]*old)?" + _NOT_AGE, re.I),
    # "Sam, 34, Aquarius", "Mateo, 26, Buenos Aires", "Hi! Kim, 41 from Leeds", "Jo here, 27"
    re.compile(r"^\W*(?:" + _GREETING + r")?\s*" + _NAME + r"(?:\s+here)?,\s*" + _AGE
               + r"(?=\s*(?:[,.;!/]|$)|\s+(?:and|from|yo|y/o|years|yrs)\b)", re.I),
    # "27 today" at a turn's start
    re.compile(r"^\W*" + _AGE + r"\s+today\b", re.I),
]
# an age the speaker will be, not is ("want to buy before I'm 30")
_SOME_DAY = re.compile(r"\b(?:before|by the time|until|till|til|when|once|by|after|if)\s*$", re.I)
_ZH_BOUND = r"(?=[^\w\u4e00-\u9fff]|$)"  # punctuation, a space, an emoji or the end
_ZH_END = r"(?:岁|周岁|了(?!解|吗|么|吧)|" + _ZH_BOUND + r")"
_ZH_AGE_RULES = [
    # "我今年六十八了", "我22，", "我都45了", "我才23", "我今年四十六，"
    re.compile(r"我(?:今年|都|才|已经|也|马上|快|刚满?|过了年就)?(?:已经|快|都)?" + _ZH_AGE
               + _ZH_END),
    # "今年28，在深圳" at a clause's start
    re.compile(r"(?:^|[，,。！!]\s*)(?:今年|本人)" + _ZH_AGE + _ZH_END),
    # "28岁，在深圳做产品", "重庆妹子，31了" at a clause's start
    re.compile(r"(?:^|[，,。！!]\s*)" + _ZH_AGE + r"(?:岁|了)(?:了|" + _ZH_BOUND + r")"),
]
_ZH_NAME_CALLED = re.compile(r"叫我(?!一)(?P<name>[\u4e00-\u9fffA-Za-z]{1,6}?)"
                             r"(?:就好|就行|就可以|好了|吧|就成)")
_ZH_NAME_LATIN = re.compile(r"我是(?-i:(?P<name>[A-Z][a-z]+))(?=[，,。！!～~\s]|$)")
_ZH_FULL_NAME = re.compile(r"我姓[\u4e00-\u9fff][，,]\s*(?P<name>[\u4e00-\u9fff]{2,3})"
                           r"(?=[，,。！!]|$)")
# what jieba may tag as a name after 我是 but is a relation or a role ("宝妈", "二姑")
_ZH_NOT_NAME = re.compile(r"(?:妈|爸|姐|哥|弟|妹|姑|姨|叔|舅|婶|奶|爷|婆|公|嫂|娘|师|生|员|长|"
                          r"人|家|民|友|粉|迷|控|党|狗|族)$")
# words for a kind of person that fill 我是 's place ("我是吃货，")
_ZH_KINDS = frozenset({"吃货", "社恐", "社牛", "路痴", "新手", "小白", "菜鸟", "打工人", "上班族",
                       "学渣", "学霸", "宅男", "宅女", "单身狗", "独生女", "独生子", "北漂", "沪漂",
                       "本地", "外地", "过来人", "老住户", "新人", "楼主", "群主", "本人", "老手",
                       "素食者", "夜猫子", "处女座", "射手座", "双子座", "狮子座", "天蝎座"})
# jieba's tags of words that are no name: verbs, numbers, measures, pronouns, places, times
_ZH_NOT_NAME_TAGS = frozenset({"v", "vn", "vd", "m", "mq", "q", "r", "p", "d", "c", "u", "uj",
                               "ul", "ns", "nt", "t", "f", "s", "y", "e", "o"})
_ZH_GREETING = re.compile(r"(?:大家好|你好|您好|各位好|哈喽|嗨|hello|hi|hey)[^\w\u4e00-\u9fff]*$",
                          re.I)


def _not_a_name(words: str) -> bool:
    """Whether a capitalised run is no name: any of its words is a ``_NOT_NAME``."""
    return any(part in _NOT_NAME for part in re.split(r"[ -]", words))


def _en_age(text: str) -> int | None:
    low = text.lower().replace(" ", "-")
    if low.isdigit():
        return int(low)
    tens, _, ones = low.partition("-")
    if tens in _EN_TEENS and not ones:
        return _EN_TEENS[tens]
    if tens in _EN_TENS:
        return _EN_TENS[tens] + (_EN_ONES.get(ones, 0) if ones else 0)
    return None


def _zh_name(sentence: str) -> str | None:
    """The name after 我是 ("我是思琪，…"): a word of two or three characters that ends the
    clause and is no relation, role or kind of person (``_ZH_NOT_NAME``), that jieba tags as
    a person's name, or (jieba knows few given names: 雨桐 is a noun to it) that stands where
    an introduction puts the name, at the sentence's start or after a greeting."""
    import jieba
    import jieba.posseg

    jieba.setLogLevel(logging.WARNING)
    words = jieba.posseg.lcut(sentence)
    for i in range(len(words) - 2):
        if words[i].word != "我" or words[i + 1].word != "是":
            continue
        word, flag = words[i + 2].word, words[i + 2].flag
        after = words[i + 3].word if i + 3 < len(words) else ""
        if (not re.fullmatch(r"[\u4e00-\u9fff]{2,3}", word)
                or (after and not re.fullmatch(r"[^\w\u4e00-\u9fff]+", after))
                or _ZH_NOT_NAME.search(word) or word in _ZH_KINDS):
            return None
        before = "".join(w.word for w in words[:i])
        introduced = not before.strip() or _ZH_GREETING.search(before)
        if flag.startswith("nr") or (introduced and flag not in _ZH_NOT_NAME_TAGS):
            return str(word)
        return None
    return None


def match_identity(sentence: str) -> Iterator[Fact]:
    """The speaker's name and age in one of their sentences, at most one of each."""
    name: str | None = None
    age: int | None = None
    if re.search(r"[\u4e00-\u9fff]", sentence):
        for zh_rule in _ZH_AGE_RULES:
            if (m := zh_rule.search(sentence)) and age is None:
                age = zh_number(m.group("age"))
        for zh_rule in (_ZH_NAME_CALLED, _ZH_NAME_LATIN, _ZH_FULL_NAME):
            if (m := zh_rule.search(sentence)) and name is None:
                name = m.group("name")
        if name is None and "我是" in sentence:
            name = _zh_name(sentence)
    for pattern in _EN_NAME:
        if (name is None and (m := pattern.search(sentence))
                and not _not_a_name(m.group("name"))):
            name = m.group("name")
    for pattern in _EN_AGE:
        if age is None and (m := pattern.search(sentence)):
            if _SOME_DAY.search(sentence[: m.start()]):
                continue  # "before I'm 30", "by the time im 30": an age to come
            if "name" in m.groupdict() and _not_a_name(m.group("name")):
                continue
            age = _en_age(m.group("age"))
            name = name or m.groupdict().get("name")
    if name:
        yield "identity.name", name, False
    if age is not None and 10 <= age <= 99:
        yield "identity.age", str(age), False
