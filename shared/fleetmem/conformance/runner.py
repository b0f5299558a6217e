"""The conformance engine: cases are data, this module only knows how to run steps (the checks of the
values are in `fleetmem.conformance.checks`).

A case is `{id, rule, steps[], requires?, needs?, surface?, era?}`. Steps:
- `{"call": tool, "args": {...}, "meta": {...}?, "as": "read"?, "expect": {...}, "save": {"var": "path"}}`
  (`meta`: the request's `_meta`, e.g. `{"session_id": ...}`)
- `{"list": true, "as": "read"?, "expect": {"has": [...], "lacks": [...], "exactly": [...],
   "tools": {name: {path: check}}}}`
- `{"http": "GET"|"POST", "path": "/mcp", "auth": "token"|"none"|"bogus", "headers": {...},
   "json": {...} | "raw": "...", "expect": {"status": 405, "headers": {name: check}, "paths": {...}},
   "save": {"var": "path"}}`

Every successful tool response is also validated against the tool's result model (the registry's
`ToolSpec.result`, the shapes docs/protocol.md describes); a body that does not match fails the case.

A step may add `"many_keys": {"count": N, "prefix": "p"}`: N extra keys `p0`..`p<N-1>` in its
arguments (or `json` body), for answers that must stay small whatever the request (`expect.bytes_le`:
every content block plus `_meta` of an MCP result, or an HTTP body; `expect.notice_blocks`:
{code: how many notices of that code the body's `notices` holds}).

`expect.notice: code` (and `no_notice`): the success carries (does not carry) a notice of that code
in its body's `notices` AND under `_meta` (`fleetmem/notices` and `gbrain_notices`), D28.
`expect.joined_json: true`: every text block of the result joined with newlines parses as ONE JSON
object equal to content[0]'s (how the reference's runner reads a result).

Strings may hold `{{var}}` templates (`marker`, `slug`, `alias`, `title`, `now`, `request_uuid`, saved values).
Checks are small operator maps (`eq`, `type`, `present`, `nonempty`, `in`, `len`, `len_le`, ...);
see `check_value`. A case whose precondition the target cannot meet (a page tool on a verbs-only
surface, a second read-only token that was not given) is SKIPPED with the reason, never passed.
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import sys
import uuid
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import resources
from typing import Any
from urllib.parse import urljoin

from fleetmem.conformance.checks import (
    MISSING,
    CallOutcome,
    CaseFailed,
    CaseSkipped,
    check_call,
    check_list,
    check_value,
    get_path,
)
from fleetmem.protocol import VERB_NAMES

_TEMPLATE = re.compile(r"\{\{([A-Za-z0-9_.]+)\}\}")

#: the section of the cases in `data/conformance_cases.json`
CORE_SECTION = "core"


def load_cases() -> dict[str, Any]:
    """The core cases (`data/conformance_cases.json`) followed by every section file in
    `data/conformance/` (one JSON document `{"section", "description", "cases"}` each), in name order;
    a section's cases keep their file's order. Every case is tagged with its section's name
    (`core` for the core file)."""
    data = resources.files("fleetmem").joinpath("data")
    doc = json.loads(data.joinpath("conformance_cases.json").read_text(encoding="utf-8"))
    for case in doc["cases"]:
        case.setdefault("section", CORE_SECTION)
    sections = data.joinpath("conformance")
    if sections.is_dir():
        for entry in sorted(sections.iterdir(), key=lambda e: e.name):
            if entry.name.endswith(".json"):
                part = json.loads(entry.read_text(encoding="utf-8"))
                doc["cases"].extend({**case, "section": part["section"]} for case in part["cases"])
    return doc


def other_surface_cases(surface: str) -> set[str]:
    """The ids of the cases that check the other surface: on a target serving `surface` they can
    only skip (the runner says why)."""
    return {c["id"] for c in load_cases()["cases"] if c.get("surface") not in (None, surface)}


def select_sections(cases: dict[str, Any], sections: tuple[str, ...]) -> dict[str, Any]:
    """Only the cases of the sections whose names start with one of `sections` (all when empty);
    a name that matches no section is an error naming the sections there are."""
    if not sections:
        return cases
    names = sorted({c["section"] for c in cases["cases"]})
    unknown = [s for s in sections if not any(n.startswith(s) for n in names)]
    if unknown:
        raise ValueError(f"no conformance section starts with {unknown[0]!r}; the sections are: {', '.join(names)}")
    kept = [c for c in cases["cases"] if any(c["section"].startswith(s) for s in sections)]
    return {**cases, "cases": kept}


# --------------------------------------------------------------------------- the run


class Session:
    """One protocol era against the target: a client per token, lazily opened."""

    def __init__(self, target: str, tokens: dict[str, str | None], era: str, stack: AsyncExitStack) -> None:
        self.target = target
        self.tokens = tokens
        self.era = era
        self.stack = stack
        self.clients: dict[str, Any] = {}
        self.tool_lists: dict[str, list[Any]] = {}

    async def client(self, who: str) -> Any:
        if who not in self.clients:
            import httpx2
            from mcp.client import Client
            from mcp.client.streamable_http import streamable_http_client

            token = self.tokens.get(who)
            if token is None:
                raise CaseSkipped(f"no {who} token was given (pass --read-token to run scope cases)")
            http = await self.stack.enter_async_context(
                httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
            )
            transport = streamable_http_client(self.target, http_client=http)
            self.clients[who] = await self.stack.enter_async_context(Client(transport, mode=self.era))
        return self.clients[who]

    async def tools(self, who: str = "main") -> list[Any]:
        if who not in self.tool_lists:
            client = await self.client(who)
            self.tool_lists[who] = list((await client.list_tools()).tools)
        return self.tool_lists[who]


@dataclass
class Runner:
    target: str
    token: str
    read_token: str | None
    log: Callable[[str], None]
    surface: str | None = None
    base_marker: str = field(init=False, default_factory=lambda: secrets.token_hex(4))

    def variables(self, era: str) -> dict[str, Any]:
        marker = f"{self.base_marker}{era[:1]}"
        return {
            "marker": marker,
            "slug": f"people/conformance-{marker}",
            "slug2": f"companies/conformance-{marker}",
            "alias": f"cf-alias-{marker}",
            "title": f"Conformance Person {marker}",
            "entity": f"people/conformance-{marker}",
            "provenance": f"conformance {marker}",
            "session": f"conformance-session-{marker}",
            "now": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + "000Z",
            # a fresh UUID in upper case per era (D22: a UUID request id is kept, lowercased)
            "request_uuid": str(uuid.uuid4()).upper(),
        }

    async def run(self, cases: dict[str, Any], eras: tuple[str, ...]) -> list[dict[str, Any]]:
        results: list[dict[str, Any]] = []
        http_cases = [c for c in cases["cases"] if c.get("era") == "http"]
        mcp_cases = [c for c in cases["cases"] if c.get("era") != "http"]
        variables = self.variables("http")
        for case in http_cases:
            results.append(await self._one(case, "http", None, dict(variables)))
        for era in eras:
            variables = self.variables(era)
            self.log(
                f"conformance [{era}]: writing marker-named data: {variables['slug']}, "
                f"{variables['slug2']} and facts with provenance '{variables['provenance']}' "
                f"(left in place for inspection)"
            )
            async with AsyncExitStack() as stack:
                session = Session(self.target, {"main": self.token, "read": self.read_token}, era, stack)
                try:
                    await session.tools()
                except Exception as exc:
                    for case in mcp_cases:
                        results.append(
                            {
                                "id": case["id"],
                                "section": case.get("section", CORE_SECTION),
                                "era": era,
                                "status": "failed",
                                "detail": f"could not connect/list tools: {type(exc).__name__}: {exc}",
                            }
                        )
                    continue
                for case in mcp_cases:
                    results.append(await self._one(case, era, session, variables))
        return results

    async def _one(
        self, case: dict[str, Any], era: str, session: Session | None, variables: dict[str, Any]
    ) -> dict[str, Any]:
        entry = {
            "id": case["id"],
            "section": case.get("section", CORE_SECTION),
            "era": era,
            "rule": case.get("rule", ""),
            "status": "passed",
            "detail": "",
        }
        try:
            if session is not None:
                await self._preconditions(case, session)
            for i, step in enumerate(case["steps"]):
                try:
                    await self._step(step, session, variables)
                except CaseFailed as exc:
                    raise CaseFailed(f"step {i + 1}: {exc}") from exc
        except CaseSkipped as exc:
            entry.update(status="skipped", detail=str(exc))
        except CaseFailed as exc:
            entry.update(status="failed", detail=str(exc))
        except Exception as exc:
            entry.update(status="failed", detail=f"{type(exc).__name__}: {exc}")
        return entry

    async def _preconditions(self, case: dict[str, Any], session: Session) -> None:
        names = {t.name for t in await session.tools()}
        surface = self.surface or ("verbs" if names and names <= set(VERB_NAMES) else "full")
        if case.get("surface") and case["surface"] != surface:
            raise CaseSkipped(f"target serves the {surface} surface; this case checks the {case['surface']} surface")
        missing = [t for t in case.get("requires", []) if t not in names]
        if missing:
            raise CaseSkipped(f"target does not list {', '.join(missing)} for this token")
        if case.get("needs") == "read_token" and not self.read_token:
            raise CaseSkipped("no read-only token given (pass --read-token) — scope filtering not exercised")

    async def _step(self, step: dict[str, Any], session: Session | None, variables: dict[str, Any]) -> None:
        step = substitute(step, variables)
        who = step.get("as", "main")
        if "http" in step:
            await self._http_step(step, variables)
            return
        if session is None:
            raise CaseFailed("an MCP step needs a protocol era")
        if "list" in step:
            tools = await session.tools(who)
            check_list(tools, step.get("expect") or {})
            return
        tool, args = step["call"], {**(step.get("args") or {}), **_many_keys(step)}
        client = await session.client(who)
        result = await client.call_tool(tool, args, meta=step.get("meta"))
        out = CallOutcome(tool, args, result)
        check_call(out, step.get("expect") or {})
        for name, path in (step.get("save") or {}).items():
            value = out.raw if path == "$raw" else get_path(out.body, path)
            if value is MISSING:
                raise CaseFailed(f"{tool}: cannot save {name} — {path} is absent")
            variables[name] = value

    async def _http_step(self, step: dict[str, Any], variables: dict[str, Any]) -> None:
        import httpx2

        url = step.get("url") or urljoin(self.target, step.get("path", self.target))
        headers = dict(step.get("headers") or {})
        auth = step.get("auth", "token")
        if auth == "token":
            headers["Authorization"] = f"Bearer {self.token}"
        elif auth == "bogus":
            headers["Authorization"] = "Bearer fm_" + "x" * 43
        async with httpx2.AsyncClient(timeout=30) as http:
            kwargs: dict[str, Any] = {"headers": headers}
            if "json" in step:
                kwargs["content"] = json.dumps({**step["json"], **_many_keys(step)}).encode()
                headers.setdefault("Content-Type", "application/json")
            elif "raw" in step:
                kwargs["content"] = step["raw"].encode()
                headers.setdefault("Content-Type", "application/json")
            response = await http.request(step["http"], url, **kwargs)
        expect = step.get("expect") or {}
        if "status" in expect:
            allowed = expect["status"] if isinstance(expect["status"], list) else [expect["status"]]
            if response.status_code not in allowed:
                raise CaseFailed(f"{step['http']} {url}: expected HTTP {expect['status']}, got {response.status_code}")
        if "bytes_le" in expect and len(response.content) > expect["bytes_le"]:
            raise CaseFailed(f"{url}: the answer is {len(response.content)} bytes, more than {expect['bytes_le']}")
        for name, spec in (expect.get("headers") or {}).items():
            check_value(response.headers.get(name, MISSING), spec, f"header {name}")
        if expect.get("paths") or step.get("save"):
            try:
                doc = response.json()
            except ValueError as exc:
                raise CaseFailed(f"{url}: response is not JSON") from exc
            for path, spec in (expect.get("paths") or {}).items():
                check_value(get_path(doc, path), spec, path)
            for name, path in (step.get("save") or {}).items():
                variables[name] = get_path(doc, path)
        for name, source in (step.get("save_header_param") or {}).items():
            header, param = source
            m = re.search(rf'{param}="([^"]+)"', response.headers.get(header, ""))
            if not m:
                raise CaseFailed(f'header {header} has no {param}="…"')
            variables[name] = m.group(1)


def _many_keys(step: dict[str, Any]) -> dict[str, Any]:
    spec = step.get("many_keys") or {}
    return {f"{spec.get('prefix', 'k')}{i}": i for i in range(int(spec.get("count", 0)))}


def substitute(value: Any, variables: dict[str, Any]) -> Any:
    if isinstance(value, str):
        whole = _TEMPLATE.fullmatch(value)
        if whole:
            return _lookup(whole.group(1), variables)
        return _TEMPLATE.sub(lambda m: str(_lookup(m.group(1), variables)), value)
    if isinstance(value, list):
        return [substitute(v, variables) for v in value]
    if isinstance(value, dict):
        return {substitute(k, variables): substitute(v, variables) for k, v in value.items()}
    return value


def _lookup(name: str, variables: dict[str, Any]) -> Any:
    head, _, rest = name.partition(".")
    if head == "repeat":  # {{repeat.N.c}}: a string of N copies of c (oversized inputs)
        count, _, char = rest.partition(".")
        return (char or "x") * int(count)
    if head not in variables:
        raise CaseFailed(f"template variable {head!r} is not set (an earlier step did not save it)")
    value = variables[head]
    return get_path(value, rest) if rest else value


def run(
    target_url: str,
    token: str,
    *,
    json: bool = False,
    read_token: str | None = None,
    eras: tuple[str, ...] = ("legacy", "auto"),
    log: Callable[[str], None] | None = None,
    surface: str | None = None,
    sections: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Run every case (or those of `sections`, by name prefix) against `target_url`; returns the
    report (and prints a table, then one line per section, unless `json`).

    `surface` names the surface the target serves ("verbs" | "full"); by default it is inferred
    from tools/list (only the seven verbs listed -> verbs)."""
    emit = log or (lambda line: print(line, file=sys.stderr))
    cases = select_sections(load_cases(), sections)
    runner = Runner(target_url, token, read_token, emit, surface)
    results = asyncio.run(runner.run(cases, tuple(e for e in eras if e)))
    report = {
        "target": target_url,
        "marker": runner.base_marker,
        "passed": sum(r["status"] == "passed" for r in results),
        "failed": sum(r["status"] == "failed" for r in results),
        "skipped": sum(r["status"] == "skipped" for r in results),
        "sections": _by_section(results),
        "cases": results,
    }
    if not json:
        for r in results:
            mark = {"passed": "PASS", "failed": "FAIL", "skipped": "SKIP"}[r["status"]]
            line = f"{mark}  [{r['era']:<6}] {r['id']}"
            print(line + (f" — {r['detail']}" if r["detail"] else ""))
        for name, counts in report["sections"].items():
            print(f"section {name}: {counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped")
        print(f"{report['passed']} passed, {report['failed']} failed, {report['skipped']} skipped")
    return report


def _by_section(results: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    counts: dict[str, dict[str, int]] = {}
    for r in results:
        tally = counts.setdefault(r["section"], {"passed": 0, "failed": 0, "skipped": 0})
        tally[r["status"]] += 1
    return counts
