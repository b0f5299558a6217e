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

The detectors (`fleetmem.memory.secret_detectors`, loaded on the first text that may hold a
secret, so a process that shows no such text never imports detect-secrets) are detect-secrets'
plugins (their patterns and their own checks, e.g. a JWT must decode), used through
`analyze_string` on each line; a private key's whole block is replaced, from its BEGIN line to its
END line (or the end of the text). fleetmem's own `fm_` tokens are a plugin
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

from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from fleetmem.memory.secret_spans import MAYBE_SECRET, Finding
from fleetmem.models import Caller, Fact

#: Texts up to this size are remembered by the LRU (larger ones, whole pages, are scanned each time).
CACHE_MAX_CHARS = 16_384
CACHE_ENTRIES = 4096


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
    if not text or not MAYBE_SECRET.search(text):
        return []
    from fleetmem.memory import secret_detectors  # detect-secrets (and the `requests` it imports) on first use

    return _merged(secret_detectors.scan(text))


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
