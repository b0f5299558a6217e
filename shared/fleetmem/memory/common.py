"""Small helpers the DOMAIN verbs share.

Public API:
- `normalize_text(text) -> str`: case-folded, whitespace collapsed, trimmed (dedup comparisons).
- `world_only(caller, include_private=False) -> bool`: True unless a trusted-local caller asked
  for private data (remote callers never widen: fail closed).
- `given_args(params) -> dict`: the arguments the caller actually passed (for fixes that keep them).
- `fix_call(tool, args, why, *, verify=None) -> Fix`: an agent-run corrected call.
- `invalid(tool, params, message, *, problem, cause, field, value, why=None, drop=False,
  verify=None) -> VerbError`: `invalid_params` whose suggestion says problem, cause and fix, and
  whose fix is the same call with `field` set to `value` (or removed when `drop`) and every other
  argument kept.
- `loose_int(value) -> int | None`: an integer from int / integral float / ASCII digit string, else
  None (bools are not integers here).
- `check_budget(tool, params) -> int | None`: D4 — `budget_tokens` absent/null -> None; an integer
  1..MAX_BUDGET_TOKENS -> it (the `Budget` type refused anything else).
- `clamp_limit(tool, params, default=50, lo=1, hi=100) -> int`: `limit` clamped to lo..hi (only
  recall's limit can be out of range here: the spec clamps it; list_pages' `Limit` refuses).
- `parse_since(tool, params, field, now) -> datetime | None`: ISO 8601 or `invalid_params` (no
  corrected call: a time the caller did not write would be a guess).
- `too_long(message, *, problem, cause, instead, detail=None) -> VerbError`: `invalid_params` for a
  size limit (D16). Cutting text, a name or a slug changes what the caller meant, so the fix has
  no runnable step (`next: report`): the suggestion and `why` say what to do instead.
- `degraded_recall_notice(reason) -> Notice` (kind degraded), `empty_retrieval_notice(degraded)
  -> Notice` (kind info), `doctor_fix(why) -> Fix` (host-admin diagnosis step).

The typed parameters every tool's model is built from live in `fleetmem.memory.params`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from pydantic import (
    BaseModel,
)

from fleetmem.errors import Fix, Notice, VerbError
from fleetmem.models import Caller, Fact
from fleetmem.protocol import ErrorCode
from fleetmem.timefmt import parse_iso

_WS = re.compile(r"\s+")
#: An integer written as text: ASCII digits only (`int()` also reads "٣" and "1_000").
_ASCII_INT = re.compile(r"\s*-?[0-9]{1,12}\s*", re.ASCII)
DEFAULT_BUDGET_FIX = 2000
#: D4 and D18: the largest budget (a million tokens is far beyond any answer's size).
MAX_BUDGET_TOKENS = 1_000_000
#: D18: the largest change position: the largest integer every JSON reader keeps exactly (2^53 - 1,
#: JavaScript's safe integer), well inside what every store holds (SQLite's signed 64-bit INTEGER,
#: DynamoDB's numbers). No brain comes near it.
MAX_POSITION = 2**53 - 1


def normalize_text(text: str) -> str:
    return _WS.sub(" ", text.casefold()).strip()


def world_only(caller: Caller, include_private: bool | None = False) -> bool:
    return caller.remote or not include_private


def shown_to(caller: Caller, fact: Fact | None) -> Fact | None:
    """`fact` when this caller may see it — its own tenant's, and for a remote caller a world fact —
    else None: a private fact looks exactly like a missing one to a remote caller."""
    if fact is None or fact.tenant != caller.tenant or (caller.remote and fact.visibility != "world"):
        return None
    return fact


def given_args(params: BaseModel) -> dict[str, Any]:
    given = params.model_fields_set
    # As JSON values: a nested argument model (put_page's timeline/links items) must not reach a
    # fix, which is rendered as JSON.
    dumped = params.model_dump(mode="json", include=set(given))
    return {name: dumped[name] for name in type(params).model_fields if name in given}


def fix_call(tool: str, args: dict[str, Any], why: str, *, verify: dict[str, Any] | None = None) -> Fix:
    return Fix(why=why, mcp={"tool": tool, "arguments": args}, verify=verify)


def invalid(
    tool: str,
    params: BaseModel | Mapping[str, Any],
    message: str,
    *,
    problem: str,
    cause: str,
    field: str,
    value: Any = None,
    why: str | None = None,
    drop: bool = False,
    no_fix: str | None = None,
    verify: dict[str, Any] | None = None,
    detail: Any = None,
    code: ErrorCode = "invalid_params",
) -> VerbError:
    """`code` (invalid_params) for one argument of a call given as its parsed `params` or its raw
    arguments: the corrected call sets `field` to `value` (or drops it; `no_fix`: no corrected
    call, only this remedy)."""
    args = given_args(params) if isinstance(params, BaseModel) else dict(params)
    if no_fix is not None:
        remedy = no_fix
    elif drop:
        args.pop(field, None)
        remedy = f"call {tool} again without `{field}`"
    else:
        args[field] = value
        remedy = f"pass `{field}` as {json.dumps(value, ensure_ascii=False, default=str)}"
    suggestion = f"{problem} Cause: {cause} Fix: {remedy}" + (
        "." if no_fix is not None else ", keeping the other arguments."
    )
    return VerbError(
        code,
        message,
        suggestion,
        why=why or cause,
        detail=detail,
        fix=Fix(why=why or cause) if no_fix is not None else fix_call(tool, args, why or cause, verify=verify),
        klass="caller",
    )


def loose_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    if isinstance(value, str) and _ASCII_INT.fullmatch(value):
        return int(value)
    return None


def check_budget(tool: str, params: BaseModel) -> int | None:
    """D4: the validated `budget_tokens` (the `Budget` type already refused anything but an integer
    >= 1), or None for no budget."""
    raw = getattr(params, "budget_tokens", None)
    return raw if isinstance(raw, int) and raw >= 1 else None


def clamp_limit(tool: str, params: BaseModel, default: int = 50, lo: int = 1, hi: int = 100) -> int:
    """`limit` clamped to lo..hi (never rejected for being out of range; the `Limit` type already
    refused non-numbers); absent -> default."""
    raw = getattr(params, "limit", None)
    if raw is None:
        return default
    return max(lo, min(hi, int(raw)))


def parse_since(tool: str, params: BaseModel, field: str, now: datetime) -> datetime | None:
    raw = getattr(params, field, None)
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return None
    if isinstance(raw, str):
        try:
            return parse_iso(raw)
        except (ValueError, OverflowError):
            pass
    raise _since_error(tool, given_args(params), field, raw)


def _since_error(tool: str, args: Mapping[str, Any], field: str, raw: Any) -> VerbError:
    """`invalid_params` for a time that does not parse. No corrected call: which instant the caller
    meant is theirs to say (a made-up one would silently change what the read returns)."""
    shown = json.dumps(raw, ensure_ascii=False, default=str)[:80]
    return invalid(
        tool,
        args,
        f"{field} is not an ISO 8601 date or datetime (got {shown}).",
        problem=f"{field}={shown} could not be read as a time.",
        cause=f"{field} must be ISO 8601 in UTC: a date (2026-06-01) or a datetime (2026-06-01T09:30:00Z).",
        field=field,
        no_fix=f"send {field} as the ISO 8601 time you meant, or leave {field} out",
        why=f"{field} must be an ISO 8601 date or datetime; which time you meant cannot be read from "
        f"{shown}, so no corrected call is offered: send the time you meant, e.g. 2026-06-01 or "
        "2026-06-01T09:30:00Z, or leave it out.",
    )


def doctor_fix(why: str) -> Fix:
    return Fix(why=why, argv=["fleetmem", "doctor"], actor="host_admin")


def degraded_recall_notice(reason: str) -> Notice:
    reason = reason.strip().rstrip(".")  # a reason may be a whole sentence; it ends this one
    return Notice(
        code="degraded_recall",
        kind="degraded",
        why=f"Search ran keyword-only: {reason}. Results found only by meaning are missing.",
        fix=doctor_fix("The brain's operator can check the embedding model with `fleetmem doctor`."),
        user_message="Memory search matched keywords only right now, so some related notes may be missing.",
    )


def empty_retrieval_notice(degraded: str | None) -> Notice:
    why = "Nothing in this brain matched the query."
    if degraded:
        why += f" Search ran keyword-only ({degraded}), so a match by meaning could have been missed."
    return Notice(
        code="empty_retrieval",
        kind="info",
        why=why,
        user_message="I found no saved notes on that topic."
        if not degraded
        else "I found no notes on that topic; the brain searched keywords only right now.",
    )


def too_long(message: str, *, problem: str, cause: str, instead: str, detail: Any = None) -> VerbError:
    why = f"{problem} {instead[0].upper()}{instead[1:]}"
    return VerbError(
        "invalid_params",
        message,
        f"Problem: {problem} Cause: {cause} Fix: {instead}",
        why=why,
        detail=detail,
        fix=Fix(why=why, actor="agent"),
        klass="caller",
    )


# --------------------------------------------------------------------------- typed parameters
