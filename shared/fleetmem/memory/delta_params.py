"""The parameters of `delta` (its schema on the wire), apart from the verb so that its steps can
name them without importing the verb."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, WithJsonSchema

from fleetmem.memory.params import NO_FIX, Budget, ChangePosition, Hint, Params, SinceText

#: D33: next_cursor.cursor passed back; what a value that is not one meant is the caller's to say.
CursorText = Annotated[
    str | None,
    Hint(
        accepts="the string next_cursor.cursor",
        cause="cursor is next_cursor.cursor of an earlier delta answer, passed back unchanged.",
        fix=NO_FIX,
        remedy="pass next_cursor.cursor unchanged, or leave cursor out and pass since or session_id",
    ),
    WithJsonSchema({"type": "string"}),
]


def _resume_at(what: str, cursor_field: str) -> Any:
    """A `since_*` parameter: the position, within `since`, a call resumes from (the field of the
    last answer's `next_cursor` it passes back)."""
    return Field(default=None, description=f"With since: {what} (pass back next_cursor.{cursor_field}).")


class DeltaParams(Params):
    since: SinceText = Field(
        default=None,
        description="ISO 8601 date/datetime: changes strictly after it. Wins over the session cursor.",
    )
    since_slug: str | None = _resume_at("resume after this slug", "since + next_cursor.slug")
    since_page_seq: ChangePosition = _resume_at("the exact page position", "page_seq")
    since_fact_seq: ChangePosition = _resume_at("the exact fact position", "fact_seq")
    since_expiry: str | None = _resume_at("the TTL-expiry position", "expiry")
    session_id: str | None = Field(
        default=None,
        description="A stable id for this heartbeat loop: the server keeps and advances its cursor.",
    )
    entities: str | None = Field(
        default=None,
        description="Comma-separated entity names/slugs (up to 8) whose open-thread events to include.",
    )
    budget_tokens: Budget = Field(
        default=None, description="Token budget (integer >= 1): pages pack first, then facts."
    )
    include_private: bool = Field(
        default=False, description="Trusted local callers only: include private pages and facts."
    )
    cursor: CursorText = Field(
        default=None,
        description="Opaque next_cursor.cursor of an earlier answer: resume exactly on both arms. "
        "since given with it replaces its positions.",
    )
