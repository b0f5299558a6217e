"""The credential detectors behind `fleetmem.memory.redaction` (D25): detect-secrets' plugins and
fleetmem's own, and the scan that finds every span to redact. Imported by `redaction` on the first
text that may hold a secret (detect-secrets imports `requests`: a tenth of a second no process
should pay before it needs it).

Public API: `scan(text) -> list[Finding]` (unmerged spans), `ENTROPY_LIMIT`,
`ENTROPY_MIN_LENGTH`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from detect_secrets.filters.heuristic import is_potential_uuid, is_sequential_string
from detect_secrets.plugins.aws import AWSKeyDetector
from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
from detect_secrets.plugins.base import BasePlugin, RegexBasedDetector
from detect_secrets.plugins.basic_auth import BasicAuthDetector
from detect_secrets.plugins.discord import DiscordBotTokenDetector
from detect_secrets.plugins.github_token import GitHubTokenDetector
from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
from detect_secrets.plugins.high_entropy_strings import Base64HighEntropyString
from detect_secrets.plugins.jwt import JwtTokenDetector
from detect_secrets.plugins.keyword import CONFIG_DENYLIST_REGEX_TO_GROUP, KeywordDetector
from detect_secrets.plugins.keyword import DENYLIST as KEYWORDS
from detect_secrets.plugins.mailchimp import MailchimpDetector
from detect_secrets.plugins.npm import NpmDetector
from detect_secrets.plugins.openai import OpenAIDetector
from detect_secrets.plugins.private_key import PrivateKeyDetector
from detect_secrets.plugins.pypi_token import PypiTokenDetector
from detect_secrets.plugins.sendgrid import SendGridDetector
from detect_secrets.plugins.slack import SlackDetector
from detect_secrets.plugins.square_oauth import SquareOAuthDetector
from detect_secrets.plugins.stripe import StripeDetector
from detect_secrets.plugins.telegram_token import TelegramBotTokenDetector
from detect_secrets.plugins.twilio import TwilioKeyDetector

from fleetmem.memory.secret_spans import MAYBE_SECRET, Finding

#: Above this Shannon entropy (bits per character over the base64 alphabet) a bare token of
#: `ENTROPY_MIN_LENGTH`+ characters that mixes upper case, lower case and digits is a secret.
ENTROPY_LIMIT = 4.0
ENTROPY_MIN_LENGTH = 24


class FleetmemTokenDetector(RegexBasedDetector):
    """fleetmem's own API tokens: "fm_" + 43 url-safe base64 characters (fleetmem.tokens)."""

    secret_type = "fleetmem token"  # noqa: S105 (a label, not a secret)
    denylist = (re.compile(r"(?<![A-Za-z0-9_])fm_[A-Za-z0-9_-]{43}(?![A-Za-z0-9_-])"),)


#: detect-secrets' detectors for credentials with a known shape, most specific first (the first to
#: claim a span names it). Left out: IPs (not credentials), and Artifactory's short `AP…` shape,
#: which matches ordinary capitalised words with digits.
_DETECTORS: tuple[RegexBasedDetector, ...] = (
    FleetmemTokenDetector(),
    AWSKeyDetector(),
    GitHubTokenDetector(),
    GitLabTokenDetector(),
    SlackDetector(),
    JwtTokenDetector(),
    StripeDetector(),
    OpenAIDetector(),
    SendGridDetector(),
    TwilioKeyDetector(),
    DiscordBotTokenDetector(),
    MailchimpDetector(),
    NpmDetector(),
    PypiTokenDetector(),
    TelegramBotTokenDetector(),
    SquareOAuthDetector(),
    AzureStorageKeyDetector(),
    BasicAuthDetector(),
)
_KEYWORD = KeywordDetector()
_PRIVATE_KEY = PrivateKeyDetector()
_ENTROPY = Base64HighEntropyString()

_NAMES = {
    "AWS Access Key": "aws_access_key",
    "JSON Web Token": "jwt",
    "Basic Auth Credentials": "basic_auth",
    "Secret Keyword": "secret_keyword",
    "fleetmem token": "fm_token",
}
_KEY_BLOCK = re.compile(
    r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)", re.S
)
_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=_-")
_TOKEN = re.compile(rf"(?<![A-Za-z0-9+/=_-])[A-Za-z0-9+/=_-]{{{ENTROPY_MIN_LENGTH},}}(?![A-Za-z0-9+/=_-])")
_KEYWORD_HINT = re.compile("|".join(KEYWORDS), re.I)
_KEYWORD_BEFORE, _KEYWORD_AFTER = 40, 160
#: every keyword of the detector contains one of these (a substring test before its patterns)
_KEYWORD_STEMS = ("key", "pass", "pwd", "secret", "contrase")
_OWN_ID = re.compile(r"[a-z]{1,4}_[0-9A-Z]{26}")


def _pattern_name(plugin: BasePlugin) -> str:
    kind = str(plugin.secret_type)
    return _NAMES.get(kind) or re.sub(r"[^a-z0-9]+", "_", kind.lower()).strip("_")


def _widen(line: str, start: int, end: int) -> tuple[int, int]:
    """The span grown to the whole token it sits in (a match inside a longer token hides nothing)."""
    while start > 0 and line[start - 1] in _TOKEN_CHARS:
        start -= 1
    while end < len(line) and line[end] in _TOKEN_CHARS:
        end += 1
    return start, end


def _secret_span(m: re.Match[str]) -> tuple[int, int]:
    """The secret of a detector's match: its last group that does not open the match (a prefix
    group such as GitHub's `ghp` does), else the whole match."""
    for g in range(len(m.groups()), 0, -1):
        if m.group(g) and m.start(g) > m.start():
            return m.span(g)
    return m.span()


def _regex_findings(plugin: RegexBasedDetector, line: str) -> Iterator[tuple[int, int]]:
    """The spans of `plugin`'s patterns in `line` whose secret the plugin itself reports
    (`analyze_string`, with its own checks: a JWT must decode)."""
    values = [v for v in plugin.analyze_string(line) if v]
    if not values:
        return
    for regex in plugin.denylist:
        for m in regex.finditer(line):
            start, end = _widen(line, *_secret_span(m))
            if any(v in line[start:end] for v in values):
                yield start, end


def _keyword_values(line: str) -> Iterator[str]:
    yield from _KEYWORD.analyze_string(line)
    for value in _KEYWORD.analyze_string(line, denylist_regex_to_group=CONFIG_DENYLIST_REGEX_TO_GROUP):
        if value and not any(c.isspace() for c in value):
            yield value


def _line_findings(line: str, offset: int) -> Iterator[Finding]:
    for plugin in _DETECTORS:
        for start, end in _regex_findings(plugin, line):
            yield Finding(offset + start, offset + end, _pattern_name(plugin))
    lowered = line.lower()
    if not any(word in lowered for word in _KEYWORD_STEMS):
        return
    for hint in _KEYWORD_HINT.finditer(line):
        # the keyword detector reads a window around each keyword (its patterns are costly on a long line)
        at = max(0, hint.start() - _KEYWORD_BEFORE)
        window = line[at : hint.end() + _KEYWORD_AFTER]
        for value in {v for v in _keyword_values(window) if len(v) >= 4}:
            for m in re.finditer(r"(?<![A-Za-z0-9])" + re.escape(value) + r"(?![A-Za-z0-9])", window):
                start, end = _widen(window, m.start(), m.end())
                yield Finding(offset + at + start, offset + at + end, "secret_keyword")


def _high_entropy(token: str) -> bool:
    if min(sum(c.isupper() for c in token), sum(c.islower() for c in token), sum(c.isdigit() for c in token)) < 2:
        return False  # words, slugs, hex hashes: the cheap test first
    if _OWN_ID.fullmatch(token) or is_potential_uuid(token) or is_sequential_string(token):
        return False
    return _ENTROPY.calculate_shannon_entropy(token) > ENTROPY_LIMIT


def scan(text: str) -> list[Finding]:
    found: list[Finding] = []
    if any(True for _ in _PRIVATE_KEY.analyze_string(text)):
        found += [Finding(m.start(), m.end(), "private_key") for m in _KEY_BLOCK.finditer(text)]
        if not found:  # a PuTTY key or a header without the dashes: the marker's line
            for m in re.finditer(r"[^\n]*(?:PRIVATE KEY|PuTTY-User-Key-File)[^\n]*", text):
                found.append(Finding(m.start(), m.end(), "private_key"))
    offset = 0
    for line in text.splitlines(keepends=True):
        if MAYBE_SECRET.search(line):
            found += _line_findings(line, offset)
        offset += len(line)
    found += [Finding(m.start(), m.end(), "high_entropy") for m in _TOKEN.finditer(text) if _high_entropy(m.group())]
    return found
