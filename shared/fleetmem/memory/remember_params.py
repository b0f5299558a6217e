"""The parameters of `remember` (its schema on the wire), apart from the verb so that its steps can
name them without importing the verb."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, ConfigDict, Field, StringConstraints, WithJsonSchema
from pydantic_core import PydanticCustomError

from fleetmem.memory.params import NO_FIX, FactIdArg, Hint, Params, VisibilityArg, is_blank
from fleetmem.protocol import (
    CONTENT_ORIGINS,
    FACT_KINDS,
    FACT_MAX,
    PROVENANCE_MAX,
    TITLE_MAX,
    ContentOrigin,
    FactKind,
)
from fleetmem.timefmt import iso

#: How many facts one `remember{items}` call saves at most (the reference's `REMEMBER_BATCH_MAX`).
BATCH_MAX = 20

_INVISIBLE = "it holds no visible character (only spaces, zero-width or other invisible characters)"


def _refuse_blank(value: Any, code: str, empty: str) -> None:
    """A text of no visible character (`params.is_blank`) is refused with `code`: "<empty>." for "",
    "<empty>: it holds no visible character (…)." for spaces or invisible characters."""
    if isinstance(value, str) and is_blank(value):
        raise PydanticCustomError(code, f"{empty}: {_INVISIBLE}." if value else f"{empty}.")


def _fact_text(value: Any) -> Any:
    _refuse_blank(value, "fm_fact_empty", "fact is empty")
    return value


def _provenance_gate(value: Any) -> Any:
    if value is None:
        raise PydanticCustomError("fm_provenance_missing", "provenance is missing.")
    _refuse_blank(value, "provenance_required", "provenance is blank")
    return value


def _ttl_given(value: Any) -> Any:
    # "" (or whitespace) means "never expires", as PROTOCOL_NOTES and the reference define it; a ttl
    # of invisible characters only ("\u200b") is no duration and no date.
    if isinstance(value, str) and value.strip() and is_blank(value):
        raise PydanticCustomError(
            "fm_ttl_empty",
            'ttl holds only invisible characters. Leave ttl out (or "", or null) for a fact that never '
            'expires, or send the duration you meant ("30d", "12h") or an ISO 8601 date.',
        )
    return value


#: `entity` values that mean "no entity" (reference 0.60, #4755), compared trimmed and casefolded;
#: a blank text (`params.is_blank`) means the same.
NULL_LIKE_ENTITIES = frozenset({"null", "none", "n/a", "na", "nil", "undefined", "unknown", "-"})


def _null_like_entity(value: Any) -> Any:
    """A null-like `entity` ("null", "None", "N/A", "undefined", "", whitespace) is left out (D24)."""
    if isinstance(value, str) and (is_blank(value) or value.strip().casefold() in NULL_LIKE_ENTITIES):
        return None
    return value


def _fact_fix(raw: Any, now: datetime) -> Any:
    return str(raw) if isinstance(raw, int | float) and not isinstance(raw, bool) else NO_FIX


def _provenance_fix(raw: Any, now: datetime) -> str:
    if isinstance(raw, str) and not is_blank(raw):
        return raw[:PROVENANCE_MAX]
    if raw is not None and not isinstance(raw, str):
        return str(raw)
    # The corrected call attributes the fact to this conversation.
    return f"agent conversation {(iso(now) or '')[:10]}"


class RememberParams(Params):
    # Checked in the documented order (docs/protocol.md, remember): fact, provenance (absent ->
    # invalid_params, blank -> provenance_required, > 500 chars -> invalid_params), kind,
    # visibility, ttl (its grammar is read by `ttl.parse_ttl`). No docstring: it would become the
    # inputSchema's description.

    # `fact` and `provenance` are not schema-required (`items` is the alternative to `fact`, and a
    # batch may give provenance per item); the handler still refuses a call without them.
    model_config = ConfigDict(extra="ignore")

    fact: Annotated[
        str,
        AfterValidator(_fact_text),
        Hint(
            accepts="one non-empty sentence",
            cause="remember needs one non-empty sentence in `fact`.",
            fix=_fact_fix,
            remedy="call remember with the fact text and its provenance",
        ),
    ] = Field(
        "",
        validate_default=True,
        description="The ONE fact to save, as a short self-contained sentence (at most 2,000 characters; "
        'store longer text as a page with put_page). Example: "Alice prefers async standups over meetings".',
        json_schema_extra={"maxLength": FACT_MAX},
    )
    provenance: Annotated[
        str,
        BeforeValidator(_provenance_gate),
        StringConstraints(max_length=PROVENANCE_MAX),
        WithJsonSchema({"type": "string", "maxLength": PROVENANCE_MAX}),
        Hint(
            accepts=f"free text of 1 to {PROVENANCE_MAX} characters",
            cause=f"every fact must say where it came from (free text, up to {PROVENANCE_MAX} characters).",
            fix=_provenance_fix,
        ),
    ] = Field(
        None,  # absent is reported as missing, never used as a value
        validate_default=True,
        description="REQUIRED (here or on each of `items`). Where the fact came from, free text up to 500 "
        "characters, stored verbatim. "
        'Examples: "user said in chat 2026-06-12", "import: notes.md".',
    )
    entity: Annotated[str | None, BeforeValidator(_null_like_entity)] = Field(
        None,
        description="Slug or name of the person/company/project the fact is about, e.g. "
        '"people/alice-example" or "Acme". Set it whenever the fact is about a specific entity: '
        "entity-scoped recall only finds attributed facts. An exact alias, title or slug of an existing "
        "page files the fact under that page's slug.",
        json_schema_extra={"maxLength": TITLE_MAX},
    )
    kind: Annotated[
        FactKind | None,
        WithJsonSchema({"type": "string", "enum": list(FACT_KINDS)}),
        Hint(accepts=f"one of {', '.join(FACT_KINDS)}", fix="fact"),
    ] = Field(None, description='One of event, preference, commitment, belief, fact (default "fact").')
    visibility: VisibilityArg = Field(
        None,
        description='"world" (default: readable by every agent connected to this brain) or "private" '
        "(readable only by the owner's local CLI; remote agents cannot read or forget it).",
    )
    ttl: Annotated[
        str | None,
        AfterValidator(_ttl_given),
        WithJsonSchema({"type": ["string", "null"]}),
        Hint(
            accepts="a duration string or an ISO 8601 date",
            cause='ttl is text: a shorthand like "30d" / "12h" or an ISO 8601 date; left out (or null) the '
            "fact never expires.",
            # A bare number has no unit (seconds? days?) and an empty text no duration at all: no
            # corrected call keeps the meaning.
            fix=NO_FIX,
            remedy='pass ttl as text with its unit, e.g. "30d" for thirty days or "12h" for twelve hours, '
            "or leave ttl out for a fact that never expires",
        ),
    ] = Field(
        None,
        description='When the fact stops being true: a duration shorthand ("30d", "12h", "45m" = minutes, '
        '"2w") or an absolute ISO 8601 date/datetime. ISO durations like "P30D" are not accepted. '
        "Omit for never.",
    )
    session_id: str | None = Field(
        None, description="Your conversation/session id, so recall(session_id=...) can find this fact later."
    )
    idempotency_key: str | None = Field(
        None,
        description="Optional retry key: repeating the call with the same key and arguments within 24 h "
        "returns the first result instead of saving twice.",
    )
    supersedes: FactIdArg = Field(
        None,
        description="Optional: the `fact_id` of the ACTIVE fact this one replaces (remember's `id` or "
        'recall\'s `facts[].fact_id`, e.g. "f_01JD..."). That fact is expired with `superseded_by` set '
        "to the new fact and the answer says `status: superseded`. Use it when a value changed "
        '("the deadline moved to 2027-02-01") and you know the fact that held the old value.',
    )
    replaces: FactIdArg = Field(
        None,
        description="Optional: the `fact_id` of the ACTIVE fact this one replaces (the reference's name; "
        "`supersedes` is the same parameter). It must be a fact you can see with the same visibility and "
        "the same entity (an unattributed fact may be replaced by one with an `entity`, which links it). "
        "Refusals start with a code: target_withdrawn, target_superseded, target_expired, "
        "replaces_entity_mismatch, replaces_duplicate. The answer says `superseded_fact_id` and "
        "`replaced_by_caller: true`.",
    )
    restore_withdrawn: bool | None = Field(
        None,
        description="Only after a `fact_withdrawn` refusal, once the user confirmed the forgotten claim is "
        "true again: true remembers it anyway and lifts the withdrawal.",
    )
    items: Annotated[
        list[Any] | None,
        WithJsonSchema(
            {
                "type": "array",
                "minItems": 1,
                "maxItems": BATCH_MAX,
                "items": {
                    "anyOf": [
                        {"type": "string", "maxLength": FACT_MAX},
                        {"type": "object", "properties": {"fact": {"type": "string", "maxLength": FACT_MAX}}},
                    ]
                },
            }
        ),
    ] = Field(
        None,
        description=f"Instead of `fact`: 1 to {BATCH_MAX} facts saved in one call, each a sentence or an "
        "object {fact, provenance?, entity?, kind?, ttl?, visibility?, replaces?}. Top-level provenance, "
        "kind, ttl, visibility and session_id are the defaults of every item. Every item is checked before "
        "any is saved; each is then saved on its own (answer: items[] with each item's status, saved, "
        "failed, partial).",
    )
    infer_entity: bool = Field(
        True,
        description="With no `entity`: link the fact to the one entity page its text names exactly (a "
        "page title or alias, whole words, any case). Default true; false saves it unattributed.",
    )
    content_origin: Annotated[
        ContentOrigin | None,
        WithJsonSchema({"type": "string", "enum": list(CONTENT_ORIGINS)}),
        Hint(
            accepts=f"one of {', '.join(CONTENT_ORIGINS)}",
            cause=f"content_origin says who produced the text: one of {', '.join(CONTENT_ORIGINS)}.",
            fix="tool_output",
        ),
    ] = Field(
        None,
        description="Optional: who produced the fact's text: user_said, tool_output (read back as "
        "trust_tier external_untrusted) or inferred.",
    )
    source_id: str | None = Field(
        None,
        description='Optional: the write\'s source. This credential reaches one brain, its own source "default"; '
        "any other source is outside its grant (scope_denied).",
    )
    expected_revision: str | None = Field(
        None,
        description="Optional: the revision (a UUID) of the entity page you read. A fact never rewrites a page, "
        "so it only has to be a UUID; not together with force.",
    )
    force: bool | None = Field(None, description="Optional: ignore expected_revision (not together with it).")
