"""Credential redaction for what readers are shown (docs/protocol.md: Redaction; D25). Pure: no store.

Public API:
- `redact(text) -> str`: every credential-shaped span of `text` replaced by `<REDACTED:pattern>`
  (`pattern` a short name: `aws_access_key`, `github_token`, `gitlab_token`, `slack_token`, `jwt`,
  `private_key`, `basic_auth` (the password of a connection string or URL), `secret_keyword`,
  `fm_token`, `high_entropy`, ...). The same text is scanned once per process (a bounded LRU).
- `redact_opt(text | None) -> str | None`: the same, None kept.
- `findings(text) -> list[Finding]`: the spans `redact` replaces, each `(start, end, pattern)`.
- `redact_fact(fact) -> Fact`: the fact with its `text` and `provenance` redacted.
- `shown_facts(caller, facts) -> list[Fact]`: the facts as this caller reads them: redacted for a
  remote caller, as written for the owner's local lane (`caller.remote` False).
- `redact_card(card) -> dict`: an entity card (`cards.build_card`/`fact_card` shape, or its flat
  form) with its summary, open-thread texts and edge contexts redacted (for a remote caller).

The detectors are detect-secrets' plugins (their patterns and their own checks, e.g. a JWT must
decode), used through `analyze_string` on each line; a private key's whole block is replaced, from
its BEGIN line to its END line (or the end of the text). fleetmem's own `fm_` tokens are a plugin
of the same kind (`FleetmemTokenDetector`, the library's custom-plugin form: a `RegexBasedDetector`
subclass). `KeywordDetector` runs in its quoted form and in its config form (`password: hunter2`),
the latter keeping only a value without spaces (prose after "password:" is not a secret).

High entropy: detect-secrets' entropy plugins read only quoted strings; prose holds tokens bare, so
every run of 24 or more base64/url-safe characters is measured with `Base64HighEntropyString`'s
Shannon entropy and redacted above `ENTROPY_LIMIT` when it mixes upper case, lower case and digits.
What stays: hex (its entropy cannot pass 4.0: git SHAs and hashes in prose), UUIDs (detect-secrets'
`is_potential_uuid`), slugs and words (no upper case, or no digit), fleetmem's own ids (`f_` + 26
upper-case base32 characters) and anything under 24 characters.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from functools import lru_cache
from typing import Any, NamedTuple

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

from fleetmem.models import Caller, Fact

#: Above this Shannon entropy (bits per character over the base64 alphabet) a bare token of
#: `ENTROPY_MIN_LENGTH`+ characters that mixes upper case, lower case and digits is a secret.
ENTROPY_LIMIT = 4.0
ENTROPY_MIN_LENGTH = 24
#: Texts up to this size are remembered by the LRU (larger ones, whole pages, are scanned each time).
CACHE_MAX_CHARS = 16_384
CACHE_ENTRIES = 4096


class FleetmemTokenDetector(RegexBasedDetector):
    """fleetmem's own API tokens: "fm_" + 43 url-safe base64 characters (fleetmem.tokens)."""

    secret_type = "fleetmem token"  # noqa: S105 (a label, not a secret)
    denylist = (re.compile(r"(?<![A-Za-z0-9_])fm_[A-Za-z0-9_-]{43}(?![A-Za-z0-9_-])"),)


class Finding(NamedTuple):
    start: int
    end: int
    pattern: str


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
#: A text none of whose parts this matches holds nothing any detector above can find (a fast path).
_MAYBE = re.compile(r"[A-Za-z0-9+/=_-]{16,}|PRIVATE KEY|PuTTY|://|pass|pwd|secret|key|token|contrase", re.I)


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


def _scan(text: str) -> list[Finding]:
    found: list[Finding] = []
    if any(True for _ in _PRIVATE_KEY.analyze_string(text)):
        found += [Finding(m.start(), m.end(), "private_key") for m in _KEY_BLOCK.finditer(text)]
        if not found:  # a PuTTY key or a header without the dashes: the marker's line
            for m in re.finditer(r"[^\n]*(?:PRIVATE KEY|PuTTY-User-Key-File)[^\n]*", text):
                found.append(Finding(m.start(), m.end(), "private_key"))
    offset = 0
    for line in text.splitlines(keepends=True):
        if _MAYBE.search(line):
            found += _line_findings(line, offset)
        offset += len(line)
    found += [Finding(m.start(), m.end(), "high_entropy") for m in _TOKEN.finditer(text) if _high_entropy(m.group())]
    return found


def _merged(found: Iterable[Finding]) -> list[Finding]:
    """Overlapping spans become one, named by the span that starts first (the longer on a tie)."""
    out: list[Finding] = []
    for f in sorted(found, key=lambda f: (f.start, -f.end)):
        if out and f.start < out[-1].end:
            last = out[-1]
            out[-1] = Finding(last.start, max(last.end, f.end), last.pattern)
        else:
            out.append(f)
    return out


def findings(text: str) -> list[Finding]:
    if not text or not _MAYBE.search(text):
        return []
    return _merged(_scan(text))


def _apply(text: str) -> str:
    found = findings(text)
    if not found:
        return text
    parts, at = [], 0
    for f in found:
        parts += [text[at : f.start], f"<REDACTED:{f.pattern}>"]
        at = f.end
    parts.append(text[at:])
    return "".join(parts)


@lru_cache(maxsize=CACHE_ENTRIES)
def _cached(text: str) -> str:
    return _apply(text)


def redact(text: str) -> str:
    if not text:
        return text
    return _cached(text) if len(text) <= CACHE_MAX_CHARS else _apply(text)


def redact_opt(text: str | None) -> str | None:
    return None if text is None else redact(text)


def redact_fact(fact: Fact) -> Fact:
    text, provenance = redact(fact.text), redact(fact.provenance)
    if text == fact.text and provenance == fact.provenance:
        return fact
    return fact.model_copy(update={"text": text, "provenance": provenance})


def shown_facts(caller: Caller, facts: Iterable[Fact]) -> list[Fact]:
    return [redact_fact(f) for f in facts] if caller.remote else list(facts)


def redact_card(card: dict[str, Any]) -> dict[str, Any]:
    return {
        **card,
        "summary": redact_opt(card.get("summary")),
        "open_threads": [{**t, "text": redact_opt(t.get("text"))} for t in card.get("open_threads", [])],
        "edges": [{**e, "context": redact_opt(e.get("context"))} for e in card.get("edges", [])],
    }
