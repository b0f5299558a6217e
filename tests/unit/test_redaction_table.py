"""The credential redaction table (D25): at least 100 secrets of every kind the reference redacts,
written into prose, each replaced by `<REDACTED:pattern>` and gone from the text; at least 100
look-alikes (UUIDs, fact ids, slugs, git SHAs and hashes in prose, versions, dates, base64-looking
words, URLs without credentials, words that name secrets without holding one) left exactly as
written. The fake secrets are generated from a fixed seed, so the table is the same on every run."""

from __future__ import annotations

import base64
import json
import random
import string
import uuid
from datetime import UTC, datetime

import pytest

from fleetmem.memory import redaction, secret_detectors
from fleetmem.memory.redaction import findings, redact, redact_card, redact_fact, shown_facts
from fleetmem.models import Caller, Fact

RNG = random.Random(20261206)
UPPER_DIGITS = string.ascii_uppercase + string.digits
ALNUM = string.ascii_letters + string.digits
URLSAFE = ALNUM + "-_"
CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
HEX = "0123456789abcdef"
PROSE = (
    "Alice said {} works for the staging deploy.",
    "Note for later: {} (rotate after the audit).",
    "The runbook step uses {} and nothing else.",
    "{}",
    "Bob pasted {} into the incident channel by mistake.",
    "config line: {} — keep it out of the wiki",
)


def _pick(alphabet: str, n: int) -> str:
    return "".join(RNG.choice(alphabet) for _ in range(n))


def _mixed(n: int) -> str:
    """A random token with at least two upper-case letters, lower-case letters and digits."""
    while True:
        token = _pick(ALNUM, n)
        if min(sum(c.isupper() for c in token), sum(c.islower() for c in token), sum(c.isdigit() for c in token)) >= 2:
            return token


def _b64url(data: dict[str, object]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")


def _jwt() -> str:
    header = _b64url({"alg": RNG.choice(["HS256", "RS256", "ES256"]), "typ": "JWT"})
    payload = _b64url({"sub": _pick(ALNUM, 10), "iat": RNG.randrange(1_600_000_000, 1_800_000_000)})
    return f"{header}.{payload}.{_pick(URLSAFE, 43)}"


def _key_block(kind: str) -> str:
    lines = [_pick(ALNUM + "+/", 64) for _ in range(4)]
    return f"-----BEGIN {kind}-----\n" + "\n".join(lines) + f"\n-----END {kind}-----"


def _secrets() -> list[tuple[str, str, str]]:
    """(text, the secret in it, the pattern it is redacted as)."""
    rows: list[tuple[str, str, str]] = []

    def add(secret: str, pattern: str, template: str | None = None) -> None:
        text = (template or RNG.choice(PROSE)).format(secret)
        rows.append((text, secret, pattern))

    for _ in range(12):
        add(RNG.choice(["AKIA", "ASIA", "ABIA", "ACCA"]) + _pick(UPPER_DIGITS, 16), "aws_access_key")
    for _ in range(6):
        add(_pick(ALNUM + "/+", 40), "aws_access_key", "aws_secret_access_key = '{}'")
    for _ in range(10):
        add(RNG.choice(["ghp", "gho", "ghu", "ghs", "ghr"]) + "_" + _pick(ALNUM, 36), "github_token")
    for _ in range(8):
        add(RNG.choice(["glpat", "gldt", "glrt"]) + "-" + _pick(URLSAFE, 20), "gitlab_token")
    for _ in range(8):
        token = f"xox{RNG.choice('bpas')}-{_pick(string.digits, 12)}-{_pick(string.digits, 13)}-{_pick(ALNUM, 24)}"
        add(token, "slack_token")
    for _ in range(10):
        add(_jwt(), "jwt")
    for kind in (
        "RSA PRIVATE KEY",
        "EC PRIVATE KEY",
        "OPENSSH PRIVATE KEY",
        "PRIVATE KEY",
        "DSA PRIVATE KEY",
        "PGP PRIVATE KEY BLOCK",
    ):
        add(_key_block(kind), "private_key", "the deploy key:\n{}\nends here")
    for _ in range(10):
        add("fm_" + _pick(URLSAFE, 43), "fm_token")
    for scheme in ("postgres", "postgresql", "mysql", "mongodb+srv", "redis", "amqp", "mssql", "https", "ftp", "smtp"):
        password = _mixed(14)
        add(password, "basic_auth", f"connect with {scheme}://svc_user:{{}}@db.internal.example:5432/app today")
    for _ in range(12):
        add(_mixed(RNG.randrange(32, 48)), "high_entropy")
    for keyword in ("password", "db_pass", "api_key", "secret", "passwd", "client_key", "pwd", "auth_key"):
        add(_pick(string.ascii_lowercase, 6) + _pick(string.digits, 3) + "!", "secret_keyword", keyword + ' = "{}"')
    for _ in range(3):
        add("sk_live_" + _pick(ALNUM, 24), "stripe_access_key")
    for _ in range(2):
        add(f"SG.{_pick(URLSAFE, 22)}.{_pick(URLSAFE, 43)}", "sendgrid_api_key")
    return rows


def _uuid() -> str:
    return str(uuid.UUID(int=RNG.getrandbits(128), version=4))


def _lookalikes() -> list[str]:
    rows: list[str] = []
    rows += [f"Ticket {_uuid()} is closed." for _ in range(10)]
    rows += [f"request_id {_uuid().upper()} replayed" for _ in range(5)]
    rows += [f"fact {RNG.choice(['f', 'p', 'e', 'wr'])}_{_pick(CROCKFORD, 26)} replaces the old one" for _ in range(15)]
    rows += [
        f"see {slug}"
        for slug in (
            "people/alice-example",
            "companies/acme-example",
            "projects/fleetmem-redaction-rollout-2026",
            "companies/initech-2026-q3-renewal-planning-notes",
            "people/bob-o-reilly-2",
            "meetings/2026-12-06-weekly-sync-with-the-platform-team",
            "projects/k8s-cluster-migration-phase-3",
            "concepts/retrieval-augmented-generation",
            "decisions/use-dynamodb-on-demand-capacity-for-stage-prod",
            "people/jean-luc-picard",
            "companies/the-very-long-company-name-incorporated-ltd",
            "projects/q4-okr-draft-v2",
            "topics/a1b2c3-naming-scheme",
            "people/zoe",
            "wiki/how-to-rotate-credentials-safely",
        )
    ]
    rows += [f"fixed in commit {_pick(HEX, 40)}." for _ in range(10)]
    rows += [f"the artifact's sha256 is {_pick(HEX, 64)}" for _ in range(5)]
    rows += [f"reverted {_pick(HEX, 7)} and {_pick(HEX, 12)}" for _ in range(5)]
    rows += [
        f"upgraded to {v}"
        for v in (
            "v1.2.3",
            "2.19.1.0",
            "3.5.0-rc.1+build.20261206",
            "0.60.162",
            "1.5.0",
            "v2026.12.06",
            "12.4.1-beta.7",
        )
    ]
    rows += ["pinned python 3.11.7 and node 22.11.0"]
    rows += [
        f"happened at {d}"
        for d in (
            "2026-12-06",
            "2026-12-06T06:10:58Z",
            "2026-12-06T06:10:58.123456+00:00",
            "06/12/2026",
            "Dec 6, 2026",
            "20261206T061058Z",
            "1733465458",
            "2026-W49",
        )
    ]
    rows += [
        f"the header decodes {w}"
        for w in ("SGVsbG8=", "ZXhhbXBsZQ==", "dGVzdA==", "Zm9vYmFy", "YWxpY2U=", "Ym9i", "c2VjcmV0", "TWFu")
    ]
    rows += [
        f"docs at {u}"
        for u in (
            "https://docs.example.com/guides/getting-started?page=2",
            "https://github.com/example/fleetmem/pull/4412",
            "http://127.0.0.1:8765/console/facts?entity=people/alice",
            "https://example.com/a/b/c/d/e/f/g",
            "s3://fleetmem-backups-prod/2026/12/06/snapshot.tar.gz",
            "https://user@example.com/path",
            "https://en.wikipedia.org/wiki/Shannon_(unit)",
            "postgres://db.internal.example:5432/app",
            "https://example.com/search?q=password+reset",
            "ssh://git@github.com/example/repo.git",
        )
    ]
    rows += [
        "the password policy requires rotation every 90 days",
        "rotate the secret in the vault after the audit",
        "api key rotation is owned by Alice",
        "password: see the vault for it",
        "the private key lives in the HSM, never on disk",
        "ask Bob for the token when you need it",
        "client_key rotation moved to Friday",
        "the db password changed last week",
    ]
    rows += [
        "mail alice@example.com or call +1 555 0100",
        "the server is at 10.0.12.7 and 203.0.113.42",
        "price rose 12.5% to $1,299.00 on 2026-12-01",
        "AbstractSingletonProxyFactoryBean2 is the class to mock",
        "getUserAccountSettingsForTenant returns the defaults",
        "the build id is build-2026-12-06-0610-main",
        "MiniLM all-MiniLM-L6-v2 embeds 384 dimensions",
        "Use X-Fleetmem-Correlation-Id for tracing",
        "thread_2026_12_06_platform_sync_notes was archived",
        "the SKU is FM-ENTERPRISE-2026-ANNUAL-EU",
    ]
    return rows


SECRETS = _secrets()
LOOKALIKES = _lookalikes()


def test_the_table_has_two_hundred_cases_half_secrets_half_lookalikes():
    assert len(SECRETS) >= 100
    assert len(LOOKALIKES) >= 100
    assert len(SECRETS) + len(LOOKALIKES) >= 200


@pytest.mark.parametrize(("text", "secret", "pattern"), SECRETS, ids=[f"secret-{i}" for i in range(len(SECRETS))])
def test_every_secret_is_redacted_with_its_pattern(text, secret, pattern):
    out = redact(text)
    assert secret not in out
    assert f"<REDACTED:{pattern}>" in out
    for line in secret.splitlines():  # a private key block goes whole, not line by line
        assert line not in out


@pytest.mark.parametrize("text", LOOKALIKES, ids=[f"lookalike-{i}" for i in range(len(LOOKALIKES))])
def test_a_lookalike_is_left_as_written(text):
    assert findings(text) == []
    assert redact(text) == text


def test_the_prose_around_a_secret_stays():
    text = "Alice said AKIAIOSFODNN7EXAMPLE works for the staging deploy."
    assert redact(text) == "Alice said <REDACTED:aws_access_key> works for the staging deploy."


def test_a_connection_string_keeps_its_host_and_user():
    out = redact("use postgres://svc:Zq8rT2mK9vLx@db.example:5432/app")
    assert out == "use postgres://svc:<REDACTED:basic_auth>@db.example:5432/app"


def test_redacting_twice_changes_nothing_more():
    for text, _, _ in SECRETS:
        once = redact(text)
        assert redact(once) == once


def test_the_same_text_is_scanned_once(mocker):
    text = "a fresh text with ghp_" + "a1B2" * 9
    spy = mocker.spy(redaction, "_apply")
    assert redact(text) == redact(text) == "a fresh text with <REDACTED:github_token>"
    assert spy.call_count == 1


def _fact(text: str, provenance: str) -> Fact:
    now = datetime(2026, 12, 6, tzinfo=UTC)
    return Fact(tenant="t", fact_id="f_1", seq=1, text=text, provenance=provenance, client_id="c", created_at=now)


def test_remote_callers_read_facts_redacted_and_the_local_lane_as_written():
    key = "AKIA" + "Q" * 16
    fact = _fact(f"the key is {key}", f"chat with {key}")
    remote = shown_facts(Caller(tenant="t", client_id="agent"), [fact])[0]
    local = shown_facts(Caller(tenant="t", client_id="local", remote=False), [fact])[0]
    assert remote.text == "the key is <REDACTED:aws_access_key>"
    assert remote.provenance == "chat with <REDACTED:aws_access_key>"
    assert local == fact
    assert redact_fact(_fact("nothing here", "cli")) == _fact("nothing here", "cli")


def test_a_card_is_redacted_in_its_summary_threads_and_edges():
    token = "ghp_" + "Zz9" * 12
    card = {
        "entity": {"slug": "people/alice", "title": "Alice", "type": "person"},
        "summary": f"holds {token}",
        "open_threads": [{"kind": "commitment", "text": f"rotate {token}", "date": None}],
        "edges": [{"type": "works_at", "direction": "out", "slug": "companies/acme", "context": token}],
    }
    out = redact_card(card)
    assert token not in json.dumps(out)
    assert out["entity"] == card["entity"]
    assert out["summary"] == "holds <REDACTED:github_token>"


def test_every_keyword_of_the_detector_passes_the_substring_pre_check():
    from detect_secrets.plugins.keyword import DENYLIST

    for pattern in DENYLIST:
        spelled = pattern.replace("_?", "_")
        assert any(stem in spelled for stem in secret_detectors._KEYWORD_STEMS), pattern
