"""The CLI as a remote client: the same verb subcommands against an MCP endpoint instead of a data dir.

`--url URL` with a token from `--token-file PATH` or `$FLEETMEM_TOKEN`, or a named profile
(`--profile NAME` / `$FLEETMEM_PROFILE`, see `fleetmem.profiles`). There is deliberately no
`--token` option: a token on the command line ends up in shell history and process listings.

A remote call is a real MCP `tools/call` over streamable HTTP with the official `mcp` client, so
the caller is REMOTE (docs/protocol.md: trust): the server decides visibility and ignores
`include_private`. Error bodies come back exactly as the server built them (envelope and fix);
an HTTP-level refusal (401 and friends) carries the same envelope in its JSON body and is kept too.

The MCP wire here (`call_remote`, `call_remote_async`) is the typed client's MCP transport
(`fleetmem.client.transports.McpTransport`); the verb subcommands call through that client
(`fleetmem.cli.tools.remote_reply`), as the hook and heartbeat commands do over `/v1`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import stat
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fleetmem.config import ClientSettings
from fleetmem.console import CommandFailed
from fleetmem.lanes import ToolReply

#: The protocol version the client pins: the stateless era, one HTTP round trip per call.
DEFAULT_MODE = "2026-07-28"
DEFAULT_TIMEOUT_S = 30.0
NOTICES_META_KEY = "fleetmem/notices"
#: D28: where a successful body carries its notices.
NOTICES_KEY = "notices"


@dataclass(frozen=True)
class Endpoint:
    url: str
    token: str = field(repr=False)
    timeout: float = DEFAULT_TIMEOUT_S
    #: Where the endpoint came from (`--url`, `profile NAME`), for messages; never the token.
    source: str = "--url"
    #: argv that names this endpoint again (for fixes and confirmations), without the token.
    argv: tuple[str, ...] = ()


class RemoteUnavailable(Exception):
    """The endpoint could not be reached or did not answer in time (no envelope to show)."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"{url}: {reason}")
        self.url = url
        self.reason = reason


# --------------------------------------------------------------------------- options and resolution


def add_remote_options(p: argparse.ArgumentParser, default_timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
    """The options every verb subcommand (and hook/heartbeat) takes to act on an MCP endpoint;
    `default_timeout_s` is the timeout the command applies when --timeout is not given."""
    g = p.add_argument_group("remote endpoint (instead of a data directory)")
    g.add_argument("--url", default=None, metavar="URL", help="MCP endpoint, e.g. http://127.0.0.1:8765/mcp")
    g.add_argument(
        "--token-file",
        default=None,
        metavar="PATH",
        help="file holding the bearer token (default: $FLEETMEM_TOKEN); tokens are never taken as arguments",
    )
    g.add_argument(
        "--profile", default=None, metavar="NAME", help="a saved endpoint (fleetmem profile add; $FLEETMEM_PROFILE)"
    )
    g.add_argument(
        "--timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help=f"remote call timeout (default {default_timeout_s:g})",
    )


def _usage(message: str, suggestion: str) -> CommandFailed:
    return CommandFailed.usage(message, suggestion, code="usage")


def read_token_file(path: str) -> str:
    p = Path(path).expanduser()
    try:
        token = p.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise _usage(
            f"Cannot read the token file {p}: {type(exc).__name__}",
            "Put the token (fm_…, as printed by `fleetmem token create`) alone in a file readable by you, "
            "and pass it with --token-file PATH.",
        ) from exc
    if not token:
        raise _usage(f"The token file {p} is empty.", "Write the token into it, e.g. from `fleetmem token create`.")
    try:
        if p.stat().st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            sys.stderr.write(f"Note [token_file_mode]: {p} is readable by others. Fix: chmod 600 {p}\n")
    except OSError:
        pass
    return token


def resolve_endpoint(
    *,
    url: str | None,
    token_file: str | None,
    profile: str | None,
    timeout: float | None = None,
    local_requested: bool = False,
    env: dict[str, str] | None = None,
    profile_source: str = "--profile",
) -> Endpoint | None:
    """The endpoint the options name, or None for the local lane.

    Precedence: `--url` > `--profile` > an explicit local `--data-dir` > `$FLEETMEM_PROFILE` > local.
    `profile_source` names where `profile` came from (an option, a project file) for the message
    an unknown profile gets.
    """
    client = ClientSettings.from_env(env)
    if url and profile:
        raise _usage("--url and --profile both name an endpoint.", "Pass one of them.")
    if (url or profile) and local_requested:
        raise _usage(
            "--data-dir names a local store but --url/--profile names a remote endpoint.",
            "Pass --data-dir to act on a local data directory, or --url/--profile for an endpoint, not both.",
        )
    if not url and not profile:
        profile = None if local_requested else (client.profile or None)
        profile_source = "$FLEETMEM_PROFILE"
    seconds = DEFAULT_TIMEOUT_S if timeout is None else timeout
    if seconds <= 0:
        raise _usage(f"--timeout must be positive, got {seconds:g}", "Pass e.g. --timeout 10")
    if url:
        if not url.startswith(("http://", "https://")):
            raise _usage(
                f"--url {url!r} is not an http(s) URL.", "Pass the MCP endpoint, e.g. --url http://127.0.0.1:8765/mcp"
            )
        token = read_token_file(token_file) if token_file else client.token
        if not token:
            raise _usage(
                f"No token for {url}.",
                "Pass --token-file PATH (a file holding the fm_… token) or set FLEETMEM_TOKEN; "
                "tokens are never taken on the command line.",
            )
        argv = ("--url", url, *(("--token-file", token_file) if token_file else ()))
        return Endpoint(url, token, seconds, "--url", argv)
    if profile:
        from fleetmem.profiles import load_profiles, profile_path

        try:
            profiles = load_profiles()
        except ValueError as exc:
            raise CommandFailed(
                "invalid_params",
                f"The profile file is unreadable: {exc}",
                "Fix or remove it, then: fleetmem profile list",
            ) from exc
        found = profiles.get(profile)
        if found is None:
            known = f"holds {', '.join(sorted(profiles))}" if profiles else "holds none"
            raise _usage(
                f"No profile named {profile!r} (named by {profile_source}): a profile is a saved endpoint "
                f"(a URL and a token file) and must be added on this machine before use; {profile_path()} {known}.",
                f"Save it first: fleetmem profile add {profile} --url URL --token-file PATH "
                f"(e.g. --url http://127.0.0.1:8765/mcp for the local server), or drop {profile_source} "
                "to use the local data directory.",
            )
        path = token_file or found.token_file
        token = read_token_file(path) if path else client.token
        if not token:
            raise _usage(
                f"Profile {profile!r} names no token file and FLEETMEM_TOKEN is not set.",
                f"Re-save it with one: fleetmem profile add {profile} --url {found.url} --token-file PATH",
            )
        return Endpoint(found.url, token, seconds, f"profile {profile}", ("--profile", profile))
    return None


def endpoint_from_args(args: argparse.Namespace) -> Endpoint | None:
    """resolve_endpoint() for a parsed verb subcommand; also refuses `--tenant` on a remote call."""
    endpoint = resolve_endpoint(
        url=getattr(args, "url", None),
        token_file=getattr(args, "token_file", None),
        profile=getattr(args, "profile", None),
        timeout=getattr(args, "timeout", None),
        local_requested=bool(getattr(args, "data_dir", None)),
    )
    if endpoint is not None and getattr(args, "tenant", None):
        raise _usage(
            "--tenant cannot be chosen for a remote call: the tenant comes from the token.",
            "Drop --tenant, or use a token minted for that tenant.",
        )
    return endpoint


# --------------------------------------------------------------------------- the MCP client


def _leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _reply_of(result: Any) -> ToolReply:
    texts = [getattr(block, "text", None) for block in result.content]
    body: Any = None
    if texts and texts[0] is not None:
        try:
            body = json.loads(texts[0])
        except json.JSONDecodeError:
            body = None
    if not isinstance(body, dict):
        body = result.structured_content if isinstance(result.structured_content, dict) else {}
    return ToolReply(body=body, is_error=bool(result.is_error), notices=_notices_of(body, result))


def _notices_of(body: dict[str, Any], result: Any) -> list[Any]:
    """A success's notices (D28): inside the body under `notices` (taken out, so the body is the
    tool's own, as on the local lane), else under `_meta` (a server from before D28). An error
    envelope keeps its own `notices` key."""
    inside = body.pop(NOTICES_KEY, None) if not result.is_error else None
    if isinstance(inside, list):
        return inside
    meta = getattr(result, "meta", None) or {}
    notices = meta.get(NOTICES_META_KEY) if isinstance(meta, dict) else None
    return list(notices or [])


async def _call_all(
    endpoint: Endpoint, calls: Sequence[tuple[str, dict[str, Any]]], mode: str, concurrency: int
) -> list[ToolReply]:
    import httpx2
    from mcp.client import Client
    from mcp.client.streamable_http import streamable_http_client

    refusals: list[dict[str, Any]] = []

    async def keep_refusal(response: Any) -> None:
        # The SDK turns a non-JSON-RPC error body into a generic error; the envelope is in the body.
        if response.status_code in (401, 403, 429) or response.status_code >= 500:
            try:
                await response.aread()
                doc = json.loads(response.content)
            except Exception:
                doc = None
            if isinstance(doc, dict) and doc.get("code"):
                refusals.append(doc)

    headers = {"Authorization": f"Bearer {endpoint.token}"}
    try:
        async with httpx2.AsyncClient(
            headers=headers, timeout=endpoint.timeout, event_hooks={"response": [keep_refusal]}
        ) as http:
            async with Client(streamable_http_client(endpoint.url, http_client=http), mode=mode) as client:
                gate = asyncio.Semaphore(max(1, concurrency))

                async def one(tool: str, arguments: dict[str, Any]) -> ToolReply:
                    async with gate:
                        return _reply_of(await client.call_tool(tool, arguments))

                return list(await asyncio.gather(*(one(t, a) for t, a in calls)))
    except Exception as exc:
        if refusals:
            return [ToolReply(body=refusals[0], is_error=True) for _ in calls]
        leaf = _leaf(exc)
        raise RemoteUnavailable(endpoint.url, f"{type(leaf).__name__}: {leaf}".rstrip(": ")) from exc


def call_remote(
    endpoint: Endpoint,
    calls: Sequence[tuple[str, dict[str, Any]]],
    *,
    mode: str | None = None,
    concurrency: int = 4,
) -> list[ToolReply]:
    """Run `calls` over one MCP connection; the whole batch is bounded by `endpoint.timeout`."""
    return asyncio.run(call_remote_async(endpoint, calls, mode=mode, concurrency=concurrency))


async def call_remote_async(
    endpoint: Endpoint,
    calls: Sequence[tuple[str, dict[str, Any]]],
    *,
    mode: str | None = None,
    concurrency: int = 4,
) -> list[ToolReply]:
    """`call_remote` on the caller's event loop (the async client's MCP transport)."""
    mode = mode or ClientSettings.from_env().mcp_mode or DEFAULT_MODE
    try:
        return await asyncio.wait_for(_call_all(endpoint, calls, mode, concurrency), endpoint.timeout)
    except TimeoutError:
        raise RemoteUnavailable(endpoint.url, f"no answer within {endpoint.timeout:g} s") from None


def unavailable_failure(exc: RemoteUnavailable) -> CommandFailed:
    return CommandFailed(
        "unavailable",
        f"Could not reach the memory endpoint {exc.url} ({exc.reason}).",
        "Check that the server is running and the URL ends in /mcp (locally: fleetmem serve), then retry; "
        "raise --timeout for a slow network.",
    )
