"""Credential redaction end to end (D25) on a real `fleetmem serve` subprocess (127.0.0.1, free
port): a fact and a page holding an AWS key, a GitHub token, a connection-string password and an
`fm_` token are written; every read verb answers a remote caller — the official MCP client in both
eras and `/v1` — without any of them and with `<REDACTED:…>` in their place, while the owner's CLI
on the same data directory (the trusted-local lane) reads the fact and the page as written."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.cli.conftest import fleetmem_command
from tests.conformance.test_conformance_local import mint
from tests.mcp.conftest import mcp_session
from tests.mcp.served import Served, server_env

AWS_KEY = "AKIAZ7Q2M4N8P1R5T9V3"
GITHUB = "ghp_" + "Xq7Lm2Pz9Rt4Vw8Ky3Nb6Hd1Gf5Js0Ca2Ue4"
PASSWORD = "Zq8rT2mK9vLx"
FM_TOKEN = "fm_" + "N3vQ8x_Lr2Tz-Pk6Wm9Yb4Hc7Jd1Fg5Sa0Ue3Ri8Oy2"
SECRETS = (AWS_KEY, GITHUB, PASSWORD, FM_TOKEN)
SLUG = "people/alice-example"
FACT = f"Alice's deploy key is {AWS_KEY} and her CI token is {GITHUB}"
PROVENANCE = f"pasted from postgres://svc:{PASSWORD}@db.example:5432/app"
PAGE = (
    f"---\ntitle: Alice Example\ntype: person\nsummary: Alice runs deploys with {FM_TOKEN}\n---\n"
    f"Alice Example runs the staging deploys with token {FM_TOKEN} and key {AWS_KEY}.\n"
)

#: every read verb a remote caller may call, with arguments that reach the stored secrets
READS: list[tuple[str, dict[str, Any]]] = [
    ("recall", {"query": "Alice deploy key token staging"}),
    ("recall", {"entity": SLUG}),
    ("entity", {"name": SLUG}),
    ("context_pack", {"entities": SLUG, "budget_tokens": 2000}),
    ("delta", {"since": "2020-01-01T00:00:00Z", "entities": SLUG}),
    ("get_page", {"slug": SLUG}),
    ("list_facts", {"entity": SLUG}),
]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    server = Served(tmp_path, server_env())
    try:
        server.start()
        saved = server.call("remember", {"fact": FACT, "provenance": PROVENANCE, "entity": SLUG, "kind": "commitment"})
        assert saved.status_code == 200, saved.text
        put = server.call("put_page", {"slug": SLUG, "content": PAGE})
        assert put.status_code == 200, put.text
        yield server
    finally:
        server.stop()


def _leaks(text: str) -> list[str]:
    return [s for s in SECRETS if s in text]


def _fact_id(served: Served) -> str:
    listed = served.call("list_facts", {"entity": SLUG}).json()
    return str(listed["facts"][0]["fact_id"])


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_no_read_verb_returns_a_secret_to_a_remote_mcp_caller(served: Served, mode: str) -> None:
    admin = mint(served.env, served.data_dir, "admin", "auditor")
    reads = [*READS, ("trace_fact", {"id": _fact_id(served)})]

    async def scenario() -> dict[str, str]:
        seen: dict[str, str] = {}
        for i, (tool, args) in enumerate(reads):
            token = admin if tool == "trace_fact" else served.token
            async with mcp_session(served.url, token, mode) as client:
                result = await client.call_tool(tool, args)
            assert not result.is_error, (tool, result.content)
            blocks = [getattr(c, "text", "") for c in result.content]
            seen[f"{i}:{tool}"] = json.dumps(result.structured_content) + "\n".join(blocks)
        return seen

    seen = anyio.run(scenario)
    for name, text in seen.items():
        assert _leaks(text) == [], name
        assert "<REDACTED:" in text, name


def test_v1_returns_no_secret_while_the_owner_cli_reads_the_same_fact_as_written(served: Served) -> None:
    for tool, args in READS:
        answer = served.call(tool, args)
        assert answer.status_code == 200, (tool, answer.text)
        assert _leaks(answer.text) == [], tool
        assert "<REDACTED:" in answer.text, tool
    body = served.call("get_page", {"slug": SLUG}).json()
    assert "token <REDACTED:fm_token> and key <REDACTED:aws_access_key>." in body["content"]
    fact = served.call("recall", {"entity": SLUG}).json()["facts"][0]
    assert fact["fact"] == "Alice's deploy key is <REDACTED:aws_access_key> and her CI token is <REDACTED:github_token>"
    assert fact["provenance"] == "pasted from postgres://svc:<REDACTED:basic_auth>@db.example:5432/app"

    # the owner's CLI on the same data directory (the trusted-local lane) reads it as written
    def cli(*args: str) -> dict[str, Any]:
        run = subprocess.run(
            [*fleetmem_command(), *args, "--json", "--data-dir", str(served.data_dir)],
            env=served.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert run.returncode == 0, run.stdout + run.stderr
        return json.loads(run.stdout)  # type: ignore[no-any-return]

    recalled = cli("recall", "--entity", SLUG)
    assert recalled["facts"][0]["fact"] == FACT
    assert recalled["facts"][0]["provenance"] == PROVENANCE
    assert f"with token {FM_TOKEN} and key {AWS_KEY}" in cli("get-page", SLUG)["content"]
    assert cli("list-facts", "--entity", SLUG)["facts"][0]["fact"] == FACT
    # ... the entity card and context_pack's text too: the owner sees what was stored, to correct it
    assert FM_TOKEN in cli("entity", SLUG)["card"]["summary"]
    packed = cli("context-pack", "--entities", SLUG, "--budget-tokens", "2000")
    assert AWS_KEY in packed["text"] and FM_TOKEN in packed["text"]
