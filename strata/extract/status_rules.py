"""What the speaker does and has (Chinese and English, issue #36): work, study, things they
own, health and diet, in the words people use for them in conversation and
with an assistant ("I work as a nurse at St. Mary's", "I'm a junior at Ohio State", "I drive
an old Subaru", "I was diagnosed with asthma", "我在一家银行上班", "我是学计算机的").

Written from what each attribute is, not from the labelled sentences: a role is a word for
a person who does something (``_ROLE``), a school names itself as one (University, College,
大学, 学院 …), a condition has the shape of one (…itis, …osis, diabetes, 病, 症, 炎).
Keys: ``work.employer``, ``work.role``, ``education.school``, ``education.field``,
``possession.<thing>``, ``health.<condition>``, ``constraint.diet`` (the speaker's name:
``identity_rules``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

__all__ = ["match_status"]

Fact = tuple[str, str, bool]
_Build = Callable[[re.Match[str]], Iterator[Fact]]

_EN_END = (r"(?=\s*[,.!?;:)(]|$| and | but | so | now| since| which| because| lol| for | as |"
           r" in | at | where | with | who | while | because)")
_ORG = r"(?P<obj>(?-i:[A-Z][\w'&.-]*(?: (?:of |and |& |de |the )?[A-Z][\w'&.-]*){0,4}))"
_ROLE_WORD = (r"(?:[a-z-]+(?:er|or|ist|ian|ant|ent|eon|ee|man|woman)|nurse|chef|cook|pilot|"
              r"student|vet|clerk|coach|barista|model|editor|agent|analyst|officer|medic|"
              r"tutor|intern|resident|freelancer|teacher|professor|lecturer|scientist|"
              r"librarian|pharmacist|therapist|dentist|surgeon|attorney|paralegal|"
              r"accountant|architect|mechanic|electrician|plumber|carpenter|firefighter|"
              r"cop|detective|nanny|realtor|cashier|waitress|bartender|sommelier|artist|midwife|"
              r"physio|paramedic|carer|postdoc)")
_ROLE = (r"(?P<obj>(?:(?:senior|junior|lead|head|staff|principal|assistant|chief|"
         r"freelance|full-time|part-time|self-employed|registered|high school|middle school|"
         r"elementary school|software|data|product|project|graphic|ux|ui|web|civil|"
         r"mechanical|marketing|sales|account|social|dental|medical|research|lab|"
         r"kindergarten|math|science|english|history|music|art|pe|er|icu|"
         r"[a-z]+ grade)[ -])*" + _ROLE_WORD + r")")
# the names of jobs a sentence may start with ("Firefighter in Phoenix."): a list, since a
# capitalised word of a job's shape opens many sentences ("Whatever", "Remember", "Together")
_OCCUPATION = (r"(?:nurse|doctor|gp|surgeon|dentist|vet|pharmacist|paramedic|midwife|physio|"
               r"physiotherapist|therapist|psychologist|counsellor|counselor|teacher|lecturer|"
               r"professor|tutor|engineer|developer|dev|programmer|designer|architect|"
               r"accountant|lawyer|solicitor|barrister|paralegal|chef|cook|baker|barista|"
               r"bartender|waiter|waitress|firefighter|police officer|cop|soldier|pilot|"
               r"driver|mechanic|electrician|plumber|carpenter|builder|farmer|gardener|"
               r"cleaner|nanny|journalist|writer|editor|photographer|artist|illustrator|"
               r"musician|actor|dancer|scientist|researcher|postdoc|analyst|consultant|"
               r"manager|recruiter|librarian|student|intern|radiographer|"
               r"optometrist|hairdresser|barber|realtor|estate agent|copywriter|translator|"
               r"social worker|carer|caregiver|receptionist|cashier|courier|surveyor|"
               r"economist|actuary|banker|trader|marketer|entrepreneur|founder)")
_NOT_ROLE = re.compile(r"\b(?:junior|senior|major|minor|sophomore|freshman|lover|fan|owner|"
                       r"beginner|member|believer|sucker|loser|winner|"
                       r"hater|eater|drinker|sleeper|talker|thinker|worrier|introvert|"
                       r"extrovert|user|customer|player|reader|viewer|listener|runner|"
                       r"walker|gamer|foodie|mother|father|brother|sister|daughter|"
                       r"partner|roommate|neighbor|neighbour|outsider|newcomer|other|"
                       r"quarter|water|number|order|letter|corner|center|centre|summer|"
                       r"winter|dinner|weather|paper|matter|answer|power|tower|finger|"
                       r"monster|disaster|character|computer|printer|charger|burger)$", re.I)
_SCHOOL = (r"(?P<obj>(?-i:(?:[A-Z][\w'.&-]*\s+){0,4}(?:University|College|Institute|School|"
           r"Academy|Polytechnic|Conservatory|U)(?:\s+of(?:\s+[A-Z][\w'.&-]*){1,3})?|"
           r"(?:[A-Z][\w'.&-]*\s+){1,3}(?:State|Tech)|[A-Z]{2,6}))")
_FIELD = r"(?P<field>[a-z][a-z -]{2,40}?)"
_THINGS = (r"(?P<thing>car|truck|van|suv|motorcycle|motorbike|scooter|vespa|bike|bicycle|"
           r"e-bike|boat|piano|guitar|violin|drum kit|keyboard|camera|laptop|macbook|"
           r"ipad|tablet|iphone|phone|pixel|kindle|tesla|prius|subaru|honda|toyota|"
           r"jeep|house|apartment|condo|flat|cabin|townhouse|garden|3d printer|"
           r"espresso machine|record player|telescope|treadmill|peloton|couch|sofa)")
_CONDITION = (r"(?P<obj>(?:type [12] |mild |severe |chronic |bad |early |seasonal )?"
              r"(?:[a-z]+(?:itis|osis|emia|pathy|algia)|diabetes|asthma|migraines?|"
              r"allergies|eczema|psoriasis|adhd|ocd|ptsd|anxiety|depression|insomnia|"
              r"celiac(?: disease)?|crohn'?s(?: disease)?|ibs|gout|lupus|epilepsy|vertigo|"
              r"tinnitus|sleep apnea|high blood pressure|high cholesterol|a bad back|"
              r"a bad knee|back pain|knee pain|[a-z]+ (?:disease|disorder|syndrome|cancer|"
              r"injury|intolerance)))")
_NOT_CONDITION = re.compile(r"^(?:media|ia|trivia|pizzeria|cafeteria|criteria|california|"
                            r"ism|optimism|tourism|journalism|racism|mechanism|organism|"
                            r"capitalism|realism)$", re.I)
def _put(key: str, group: str = "obj", change: bool = False) -> _Build:
    def build(match: re.Match[str]) -> Iterator[Fact]:
        value = (match.group(group) or "").strip(" ,.!?;:'\"，。！？")
        value = re.sub(r"^(?:the|a|an|my)\s+", "", value, flags=re.I)
        if len(value) >= 2:
            yield key.format(value.lower()), value, change
    return build


def _role(match: re.Match[str]) -> Iterator[Fact]:
    role = match.group("obj").strip()
    if _NOT_ROLE.search(role):
        return
    yield "work.role", role, False
    org = match.groupdict().get("org")
    if org:
        yield "work.employer", org.strip(" ,.!?"), False


def _study(match: re.Match[str]) -> Iterator[Fact]:
    school, field = match.groupdict().get("obj"), match.groupdict().get("field")
    if school:
        yield "education.school", school.strip(" ,.!?"), False
    if field and not re.match(r"(?:it|that|this|there|here|home|hard|a lot)\b", field):
        yield "education.field", field.strip(" ,.!?"), False


def _owned(match: re.Match[str]) -> Iterator[Fact]:
    thing = match.group("thing").lower()
    described = (match.groupdict().get("desc") or "").strip()
    yield f"possession.{thing}", f"{described} {match.group('thing')}".strip(), False


def _condition(match: re.Match[str]) -> Iterator[Fact]:
    condition = match.group("obj").strip()
    if not _NOT_CONDITION.match(condition.split()[-1]):
        yield f"health.{condition.lower()}", condition, False


_RULES: list[tuple[re.Pattern[str], _Build]] = [
    # -- work --------------------------------------------------------------------------------
    (re.compile(r"\b(?:i(?:'m| am)(?: now| currently| still)? (?:a|an)|i work as (?:a|an)|"
                r"i(?:'ve| have) been (?:a|an)|i(?:'m| am) working as (?:a|an)|my job is|"
                r"i got (?:a job|hired) as (?:a|an)|i was promoted to|i(?:'m| am) now)\s+"
                + _ROLE + r"(?:\s+(?:at|for|with|in)\s+(?:the |a )?(?-i:(?P<org>[A-Z][\w'&.-]*"
                r"(?: (?:of |and |& )?[A-Z][\w'&.-]*){0,4})))?" + _EN_END, re.I), _role),
    (re.compile(r"\b(?:i(?:'m| am) employed (?:at|by)|i(?:'ve| have) been (?:working )?at|"
                r"i teach at|i work (?:at|for)|i(?:'m| am) (?:interning|working) at|"
                r"i got (?:a job|hired|an offer) (?:at|with|from)|my (?:company|employer|firm) "
                r"is)\s+(?:the )?" + _ORG, re.I), _put("work.employer")),
    (re.compile(r"\bi (?:own|run|manage|started) (?:a|an|my own|our) (?P<obj>[\w' -]{2,30}?"
                r"(?:shop|store|bakery|cafe|café|restaurant|business|company|studio|salon|"
                r"practice|firm|farm|bar|clinic|agency|startup|gym))\b", re.I),
     _put("work.employer")),
    (re.compile(r"我(?:现在|目前)?在(?:一家|一个|一所)?(?P<obj>[\u4e00-\u9fffA-Za-z0-9]{2,14}?"
                r"(?:公司|医院|学校|银行|工厂|餐厅|饭店|酒店|机构|事务所|律所|研究所|出版社|"
                r"杂志社|报社|电视台|大厂|集团|小学|中学|幼儿园|店))(?:上班|工作|实习|当|做|任职|[，,。]|$)"),
     _put("work.employer")),
    (re.compile(r"我(?:是|现在是|目前是)?(?:做|干|搞)(?P<obj>[\u4e00-\u9fffA-Za-z]{2,8}?)(?:的|这行)"),
     _put("work.role")),
    (re.compile(r"我的(?:工作|职业)是(?P<obj>[\u4e00-\u9fffA-Za-z]{2,10}?)(?:[，,。！]|$)"),
     _put("work.role")),
    (re.compile(r"我(?:是|现在是|目前是)(?:一名|一个|个)?(?P<obj>[\u4e00-\u9fff]{0,8}?"
                r"(?:经理|工程师|老师|教师|医生|护士|律师|会计|设计师|程序员|司机|厨师|销售|编辑|记者|"
                r"作家|主管|总监|客服|公务员|警察|店员|助理|研究员|博士后|实习生|产品经理|运营|"
                r"教授|保安|快递员|外卖员|自由职业者|全职妈妈|全职太太))(?=[，,。！？]|$|了|，)"),
     _put("work.role")),
    # "as a pediatrician I'm…", "As a nurse, I…": the speaker's job in passing
    (re.compile(r"(?:^|[,.;!]\s*|\b(?:and|but|so)\s+)as (?:a|an) " + _ROLE
                + r"(?=,?\s+(?:i|i'm|i've|i'd|myself|my)\b)", re.I), _role),
    # "Firefighter in Phoenix.", "paediatric physio in Bristol", "Backend engineer, ex-Shopify"
    # at a sentence's start or after an introduction ("Marcus here.", "Maya, 29,")
    (re.compile(r"(?:^\W*|\b(?:here|[1-9]\d)\s*[,.]\s*)(?:an? )?(?P<obj>(?:[a-z-]+ ){0,2}?"
                + _OCCUPATION + r")(?=\s+(?:in|at|from)\s+(?-i:[A-Z])|\s*,\s*ex-)", re.I),
     _role),
    # "I teach Year 4", "I'm teaching eighth grade science this year"
    (re.compile(r"\bi(?:'m| am)? (?:now |currently |still )?teach(?:ing)? (?!at\b|in\b|(?:him|her|"
                r"them|my|you|your|it|myself|people|kids|students|how)\b)(?P<obj>[\w ]{2,30}?)"
                r"(?=\s+(?:at|in|this|now|to|for|and)\b|\s*[,.!;)]|$)", re.I),
     lambda m: iter([("work.role", f"{m.group('obj').strip()} teacher", False)])),
    # "I drive long haul", "I drive a cab", "I drive for Uber"
    (re.compile(r"\bi (?:now |still )?drive (?P<obj>long[- ]haul|(?:a|an) (?:taxi|cab|truck|lorry|"
                r"bus|forklift|delivery van|ambulance)|for (?:uber|lyft|deliveroo|a living))\b",
                re.I), lambda m: iter([("work.role", f"{m.group('obj')} driver", False)])),
    (re.compile(r"(?:我|^|[，,]\s*)(?:是)?开(?P<obj>出租车?|的士|滴滴|网约车|大货车|货车|公交车?|大巴|卡车)(?:的|[，,。]|$)"),
     lambda m: iter([("work.role", f"{m.group('obj').rstrip('车')}车司机", False)])),
    # "在广州一所小学教语文" → 语文老师
    (re.compile(r"(?:我|^)[^，。！？]{0,16}?(?<!请)教(?P<obj>语文|数学|英语|物理|化学|生物|历史|地理|政治|"
                r"音乐|美术|体育|法语|日语|德语|中文|汉语|钢琴|舞蹈|书法|编程|瑜伽)(?=[，,。！]|$|的|了|，)"),
     lambda m: iter([("work.role", f"{m.group('obj')}老师", False)])),
    # "现在做自由插画师", "转行当律师", "本人小学语文老师"
    (re.compile(r"(?:现在|目前|如今|转行|转去|改行|本人)(?:在|是)?(?:做|当|干)?(?P<obj>[\u4e00-\u9fffA-Za-z]"
                r"{0,6}?(?:经理|工程师|老师|教师|医生|护士|律师|会计|设计师|插画师|摄影师|程序员|司机|"
                r"厨师|编辑|记者|作家|主管|总监|空乘|HR|运营|销售|客服|咨询师|分析师|策划))"
                r"(?=[，,。！？]|$|了|，|的)"),
     _put("work.role")),
    # -- education ---------------------------------------------------------------------------
    (re.compile(r"\b(?:i(?:'m| am) (?:studying|majoring in|doing (?:a|my) (?:degree|"
                r"master'?s|phd|bachelor'?s) in)|i study|i major in|i(?:'ve| have) (?:a|my) "
                r"(?:degree|master'?s|phd|bachelor'?s|ba|bs|ms|ma) in|i graduated in|my major "
                r"is)\s+" + _FIELD + r"(?:\s+(?:at|from)\s+(?:the )?" + _SCHOOL + r")?" + _EN_END,
                re.I), _study),
    (re.compile(r"\b(?:i(?:'m| am) (?:a |an )?(?:freshman|sophomore|junior|senior|student|"
                r"grad student|phd student|first-year|second-year|third-year|final-year)"
                r"(?: student)? at|i graduated from|i go to|i attend|i(?:'m| am) enrolled at|"
                r"i(?:'m| am) at)\s+(?:the )?" + _SCHOOL, re.I), _study),
    (re.compile(r"我(?:是|在)?(?P<obj>[\u4e00-\u9fff]{2,10}?(?:大学|学院|中学|高中|小学))"
                r"(?:的|读|上|毕业|念)"), _put("education.school")),
    (re.compile(r"我(?:是)?(?:大学)?(?:学|读|念|修)(?P<obj>[\u4e00-\u9fffA-Za-z]{2,8}?)(?:专业|的)"),
     _put("education.field")),
    (re.compile(r"(?:在读|读|念|考上了?|报了个?)(?P<obj>研究生|研|博士|博|本科|硕士|MBA|在职研究生)"),
     _put("education.degree")),
    # -- things owned ------------------------------------------------------------------------
    (re.compile(r"\b(?:i|we) (?:have|own|drive|ride|bought|got|just bought|finally bought)"
                r" (?:a|an|my|our|this|two)\s+(?P<desc>(?:[\w'-]+ ){0,3}?)" + _THINGS + r"\b",
                re.I), _owned),
    # "my old red Vespa": a thing described is owned; "the app on my phone" says nothing
    (re.compile(r"\bmy (?P<desc>(?:(?!(?:own|new|old)\b)[\w'-]+ ){1,2})" + _THINGS
                + r"\b(?! of\b)", re.I), _owned),
    (re.compile(r"我(?:有|买了|开|骑|养着?)(?:一辆|一台|一架|一套|一把|辆|台|套|把)(?P<obj>"
                r"[\u4e00-\u9fffA-Za-z0-9]{1,10}?(?:车|钢琴|吉他|相机|电脑|房|房子|摩托|自行车|"
                r"电动车|单车|小提琴))"), _put("possession.{0}")),
    # -- health ------------------------------------------------------------------------------
    (re.compile(r"\b(?:i was diagnosed with|diagnosed with|i have|i've got|i(?:'ve| have) had|"
                r"i suffer from|i deal with|i live with|i struggle with|my)\s+" + _CONDITION
                + r"\b", re.I), _condition),
    (re.compile(r"\bi(?:'m| am) (?P<obj>lactose intolerant|diabetic|asthmatic|celiac|"
                r"pre-diabetic|prediabetic|anemic|epileptic|colorblind|color blind|deaf|"
                r"hard of hearing|pregnant)\b", re.I), _put("health.{0}")),
    (re.compile(r"我(?:有|得了|患有|查出了?|确诊了?)(?P<obj>[\u4e00-\u9fff]{1,6}?"
                r"(?:病|症|炎|过敏|哮喘|结石|三高|高血压|糖尿病|痛风))"), _put("health.{0}")),
    # -- diet --------------------------------------------------------------------------------
    (re.compile(r"\bi (?:keep|eat|follow|am on|'m on|try to eat|stick to) (?:a |an )?"
                r"(?P<obj>kosher|halal|keto|low-carb|low carb|paleo|plant-based|"
                r"mediterranean|gluten-free|dairy-free|low-sodium|low-fodmap|vegan|"
                r"vegetarian)(?: diet| food)?\b", re.I), _put("constraint.diet")),
    (re.compile(r"\bi (?:avoid|cut out|gave up|quit|stay away from|can't have|cannot have|"
                r"don't do)\s+(?P<obj>gluten|dairy|sugar|caffeine|alcohol|meat|red meat|pork|"
                r"carbs|soy|nuts|eggs|shellfish|coffee)\b", re.I),
     lambda m: iter([("constraint.diet", f"no {m.group('obj').lower()}", True)])),
    (re.compile(r"我(?:现在|目前|一直)?(?:不吃|不碰|戒了|忌口|不能吃)(?P<obj>[\u4e00-\u9fff]{1,4}?)"
                r"(?=[，,。！？了]|$)"),
     lambda m: iter([("constraint.diet", f"不吃{m.group('obj')}", False)])),
    (re.compile(r"我(?:是|一直|现在)?(?:在)?(?P<obj>吃素|素食者|清真|减肥|控糖|生酮|低碳水)"),
     _put("constraint.diet")),
]


def match_status(sentence: str) -> list[Fact]:
    """The work, study, possession, health, diet and name facts in one speaker sentence."""
    found: dict[str, Fact] = {}
    for pattern, build in _RULES:
        for match in pattern.finditer(sentence):
            for key, value, change in build(match):
                found.setdefault(key, (key, value, change))
    return list(found.values())
