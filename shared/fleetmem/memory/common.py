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
- `loose_int(value) -> int | None`: an integer from int / integral float / digit string, else None
  (bools are not integers here).
- `check_budget(tool, params) -> int | None`: D4 — `budget_tokens` absent/null -> None; an integer
  >= 1 -> it; anything else -> `invalid_params` with a corrected value.
- `clamp_limit(tool, params, default=50, lo=1, hi=100) -> int`: `limit` clamped (never rejected for
  being out of range); a non-number -> `invalid_params` with limit=default.
- `parse_since(tool, params, field, now) -> datetime | None`: ISO 8601 or `invalid_params`.
- `degraded_recall_notice(reason) -> Notice` (kind degraded), `empty_retrieval_notice(degraded)
  -> Notice` (kind info), `doctor_fix(why) -> Fix` (host-admin diagnosis step).
"""

from __future__ import annotations

import json
import math
import re
from datetime import datetime, timedelta
from typing import Any

from pydantic import BaseModel

from fleetmem.errors import Fix, Notice, VerbError
from fleetmem.models import Caller
from fleetmem.timefmt import iso, parse_iso

_WS = re.compile(r"\s+")
DEFAULT_BUDGET_FIX = 2000


def normalize_text(text: str) -> str:
    return _WS.sub(" ", text.casefold()).strip()


def world_only(caller: Caller, include_private: bool | None = False) -> bool:
    return caller.remote or not include_private


def given_args(params: BaseModel) -> dict[str, Any]:
    given = params.model_fields_set
    return {name: getattr(params, name) for name in type(params).model_fields if name in given}


def fix_call(tool: str, args: dict[str, Any], why: str, *, verify: dict[str, Any] | None = None) -> Fix:
    return Fix(why=why, mcp={"tool": tool, "arguments": args}, verify=verify)


def invalid(
    tool: str,
    params: BaseModel,
    message: str,
    *,
    problem: str,
    cause: str,
    field: str,
    value: Any = None,
    why: str | None = None,
    drop: bool = False,
    verify: dict[str, Any] | None = None,
    detail: Any = None,
) -> VerbError:
    args = given_args(params)
    if drop:
        args.pop(field, None)
        remedy = f"call {tool} again without `{field}`"
    else:
        args[field] = value
        remedy = f"pass `{field}` as {json.dumps(value, ensure_ascii=False, default=str)}"
    suggestion = f"{problem} Cause: {cause} Fix: {remedy}, keeping the other arguments."
    return VerbError(
        "invalid_params",
        message,
        suggestion,
        why=why or cause,
        detail=detail,
        fix=fix_call(tool, args, why or cause, verify=verify),
        klass="caller",
    )


def loose_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"\s*-?\d{1,12}\s*", value):
        return int(value)
    return None


def check_budget(tool: str, params: BaseModel) -> int | None:
    raw = getattr(params, "budget_tokens", None)
    if raw is None:
        return None
    n = loose_int(raw)
    if n is not None and n >= 1:
        return n
    if isinstance(raw, int | float) and not isinstance(raw, bool) and math.isfinite(raw) and raw >= 1:
        corrected = max(1, math.floor(raw))
    else:
        corrected = DEFAULT_BUDGET_FIX
    raise invalid(
        tool,
        params,
        f"budget_tokens must be an integer >= 1 (got {raw!r}).",
        problem=f"budget_tokens={raw!r} is not a usable token budget.",
        cause="budget_tokens is a whole number of tokens, at least 1; omit it for no budget.",
        field="budget_tokens",
        value=corrected,
    )


def clamp_limit(tool: str, params: BaseModel, default: int = 50, lo: int = 1, hi: int = 100) -> int:
    raw = getattr(params, "limit", None)
    if raw is None:
        return default
    n = loose_int(raw)
    if n is None and isinstance(raw, float) and math.isfinite(raw):
        n = round(raw)
    if n is None:
        raise invalid(
            tool,
            params,
            f"limit must be a number (got {raw!r}).",
            problem=f"limit={raw!r} is not a number.",
            cause=f"limit is the per-arm maximum ({lo}..{hi}, default {default}).",
            field="limit",
            value=default,
        )
    return max(lo, min(hi, n))


def parse_since(tool: str, params: BaseModel, field: str, now: datetime) -> datetime | None:
    raw = getattr(params, field, None)
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return None
    if isinstance(raw, str):
        try:
            return parse_iso(raw)
        except (ValueError, OverflowError):
            pass
    example = iso(now - timedelta(days=1))
    raise invalid(
        tool,
        params,
        f"{field} is not an ISO 8601 date or datetime (got {raw!r}).",
        problem=f"{field}={raw!r} could not be read as a time.",
        cause=f"{field} must be ISO 8601, e.g. {example} (UTC) or 2026-06-01.",
        field=field,
        value=example,
        why=f"{field} must be ISO 8601; the corrected call uses 24 hours ago as an example.",
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
