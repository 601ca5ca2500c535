"""Facts of ordinary conversation (Chinese and English, issue #36): the people and pets in
the speaker's life, work, home, languages, goals, health, diet and tastes, as they come up
in chat ("Luna (our new pup) keeps us busy", "my sister Rachel is getting married", "Still
at the brewery", "我们上个月领养了一只柯基，叫豆豆").

Every rule is about the speaker: a possessive of the speaker's ("my", "our", "我", "我们家")
or the speaker as the subject. What someone else has or does, advice, a question and a
hypothetical are left out by the callers (``is_question``) and by ``_NOT_SPEAKERS``. Values
are the thing itself: a pet's name, the person's relation and name, the employer, the city.
Keys: ``pet.<species>[:<name>]``, ``relationship.<relation>[:<name>]``, ``work.employer``,
``work.role``, ``location.home``, ``identity.origin``, ``language.<language>``,
``goal:<what>``, ``health.<condition>``, ``constraint.diet``; with ``status_rules`` (work, study,
things, health) and ``identity_rules`` (name, age) called from here.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from strata.extract.identity_rules import match_identity
from strata.extract.status_rules import match_status

__all__ = ["LifeFact", "match_life", "names_a_person", "relation_of", "speakers_part",
           "species_of"]

LifeFact = tuple[str, str, bool]  # key, value, whether the sentence states a change

_SPECIES = {
    "dog": "dog", "dogs": "dog", "puppy": "dog", "pup": "dog", "doggo": "dog", "corgi": "dog",
    "labrador": "dog", "lab": "dog", "retriever": "dog", "husky": "dog", "beagle": "dog",
    "poodle": "dog", "terrier": "dog", "pug": "dog", "dachshund": "dog", "shepherd": "dog",
    "cat": "cat", "cats": "cat", "kitten": "cat", "kitty": "cat", "rabbit": "rabbit",
    "bunny": "rabbit", "hamster": "hamster", "parrot": "bird", "bird": "bird",
    "budgie": "bird", "goldfish": "fish", "fish": "fish", "turtle": "turtle",
    "tortoise": "turtle", "horse": "horse", "pony": "horse", "guinea pig": "guinea pig",
    "lizard": "lizard", "gecko": "lizard", "snake": "snake", "ferret": "ferret",
    "狗": "狗", "狗狗": "狗", "小狗": "狗", "柯基": "狗", "金毛": "狗", "哈士奇": "狗",
    "泰迪": "狗", "柴犬": "狗", "边牧": "狗", "拉布拉多": "狗", "猫": "猫", "猫咪": "猫",
    "小猫": "猫", "橘猫": "猫", "布偶": "猫", "英短": "猫", "兔子": "兔子", "仓鼠": "仓鼠",
    "鹦鹉": "鸟", "乌龟": "乌龟", "金鱼": "鱼"}
_EN_SPECIES = "|".join(sorted((s for s in _SPECIES if s.isascii()), key=len, reverse=True))
_ZH_SPECIES = "|".join(sorted((s for s in _SPECIES if not s.isascii()), key=len,
                              reverse=True))
_RELATIONS = {
    "wife": "wife", "husband": "husband", "partner": "partner", "boyfriend": "boyfriend",
    "girlfriend": "girlfriend", "fiance": "fiance", "fiancé": "fiance", "fiancee": "fiancee",
    "fiancée": "fiancee", "mom": "mother", "mum": "mother", "mother": "mother",
    "mama": "mother", "dad": "father", "father": "father", "papa": "father",
    "parents": "parents", "sister": "sister", "brother": "brother", "son": "son",
    "daughter": "daughter", "kids": "children", "children": "children", "twins": "twins",
    "baby": "baby", "grandma": "grandmother", "grandmother": "grandmother",
    "grandpa": "grandfather", "grandfather": "grandfather", "aunt": "aunt", "uncle": "uncle",
    "cousin": "cousin", "niece": "niece", "nephew": "nephew", "best friend": "best friend",
    "roommate": "roommate", "in-laws": "in-laws", "mother-in-law": "mother-in-law",
    "father-in-law": "father-in-law", "stepson": "stepson", "stepdaughter": "stepdaughter",
    "老婆": "妻子", "妻子": "妻子", "媳妇": "妻子", "太太": "妻子", "爱人": "爱人",
    "老公": "丈夫", "丈夫": "丈夫", "先生": "丈夫", "男朋友": "男朋友", "女朋友": "女朋友",
    "对象": "对象", "妈妈": "妈妈", "妈": "妈妈", "老妈": "妈妈", "母亲": "妈妈", "爸爸": "爸爸",
    "爸": "爸爸", "老爸": "爸爸", "父亲": "爸爸", "爸妈": "父母", "父母": "父母", "姐姐": "姐姐",
    "妹妹": "妹妹", "哥哥": "哥哥", "弟弟": "弟弟", "儿子": "儿子", "女儿": "女儿", "闺女": "女儿",
    "孩子": "孩子", "娃": "孩子", "奶奶": "奶奶", "爷爷": "爷爷", "外婆": "外婆", "姥姥": "外婆",
    "外公": "外公", "姥爷": "外公", "婆婆": "婆婆", "公公": "公公", "岳父": "岳父", "岳母": "岳母",
    "室友": "室友", "闺蜜": "闺蜜", "发小": "发小", "双胞胎": "双胞胎"}
_EN_REL = "|".join(sorted((r for r in _RELATIONS if r.isascii()), key=len, reverse=True))
_ZH_REL = "|".join(sorted((r for r in _RELATIONS if not r.isascii()), key=len, reverse=True))
_NAME = r"(?-i:(?P<name>[A-Z][a-z]{1,15}))"
_NOT_NAME = {"I", "He", "She", "It", "We", "They", "The", "And", "But", "So", "Just", "Is",
             "Was", "Has", "Had", "Who", "That", "This", "Then", "Also", "Still", "Lol",
             "Omg", "Haha", "Oh", "My", "Our", "Not", "Now", "Today", "Yesterday", "Monday",
             "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"}
# a sentence about what someone else does, or what the speaker would/should do
_NOT_SPEAKERS = re.compile(
    r"^\s*(?:if|when you|you|your|imagine|what if|suppose)\b|\b(?:you should|you could|"
    r"you need to|you have to|you'd|would you|should you|if i were|if i had|if i was)\b|"
    r"^\s*(?:(?:and |oh |also |just |pls |please |so )*(?:remember|don'?t forget|do not forget|"
    r"make sure|be sure)\b(?:\s+to\b|,))|^\s*(?:如果|要是|假如|假设)|你(?:应该|可以|要|得|需要)|"
    r"的话[，,]|(?:^|[，,])\s*(?:记得|别忘了|不要忘了|别忘记|千万别|一定要)(?!我)", re.I)

# A clause whose subject is someone else in the speaker's life ("my roommate just adopted a
# ferret", "我表哥在新加坡做程序员", "我同事养了一只哈士奇"): the person is the speaker's
# relation, but the pet, the job and the city are that person's (``speakers_part``).
_OTHER_PEOPLE_EN = ("friend|friends|buddy|mate|coworker|co-worker|colleague|boss|manager|"
                    "neighbour|neighbor|classmate|teammate|landlord|ex|bf|gf|bestie|flatmate|"
                    "housemate|" + _EN_REL)
_OTHER_PEOPLE_ZH = ("朋友|同事|邻居|同学|老板|领导|上司|表哥|表姐|表弟|表妹|堂哥|堂姐|堂弟|堂妹|"
                    "舅舅|姑姑|阿姨|叔叔|舅妈|婶婶|嫂子|姐夫|妹夫|前任|前男友|前女友|" + _ZH_REL)
_SOMEONE_ELSE = re.compile(
    r"^\s*(?:(?:and|but|so|also|oh|lol|haha|plus|well|btw|ok|okay)\s+)*(?:my|our)\s+"
    r"(?:[\w-]+\s+){0,2}?(?:" + _OTHER_PEOPLE_EN + r")(?:'s)?(?![\w-])"
    r"(?>(?:\s+(?-i:[A-Z][a-z]+)(?:'s)?(?![\w-]))?)"
    r"(?!\s*(?:and|&|or|who|,|$)|\s+(?:i|me|we)\b)"
    r"|^\s*我(?:的|家|们家的?)?(?:" + _OTHER_PEOPLE_ZH + r")(?![和跟与同]我|，|,|$)", re.I)
# clause bounds: punctuation inside a sentence, and a conjunction before the speaker again
# ("my daughter started school and I went back to work")
_CLAUSE = re.compile(r"(\s*[,;:，；：—–]\s*|\s+(?:and|but|so|while|because|though)\s+"
                     r"(?=(?:i|i'm|i've|we|we're)\b))", re.I)


def speakers_part(sentence: str) -> str:
    """The sentence with each clause about someone else cut to who it is about: "my roommate
    just adopted a ferret, it's chaos" → "my roommate, it's chaos"."""
    parts = _CLAUSE.split(sentence)
    for i in range(0, len(parts), 2):
        if match := _SOMEONE_ELSE.search(parts[i]):
            parts[i] = match.group(0)
    return "".join(parts)


_Build = Callable[[re.Match[str]], Iterator[LifeFact]]
_LEAD_WORD = re.compile(r"^(?:Honestly|Now|But|And|So|Well|Actually|Yeah|Like|Lol|Also|Plus|Oh|"
                        r"Anyway|Still|Tbh|Okay|Ok)\s+(?=[A-Z])")
_NOT_OBJ = re.compile(r"\b(?:your|you|yours|ur)\b|^(?:idea|energy|vibe|vibes|way|feeling|"
                      r"thought|sound|look|smell|taste|support|effort|it|that|this|them|you|"
                      r"those|these|him|her|the work|work|life|"
                      r"everything|everyone|people|when|how|what|你|他|她|它|什么|工作)$|"
                      r"[这那]|^(?:现在|这份|那份)", re.I)


def _pref(stance: str) -> _Build:
    """A like or dislike: ``preference:<object>`` (``dislikes <object>`` / ``不喜欢<object>``)."""
    def build(match: re.Match[str]) -> Iterator[LifeFact]:
        obj = re.sub(r"^(?:the|a|an|my|that|this)\s+", "", match.group("obj").strip(" ,.!?"),
                     flags=re.I)
        if (len(obj) < 2 and not re.search(r"[\u4e00-\u9fff]", obj)) or _NOT_OBJ.match(obj):
            return
        zh = bool(re.search(r"[\u4e00-\u9fff]", obj))
        verb = match.groupdict().get("verb") or ""
        for part in re.split(r"\s+and\s+|\s*,\s*|和|跟", obj):
            part = re.sub(r"^(?:the|a|an|my|that|this|some)\s+", "", part.strip(), flags=re.I)
            if len(part) < 2 and not zh:
                continue
            thing = f"{verb}{part}" if zh and verb in ("坐", "玩") else part
            value = thing if stance == "like" else (f"不喜欢{thing}" if zh else f"dislikes {thing}")
            yield f"preference:{thing.lower()}", value, False
    return build


def _name(match: re.Match[str], group: str = "name") -> str | None:
    value = match.groupdict().get(group)
    return value if value and value not in _NOT_NAME else None


def _pet(match: re.Match[str]) -> Iterator[LifeFact]:
    species = _SPECIES[match.group("species").lower()]
    name = _name(match) or _name(match, "name2")
    if name:
        yield f"pet.{species}:{name.lower()}", name, False
    else:
        yield f"pet.{species}", species, False


def _zh_pets(match: re.Match[str]) -> Iterator[LifeFact]:
    species = _SPECIES[match.group("species")]
    names = [n for n in re.findall(r"叫([\u4e00-\u9fffA-Za-z]{1,4}?)"
                                   r"(?=[，,。！!~～\s一另]|$|[，,]?天天)",
                                   match.group(0))]
    if not names:
        yield f"pet.{species}", species, False
    for name in names:
        yield f"pet.{species}:{name}", name, False


def _relation(match: re.Match[str]) -> Iterator[LifeFact]:
    raw = match.group("rel")
    relation = _RELATIONS.get(raw.lower(), _RELATIONS.get(raw, raw))
    name = _name(match)
    if name:
        yield f"relationship.{relation}:{name.lower()}", f"{raw.lower()} {name}", False
    else:
        yield f"relationship.{relation}", raw.lower(), False


def _fixed(key: str, group: str = "obj", change: bool = False) -> _Build:
    def build(match: re.Match[str]) -> Iterator[LifeFact]:
        value = match.group(group).strip(" ,.!?;:'\"，。！？")
        value = re.sub(r"^(?:the|a|an|my|our)\s+", "", value, flags=re.I)
        value = _LEAD_WORD.sub("", value)  # "Honestly Toronto feels like home"
        if len(value) >= 2:
            yield key.format(value.lower()), value, change
    return build


_CAP_PLACE = r"(?-i:(?P<obj>[A-Z][\w'-]+(?: [A-Z][\w'-]+){0,2}))"
_ORG = r"(?P<obj>(?:the |a |an |my )?[\w'&-]+(?: [\w'&-]+){0,3}?)"
_EN_END = (r"(?=\s*(?:[,!?;:)(]|\.(?<!\bSt\.)(?<!\bDr\.)(?<!\bMt\.))|$| and | but | so | now|"
           r" since| which| because| lol| haha| for | as )")
_LANGS = (r"(?-i:(?P<obj>Japanese|Spanish|French|German|Italian|Portuguese|Mandarin|Chinese|"
          r"Korean|Arabic|Russian|Hindi|Dutch|Swedish|Greek|Turkish|Vietnamese|Thai|Polish|"
          r"Hebrew|Cantonese|English|Tagalog|Swahili|ASL|sign language))")
_ZH_LANGS = (r"(?P<obj>日语|英语|韩语|法语|德语|西班牙语|意大利语|俄语|粤语|葡萄牙语|泰语|"
             r"阿拉伯语|手语)")
_ZH_CITY = r"(?P<obj>[\u4e00-\u9fff]{2,6}?)"

_RULES: list[tuple[re.Pattern[str], _Build]] = [
    # -- pets -------------------------------------------------------------------------------
    (re.compile(r"\b(?:my|our)\s+(?:new |little |old |sweet |rescue |second |other |baby |"
                r"senior |fur |two |three )*(?P<species>" + _EN_SPECIES + r")\b"
                r"(?:,?\s+(?:named|called)\s+" + _NAME
                + r"|,?\s+(?-i:(?P<name2>[A-Z][a-z]{1,15}))\b)?",
                re.I), _pet),
    (re.compile(r"\b(?:adopted|got|rescued|have|own|brought home|picked up|took in)\s+"
                r"(?:a|an|two|another|a second|a new|a little|this)\s+(?:new |little |rescue |"
                r"second |tiny |senior )*(?P<species>" + _EN_SPECIES + r")\b"
                r"(?:[^.!?]{0,40}?\b(?:named|called|name is|name's)\s+" + _NAME + r")?", re.I),
     _pet),
    (re.compile(r"(?-i:(?P<name>[A-Z][a-z]{1,15}))\s*\((?:our|my)\s+(?:new |little |rescue )*"
                r"(?P<species>" + _EN_SPECIES + r")\)", re.I), _pet),
    (re.compile(r"(?:养了|领养了|收养了|捡了|捡回来|买了|有)(?:一只|一条|两只|三只|只|条|个|一个)?"
                r"(?:小)?(?P<species>" + _ZH_SPECIES + r")[^。！？!?]{0,30}"), _zh_pets),
    (re.compile(r"我(?:们)?家(?:的|那只|那条)?(?P<species>" + _ZH_SPECIES + r")"), _zh_pets),
    # -- people -----------------------------------------------------------------------------
    (re.compile(r"\b(?:my|our)\s+(?:little |older |younger |big |baby |oldest |youngest |"
                r"twin |late |ex-)?(?P<rel>" + _EN_REL + r")\b(?!-|'s\b)"
                r"(?:,?\s+" + _NAME + r"\b)?", re.I), _relation),
    (re.compile(r"\bour (?P<rel>kids|twins)\b", re.I), _relation),
    (re.compile(r"我(?:的|跟|和|们家|家)?(?P<rel>" + _ZH_REL + r")"), _relation),
    # -- work -------------------------------------------------------------------------------
    (re.compile(r"\b(?:my (?:new )?job at|i (?:now |currently |still )?work (?:at|for|in)|"
                r"(?:^|,\s*|\.\s*)still (?:at|with)|i(?:'m| am) (?:now )?(?:at|with)|"
                r"the (?:actual )?job at|i work the [\w -]{2,15} (?:shift )?at|"
                r"(?:i )?started (?:a new job|working) (?:at|for))\s+" + _ORG + _EN_END, re.I),
     _fixed("work.employer")),
    (re.compile(r"\b(?:i(?:'m| am) (?:now |currently |still )?(?:teaching|working as|an?\b)|"
                r"i work as (?:a|an)|promoted to|promotion \()\s*(?P<obj>(?:senior |junior |"
                r"lead |head |staff |principal |assistant )?[a-z]+(?: [a-z]+){0,3}?)"
                r"(?=\s*(?:now|this year|at|for|in)\b|\s*[,.!?;)]|$)", re.I),
     _fixed("work.role")),
    (re.compile(r"(?:在|去了|到了)(?P<obj>[\u4e00-\u9fffA-Za-z0-9]{2,12}?)(?:当|做|任)"
                r"(?P<role>[\u4e00-\u9fff]{0,6}?(?:经理|师|员|编辑|老师|医生|护士|主管|总监|"
                r"专员|顾问|记者|作家|律师|会计))"), _fixed("work.employer")),
    (re.compile(r"(?:在|去了|到了)[\u4e00-\u9fffA-Za-z0-9]{2,12}?(?:当|做|任)"
                r"(?P<obj>[\u4e00-\u9fff]{0,6}?(?:经理|师|员|编辑|老师|医生|护士|主管|总监|专员|顾问|"
                r"记者|作家|律师|会计))"), _fixed("work.role")),
    # -- home and origin --------------------------------------------------------------------
    (re.compile(r"\b" + _CAP_PLACE + r" (?:feels|is starting to feel|finally feels) like home"),
     _fixed("location.home")),
    (re.compile(r"\b(?:we(?:'re| are)|[Ii](?:'m| am)) (?:now )?(?:in|living in|based in|settled "
                r"in) (?:a [\w ]{2,20} (?:in|outside|near) )?" + _CAP_PLACE
                + r"(?: now)?" + _EN_END), _fixed("location.home")),
    (re.compile(r"\b[\w-]+ years in (?!(?:January|February|March|April|May|June|July|August|"
                r"September|October|November|December)\b)" + _CAP_PLACE + r"\b"),
     _fixed("location.home")),
    (re.compile(r"\b[Ii] (?:grew up|was born|was raised) in (?:a [\w ]{2,20} (?:in|outside|near) )?"
                + _CAP_PLACE), _fixed("identity.origin")),
    (re.compile(r"我(?:是)?" + _ZH_CITY + r"(?:长大|出生|人)的"), _fixed("identity.origin")),
    (re.compile(r"我(?:是|一个)(?P<obj>(?!好|坏|病|客|穷|大|年轻|普通|外地|本地|老实|懒|宅)"
                r"[\u4e00-\u9fff]{2,3}?)人(?!的)"), _fixed("identity.origin")),
    (re.compile(r"我老家(?:是|在)?" + _ZH_CITY + r"(?:的|人|[，,。]|$)"),
     _fixed("identity.origin")),
    (re.compile(r"(?:一个人|我们)?(?:住|定居)在" + _ZH_CITY + r"(?:[，,。！？]|$|了)"),
     _fixed("location.home")),
    (re.compile(r"在" + _ZH_CITY + r"(?:待|住|呆)了[一二两三四五六七八九十几\d]+年"),
     _fixed("location.home")),
    # -- languages --------------------------------------------------------------------------
    (re.compile(r"\b(?:learning|studying|teaching myself|taking|i speak|i can speak|speak "
                r"enough|practicing|practising|brushing up on|i'm fluent in|fluent in)\s+"
                + _LANGS, re.I), _fixed("language.{0}")),
    (re.compile(r"(?:学|练|说|讲|会)(?:点|一点|了)?" + _ZH_LANGS), _fixed("language.{0}")),
    # -- goals ------------------------------------------------------------------------------
    # a goal says it is one ("the dream is", "saving up to", "目标是"); "I'd love to …" is
    # mostly politeness in conversation ("I'd love to have you over again")
    (re.compile(r"\b(?:the dream is(?: still)?|my (?:big |biggest |life )?(?:dream|goal) is|"
                r"i(?:'m| am) determined to|(?:i'm|i am|we're|we are) saving (?:up )?(?:for|to)|"
                r"i(?:'ve| have) been thinking (?:a lot )?about (?=going back|moving|starting|"
                r"becoming|getting|opening|applying|switching|buying)|my plan is to|"
                r"i(?:'m| am) (?:training|studying|preparing) for|"
                r"i (?:really )?(?:want|hope|plan) to(?! (?:say|tell|thank|ask|know|see|hear|"
                r"check|let|make sure|try it|have you)\b))\s+"
                r"(?P<obj>(?!(?:it|that|this|you|them|there)\b)(?![\w' -]*\byou)"
                r"[\w' -]{3,50}?)"
                + _EN_END, re.I),
     _fixed("goal:{0}")),
    (re.compile(r"(?:目标是|梦想是|(?:明年|今年|以后|将来)?(?:打算|计划)(?:明年|今年|以后|将来)?)"
                r"(?P<obj>[\u4e00-\u9fffA-Za-z0-9]{2,12}?)(?:[，,。！？!?]|$)"),
     _fixed("goal:{0}")),
    (re.compile(r"(?:在)?备考(?P<obj>[\u4e00-\u9fffA-Za-z0-9]{2,8}?)(?:[，,。！？]|$)"),
     _fixed("goal:{0}")),
    # -- health and diet --------------------------------------------------------------------
    (re.compile(r"\b(?:my|i have|i've got|diagnosed with|i suffer from) (?:bad |chronic |mild )?"
                r"(?P<obj>arthritis|asthma|diabetes|migraines?|celiac(?: disease)?|"
                r"insomnia|anxiety|depression|adhd|eczema|back pain|a bad back|"
                r"high blood pressure|ibs|lactose intolerance)\b", re.I),
     _fixed("health.{0}")),
    (re.compile(r"\b(?P<obj>celiac|lactose intolerant|diabetic|asthmatic)\b", re.I),
     _fixed("health.{0}")),
    (re.compile(r"(?P<obj>[\u4e00-\u9fff]{1,4}过敏|哮喘|糖尿病|高血压|失眠|偏头痛|颈椎病|胃病|"
                r"鼻炎)"), _fixed("health.{0}")),
    (re.compile(r"\b(?:i(?:'m| am)|we(?:'ve| have) gone|i(?:'ve| have) gone|i went|went|"
                r"gone) (?:now |fully |totally |completely |mostly )?(?P<obj>vegetarian|vegan|"
                r"gluten[ -]free|dairy[ -]free|keto|pescatarian|sober|plant[ -]based)\b", re.I),
     _fixed("constraint.diet", change=True)),
    (re.compile(r"\bi (?:don't|do not) (?:really )?(?:drink|eat) (?P<obj>anymore|any more|"
                r"alcohol|meat|pork|beef|dairy|sugar)\b", re.I),
     lambda m: iter([("constraint.diet", "no alcohol" if m.group("obj").startswith("any")
                      else f"no {m.group('obj').lower()}", True)])),
    (re.compile(r"(?P<obj>吃素|素食|戒酒|不喝酒|戒糖|不吃肉|生酮)"),
     lambda m: iter([("constraint.diet", "素食" if m.group("obj") in ("吃素", "素食", "不吃肉")
                      else m.group("obj"), False)])),
    # -- likes and dislikes ------------------------------------------------------------------
    (re.compile(r"\b(?:obsessed with|addicted to|hooked on|really into|so into|a huge fan of|"
                r"a big fan of)\s+(?:that |this |the )?(?:one )?(?P<obj>[\w' -]{2,40}?)" + _EN_END,
                re.I), _pref("like")),
    (re.compile(r"(?:^|[,.;]\s*)(?P<obj>[\w' -]{2,30}?) (?:is|are) (?:literally |honestly |"
                r"still )?(?:my (?:comfort food|favou?rite thing|happy place|jam|thing|"
                r"favou?rite)|the best thing ever)\b", re.I), _pref("like")),
    (re.compile(r"\b(?:it's|its) (?:literally |honestly )?my favou?rite thing\b(?P<obj>)", re.I),
     lambda m: iter(())),
    (re.compile(r"\bgive me (?P<obj>[\w' -]{2,60}?) any ?day\b", re.I), _pref("like")),
    (re.compile(r"\b(?:never been|not really|i'm not|i am not|not) (?:a|much of a|an) "
                r"(?P<obj>[\w-]{3,20}) (?:person|fan|guy|girl)\b", re.I), _pref("dislike")),
    (re.compile(r"(?:^|,\s*|\band\s+)(?:still |really |honestly )?(?:hate|can't stand|"
                r"cannot stand|despise|loathe)\s+(?P<obj>[\w' -]{2,30}?)" + _EN_END, re.I),
     _pref("dislike")),
    (re.compile(r"(?:^|[,.;]\s*|though |although |you know )(?P<obj>[\w-]{3,20}) puts me to "
                r"sleep\b", re.I), _pref("dislike")),
    (re.compile(r"我[^，。！？]{0,4}?(?:受不了|讨厌|怕|不喜欢|不爱)(?P<verb>吃|喝|看|玩|听|坐|用)?"
                r"(?P<obj>[\u4e00-\u9fffA-Za-z]{1,8}?)(?=[，。！？；,.!?;]|$|了|的)"),
     _pref("dislike")),
    (re.compile(r"(?:我|^)[^，。！？]{0,4}?(?<!不)(?:超爱|最爱|很爱|挺喜欢|超喜欢|特别喜欢|很喜欢|"
                r"迷上了|爱上了|喜欢上了)(?P<verb>吃|喝|看|玩|听)?"
                r"(?P<obj>[\u4e00-\u9fffA-Za-z]{1,8}?)(?=[，。！？；,.!?;]|$|了|的)"),
     _pref("like")),
]


def match_life(sentence: str) -> list[LifeFact]:
    """The facts these rules find in one sentence of the speaker's, first per key."""
    if _NOT_SPEAKERS.search(sentence):
        return []
    found: dict[str, LifeFact] = {}
    for pattern, build in _RULES:
        for match in pattern.finditer(sentence):
            for key, value, change in build(match):
                found.setdefault(key, (key, value, change))
    for key, value, change in (*match_status(sentence), *match_identity(sentence)):
        found.setdefault(key, (key, value, change))
    return list(found.values())


def species_of(text: str) -> str | None:
    """The species a pet word in ``text`` names ("our beagle Biscuit" → dog, "柯基" → 狗)."""
    low = text.lower()
    found = re.search(rf"\b(?:{_EN_SPECIES})\b", low) or re.search(_ZH_SPECIES, text)
    return _SPECIES[found.group(0)] if found else None


def relation_of(text: str) -> str | None:
    """The relation a word in ``text`` names ("my sister Rosa" → sister, "老公" → 丈夫)."""
    low = text.lower()
    found = re.search(rf"\b(?:{_EN_REL})\b", low) or re.search(_ZH_REL, text)
    return _RELATIONS[found.group(0)] if found else None


_PERSON = re.compile(r"\b(?:" + _OTHER_PEOPLE_EN + r"|fiancee?|sil|mil|fil|bil|dh|dd|ds|"
                     r"grandkids?|grandchildren|stepmom|stepdad|godmother|godfather|pals?|"
                     r"bff|mates)\b|" + _OTHER_PEOPLE_ZH + r"|老伴|侄|外甥|孙", re.I)


def names_a_person(text: str) -> bool:
    """Whether ``text`` names someone by who they are to the speaker ("sister Rosa", "my
    friend Leah", "老伴", "同事"): a relation or another person in the speaker's life."""
    return relation_of(text) is not None or bool(_PERSON.search(text))
