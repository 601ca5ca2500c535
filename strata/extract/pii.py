"""Sensitive-data detection and redaction, applied before anything enters long-term memory
and again at recall.

Detected: mainland China resident ID numbers (checksum verified), bank cards (Luhn
verified), phone numbers, passwords and PINs stated in text ("the password for my bank is
…", "wifi pwd: …", "门禁密码是…"), API keys and tokens (known prefixes, and long mixed-case
runs such as an AWS secret access key), and exact addresses down to the flat (English and
Chinese: "Apt 3B", "A座1203室", "5栋2单元801"), and the credential formats detect-secrets'
plugins know (``known_key``: AWS, GitHub, GitLab, Slack, Stripe, JWT, private keys, …).

Text is matched as it reads, not as it is encoded: each character NFKC-normalised
(fullwidth ``ＡＫＩＡ…`` is ``AKIA…``), zero-width and bidi-control characters dropped, and
the key and number formats matched once more with the spaces taken out of runs of short
groups ("A K I A …", "4111 1111 …"). A span found in the normalised text is the span of
the characters it came from, so redaction masks the original's whole spread.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Callable, Iterator
from typing import Any

from pydantic import BaseModel

__all__ = ["PiiFinding", "find_pii", "find_secrets", "high_entropy", "holds_secret", "luhn_ok",
           "mask_secrets", "normalised", "redact", "redact_value", "resident_id_ok"]

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
_STRONG = (r"pass(?:word|wd|code|phrase)|pwd|pword|secret[ _-]?access[ _-]?key|private[ _-]?key|"
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
        + _VALUE
        # a bare "pass"/"pw" is a label only with a colon or an equals sign ("wifi pass: …")
        + r"|\b(?:pass|pw)\s*[:=：]\s*" + _VALUE + ")"),
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


# detect-secrets' own plugins, less two that are not credentials in conversation: public IP
# addresses, and Artifactory's "AP" + hex pattern that matches capitalised words
_NOT_SECRETS = {"IPPublicDetector", "ArtifactoryDetector"}


@functools.cache
def _known_keys() -> tuple[re.Pattern[str], ...]:
    """The credential patterns of detect-secrets' regex plugins (loaded on first use)."""
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
    from detect_secrets.plugins.base import RegexBasedDetector

    patterns: list[re.Pattern[str]] = []
    plugins: list[type] = list(get_mapping_from_secret_type_to_class().values())
    for plugin in plugins:
        if issubclass(plugin, RegexBasedDetector) and plugin.__name__ not in _NOT_SECRETS:
            patterns.extend(plugin().denylist)
    return tuple(patterns)


# invisible characters that hide a secret from a pattern: zero-width, soft hyphen, bidi
_INVISIBLE = frozenset("\u00ad\u180e\u200b\u200c\u200d\u200e\u200f\u2060\u2061\u2062\u2063"
                       "\u2064\ufeff\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
# formats matched again with the spaces of a spread-out run taken out (case-sensitive keys:
# lower-case prose glued together must not become one)
_SPREAD = re.compile(r"(?<!\S)(?:\S{1,6}[ \t]+){2,}\S{1,6}(?!\S)")
_GROUP = re.compile(r"\S+")
_COMPACT_LONGEST = 48  # the longest format matched glued (a GitHub token: 40)
_COMPACT: list[tuple[str, re.Pattern[str], _Check | None]] = [  # each matched whole
    ("resident_id", re.compile(r"\d{17}[\dXx]"), resident_id_ok),
    ("bank_card", re.compile(r"\d{13,19}"), luhn_ok),
    ("api_key", re.compile(r"(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{20,}|"
                           r"sk-[A-Za-z0-9]{20,}|(?:sk|rk)_live_[A-Za-z0-9]{10,}|"
                           r"glpat-[A-Za-z0-9_-]{16,}|xox[abpr]-[A-Za-z0-9-]{10,}"), None),
]


def normalised(text: str) -> tuple[str, list[int]]:
    """``text`` as it reads (per character NFKC, invisible characters dropped), and for each
    of its characters the index of the original character it came from (one more entry:
    the original's length)."""
    out: list[str] = []
    origin: list[int] = []
    for index, char in enumerate(text):
        if char in _INVISIBLE:
            continue
        plain = unicodedata.normalize("NFKC", char) if ord(char) > 127 else char
        out.append(plain)
        origin.extend([index] * len(plain))
    origin.append(len(text))
    return "".join(out), origin


def _matches(text: str) -> Iterator[tuple[str, int, int]]:
    """(kind, start, end) of every checked match in ``text``, in pattern order."""
    for kind, pattern, check in _PATTERNS:
        for match in pattern.finditer(text):
            if check is None or check(re.sub(r"[ -]", "", match.group(0))):
                yield kind, match.start(), match.end()
    for pattern in _known_keys():
        for match in pattern.finditer(text):
            yield "known_key", match.start(), match.end()
    for run in _SPREAD.finditer(text):  # "A K I A …", "4111 1111 1111 1111"
        yield from _glued(text, run.start(), run.end())


def _glued(text: str, start: int, end: int) -> Iterator[tuple[str, int, int]]:
    """Formats written spread over a run of short groups: each stretch of whole groups,
    its spaces taken out, matched whole (a key glued to the words around it is none)."""
    groups = [(m.start(), m.end()) for m in _GROUP.finditer(text, start, end)]
    for first in range(len(groups)):
        glued = ""
        for last in range(first, len(groups)):
            glued += text[groups[last][0]:groups[last][1]]
            if len(glued) > _COMPACT_LONGEST:
                break
            if last == first:
                continue  # one group: the plain patterns' case
            for kind, pattern, check in _COMPACT:
                if pattern.fullmatch(glued) and (check is None or check(glued)):
                    yield kind, groups[first][0], groups[last][1]


def find_pii(text: str) -> list[PiiFinding]:
    """Every sensitive span of ``text`` (offsets into ``text`` as given), checksums verified
    where the format has one, matched in the normalised text (``normalised``)."""
    plain, origin = normalised(text)
    found: list[PiiFinding] = []
    for kind, start, end in _matches(plain):
        if end <= start:
            continue
        span = PiiFinding(kind=kind, start=origin[start], end=origin[end - 1] + 1)
        if any(f.start < span.end and span.start < f.end for f in found):
            continue
        found.append(span)
    return sorted(found, key=lambda f: f.start)


_SECRET_KINDS = frozenset({"resident_id", "bank_card", "api_key", "secret", "known_key"})
_CREDENTIAL_KINDS = frozenset({"api_key", "secret", "known_key"})


def find_secrets(text: str) -> list[PiiFinding]:
    """The credentials and numbers among ``find_pii``'s spans — what an identifier or a name
    may never hold (a phone number or a random-looking id may be someone's user id)."""
    return [f for f in find_pii(text) if f.kind in _SECRET_KINDS]


@functools.lru_cache(maxsize=65_536)  # ids and names repeat: every request checks its own
def holds_secret(text: str, numbers: bool = True) -> bool:
    """Whether ``text`` holds a credential or (``numbers``) a card or ID number
    (``find_secrets``). An id is checked for credentials only: a random id's digits (a
    UUID's hex) pass a card's checksum one time in a few hundred."""
    kinds = _SECRET_KINDS if numbers else _CREDENTIAL_KINDS
    return any(f.kind in kinds for f in find_pii(text))


def _masked(text: str, findings: list[PiiFinding]) -> str:
    out, last = [], 0
    for finding in findings:
        out.append(text[last:finding.start])
        out.append(f"[REDACTED:{finding.kind}]")
        last = finding.end
    out.append(text[last:])
    return "".join(out)


@functools.lru_cache(maxsize=16_384)  # recall redacts the same memories query after query
def redact(text: str) -> str:
    """The text with each sensitive span replaced by ``[REDACTED:<kind>]``."""
    return _masked(text, find_pii(text))


def mask_secrets(text: str) -> str:
    """``redact`` of the credentials and numbers only (a document's support phone number
    or office address is not a secret)."""
    return _masked(text, find_secrets(text))


def redact_value(value: Any) -> Any:
    """Every string inside a JSON-like value ``redact``-ed (object keys too)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        return [redact_value(v) for v in value]
    if isinstance(value, dict):
        return {redact(k) if isinstance(k, str) else k: redact_value(v)
                for k, v in value.items()}
    return value
