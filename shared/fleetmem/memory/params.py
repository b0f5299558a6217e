"""Typed parameters (docs/protocol.md, "Parameters and validation"):
- `Params`: the base of every tool's parameter model. Validation failures of its typed fields become
  ONE `invalid_params` (or `provenance_required`) `VerbError` raised straight out of
  `model_validate`, built by `invalid_from_validation` — the one generic builder dispatch uses too.
  Errors are reported in the model's field order (`check_order` fields first).
- `Hint(accepts, cause=None, fix=..., remedy=None)`: per-field metadata (`Annotated[..., Hint(...)]`)
  the builder reads: what the field accepts and the corrected value (a constant, or a function of the
  rejected value and the current time; `NO_FIX` for none, `DROP` to leave the field out).
- `Budget`, `Limit`, `ChangePosition`, `Since`/`SinceText`, `VisibilityArg`, `FactIdArg`: the shared
  typed fields (D4 budget, per-call limit, delta positions, ISO `since`, world|private, a fact id).
- `is_blank(text)`: the one test of "this text says nothing" for a required text: only whitespace,
  format characters (zero-width space, ZWNJ, ZWJ, BOM, word joiner, bidi marks, tags), controls,
  variation selectors and the blank filler letters (Hangul fillers, Braille blank). `str.strip()`
  alone keeps "\u200b", so a zero-width fact or provenance would pass as text.

Strict parameters (docs/protocol.md, D18): every `Params` model validates strictly. An integer is a
JSON integer (a number without a fractional part; never a string or a boolean) within the bounds its
schema advertises (`minimum`/`maximum`: every integer parameter has both, `registry.register`
checks); a boolean is a JSON boolean. A refusal's fix is the same call with the value corrected to
the nearest valid one when that is unambiguous (`nearest_int`, `_flag_value`), else no runnable step.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    ValidationError,
    ValidationInfo,
    WithJsonSchema,
    model_validator,
)
from pydantic_core import to_jsonable_python

from fleetmem.errors import Fix, VerbError
from fleetmem.memory.common import DEFAULT_BUDGET_FIX, MAX_BUDGET_TOKENS, MAX_POSITION, invalid
from fleetmem.protocol import VISIBILITIES

#: `Hint.fix` values: no corrected call exists / the corrected call leaves the field out.
NO_FIX: Any = object()
DROP: Any = object()
_FROM_DEFAULT: Any = object()

#: pydantic error types that are their own envelope code (the rest are `invalid_params`).
_OWN_CODES = frozenset({"provenance_required"})


#: Unicode categories that show nothing on their own: controls, format characters (zero-width
#: space and joiners, BOM, bidi marks, tags) and separators.
_BLANK_CATEGORIES = frozenset({"Cc", "Cf", "Zs", "Zl", "Zp"})
#: Code points of other categories that render as nothing: the combining grapheme joiner,
#: variation selectors, the Hangul fillers and the Braille blank.
_BLANK_CHARS = frozenset(
    {"\u034f", "\u115f", "\u1160", "\u2800", "\u3164", "\uffa0"}
    | {chr(c) for c in range(0xFE00, 0xFE10)}
    | {chr(c) for c in range(0xE0100, 0xE01F0)}
)


def is_blank(text: str) -> bool:
    """True when `text` holds nothing a reader could see (see the module docstring); "" is blank."""
    return all(ch.isspace() or ch in _BLANK_CHARS or unicodedata.category(ch) in _BLANK_CATEGORIES for ch in text)


@dataclass(frozen=True)
class Hint:
    """What a field accepts and how to correct it; read by `invalid_from_validation`.

    `fix`: the corrected value — a constant, or `fn(rejected_value, now) -> value` (`NO_FIX`: no
    corrected call, `remedy` says what to do instead; `DROP`: leave the field out). Without `fix`
    the field's default is used (left out when the default is None).
    """

    accepts: str
    cause: str | None = None
    fix: Any = _FROM_DEFAULT
    remedy: str | None = None

    def value(self, raw: Any, now: datetime, default: Any) -> Any:
        if self.fix is _FROM_DEFAULT:
            return DROP if default is None else to_jsonable_python(default)
        if callable(self.fix):
            return self.fix(raw, now)
        return self.fix


def _hint_of(model: type[BaseModel], name: str) -> Hint | None:
    info = model.model_fields.get(name)
    if info is None:
        return None
    return next((m for m in info.metadata if isinstance(m, Hint)), None)


class Params(BaseModel):
    """Base of every tool's parameter model (registered tools set `tool`).

    A failed validation raises the tool's `VerbError` directly (see `invalid_from_validation`), so
    every caller of `model_validate` — dispatch, the CLI, tests — gets the same envelope. Pass
    `context={"tool": name, "now": datetime, "keep": {...}}` to date example values by the deps' clock and to echo
    arguments dispatch handles itself (`dry_run`, `idempotency_key`) in fixes.
    """

    # D18: strict — no string is read as a number or a flag and no number as a flag (pydantic's lax
    # mode read "yes" and 1 as true and "5" as 5, while refusing 2.5).
    model_config = ConfigDict(extra="ignore", strict=True)
    tool: ClassVar[str] = ""
    #: Fields whose errors are reported first, in this order (then the declaration order).
    check_order: ClassVar[tuple[str, ...]] = ()

    @model_validator(mode="wrap")
    @classmethod
    def _one_error(cls, data: Any, handler: Callable[[Any], Any], info: ValidationInfo) -> Any:
        try:
            return handler(data)
        except ValidationError as exc:
            ctx = info.context or {}
            raise invalid_from_validation(
                cls,
                data if isinstance(data, Mapping) else {},
                exc,
                tool=ctx.get("tool"),
                now=ctx.get("now"),
                keep=ctx.get("keep"),
            ) from None


def invalid_from_validation(
    model: type[BaseModel],
    data: Mapping[str, Any],
    exc: ValidationError,
    *,
    tool: str | None = None,
    now: datetime | None = None,
    keep: Mapping[str, Any] | None = None,
) -> VerbError:
    """THE builder of `invalid_params` for a failed parameter validation.

    The first failing field (model order, `check_order` first) decides. With a `Hint` it answers in
    the verbs' problem/cause/fix form with the hint's corrected value; otherwise it names every bad
    field and, when derivable, fixes each to its default (other arguments kept).
    """
    tool = tool or getattr(model, "tool", "") or model.__name__
    now = now or datetime.now(UTC)
    fields = model.model_fields
    by_alias = {f.alias: n for n, f in fields.items() if f.alias}
    raw_errors = _in_check_order(model, exc)
    errors = [
        {
            "field": ".".join(str(p) for p in (e.get("loc") or ())) or None,
            "type": e.get("type"),
            "message": e.get("msg"),
        }
        for e in raw_errors
    ]
    args = {**{k: v for k, v in data.items()}, **dict(keep or {})}
    first_field = _top(raw_errors[0]) if raw_errors else None
    hint = _hint_of(model, by_alias.get(first_field, first_field)) if first_field else None
    if first_field is None or hint is None:
        return _generic_invalid(tool, model, args, raw_errors, errors)
    name = by_alias.get(first_field, first_field)
    raw = data.get(first_field)
    first = raw_errors[0]
    custom = first.get("type") in _OWN_CODES or str(first.get("type", "")).startswith("fm_")
    shown = json.dumps(raw, ensure_ascii=False, default=str)[:80]
    message = str(first.get("msg")) if custom else f"{first_field} must be {hint.accepts} (got {shown})."
    problem = message if custom else f"{first_field}={shown} is not {hint.accepts}."
    value = hint.value(raw, now, fields[name].get_default(call_default_factory=True))
    return invalid(
        tool,
        args,
        message,
        problem=problem,
        cause=hint.cause or f"{first_field} must be {hint.accepts}.",
        field=first_field,
        value=None if value in (DROP, NO_FIX) else value,
        drop=value is DROP,
        no_fix=(hint.remedy or "correct the call") if value is NO_FIX else None,
        detail={"errors": errors},
        code="provenance_required" if first.get("type") == "provenance_required" else "invalid_params",
    )


def _top(e: Any) -> str | None:
    """The top-level parameter an error is about (None: the arguments as a whole)."""
    loc = e.get("loc") or ()
    return loc[0] if loc and isinstance(loc[0], str) else None


def _in_check_order(model: type[BaseModel], exc: ValidationError) -> list[Any]:
    """The validation errors, first failing field first (`check_order` before model order)."""
    fields = model.model_fields
    by_alias = {f.alias: n for n, f in fields.items() if f.alias}
    order = list(getattr(model, "check_order", ())) + [n for n in fields]
    rank = {n: i for i, n in reversed(list(enumerate(order)))}
    raw_errors = exc.errors(include_url=False, include_input=False)
    return sorted(raw_errors, key=lambda e: rank.get(by_alias.get(_top(e) or "", _top(e) or ""), len(order)))


def _generic_invalid(
    tool: str, model: type[BaseModel], args: dict[str, Any], raw_errors: list[Any], errors: list[dict[str, Any]]
) -> VerbError:
    fields = model.model_fields
    by_alias = {f.alias: n for n, f in fields.items() if f.alias}
    fixed, derivable, bad = _corrected(model, args, raw_errors)
    first = errors[0] if errors else {"field": None, "message": "invalid"}
    field_name = bad[0] if bad else None
    described = ""
    if field_name:
        finfo = fields.get(by_alias.get(field_name, field_name))
        if finfo is not None and finfo.description:
            described = f" ({finfo.description.strip().rstrip('.')})"
    if field_name:
        message = f'Parameter "{field_name}" is invalid: {first["message"]}.'
    else:
        message = f"The arguments of {tool} are invalid: {first['message']}."
    others = bad[1:]
    suggestion = (
        (f"Correct `{field_name}`{described}" if field_name else f"Correct the arguments of {tool}")
        + (f" and also {', '.join(f'`{o}`' for o in others)}" if others else "")
        + f"; tools/list shows {tool}'s inputSchema."
    )
    fix = None
    if derivable and bad:
        keep = "your other arguments kept and " + ", ".join(
            f"`{b}` {'set to ' + _compact(fixed[b]) if b in fixed else 'left out (its default applies)'}" for b in bad
        )
        fix = Fix(
            why=f"The call failed validation before it ran, so nothing changed. This is the same call with {keep}.",
            mcp={"tool": tool, "arguments": fixed},
        )
    return VerbError(
        "invalid_params",
        message,
        suggestion,
        why="The call failed validation before it ran, so nothing changed.",
        detail={"errors": errors},
        fix=fix,
    )


def _corrected(
    model: type[BaseModel], args: dict[str, Any], raw_errors: list[Any]
) -> tuple[dict[str, Any], bool, list[str]]:
    """The call with each bad parameter corrected where a correction is evident (its default, the
    boolean or text it plainly spells), whether every one was, and the bad parameters in order."""
    fields = model.model_fields
    by_alias = {f.alias: n for n, f in fields.items() if f.alias}
    fixed = dict(args)
    derivable = True
    bad: list[str] = []
    for e in raw_errors:
        loc = e.get("loc") or ()
        top = loc[0] if loc and isinstance(loc[0], str) else None
        if top is None:
            derivable = False
            continue
        if top not in bad:
            bad.append(top)
        finfo = fields.get(by_alias.get(top, top))
        if finfo is None or finfo.is_required():
            derivable = False
            continue
        given = args.get(top)
        if e.get("type") == "bool_type" and len(loc) == 1:
            # D18: a flag is a JSON boolean; text or a number that plainly spells one is corrected to
            # it, anything else has no corrected call (guessing false could hide what was asked for).
            flag = _flag_value(given)
            if flag is None:
                derivable = False
            else:
                fixed[top] = flag
            continue
        if (
            e.get("type") == "string_type"
            and len(loc) == 1
            and isinstance(given, int | float)
            and not isinstance(given, bool)
        ):
            # A number where text belongs: the same value as text is the evident correction.
            fixed[top] = str(given)
            continue
        default = finfo.get_default(call_default_factory=True)
        if default == "":
            # An empty default only stands in for "not given"; sending it would fail again.
            derivable = False
        elif default is None:
            fixed.pop(top, None)
        else:
            fixed[top] = to_jsonable_python(default)
    return fixed, derivable, bad


_FLAG_WORDS = {"true": True, "yes": True, "on": True, "1": True, "false": False, "no": False, "off": False, "0": False}


def _flag_value(value: Any) -> bool | None:
    """The boolean a non-boolean plainly spells ("true", "no", 1, 0), else None."""
    if isinstance(value, int) and not isinstance(value, bool) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        return _FLAG_WORDS.get(value.strip().lower())
    return None


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


# -- the shared typed fields ----------------------------------------------------------------------


def _integral_as_int(value: Any) -> Any:
    """JSON does not tell 2 from 2.0: a number without a fractional part is that integer. Everything
    else (a fraction, a string, a boolean) is left for the strict integer check to refuse."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return value


def _as_number(raw: Any) -> int | float | None:
    """The number a rejected value plainly spells (a JSON number, or one written in ASCII digits)."""
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return raw
    if isinstance(raw, float) and math.isfinite(raw):
        return raw
    if isinstance(raw, str) and _ASCII_NUMBER.fullmatch(raw):
        return float(raw) if "." in raw else int(raw)
    return None


def nearest_int(lo: int, hi: int, otherwise: Any) -> Callable[[Any, datetime], Any]:
    """A `Hint.fix`: the nearest valid integer to a rejected value — a fraction rounded down, a
    number outside lo..hi moved to the bound, a number written as ASCII text read as that number —
    or `otherwise` (a constant, `DROP` or `NO_FIX`) when the value is no number at all."""

    def fix(raw: Any, now: datetime) -> Any:
        x = _as_number(raw)
        return otherwise if x is None else max(lo, min(hi, math.floor(x)))

    return fix


_ASCII_NUMBER = re.compile(r"\s*-?[0-9]{1,18}(?:\.[0-9]{1,18})?\s*", re.ASCII)


def Whole(lo: int, hi: int, *, accepts: str | None = None, cause: str, fix: Any) -> Any:
    """D18: an optional integer parameter within lo..hi, advertised as `minimum`/`maximum`."""
    return Annotated[
        Annotated[int, Strict(), Field(ge=lo, le=hi)] | None,
        BeforeValidator(_integral_as_int),
        WithJsonSchema({"type": "integer", "minimum": lo, "maximum": hi}),
        Hint(accepts=accepts or f"an integer from {lo} to {hi}", cause=cause, fix=fix),
    ]


def _budget_fix(raw: Any, now: datetime) -> int:
    x = _as_number(raw)
    if x is None or x < 1:
        return DEFAULT_BUDGET_FIX  # 0, a negative or no number says nothing about the size meant
    return max(1, min(MAX_BUDGET_TOKENS, math.floor(x)))


#: D4: an integer 1..MAX_BUDGET_TOKENS, or null for no budget.
Budget = Whole(
    1,
    MAX_BUDGET_TOKENS,
    cause=f"budget_tokens is a whole number of tokens from 1 to {MAX_BUDGET_TOKENS}; omit it for no budget.",
    fix=_budget_fix,
)


def Limit(default: int, hi: int, *, clamp: bool = False) -> Any:
    """A per-call maximum, an integer. With `clamp` (recall: the spec clamps its limit) any integer is
    taken and the verb clamps it to 1..hi with a `clamped` notice; otherwise outside 1..hi is
    refused with the nearest bound as the fix."""
    if not clamp:
        return Whole(
            1,
            hi,
            cause=f"limit is a whole number from 1 to {hi} (default {default}).",
            fix=nearest_int(1, hi, default),
        )
    return Annotated[
        Annotated[int, Strict()] | None,
        BeforeValidator(_integral_as_int),
        WithJsonSchema({"type": "integer", "minimum": 1, "maximum": hi}),
        Hint(
            accepts="an integer",
            cause=f"limit is a whole number; outside 1..{hi} it is clamped (default {default}).",
            fix=nearest_int(1, hi, default),
        ),
    ]


#: D14: a change position delta returned (`next_cursor.page_seq` / `fact_seq`). A bad one is dropped
#: from the fix: without it the position is derived from `since`, while any other number would
#: name a position delta never handed out.
ChangePosition = Whole(
    0,
    MAX_POSITION,
    cause="it is the whole number delta returned in next_cursor (0 to 2^53-1); without it the position "
    "is derived from since.",
    fix=DROP,
)

#: ISO 8601 text (or null); its grammar is read by `parse_since` in the verb.
Since = Annotated[
    str | None,
    Hint(
        accepts="an ISO 8601 date or datetime",
        cause="since must be ISO 8601 text, e.g. 2026-06-01 or 2026-06-01T09:30:00Z (UTC).",
        # Which instant a number or an object meant is the caller's to say: no corrected call.
        fix=NO_FIX,
        remedy="send since as the ISO 8601 time you meant, or leave since out",
    ),
]
#: The same, served as a plain string in the inputSchema (context_pack, delta).
SinceText = Annotated[Since, WithJsonSchema({"type": "string"})]


VisibilityArg = Annotated[
    Literal["world", "private"] | None,
    WithJsonSchema({"type": "string", "enum": list(VISIBILITIES)}),
    Hint(accepts="world or private", cause="visibility must be world (default) or private.", fix="world"),
]


def _id_as_text(raw: Any, now: datetime) -> str:
    return str(raw).lower() if isinstance(raw, bool) else str(raw)


#: A fact's opaque string id as a parameter (forget's `id`, remember's `supersedes`); a number or a
#: flag is refused with the same value as a string for the fix.
FactIdArg = Annotated[
    str | None,
    WithJsonSchema({"type": "string"}),
    Hint(
        accepts="a string",
        cause="fact ids are opaque strings (remember's `id`, recall's `fact_id`).",
        fix=_id_as_text,
    ),
]
