"""The parameters of `put_page` (its schema on the wire), apart from the verb so that its steps can
name them without importing the verb."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from fleetmem.memory.params import Params, VisibilityArg
from fleetmem.protocol import ALIAS_MAX, ALIASES_MAX, SLUG_MAX, TITLE_MAX


class LinkArg(BaseModel):
    model_config = ConfigDict(extra="ignore")

    type: str = Field(default="related", description='Edge type, e.g. "works_at", "invested_in", "related".')
    target: str = Field(description='Slug of the other page, e.g. "companies/acme-example".')
    context: str | None = Field(default=None, description="Short note on the relationship.")


class TimelineArg(BaseModel):
    model_config = ConfigDict(extra="ignore")

    date: str = Field(description="ISO 8601 date or datetime, e.g. 2026-06-01.")
    text: str = Field(description="What happened.")


def _blank_as_none(value: Any) -> Any:
    """visibility as put_page reads it from frontmatter too: trimmed, blank = not given."""
    return (value.strip() or None) if isinstance(value, str) else value


class PutPageParams(Params):
    slug: str = Field(
        description='Page slug: lowercase path segments, e.g. "people/alice-example" (at most 200 characters, '
        "each segment at most 100).",
        json_schema_extra={"maxLength": SLUG_MAX},
    )
    content: str = Field(
        description="Markdown body, optionally with YAML frontmatter (title, type, aliases, summary, "
        "visibility, links, timeline). [[other/slug]] in the text records a mention.",
    )
    title: str | None = Field(
        default=None,
        description="Overrides the frontmatter title / first heading (at most 300 characters).",
        json_schema_extra={"maxLength": TITLE_MAX},
    )
    type: str | None = Field(default=None, description='Page type, e.g. "person", "company", "project".')
    aliases: list[str] | None = Field(
        default=None,
        description="Other names the entity is known by (at most 50, each at most 200 characters).",
        json_schema_extra={"maxItems": ALIASES_MAX, "items": {"type": "string", "maxLength": ALIAS_MAX}},
    )
    summary: str | None = Field(default=None, description="One-sentence summary shown on entity cards.")
    visibility: Annotated[VisibilityArg, BeforeValidator(_blank_as_none)] = Field(
        default=None, description='"world" (default: every agent on this brain) or "private" (local only).'
    )
    links: list[LinkArg] | None = Field(default=None, description="Typed edges to other pages.")
    timeline: list[TimelineArg] | None = Field(default=None, description="Dated events about the entity.")
    idempotency_key: str | None = Field(
        default=None,
        description="Optional retry key: the same key and arguments within 24 h return the first result.",
    )
    expected_updated_at: str | None = Field(
        default=None,
        description="Optional guard against overwriting a newer version: the updated_at get_page returned "
        'when you loaded the page ("" = the page must not exist yet). If the stored page differs, nothing '
        "is written and the call is refused.",
    )
