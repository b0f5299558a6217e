"""The conformance engine: cases are data, this module only knows how to run steps and check values.

A case is `{id, rule, steps[], requires?, needs?, surface?, era?}`. Steps:
- `{"call": tool, "args": {...}, "as": "read"?, "expect": {...}, "save": {"var": "path"}}`
- `{"list": true, "as": "read"?, "expect": {"has": [...], "lacks": [...], "exactly": [...],
   "tools": {name: {path: check}}}}`
- `{"http": "GET"|"POST", "path": "/mcp", "auth": "token"|"none"|"bogus", "headers": {...},
   "json": {...} | "raw": "...", "expect": {"status": 405, "headers": {name: check}, "paths": {...}}}`

Every successful tool response is also validated against the tool's result model (the registry's
`ToolSpec.result`, the shapes docs/protocol.md describes); a body that does not match fails the case.

A step may add `"many_keys": {"count": N, "prefix": "p"}`: N extra keys `p0`..`p<N-1>` in its
arguments (or `json` body), for answers that must stay small whatever the request (`expect.bytes_le`:
every content block plus `_meta` of an MCP result, or an HTTP body; `expect.notice_blocks`:
{code: how many notice blocks of that code}).

Strings may hold `{{var}}` templates (`marker`, `slug`, `alias`, `title`, `now`, saved values).
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
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import resources
from typing import Any
from urllib.parse import urljoin

from fleetmem.protocol import CREATE_SAFETY_FOR, PROTOCOL_VERSION, VERB_ERROR_CODES, VERB_NAMES

ISO_MS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
ERROR_CLASSES = ("caller", "consent", "retryable", "unavailable", "server", "host_only")
NEXT_STEPS = ("run", "ask_user", "tell_user_to_run", "wait", "report")
ACTORS = ("agent", "user", "host_admin", "provider")
_TEMPLATE = re.compile(r"\{\{([A-Za-z0-9_.]+)\}\}")
_MISSING = object()


class CaseFailed(Exception):
    pass


class CaseSkipped(Exception):
    pass


def load_cases() -> dict[str, Any]:
    text = resources.files("fleetmem").joinpath("data/conformance_cases.json").read_text(encoding="utf-8")
    return json.loads(text)


# --------------------------------------------------------------------------- values and checks


def get_path(value: Any, path: str) -> Any:
    """`a.b.0.c` into nested dicts/lists; `_MISSING` when absent. An empty path is the value itself."""
    if path in ("", "$"):
        return value
    cur = value
    for part in path.split("."):
        if isinstance(cur, dict):
            if part not in cur:
                return _MISSING
            cur = cur[part]
        elif isinstance(cur, list) and re.fullmatch(r"-?\d+", part):
            idx = int(part)
            if not -len(cur) <= idx < len(cur):
                return _MISSING
            cur = cur[idx]
        else:
            return _MISSING
    return cur


def _type_ok(value: Any, kind: str) -> bool:
    return {
        "int": isinstance(value, int) and not isinstance(value, bool),
        "number": isinstance(value, int | float) and not isinstance(value, bool),
        "str": isinstance(value, str),
        "bool": isinstance(value, bool),
        "array": isinstance(value, list),
        "object": isinstance(value, dict),
        "null": value is None,
        "iso_ms": isinstance(value, str) and bool(ISO_MS.match(value)),
        "iso_ms_or_null": value is None or (isinstance(value, str) and bool(ISO_MS.match(value))),
        "str_or_null": value is None or isinstance(value, str),
    }.get(kind, False)


def _count_items(value: Any) -> int | None:
    if isinstance(value, list):
        return len(value)
    if isinstance(value, str):
        return len([p for p in value.split(",") if p.strip()])
    return None


def check_value(value: Any, spec: dict[str, Any], where: str) -> None:
    """Raise CaseFailed when `value` (found at `where`) violates any operator of `spec`."""
    if spec.get("optional") and value is _MISSING:
        return
    if "present" in spec:
        if spec["present"] and value is _MISSING:
            raise CaseFailed(f"{where}: expected present, was absent")
        if not spec["present"] and value is not _MISSING:
            raise CaseFailed(f"{where}: expected absent, was {_short(value)}")
        if value is _MISSING:
            return
    if value is _MISSING:
        raise CaseFailed(f"{where}: missing")
    for op, want in spec.items():
        if op in ("present", "optional"):
            continue
        ok = True
        if op == "eq":
            ok = value == want
        elif op == "ne":
            ok = value != want
        elif op == "type":
            ok = any(_type_ok(value, k) for k in (want if isinstance(want, list) else [want]))
        elif op == "in":
            ok = value in want
        elif op == "nonempty":
            ok = bool(value) if want else not value
        elif op == "len":
            ok = hasattr(value, "__len__") and len(value) == want
        elif op == "len_le":
            ok = hasattr(value, "__len__") and len(value) <= want
        elif op == "len_ge":
            ok = hasattr(value, "__len__") and len(value) >= want
        elif op == "items":
            ok = _count_items(value) == want
        elif op == "ge":
            ok = isinstance(value, int | float) and value >= want
        elif op == "le":
            ok = isinstance(value, int | float) and value <= want
        elif op == "startswith":
            ok = isinstance(value, str) and value.startswith(want)
        elif op == "contains":
            ok = isinstance(value, str | list) and want in value
        elif op == "not_contains":
            ok = isinstance(value, str | list) and want not in value
        elif op == "matches":
            ok = isinstance(value, str) and re.search(want, value) is not None
        else:
            raise CaseFailed(f"{where}: unknown check operator {op!r} in the case file")
        if not ok:
            raise CaseFailed(f"{where}: expected {op} {_short(want)}, got {_short(value)}")


def _short(value: Any, limit: int = 160) -> str:
    text = json.dumps(value, default=str) if value is not _MISSING else "<absent>"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _element_matches(element: Any, fields: dict[str, Any]) -> bool:
    try:
        for path, spec in fields.items():
            check_value(get_path(element, path), spec, path)
    except CaseFailed:
        return False
    return True


# --------------------------------------------------------------------------- results


class CallOutcome:
    def __init__(self, tool: str, args: dict[str, Any], result: Any) -> None:
        self.tool = tool
        self.args = args
        self.is_error = bool(result.is_error)
        texts = [getattr(block, "text", None) for block in result.content]
        self.blocks = len(result.content)
        if not texts or texts[0] is None:
            raise CaseFailed(f"{tool}: content[0] is not a text block")
        try:
            self.body = json.loads(texts[0])
        except json.JSONDecodeError as exc:
            raise CaseFailed(f"{tool}: content[0] is not JSON ({exc})") from exc
        self.raw = texts[0]
        self.structured = result.structured_content
        meta = getattr(result, "meta", None)
        self.block_text = "\n".join(t for t in texts[1:] if t)
        self.meta_text = json.dumps(meta or {}, default=str)
        self.size = sum(len(t.encode()) for t in texts if t) + len(self.meta_text.encode())

    def has_notice(self, code: str) -> bool:
        """docs/protocol.md, notices: a notice rides BOTH an extra content block and `_meta`."""
        pattern = rf"(?<![A-Za-z0-9_]){re.escape(code)}(?![A-Za-z0-9_])"
        return re.search(pattern, self.block_text) is not None and re.search(pattern, self.meta_text) is not None


def check_result_model(out: CallOutcome) -> None:
    """A success body must match its tool's result model exactly (a dry run is not a tool result)."""
    from pydantic import ValidationError

    from fleetmem.memory.verbs import REGISTRY

    spec = REGISTRY.get(out.tool)
    body = out.body
    if out.is_error or spec is None or (body.get("dry_run") is True and body.get("ran") is False):
        return
    try:
        spec.validate_result(body)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(body)'}: {e['msg']}"
            for e in exc.errors(include_url=False, include_input=False)[:5]
        )
        raise CaseFailed(f"{out.tool}: the response does not match {spec.result.__name__} — {problems}") from None


def check_call(out: CallOutcome, expect: dict[str, Any]) -> None:
    body = out.body
    check_result_model(out)
    if "allow_error" in expect and out.is_error:
        check_envelope(out, expect["allow_error"])
        return
    if "error" in expect:
        code = expect["error"]
        if not out.is_error:
            raise CaseFailed(f"{out.tool}: expected error {code}, got success {_short(body)}")
        check_envelope(out, code)
    elif expect.get("ok", True):
        if out.is_error:
            raise CaseFailed(f"{out.tool}: expected success, got {body.get('code')}: {body.get('message')}")
        if body.get("protocol_version") != PROTOCOL_VERSION and out.tool in VERB_NAMES:
            raise CaseFailed(f"{out.tool}: protocol_version must be {PROTOCOL_VERSION}")
        if out.structured is not None and out.structured != body:
            raise CaseFailed(f"{out.tool}: structuredContent differs from content[0]")
    for path, spec in (expect.get("paths") or {}).items():
        check_value(get_path(body, path), spec, f"{out.tool}.{path}")
    for path, fields in (expect.get("any") or {}).items():
        items = get_path(body, path)
        if not isinstance(items, list) or not any(_element_matches(e, fields) for e in items):
            raise CaseFailed(f"{out.tool}.{path}: no element matches {_short(fields)} in {_short(items)}")
    for path, fields in (expect.get("none") or {}).items():
        items = get_path(body, path)
        if isinstance(items, list) and any(_element_matches(e, fields) for e in items):
            raise CaseFailed(f"{out.tool}.{path}: an element matches {_short(fields)} but must not")
    for path, fields in (expect.get("each") or {}).items():
        items = get_path(body, path)
        if not isinstance(items, list):
            raise CaseFailed(f"{out.tool}.{path}: not an array")
        for i, element in enumerate(items):
            for fpath, spec in fields.items():
                check_value(get_path(element, fpath), spec, f"{out.tool}.{path}.{i}.{fpath}")
    if expect.get("budget"):
        check_budget(out)
    if expect.get("evidence_consistent"):
        for i, r in enumerate(body.get("results") or []):
            want = CREATE_SAFETY_FOR.get(r.get("evidence"))
            if want is None or r.get("create_safety") != want:
                raise CaseFailed(
                    f"{out.tool}.results.{i}: evidence {r.get('evidence')!r} with "
                    f"create_safety {r.get('create_safety')!r} (expected {want!r})"
                )
    if "notice" in expect and not out.has_notice(expect["notice"]):
        raise CaseFailed(f"{out.tool}: expected a {expect['notice']} notice in content[1:] and in _meta")
    if "raw_eq" in expect and out.raw != expect["raw_eq"]:
        raise CaseFailed(f"{out.tool}: content[0] must be byte-identical to the earlier call's")
    if "bytes_le" in expect and out.size > expect["bytes_le"]:
        raise CaseFailed(f"{out.tool}: the answer is {out.size} bytes, more than {expect['bytes_le']}")
    for code, count in (expect.get("notice_blocks") or {}).items():
        found = out.block_text.count(f"[fleetmem notice {code} ")
        if found != count:
            raise CaseFailed(f"{out.tool}: expected {count} {code} notice block(s), got {found}")
    if "no_notice" in expect and out.has_notice(expect["no_notice"]):
        raise CaseFailed(f"{out.tool}: unexpected {expect['no_notice']} notice")
    if "fix_run_keeps" in expect or "fix_sets" in expect or "fix_drops" in expect:
        check_fix(out, expect)


def check_envelope(out: CallOutcome, code: str) -> None:
    body = out.body
    where = f"{out.tool} envelope"
    if out.blocks != 1:
        raise CaseFailed(f"{where}: an error result carries exactly one content block, got {out.blocks}")
    if body.get("code") != code:
        raise CaseFailed(f"{where}: expected code {code}, got {body.get('code')} ({body.get('message')})")
    check_value(get_path(body, "error"), {"type": "str", "nonempty": True}, f"{where}.error")
    if code in VERB_ERROR_CODES:  # §11: error = code for every verb code
        check_value(get_path(body, "error"), {"eq": code}, f"{where}.error")
    for key in ("message", "suggestion", "correlation_id"):
        check_value(get_path(body, key), {"type": "str", "nonempty": True}, f"{where}.{key}")
    check_value(get_path(body, "class"), {"in": list(ERROR_CLASSES)}, f"{where}.class")
    check_value(get_path(body, "retryable"), {"type": "bool"}, f"{where}.retryable")
    check_value(get_path(body, "protocol_version"), {"eq": PROTOCOL_VERSION}, f"{where}.protocol_version")
    check_value(get_path(body, "contract_version"), {"eq": 1}, f"{where}.contract_version")
    fix = body.get("fix")
    if not isinstance(fix, dict):  # AGENT_OPERATOR: every error has a fix (a step, or none: `report`)
        raise CaseFailed(f"{where}: every error carries a fix, this one has {_short(fix)}")
    if fix is not None:
        check_value(get_path(fix, "next"), {"in": list(NEXT_STEPS)}, f"{where}.fix.next")
        check_value(get_path(fix, "actor"), {"in": list(ACTORS)}, f"{where}.fix.actor")
        check_value(get_path(fix, "consent"), {"type": "array"}, f"{where}.fix.consent")
        check_value(get_path(fix, "why"), {"type": "str", "nonempty": True}, f"{where}.fix.why")
        if fix.get("next") == "wait":
            check_value(get_path(fix, "retry_after_seconds"), {"type": "int"}, f"{where}.fix.retry_after_seconds")
    for banned in ("Traceback (most recent call last)", "sqlite3.", 'File "'):
        if banned in json.dumps(body):
            raise CaseFailed(f"{where}: leaks internals ({banned!r})")


def check_fix(out: CallOutcome, expect: dict[str, Any]) -> None:
    fix = out.body.get("fix") or {}
    where = f"{out.tool} fix"
    if fix.get("next") != "run":
        raise CaseFailed(f"{where}: a caller mistake with a corrected call must say next=run, got {fix.get('next')}")
    mcp = fix.get("mcp") or {}
    if mcp.get("tool") != out.tool:
        raise CaseFailed(f"{where}: fix.mcp.tool must be {out.tool}, got {mcp.get('tool')}")
    arguments = mcp.get("arguments") or {}
    for key in expect.get("fix_run_keeps", []):
        if arguments.get(key) != out.args.get(key):
            raise CaseFailed(f"{where}: the corrected call must keep {key}={_short(out.args.get(key))}")
    for key, value in (expect.get("fix_sets") or {}).items():
        if arguments.get(key) != value:
            raise CaseFailed(
                f"{where}: expected {key}={_short(value)} in the corrected call, "
                f"got {_short(arguments.get(key, _MISSING))}"
            )
    for key in expect.get("fix_drops", []):
        if key in arguments:
            raise CaseFailed(f"{where}: the corrected call must drop {key}")


def check_budget(out: CallOutcome) -> None:
    """docs/protocol.md, budgets: integer fields, used <= budget, and the packed count matches `total`."""
    body = out.body
    for key in ("budget_tokens", "budget_used", "dropped_count"):
        check_value(get_path(body, key), {"type": "int", "ge": 0}, f"{out.tool}.{key}")
    if body["budget_used"] > body["budget_tokens"]:
        raise CaseFailed(f"{out.tool}: budget_used {body['budget_used']} > budget_tokens {body['budget_tokens']}")
    if "total" in body and isinstance(body.get("facts"), list) and body["total"] != len(body["facts"]):
        raise CaseFailed(f"{out.tool}: total {body['total']} must count the packed facts ({len(body['facts'])})")
    if out.tool == "recall":
        used = sum(_cost(f.get("fact") or f.get("text") or "") for f in body.get("facts") or [])
        used += sum(_cost(r.get("title", "")) + _cost(r.get("chunk", "")) for r in body.get("results") or [])
        if used > body["budget_used"] or body["budget_used"] > body["budget_tokens"]:
            raise CaseFailed(f"recall: packed items cost at least {used} but budget_used is {body['budget_used']}")


def _cost(text: str) -> int:
    return -(-len(text) // 4)


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
        entry = {"id": case["id"], "era": era, "rule": case.get("rule", ""), "status": "passed", "detail": ""}
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
        result = await client.call_tool(tool, args)
        out = CallOutcome(tool, args, result)
        check_call(out, step.get("expect") or {})
        for name, path in (step.get("save") or {}).items():
            value = out.raw if path == "$raw" else get_path(out.body, path)
            if value is _MISSING:
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
            check_value(response.headers.get(name, _MISSING), spec, f"header {name}")
        if expect.get("paths") or step.get("save"):
            try:
                doc = response.json()
            except ValueError as exc:
                raise CaseFailed(f"{url}: response is not JSON") from exc
            for path, spec in (expect.get("paths") or {}).items():
                check_value(get_path(doc, path), spec, path)
        for name, source in (step.get("save_header_param") or {}).items():
            header, param = source
            m = re.search(rf'{param}="([^"]+)"', response.headers.get(header, ""))
            if not m:
                raise CaseFailed(f'header {header} has no {param}="…"')
            variables[name] = m.group(1)


def check_list(tools: list[Any], expect: dict[str, Any]) -> None:
    names = [t.name for t in tools]
    for name in expect.get("has", []):
        if name not in names:
            raise CaseFailed(f"tools/list lacks {name}")
    for name in expect.get("lacks", []):
        if name in names:
            raise CaseFailed(f"tools/list shows {name} but must not")
    if "exactly" in expect and sorted(names) != sorted(expect["exactly"]):
        raise CaseFailed(f"tools/list must be exactly {sorted(expect['exactly'])}, got {sorted(names)}")
    by_name = {t.name: t.model_dump(by_alias=True, exclude_none=True) for t in tools}
    for name, checks in (expect.get("tools") or {}).items():
        if name not in by_name:
            raise CaseFailed(f"tools/list lacks {name}")
        for path, spec in checks.items():
            check_value(get_path(by_name[name], path), spec, f"tools/list {name}.{path}")
    for path, spec in (expect.get("every") or {}).items():
        for name, tool in by_name.items():
            check_value(get_path(tool, path), spec, f"tools/list {name}.{path}")


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
) -> dict[str, Any]:
    """Run every case against `target_url`; returns the report (and prints a table unless `json`).

    `surface` names the surface the target serves ("verbs" | "full"); by default it is inferred
    from tools/list (only the seven verbs listed -> verbs)."""
    emit = log or (lambda line: print(line, file=sys.stderr))
    cases = load_cases()
    runner = Runner(target_url, token, read_token, emit, surface)
    results = asyncio.run(runner.run(cases, tuple(e for e in eras if e)))
    report = {
        "target": target_url,
        "marker": runner.base_marker,
        "passed": sum(r["status"] == "passed" for r in results),
        "failed": sum(r["status"] == "failed" for r in results),
        "skipped": sum(r["status"] == "skipped" for r in results),
        "cases": results,
    }
    if not json:
        for r in results:
            mark = {"passed": "PASS", "failed": "FAIL", "skipped": "SKIP"}[r["status"]]
            line = f"{mark}  [{r['era']:<6}] {r['id']}"
            print(line + (f" — {r['detail']}" if r["detail"] else ""))
        print(f"{report['passed']} passed, {report['failed']} failed, {report['skipped']} skipped")
    return report
