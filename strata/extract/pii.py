"""Sensitive-data detection and redaction, applied before anything enters long-term memory
and again at recall.

Detected: mainland China resident ID numbers (checksum verified), bank cards (Luhn
verified), phone numbers, passwords and PINs stated in text ("the password for my bank is
…", "wifi pwd: …", "门禁密码是…"), API keys and tokens (known prefixes, and long mixed-case
runs such as an AWS secret access key), and exact addresses down to the flat (English and
Chinese: "Apt 3B", "A座1203室", "5栋2单元801").
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

from pydantic import BaseModel

__all__ = ["PiiFinding", "find_pii", "high_entropy", "luhn_ok", "redact", "resident_id_ok"]

_ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
_ID_CHECK = "10X98765432"


def resident_id_ok(number: str) -> bool:
    """GB 11643 checksum of an 18-character resident ID number."""
    if not re.fullmatch(r"\d{17}[\dXx]", number):
        return False
    total = sum(int(d) * w for d, w in zip(number[:17], _ID_WEIGHTS, strict=True))
    return _ID_CHECK[total % 11] == number[17].upper()


def luhn_ok(digits: str) -> bool:
    """The Luhn checksum that bank card numbers carry."""
    nums = [int(d) for d in digits if d.isdigit()]
    if not 13 <= len(nums) <= 19:
        return False
    total = 0
    for i, d in enumerate(reversed(nums)):
        if i % 2:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


class PiiFinding(BaseModel):
    kind: str
    start: int
    end: int


def high_entropy(token: str) -> bool:
    """A credential-looking run: long, mixing upper case, lower case and digits."""
    body = token.strip("=")
    if re.fullmatch(r"(?:[A-Z][a-z]+|[a-z]+|\d+|[-_/])+", body):
        return False  # words glued together ("Getting-Started-Guide-2024"), not a key
    return (len(body) >= 24 and any(c.isupper() for c in body)
            and any(c.islower() for c in body) and any(c.isdigit() for c in body)
            and len(set(body)) >= 12)


_Check = Callable[[str], bool]
_VALUE = r"[^\s，。；！？、,;]+"  # a stated secret ends at whitespace or punctuation
# a strong label ("password", "密码") makes any value secret; a weak one ("token", "pin",
# "key") only a value with a digit in it ("the token is expired" is not a secret)
_STRONG = (r"pass(?:word|wd|code|phrase)|pwd|secret[ _-]?access[ _-]?key|private[ _-]?key|"
           r"client[ _-]?secret")
_WEAK = r"pin(?: code| number)?|api[ _-]?key|access[ _-]?key|secret(?: key)?|token|otp|auth code"
_QUALIFIER = r"(?:\s+(?:for|of|to|on)\s+(?:my|the|our|your)?\s*[\w .'-]{1,30}?)?"
_PATTERNS: list[tuple[str, re.Pattern[str], _Check | None]] = [
    ("resident_id", re.compile(r"(?<!\d)\d{17}[\dXx](?![\dA-Za-z])"), resident_id_ok),
    ("bank_card", re.compile(r"(?<!\d)(?:\d[ -]?){12,18}\d(?!\d)"), luhn_ok),
    ("api_key", re.compile(
        r"(?i)\b(?:sk-[A-Za-z0-9_-]{16,}|(?:sk|pk|rk)_(?:live|test)_[A-Za-z0-9]{10,}|"
        r"gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|(?:AKIA|ASIA)[0-9A-Z]{16}|"
        r"xox[abpr]-[A-Za-z0-9-]{10,}|AIza[0-9A-Za-z_-]{30,}|glpat-[A-Za-z0-9_-]{16,}|"
        r"eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,})"), None),
    ("secret", re.compile(
        r"(?i)(?:\b(?:[a-z]+_)*(?:" + _STRONG + r")" + _QUALIFIER
        + r"\s*(?:is|was|=|:|：)\s*" + _VALUE + r"|\b(?:" + _WEAK + r")" + _QUALIFIER
        + r"\s*(?:is|was|=|:|：)\s*[^\s，。；！？、,;]*\d" + _VALUE.replace("+", "*")
        + r"|(?:密码|口令|支付密码|验证码|秘钥|密钥|私钥|令牌|pin码)\s*(?:是|为|:|：)?\s*"
        + _VALUE + ")"),
     None),
    ("token", re.compile(r"(?<![A-Za-z0-9/+_.:-])[A-Za-z0-9/+_-]{24,}={0,2}(?![A-Za-z0-9/+_-])"),
     high_entropy),
    ("phone", re.compile(
        r"(?<!\d)(?:\+?86[ -]?)?1[3-9]\d[ -]?\d{4}[ -]?\d{4}(?!\d)|"
        r"(?<![\d\w])\+?1?[ -.]?\(?\d{3}\)?[ -.]\d{3}[ -.]\d{4}(?!\d)"), None),
    ("address", re.compile(
        r"(?i)\b\d{1,6}\s+(?:[A-Z][a-z]+\s){1,3}(?:street|st|avenue|ave|road|rd|boulevard|blvd|"
        r"lane|ln|drive|dr|court|ct|way)\b\.?(?:,?\s*(?:apt|apartment|unit|suite)\s*\w+)?|"
        r"\b(?:apt|apartment|suite|flat)\.?\s*#?\d{1,5}[A-Za-z]?\b|"
        r"[\u4e00-\u9fff]{2,12}(?:路|街|大道|巷|弄)\d{1,5}号(?:[\d\u4e00-\u9fff-]{0,12}(?:室|楼|单元))?|"
        # a flat in a building: "望京SOHO A座1203室", "幸福小区5栋2单元801"
        r"(?:[\u4e00-\u9fffA-Za-z]{2,12}(?:小区|花园|公寓|大厦|家园|新城|苑|城|广场|中心|SOHO)\s*)?"
        r"(?:[A-Za-z0-9]{1,3}|[一二三四五六七八九十]{1,3})(?:座|栋|幢|号楼)\s*(?:\d{1,2}单元)?"
        r"\s*\d{2,5}(?:室|号|房)?"),
     None),
]


def find_pii(text: str) -> list[PiiFinding]:
    """Every sensitive span, checksums verified where the format has one."""
    found: list[PiiFinding] = []
    for kind, pattern, check in _PATTERNS:
        for match in pattern.finditer(text):
            if check is not None and not check(re.sub(r"[ -]", "", match.group(0))):
                continue
            if any(f.start < match.end() and match.start() < f.end for f in found):
                continue
            found.append(PiiFinding(kind=kind, start=match.start(), end=match.end()))
    return sorted(found, key=lambda f: f.start)


@functools.lru_cache(maxsize=16_384)  # recall redacts the same memories query after query
def redact(text: str) -> str:
    """The text with each sensitive span replaced by ``[REDACTED:<kind>]``."""
    out, last = [], 0
    for finding in find_pii(text):
        out.append(text[last:finding.start])
        out.append(f"[REDACTED:{finding.kind}]")
        last = finding.end
    out.append(text[last:])
    return "".join(out)
