"""The memory pack format (docs/portability.md): its members, the strict models of their lines and
the verbs' own limits every line is checked against. `fleetmem.pack` writes and reads packs.

A pack is a gzip-compressed tar (stdlib `tarfile`) of four members, in this order:
`manifest.json` (format, version, tenant, filter, and per data member its line count, byte size
and SHA-256), then `pages.jsonl`, `facts.jsonl` and `audit.jsonl`, one JSON object per line,
described by the strict models below (`extra="forbid"`: an unknown field is refused). Never in a
pack: tokens, token hashes, cursors, idempotency records, vectors (re-embedded on import).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any, Final, Literal

from pydantic import AfterValidator, AwareDatetime, BaseModel, ConfigDict, Field

from fleetmem.errors import VerbError
from fleetmem.memory.slugs import is_canonical_slug, is_path_like, slug_size_problem
from fleetmem.models import AuditEvent, Fact, Link, Page, TimelineEntry
from fleetmem.protocol import (
    FACT_MAX,
    PAGE_BODY_MAX_BYTES,
    PROVENANCE_MAX,
    SESSION_ID_MAX,
    TITLE_MAX,
    ContentOrigin,
    FactKind,
    Visibility,
)
from fleetmem.timefmt import parse_iso, to_ms

FORMAT: Final = "fleetmem-pack"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
PAGES, FACTS, AUDIT = "pages.jsonl", "facts.jsonl", "audit.jsonl"
MEMBERS = (PAGES, FACTS, AUDIT)
#: The longest line a reader accepts: above the largest page a store keeps (384 KB), with room
#: for JSON escaping. A longer line is refused before it is parsed.
LINE_MAX_BYTES = 2 * 1024 * 1024
MANIFEST_MAX_BYTES = 64 * 1024
#: Ids, client names and audit subjects: what the stores and verbs produce, with room to spare.
ID_MAX = 200
DETAIL_MAX_BYTES = 16 * 1024
BATCH = 200
#: Progress goes to stderr every this many items of a member.
PROGRESS_EVERY = 5000

States = Literal["active", "forgotten", "superseded", "expired"]


class PackError(Exception):
    """A pack that cannot be read or imported: `message` says what and where, `fix` what to do."""

    def __init__(self, message: str, fix: str) -> None:
        super().__init__(message)
        self.message = message
        self.fix = fix


# --------------------------------------------------------------------------- the format


def _ms(value: datetime) -> datetime:
    return to_ms(value)


Stamp = Annotated[AwareDatetime, AfterValidator(_ms)]
Id = Annotated[str, Field(min_length=1, max_length=ID_MAX, pattern=r"^\S+$")]


class PackModel(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class PackLink(PackModel):
    type: Annotated[str, Field(min_length=1, max_length=TITLE_MAX)]
    target: str
    context: Annotated[str, Field(max_length=PROVENANCE_MAX)] | None = None


class PackTimelineEntry(PackModel):
    date: Annotated[str, Field(min_length=1, max_length=64)]
    text: Annotated[str, Field(max_length=FACT_MAX)]


class PackPage(PackModel):
    """A page, whole (pages.jsonl)."""

    slug: str
    title: str
    type: Annotated[str, Field(max_length=TITLE_MAX)] | None = None
    aliases: list[str] = []
    summary: Annotated[str, Field(max_length=FACT_MAX)] | None = None
    visibility: Visibility = "world"
    body: str = ""
    links: list[PackLink] = []
    timeline: list[PackTimelineEntry] = []
    frontmatter: dict[str, Any] = {}
    created_at: Stamp
    updated_at: Stamp
    last_retrieved_at: Stamp | None = None
    author: Id | None = None

    @classmethod
    def of(cls, page: Page) -> PackPage:
        return cls.model_validate(page.model_dump(exclude={"tenant"}), strict=False)

    def to_page(self, tenant: str) -> Page:
        return Page(
            tenant=tenant,
            **self.model_dump(exclude={"links", "timeline", "aliases"}),
            aliases=tuple(self.aliases),
            links=tuple(Link(**x.model_dump()) for x in self.links),
            timeline=tuple(TimelineEntry(**t.model_dump()) for t in self.timeline),
        )


class PackFact(PackModel):
    """A fact with its full state and lineage (facts.jsonl)."""

    fact_id: Id
    seq: Annotated[int, Field(ge=1, le=2**62)]
    text: str
    kind: FactKind = "fact"
    entity_slug: str | None = None
    provenance: str
    visibility: Visibility = "world"
    session_id: Annotated[str, Field(max_length=SESSION_ID_MAX)] | None = None
    client_id: Id
    created_at: Stamp
    valid_until: Stamp | None = None
    expired_at: Stamp | None = None
    expired_reason: Annotated[str, Field(max_length=PROVENANCE_MAX)] | None = None
    expired_by: Id | None = None
    superseded_by: Id | None = None
    supersedes: Id | None = None
    #: D24; written only when set, so a pack of facts saved without one reads in older releases
    content_origin: ContentOrigin | None = Field(default=None, exclude_if=lambda v: v is None)

    @classmethod
    def of(cls, fact: Fact) -> PackFact:
        return cls.model_validate(fact.model_dump(exclude={"tenant", "vector", "vector_model"}), strict=False)

    def to_fact(self, tenant: str) -> Fact:
        return Fact(tenant=tenant, **self.model_dump())


class PackAuditEvent(PackModel):
    """One audit event (audit.jsonl), in the order the trail was written."""

    subject: Annotated[str, Field(min_length=1, max_length=ID_MAX + 100)]
    action: Literal["write", "supersede", "expire", "purge", "put_page", "delete_page"]
    actor: Id
    at: Stamp
    reason: Annotated[str, Field(max_length=PROVENANCE_MAX)] | None = None
    provenance: Annotated[str, Field(max_length=PROVENANCE_MAX)] | None = None
    detail: dict[str, Any] = {}

    @classmethod
    def of(cls, event: AuditEvent) -> PackAuditEvent:
        return cls.model_validate(event.model_dump(exclude={"tenant"}), strict=False)

    def to_event(self, tenant: str) -> AuditEvent:
        return AuditEvent(tenant=tenant, **self.model_dump())


class PackFilter(PackModel):
    """What an export selected (None: everything)."""

    entity: str | None = None
    since: Stamp | None = None
    state: States | None = None


class MemberInfo(PackModel):
    count: Annotated[int, Field(ge=0)]
    bytes: Annotated[int, Field(ge=0)]
    sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]


class Manifest(PackModel):
    format: Literal["fleetmem-pack"]
    format_version: Annotated[int, Field(ge=1)]
    tenant: Annotated[str, Field(min_length=1, max_length=ID_MAX)]
    exported_at: Stamp
    fleetmem_version: str
    filter: PackFilter
    members: dict[Literal["pages.jsonl", "facts.jsonl", "audit.jsonl"], MemberInfo]


ITEM_MODELS: dict[str, type[PackModel]] = {PAGES: PackPage, FACTS: PackFact, AUDIT: PackAuditEvent}


# --------------------------------------------------------------------------- the verbs' limits


def _slug_problem(slug: str) -> str | None:
    if is_path_like(slug) or not is_canonical_slug(slug):
        return f"{slug[:80]!r} is not a page slug (lowercase words and '-' per '/' segment)"
    return slug_size_problem(slug)


def _page_problem(p: PackPage) -> str | None:
    """put_page's limits (D16), the same functions it calls."""
    from fleetmem.memory.page_limits import PAGE_STORED_MAX_BYTES, stored_bytes
    from fleetmem.memory.page_limits import check_names as _check_names

    problem = _slug_problem(p.slug)
    if problem:
        return f"slug: {problem}"
    if not p.title.strip():
        return "title is empty"
    try:
        _check_names(p.slug, p.title, tuple(p.aliases))
    except VerbError as exc:
        return str(exc)
    if len(p.body.encode("utf-8")) > PAGE_BODY_MAX_BYTES:
        return f"the body is larger than {PAGE_BODY_MAX_BYTES // 1024} KB"
    for link in p.links:
        problem = _slug_problem(link.target)
        if problem:
            return f"link target: {problem}"
    for entry in p.timeline:
        try:
            parse_iso(entry.date)
        except (ValueError, OverflowError):
            return f"timeline date {entry.date!r} is not an ISO 8601 date"
    if p.updated_at < p.created_at:
        return "updated_at is before created_at"
    size = stored_bytes(p.to_page("-"))
    if size > PAGE_STORED_MAX_BYTES:
        return f"the page takes {size // 1024} KB as stored; a page holds at most {PAGE_STORED_MAX_BYTES // 1024} KB"
    return None


def _fact_problem(f: PackFact) -> str | None:
    """remember's limits (D16) and the lineage a stored fact can have."""
    if not f.text.strip():
        return "fact text is empty"
    if len(f.text) > FACT_MAX:
        return f"fact text is longer than {FACT_MAX} characters ({len(f.text)})"
    if not f.provenance.strip():
        return "provenance is blank"
    if len(f.provenance) > PROVENANCE_MAX:
        return f"provenance is longer than {PROVENANCE_MAX} characters"
    if f.entity_slug is not None:
        problem = _slug_problem(f.entity_slug)
        if problem:
            return f"entity_slug: {problem}"
    if f.superseded_by is not None and f.expired_at is None:
        return "a superseded fact needs expired_at (when it was superseded)"
    if f.superseded_by == f.fact_id or f.supersedes == f.fact_id:
        return "a fact cannot supersede itself"
    return None


def _audit_problem(e: PackAuditEvent) -> str | None:
    if len(json.dumps(e.detail, ensure_ascii=False, default=str).encode("utf-8")) > DETAIL_MAX_BYTES:
        return f"detail is larger than {DETAIL_MAX_BYTES // 1024} KB"
    return None


PROBLEMS: dict[str, Callable[[Any], str | None]] = {PAGES: _page_problem, FACTS: _fact_problem, AUDIT: _audit_problem}
