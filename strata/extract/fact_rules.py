"""The fact patterns of the rule extractor (Chinese and English): sentence → key = value.

Keys name what a fact is about (``location.home``, ``work.employer``,
``preference.music:jazz music``); values are what the user said it is ("jazz music",
"Lisbon"), without the time phrase ("last year") or the filler ("now", "了") around it.
A rule marked ``change`` states a change by itself ("moved to", "搬到", "no longer").
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from strata.extract.habit_rules import match_habits
from strata.extract.life_rules import match_life, speakers_part
from strata.extract.timephrases import strip_time_phrases, zh_number

__all__ = ["FACT_RULES", "FactMatch", "is_job", "match_facts", "preference_category"]


@dataclass(frozen=True)
class FactMatch:
    """One fact a rule found in a sentence."""

    key: str
    value: str
    confidence: float
    change: bool


_Build = Callable[[re.Match[str]], tuple[str, str] | None]


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str]
    build: _Build
    change: bool = False
    confidence: float = 0.85


# -- values ----------------------------------------------------------------------------------
_EN_TAIL = re.compile(
    r"(?:\s+(?:now|these days|nowadays|any ?more|too|as well|again|instead|a lot|very much|"
    r"so much|in general|for work|for now|at all|(?:on|in|at|during|every|each|most)\s+(?:the\s+)?"
    r"(?:weekends?|mornings?|evenings?|nights?|afternoons?|day|days|week|summer|winter)))+$",
    re.I)
_ZH_TAIL = re.compile(r"(?:了|啦|呢|的|去|来|住|生活|定居|现在|一下|而已|之类)+$")
_ARTICLE = re.compile(r"^(?:a|an|the|some|to)\s+", re.I)


def clean_value(raw: str) -> str:
    """A value without its time phrase, filler or surrounding quotes and articles."""
    value = strip_time_phrases(raw.strip(" \"'“”‘’,，.。"))
    for _ in range(2):
        value = _ZH_TAIL.sub("", _EN_TAIL.sub("", value)).strip(" \"'“”‘’,，.。")
    return _ARTICLE.sub("", value)


def key_part(raw: str) -> str:
    """The normalized form of a value inside a key."""
    return re.sub(r"\s+", " ", clean_value(raw).lower())


# -- preference categories --------------------------------------------------------------------
_CATEGORY_WORDS: dict[str, tuple[str, ...]] = {
    "music": ("music", "jazz", "rock", "pop", "hip hop", "hip-hop", "rap", "classical", "blues",
              "folk", "metal", "songs", "song", "band", "bands", "opera", "k-pop", "乐", "歌",
              "摇滚", "说唱", "民谣"),
    "drink": ("coffee", "tea", "milk", "beer", "wine", "juice", "soda", "latte", "espresso",
              "matcha", "whisky", "whiskey", "cocktails", "咖啡", "茶", "奶", "酒", "豆浆", "果汁",
              "可乐", "饮料"),
    "food": ("food", "cuisine", "dishes", "sushi", "pizza", "pasta", "ramen", "noodles",
             "burgers", "steak", "curry", "dumplings", "chocolate", "dessert", "desserts",
             "spicy", "seafood", "菜", "饭", "面", "火锅", "烧烤", "寿司", "饺子", "甜食", "辣",
             "日料", "料理", "香菜", "海鲜", "肉", "水果"),
    "movie": ("movie", "movies", "film", "films", "cinema", "documentaries", "anime",
              "thrillers", "comedies", "电影", "片", "剧", "动漫", "纪录片"),
    "book": ("book", "books", "novel", "novels", "poetry", "comics", "manga", "书", "小说",
             "漫画", "诗"),
    "game": ("game", "games", "chess", "gaming", "游戏", "棋"),
    "sport": ("football", "soccer", "basketball", "tennis", "badminton", "swimming", "running",
              "yoga", "cycling", "golf", "skiing", "baseball", "volleyball", "球", "游泳",
              "跑步", "瑜伽", "骑行", "滑雪", "健身"),
    "phone": ("phone", "phones", "iphone", "android", "手机", "安卓"),
}
_VERB_CATEGORY = {"吃": "food", "喝": "drink", "听": "music", "看": "movie", "玩": "game",
                  "打": "sport", "踢": "sport", "eating": "food", "drinking": "drink",
                  "listening to": "music", "watching": "movie", "reading": "book"}


def preference_category(obj: str, verb: str | None = None) -> str | None:
    """The domain of a liked or disliked thing ("jazz music" → music), if one is known."""
    text = obj.lower()
    words = re.findall(r"[a-z][a-z'-]*", text)
    pairs = [f"{a} {b}" for a, b in itertools.pairwise(words)]
    for word in reversed(pairs + words):  # the head of an English noun phrase comes last
        for category, vocab in _CATEGORY_WORDS.items():
            if word in vocab:
                return category
    for suffix_len in range(len(text), 0, -1):  # a Chinese head is a suffix: 爵士乐 → 乐
        tail = text[-suffix_len:]
        for category, vocab in _CATEGORY_WORDS.items():
            if re.search(r"[\u4e00-\u9fff]", tail) and tail in vocab:
                return category
    return _VERB_CATEGORY.get((verb or "").lower())


def _pref_key(obj: str, verb: str | None) -> str:
    category = preference_category(obj, verb)
    return f"preference{'.' + category if category else ''}:{key_part(obj)}"


_PRONOUN_OBJ = re.compile(r"^(?:it|that|this|them|you|your|those|these|him|her|when|how|what|"
                          r"the idea|idea|energy|vibe|the way|feeling|"
                          r"the work|work|my job|the job|"
                          r"你|他|她|它|这|那|什么)\b", re.I)


def _pref(stance: str) -> _Build:
    def build(match: re.Match[str]) -> tuple[str, str] | None:
        obj = clean_value(match.group("obj"))
        if not obj or _PRONOUN_OBJ.match(obj) or obj.startswith("的"):
            return None
        zh = bool(re.search(r"[\u4e00-\u9fff]", obj))
        value = {"like": obj,
                 "dislike": f"不喜欢{obj}" if zh else f"dislikes {obj}",
                 "no_longer": f"不再喜欢{obj}" if zh else f"no longer likes {obj}"}[stance]
        return _pref_key(obj, match.groupdict().get("verb")), value
    return build


def _fixed(key: str, value: str | None = None) -> _Build:
    """``key`` may hold ``{0}``: the normalized first group; the value is the group unless
    given ("allergic"); a value of ``{verb}`` names what is not eaten or drunk."""
    def build(match: re.Match[str]) -> tuple[str, str] | None:
        group = match.group("obj")
        obj = clean_value(group)
        if not obj:
            return None
        if value == "{verb}":
            verb = (match.group("verb") or "").lower()
            said = "does not drink" if verb in ("drink", "drinking", "喝") else "does not eat"
            return key.format(key_part(obj)), said
        return key.format(key_part(obj)), value or obj
    return build


def _age(match: re.Match[str]) -> tuple[str, str] | None:
    years = zh_number(match.group("obj"))
    return ("identity.age", str(years)) if years and 0 < years < 130 else None


def _favorite(match: re.Match[str]) -> tuple[str, str] | None:
    value = clean_value(match.group("obj"))
    return (f"favorite.{key_part(match.group('what'))}", value) if value else None


_ORG_NOT = re.compile(r"^(?:家|家里|这里|那里|这儿|那儿|国外|外地|老家|外面|公司|单位|本地|"
                      r"北京|上海|广州|深圳|杭州|南京|成都|重庆|武汉|西安|天津|苏州|长沙|郑州|青岛|"
                      r"厦门|大连|沈阳|济南|合肥|福州|昆明|香港|台湾|澳门)$|[省市区县镇村]$")


def _employer(match: re.Match[str]) -> tuple[str, str] | None:
    org = clean_value(match.group("obj"))
    return None if not org or _ORG_NOT.search(org) else ("work.employer", org)


# -- the rules ------------------------------------------------------------------------------
_END = r"(?=\s*[,.!?;:，。！？；]|$| and | but | as | now| with| because| since| so | which| who)"
_ZEND = r"(?=[，。！？；,.!?;]|$|了|的时候|，不是)"
# a capitalised name; "of", "and", "de la" … only inside it ("Bosnia and Herzegovina"), never
# as its end ("I live in Boston and work at …")
_CAP = (r"(?-i:(?P<obj>[A-Z][\w'&-]*(?:(?: (?:of|and|&|de|la|del|the))* (?!I\b)[A-Z][\w'&-]*"
        r"(?=[\s,.!?;:]|$))*))")
_NAME = r"(?-i:(?P<obj>[A-Z][\w'-]+(?: [A-Z][\w'-]+)?))"
_WORD = r"(?-i:(?P<obj>[A-Z][\w-]{1,30}))"
_SUBJ = (r"\b(?:i|we|my family|my wife and i|my husband and i|my partner and i|"
         r"my girlfriend and i|my boyfriend and i)")
_ZT = (r"(?:上个?月|上周|上个?星期|去年|前年|昨天|前天|今年|年初|年底|最近|前段时间|前几天|"
       r"刚刚?|已经|终于|\d{4}年|[一二两三四五六七八九十\d]+(?:天|周|个月|年)前|现在|目前)*")
_ZOBJ = r"(?P<obj>[\u4e00-\u9fffA-Za-z0-9]{1,12}?)"
_OCC = (r"(?:师|员|生|家|经理|工程师|老师|医生|律师|设计师|总监|主管|创始人|记者|作家|司机|"
        r"护士|会计)")
_EN_PREF_OBJ = r"(?P<obj>[\w '&-]{2,40}?)"
_LIKE = r"(?:like|love|enjoy|adore|prefer)"


def _en(regex: str, build: _Build, change: bool = False, conf: float = 0.85) -> _Rule:
    return _Rule(re.compile(regex, re.I), build, change, conf)


def _zh(regex: str, build: _Build, change: bool = False, conf: float = 0.85) -> _Rule:
    return _Rule(re.compile(regex, re.I), build, change, conf)


FACT_RULES: list[_Rule] = [
    _en(r"\bmy name is " + _NAME, _fixed("identity.name")),
    _en(r"\bcall me (?-i:(?P<obj>[A-Z][\w'-]+))", _fixed("identity.name")),
    _en(r"\bi(?:'m| am) (?P<obj>\d{1,3}) years? old", _age),
    _en(r"\bi(?:'m| am) (?:now |currently )?(?:a|an) (?!(?:bit|little|lot|big|huge|fan|person|"
        r"morning|night|fast|slow|good|bad|great|terrible)\b)(?P<obj>[a-z][a-z -]{2,40}?)" + _END,
        _fixed("identity.occupation")),
    _en(r"\bi (?:now |currently )?work as (?:a|an) (?P<obj>[a-z][a-z -]{2,40}?)" + _END,
        _fixed("identity.occupation")),
    _en(r"\bi (?:just |recently )?(?:started (?:a new job|working) (?:at|for)|joined|got an? "
        r"(?:new )?(?:job|offer|position) (?:at|with|from)|switched jobs to|moved to a new job "
        r"at)\s+" + _CAP, _employer, change=True),
    _en(r"\bi (?:currently |now )?work (?:at|for) " + _CAP, _employer),
    _en(_SUBJ + r"(?:'ve| have)? (?:just |recently |finally |already )?(?:moved|relocated) "
        r"(?:back |over |away )?(?:from (?-i:[A-Z][\w'-]*(?: [A-Z][\w'-]*)*) )?to " + _CAP,
        _fixed("location.home"), change=True),
    _en(r"\bi(?:'m| am)? ?(?:currently |now )?(?:live|living|based) in " + _CAP,
        _fixed("location.home")),
    _en(r"\bi(?:'m| am) (?:originally )?from " + _CAP, _fixed("identity.origin")),
    _en(r"\bi (?:was born|grew up) in " + _CAP, _fixed("identity.origin")),
    _en(r"\bi(?:'m| am) allergic to (?P<obj>[\w '-]{2,40}?)" + _END,
        _fixed("constraint.allergy:{0}", "allergic")),
    _en(r"\bi(?:'m| am) (?:now |a )?(?P<obj>vegetarian|vegan|pescatarian)\b(?! any ?more)",
        _fixed("constraint.diet")),
    _en(r"\bi (?:no longer|stopped|quit|gave up) (?P<verb>eat|drink|eating|drinking) "
        r"(?P<obj>[\w '-]{2,30}?)" + _END, _fixed("constraint.diet:{0}", "{verb}"), change=True),
    _en(r"\bi (?:don't|do not|never|can't|cannot) (?P<verb>eat|drink) (?P<obj>[\w '-]{2,30}?)"
        + _END, _fixed("constraint.diet:{0}", "{verb}")),
    _en(r"\bmy (?:absolute |all-time )?favou?rite (?P<what>[a-z]+(?: [a-z]+)?) (?:is|are) "
        r"(?P<obj>[\w '&-]{2,40}?)" + _END, _favorite),
    _en(r"\bi no longer " + _LIKE + r" " + _EN_PREF_OBJ + _END, _pref("no_longer"), change=True),
    _en(r"\bi (?:don't|do not) " + _LIKE + r" " + _EN_PREF_OBJ + r" any ?more\b",
        _pref("no_longer"), change=True),
    _en(r"\bi (?:really |absolutely |just )?(?:hate|dislike|can't stand|don't like|do not like) "
        r"(?:(?P<verb>eating|drinking|listening to|watching|reading) )?" + _EN_PREF_OBJ + _END,
        _pref("dislike")),
    _en(r"\bi(?:'ve| have)? (?:just |recently |now )?(?:switched|changed|moved over) (?:over )?"
        r"(?:from [\w '-]{2,30}? )?to " + _EN_PREF_OBJ + _END, _pref("like"), change=True),
    _en(r"\bi (?:really |absolutely |also |just )?" + _LIKE + r" "
        r"(?:(?P<verb>eating|drinking|listening to|watching|reading) )?" + _EN_PREF_OBJ + _END,
        _pref("like")),
    _en(r"\b(?:i|we) (?:have |'ve )?decided (?:to |on )?(?P<obj>[\w ,'-]{3,60}?)" + _END,
        _fixed("decision:{0}")),
    _en(r"\b(?:project(?:'s)? )?(?:code ?name|code-name)(?: is| was|:)?\s+\"?" + _WORD,
        _fixed("project.codename")),
    _en(r"\bproject (?:is |was )?(?:called|named) \"?" + _WORD, _fixed("project.codename")),
    _en(r"\b(?:don'?t|do not|never|stop) (?:recommend|suggest)(?:ing)? (?P<obj>[\w '-]{2,40}?)"
        r"(?: to me)?(?: again| any ?more)?" + _END, _fixed("constraint.no_recommend:{0}",
                                                           "do not recommend")),
    _en(r"\bi(?:'m| am)? ?(?:might|may|maybe|probably|planning to|thinking (?:about|of)|going to)"
        r" ?(?:be )?(?P<obj>quit|quitting|leave|leaving) (?:my job|the company|work)",
        _fixed("work.status", "leaving the job")),
    # -- Chinese ---------------------------------------------------------------------------
    _zh(r"我(?:的名字)?(?:叫|是叫)" + r"(?P<obj>[\u4e00-\u9fffA-Za-z]{1,10}?)" + _ZEND,
        _fixed("identity.name")),
    _zh(r"我(?:今年)?(?P<obj>\d{1,3}|[一二两三四五六七八九十]{1,4})岁", _age),
    _zh(r"我(?:们)?(?:一家|家)?" + _ZT + r"(?:从[\u4e00-\u9fff]{2,8}?)?" + _ZT
        + r"搬(?:家)?(?:到|去)了?" + _ZOBJ + r"(?=[，。！？；,.!?;]|$|了|去|来|住|定居|生活)",
        _fixed("location.home"), change=True),
    _zh(r"我(?:现在|目前)?(?:住在|定居在|生活在)" + _ZOBJ + _ZEND, _fixed("location.home")),
    _zh(r"我(?:的)?老家(?:是|在)" + _ZOBJ + r"(?=的|人|[，。！？；,.!?;]|$)",
        _fixed("identity.origin")),
    _zh(r"我是(?:一名|一个|个|做)?(?!素食)(?P<obj>[\u4e00-\u9fff]{1,10}?" + _OCC + r")",
        _fixed("identity.occupation")),
    _zh(r"我(?:是|吃)?(?:素食者|素食主义者|吃素的|吃素)(?P<obj>)",
        lambda m: ("constraint.diet", "吃素")),  # the value in the turn's language
    _zh(r"我" + _ZT + r"(?:已经)?(?:不在|离开了?)[^，。]{1,10}?(?:上班|工作)?了[，,]\s*(?:现在)?"
        r"(?:去了|到了|在|加入了?)" + _ZOBJ + r"(?=上班|工作|[，。！？；,.!?;]|$|了)", _employer,
        change=True),
    _zh(r"我" + _ZT + r"(?:跳槽|换工作)了?[，,]?\s*(?:现在)?(?:到|去|在)了?" + _ZOBJ
        + r"(?=上班|工作|[，。！？；,.!?;]|$|了)", _employer, change=True),
    _zh(r"我" + _ZT + r"(?:入职|加入)了?" + _ZOBJ + r"(?=[，。！？；,.!?;]|$|了)", _employer,
        change=True),
    _zh(r"(?:我|^|[，,])(?:现在|目前)?(?<!不)在(?P<obj>[\u4e00-\u9fffA-Za-z0-9&]{2,20}?)"
        r"(?:上班|工作|任职|实习)", _employer),
    _zh(r"我对" + _ZOBJ + r"过敏", _fixed("constraint.allergy:{0}", "allergic")),
    _zh(r"我" + _ZT + r"(?:不再|不|不能|从不|戒了)(?P<verb>吃|喝)" + _ZOBJ + _ZEND,
        _fixed("constraint.diet:{0}", "{verb}")),
    _zh(r"我最(?:喜欢|爱)的(?P<what>[\u4e00-\u9fff]{1,6})是" + _ZOBJ + _ZEND, _favorite),
    _zh(r"我(?:很|也|还是|真的)?不再(?:喜欢|爱)(?P<verb>吃|喝|看|玩|听|用|打|踢)?" + _ZOBJ + _ZEND,
        _pref("no_longer"), change=True),
    _zh(r"我(?:很|最|特别|比较|非常|超|真的)?(?:不喜欢|讨厌|不爱)(?P<verb>吃|喝|看|玩|听|用|打|踢)?"
        + _ZOBJ + _ZEND, _pref("dislike")),
    _zh(r"我(?:很|最|特别|比较|非常|超|真的|也)?(?<!不)(?:喜欢|爱|偏好)(?P<verb>吃|喝|看|玩|听|用|打|踢)?"
        + _ZOBJ + _ZEND, _pref("like")),
    _zh(r"我[^，。！？]{0,6}?(?:改(?P<verb>喝|吃|用|听|看|玩)|(?:换成|改成)了?)" + _ZOBJ + _ZEND,
        _pref("like"), change=True),
    _zh(r"我(?:们)?(?:已经)?决定(?:了)?(?P<obj>[\u4e00-\u9fff\w]{2,30}?)" + _ZEND,
        _fixed("decision:{0}")),
    _zh(r"项目(?:的)?(?:代号|名字|名称)?(?:是|叫|名叫|为)(?P<obj>[\u4e00-\u9fffA-Za-z0-9-]{1,20}?)"
        + _ZEND, _fixed("project.codename")),
    _zh(r"(?:别|不要|不用)再?(?:给我)?推荐" + _ZOBJ + _ZEND,
        _fixed("constraint.no_recommend:{0}", "do not recommend")),
    _zh(r"我(?:可能|也许|打算|准备|考虑|想)?(?:下个月|明年|下周|今年|年底)?(?P<obj>离职|辞职|跳槽)(?![到去])",
        _fixed("work.status", "leaving the job")),
]


# what "I'm a …" names when it is a job: a word for a person who does something
_JOB_WORD = re.compile(r"(?:er|or|ist|ian|ant|ent|eon|ee|man|woman|nurse|chef|cook|pilot|"
                       r"student|vet|clerk|coach|barista|model|editor|agent|analyst|officer|"
                       r"medic|paramedic|tutor|major|intern|resident|freelancer|teacher|"
                       r"mom|dad)$", re.I)
_NOT_JOB = re.compile(r"\b(?:owl|lover|fan|person|mess|wreck|beginner|member|owner|believer|"
                      r"sucker|loser|winner|mother|father|mom|dad|monster|disaster|hater|"
                      r"eater|drinker|sleeper|talker|thinker|worrier|introvert|extrovert|"
                      r"nerves|bundle|total|huge|big|night|morning|people|dog|cat|"
                      # a one-off volunteer day, a place, a relative ("volunteer at a career
                      # fair", "homeless shelter", "sister"): no job
                      r"volunteer|shelter|center|centre|sister|brother|daughter|partner)\b", re.I)


def is_job(value: str) -> bool:
    """Whether a role's value names a job ("paediatric nurse", "会计"), not a trait or a
    thing ("night owl", "team")."""
    if re.search(r"[\u4e00-\u9fff]", value):
        return True  # a Chinese role rule already ends in a word for one (…师, …员, 会计)
    return bool(_JOB_WORD.search(value.strip())) and not _NOT_JOB.search(value)


# what a work value does not start with: "在", "一家" ("在一家旅行社" → "旅行社", "杭州一家医院"
# → "医院"), and a role's years ("当了三十年会计" → "会计")
_WORK_LEAD = re.compile(r"^(?:在)?(?:[\u4e00-\u9fff]{2,3}?(?=一家|一个|一所))?(?:一家|一个|一所)?|"
                        r"^了?(?:[一二三四五六七八九十两几\d]+年)")
_NOT_WORK = re.compile(r"^在?家(?:里)?(?:带|待|呆|休息|躺|陪)")


def _work_value(key: str, value: str) -> str | None:
    """A work fact's value without what leads into it; None for staying at home."""
    if not key.startswith("work.") or key == "work.status":
        return value
    value = _WORK_LEAD.sub("", value).strip() or value
    if _NOT_WORK.search(value) or (key == "work.employer" and _ORG_NOT.search(value)):
        return None  # staying home; a city is where, not whom, the speaker works for
    return value


def match_facts(sentence: str) -> list[FactMatch]:
    """Every fact the rules find in one sentence, the first rule per key winning. A clause
    about someone else in the speaker's life ("my roommate just adopted a ferret") gives only
    the relation: the pet, the job and the city in it are that person's. Cached: a turn's
    path asks it of the same text several times (the intent gate, the extractor, the
    working memory's summary when the turn leaves the window)."""
    return list(_facts_of(sentence))


@lru_cache(maxsize=1024)
def _facts_of(sentence: str) -> tuple[FactMatch, ...]:
    found = []
    for fact in _match_facts(speakers_part(sentence)):
        value = _work_value(fact.key, fact.value)
        if value is not None:
            found.append(FactMatch(key=fact.key, value=value, confidence=fact.confidence,
                                   change=fact.change))
    return tuple(found)


def _match_facts(sentence: str) -> list[FactMatch]:
    found: dict[str, FactMatch] = {}
    for rule in FACT_RULES:
        for match in rule.pattern.finditer(sentence):
            built = rule.build(match)
            if built is None or built[0] in found:
                continue
            key, value = built
            if key == "identity.occupation" and not is_job(value):
                continue
            found[key] = FactMatch(key=key, value=value, confidence=rule.confidence,
                                   change=rule.change)
    for key, value, change in match_life(sentence):  # people, pets, work, home, ...
        if key == "work.role" and ("identity.occupation" in found or not is_job(value)):
            continue
        if key == "work.employer" and _ORG_NOT.search(value):
            continue  # "在上海做会计": a city is where, not whom, the speaker works for
        if value.endswith("过敏") and any(k.startswith("constraint.allergy:") for k in found):
            continue  # "我对芒果过敏" is one allergy, said once
        if key not in found:
            found[key] = FactMatch(key=key, value=value, confidence=0.85, change=change)
    # a pet or a person with a name says what the bare relation says ("my sister Rachel")
    named = {k.split(":")[0] for k in found if k.startswith(("pet.", "relationship.")) and ":" in k}
    found = {k: v for k, v in found.items() if k not in named
             and not (k.startswith("constraint.diet:") and "constraint.diet" in found)}
    for habit in match_habits(sentence):  # a stable routine is a fact, a one-off an episode
        key = f"habit.{key_part(habit.activity)}"
        if key not in found:
            found[key] = FactMatch(key=key, value=habit.value, confidence=0.85, change=False)
    return list(found.values())
