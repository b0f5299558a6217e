"""The checks of the conformance engine: values against the cases' operator maps (`check_value`), a
tool's answer against its result model, the error envelope, its fix and the budget arithmetic, and
tools/list against a case's expectation. Each raises `CaseFailed` with what was wrong."""

from __future__ import annotations

import json
import re
from typing import Any

from fleetmem.protocol import CREATE_SAFETY_FOR, PROTOCOL_VERSION, VERB_ERROR_CODES, VERB_NAMES

ISO_MS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
ERROR_CLASSES = ("caller", "consent", "retryable", "unavailable", "server", "host_only")
NEXT_STEPS = ("run", "ask_user", "tell_user_to_run", "wait", "report")
ACTORS = ("agent", "user", "host_admin", "provider")
MISSING = object()


class CaseFailed(Exception):
    pass


class CaseSkipped(Exception):
    pass


# --------------------------------------------------------------------------- values and checks


def get_path(value: Any, path: str) -> Any:
    """`a.b.0.c` into nested dicts/lists; `MISSING` when absent. An empty path is the value itself."""
    if path in ("", "$"):
        return value
    cur = value
    for part in path.split("."):
        if isinstance(cur, dict):
            if part not in cur:
                return MISSING
            cur = cur[part]
        elif isinstance(cur, list) and re.fullmatch(r"-?\d+", part):
            idx = int(part)
            if not -len(cur) <= idx < len(cur):
                return MISSING
            cur = cur[idx]
        else:
            return MISSING
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
    if spec.get("optional") and value is MISSING:
        return
    if "present" in spec:
        if spec["present"] and value is MISSING:
            raise CaseFailed(f"{where}: expected present, was absent")
        if not spec["present"] and value is not MISSING:
            raise CaseFailed(f"{where}: expected absent, was {_short(value)}")
        if value is MISSING:
            return
    if value is MISSING:
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
    text = json.dumps(value, default=str) if value is not MISSING else "<absent>"
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
        #: Every text block joined, as a client that reads a result's whole text sees it (the
        #: reference's runner joins them and parses one JSON document).
        self.joined_text = "\n".join(t for t in texts if t)
        self.meta = meta if isinstance(meta, dict) else {}
        self.meta_text = json.dumps(meta or {}, default=str)
        self.size = sum(len(t.encode()) for t in texts if t) + len(self.meta_text.encode())

    def notice_codes(self) -> list[str]:
        """D28: the codes of a success's notices, inside its body under `notices`."""
        notices = self.body.get("notices") if not self.is_error else None
        return [str(n.get("code")) for n in notices or [] if isinstance(n, dict)]

    def has_notice(self, code: str) -> bool:
        """docs/protocol.md, notices (D28): a notice rides BOTH the body's `notices` and `_meta`
        (`fleetmem/notices`, mirrored under `gbrain_notices`)."""
        mirrored = all(
            code in [n.get("code") for n in self.meta.get(key) or [] if isinstance(n, dict)]
            for key in ("fleetmem/notices", "gbrain_notices")
        )
        return code in self.notice_codes() and mirrored


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
        raise CaseFailed(f"{out.tool}: expected a {expect['notice']} notice in the body's notices and in _meta")
    if "raw_eq" in expect and not _same_without_notices(out, expect["raw_eq"]):
        raise CaseFailed(f"{out.tool}: content[0] without its notices must be the earlier call's document")
    if "bytes_le" in expect and out.size > expect["bytes_le"]:
        raise CaseFailed(f"{out.tool}: the answer is {out.size} bytes, more than {expect['bytes_le']}")
    for code, count in (expect.get("notice_blocks") or {}).items():
        found = out.notice_codes().count(code)
        if found != count:
            raise CaseFailed(f"{out.tool}: expected {count} {code} notice(s), got {found}")
    if expect.get("joined_json"):
        check_joined_json(out)
    if "no_notice" in expect and out.has_notice(expect["no_notice"]):
        raise CaseFailed(f"{out.tool}: unexpected {expect['no_notice']} notice")
    if "fix_run_keeps" in expect or "fix_sets" in expect or "fix_drops" in expect:
        check_fix(out, expect)


def _same_without_notices(out: CallOutcome, earlier: str) -> bool:
    """D28: the body is the earlier call's document with only `notices` added (a notice never
    changes the answer itself)."""
    try:
        before = json.loads(earlier)
    except json.JSONDecodeError:
        return False
    return {k: v for k, v in out.body.items() if k != "notices"} == before and "notices" not in before


def check_joined_json(out: CallOutcome) -> None:
    """D28: every text block of the result joined is ONE JSON object (a client that joins the blocks
    and parses them, as the reference's runner does, reads the answer), the same as content[0]."""
    try:
        joined = json.loads(out.joined_text)
    except json.JSONDecodeError as exc:
        raise CaseFailed(
            f"{out.tool}: the joined text of its {out.blocks} block(s) is not one JSON document ({exc})"
        ) from None
    if not isinstance(joined, dict) or joined != out.body:
        raise CaseFailed(f"{out.tool}: the joined text is not the body of content[0]")


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
                f"got {_short(arguments.get(key, MISSING))}"
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
