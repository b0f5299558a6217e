"""put_page's steps (`fleetmem.memory.verbs.put_page.run` calls them in order): the slug, the page's
fields from the arguments over the frontmatter, the draft, then the write over the version it read
(`expected_updated_at`, a remote caller never over a page it cannot see), and the search index."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel

from fleetmem.errors import Conflict, Fix, PortError, TooLarge, VerbError, caller_error, retry_later
from fleetmem.memory import common, indexing
from fleetmem.memory.page_limits import check_names, check_stored_size, slug_too_long, too_large_to_store
from fleetmem.memory.pagefmt import clip, first_h1, mentions
from fleetmem.memory.slugs import (
    SLUG_GRAMMAR,
    is_canonical_slug,
    is_path_like,
    last_segment,
    path_slug_error,
    slug_size_problem,
    slugify,
)
from fleetmem.models import AuditEvent, Caller, Link, Page, TimelineEntry
from fleetmem.ports import CallContext, Deps
from fleetmem.protocol import MENTION_LINK_TYPE, TITLE_MAX, VISIBILITIES, Visibility
from fleetmem.timefmt import iso, parse_iso

if TYPE_CHECKING:
    from fleetmem.memory.put_page_params import PutPageParams

TOOL = "put_page"
KNOWN_KEYS = ("title", "type", "aliases", "summary", "visibility", "links", "timeline")
MENTIONS = MENTION_LINK_TYPE
#: expected_updated_at as the store's condition (None = unconditional, "" = must not exist).
Expected = dt.datetime | Literal[""] | None


def check_slug(params: PutPageParams) -> str:
    """The slug as given, when it is a page slug: not a path, within the size limits, in slug form."""
    raw_slug = (params.slug or "").strip()
    if is_path_like(raw_slug):
        raise path_slug_error("slug", raw_slug)
    too_long = slug_size_problem(raw_slug) and slug_size_problem(slugify(raw_slug) or raw_slug)
    if too_long:
        raise slug_too_long(slugify(raw_slug) or raw_slug, too_long)
    if not is_canonical_slug(raw_slug):
        fixed = slugify(raw_slug) or slugify(params.title or "") or "pages/untitled"
        raise _bad(
            params,
            f"slug {raw_slug!r} is not a valid page slug.",
            problem=f"The slug {raw_slug!r} is not in slug form.",
            cause=SLUG_GRAMMAR[0].upper() + SLUG_GRAMMAR[1:],
            field="slug",
            value=fixed,
        )
    return raw_slug


@dataclass(frozen=True)
class PageFields:
    """The page's fields: each explicit argument over its frontmatter key, checked."""

    title: str
    type: str | None
    aliases: tuple[str, ...]
    summary: str | None
    visibility: Visibility
    links: tuple[Link, ...]
    timeline: tuple[TimelineEntry, ...]
    frontmatter: dict[str, Any]


def page_fields(params: PutPageParams, slug: str, meta: dict[str, Any], body: str) -> PageFields:
    def pick(name: str) -> Any:
        value = getattr(params, name)
        return value if value is not None else meta.get(name)

    visibility = _text(pick("visibility")) or "world"
    if visibility not in VISIBILITIES:
        raise _bad(
            params,
            f"visibility must be world or private (got {visibility!r}).",
            problem=f"visibility={visibility!r} is not a visibility.",
            cause="visibility is 'world' (every agent on this brain) or 'private' (local CLI only).",
            field="visibility",
            value="world",
        )
    links = _links(params, pick("links"), slug)
    links += _mentions(body, slug, links)
    timeline = _timeline(params, pick("timeline"))
    given_title = _text(pick("title"))
    aliases = _aliases(pick("aliases"))
    check_names(slug, given_title, aliases)
    heading = first_h1(body)
    title = given_title or (clip(heading, TITLE_MAX) if heading else None) or last_segment(slug)
    return PageFields(
        title=title,
        type=_text(pick("type")),
        aliases=aliases,
        summary=_text(pick("summary")),
        visibility=visibility,  # type: ignore[arg-type]
        links=tuple(links),
        timeline=tuple(timeline),
        frontmatter={k: _jsonable(v) for k, v in meta.items() if k not in KNOWN_KEYS},
    )


def _mentions(body: str, slug: str, links: list[Link]) -> list[Link]:
    """`[[slug]]` in the body as `mentions` links, past the ones the links already hold."""
    explicit_mentions = {(link.target) for link in links if link.type == MENTIONS}
    added: list[Link] = []
    for target in mentions(body):
        if is_path_like(target):
            raise path_slug_error("link target", target)
        target_slug = slugify(target)
        if target_slug and target_slug != slug and target_slug not in explicit_mentions:
            explicit_mentions.add(target_slug)
            added.append(Link(type=MENTIONS, target=target_slug))
    return added


def draft_page(deps: Deps, caller: Caller, slug: str, body: str, fields: PageFields) -> Page:
    """The page to write, stamped now, within the stored-size limit."""
    now = deps.clock.now()
    draft = Page(
        tenant=caller.tenant,
        slug=slug,
        body=body,
        created_at=now,
        updated_at=now,
        author=caller.client_id,
        **vars(fields),
    )
    check_stored_size(draft)
    return draft


@dataclass(frozen=True)
class Written:
    """What the write step did: the page as stored (the existing one when unchanged) and its status."""

    page: Page
    status: Literal["created", "updated", "unchanged"]


def write(
    deps: Deps, caller: Caller, params: PutPageParams, ctx: CallContext, draft: Page, expected: Expected
) -> Written:
    """The draft over the stored page, conditional on the version it was decided on; decided again
    when an unconditional remote write loses a race, at most `_WRITE_ROUNDS` times."""
    slug = draft.slug
    for _ in range(_WRITE_ROUNDS):
        existing = _seen(deps, caller, slug, expected)
        if expected is not None and not _matches(expected, existing):
            raise _stale(slug, expected, existing)
        page = draft
        if existing is not None:
            page = draft.model_copy(
                update={"created_at": existing.created_at, "last_retrieved_at": existing.last_retrieved_at}
            )
        if existing is not None and _same(existing, page):
            if ctx.keyed:  # perhaps the retry of a call killed between storing and indexing the page
                index_page(deps, existing)
            return Written(existing, "unchanged")
        try:
            deps.pages.put(page, expected_updated_at=_condition(caller, expected, existing))
        except Conflict:  # changed between the read above and the write: nothing was written
            if expected is None:
                continue  # an unconditional remote write: read the page again and decide again
            raise _stale(slug, expected, _seen(deps, caller, slug, expected)) from None
        except TooLarge:
            raise too_large_to_store(slug) from None
        return Written(page, "updated" if existing is not None else "created")
    raise _busy(params)


def audit(deps: Deps, caller: Caller, written: Written) -> None:
    slug, now, status, visibility = written.page.slug, written.page.updated_at, written.status, written.page.visibility
    deps.audit.append(
        AuditEvent(
            tenant=caller.tenant,
            subject=slug,
            action="put_page",
            actor=caller.client_id,
            at=now,
            detail={"status": status, "visibility": visibility},
        )
    )


def _jsonable(value: Any) -> Any:
    """Frontmatter values as JSON-safe data (YAML dates become ISO strings)."""
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


def _text(value: Any) -> str | None:
    if value is None:
        return None
    text = str(_jsonable(value)).strip()
    return text or None


def _bad(
    params: PutPageParams, message: str, *, problem: str, cause: str, field: str, value: Any, drop: bool = False
) -> VerbError:
    return common.invalid(TOOL, params, message, problem=problem, cause=cause, field=field, value=value, drop=drop)


def _listed(raw: Any) -> list[Any]:
    """An argument given as one item or a list of them (None: none), as a list."""
    if raw is None:
        return []
    return list(raw) if isinstance(raw, list | tuple) else [raw]


def _plain(item: Any) -> Any:
    """A list item as the caller's JSON gave it (a parsed argument model back to its dict)."""
    return item.model_dump() if isinstance(item, BaseModel) else item


def _aliases(raw: Any) -> tuple[str, ...]:
    out = [t for t in (_text(a) for a in _listed(raw)) if t]
    return tuple(dict.fromkeys(out))


def _links(params: PutPageParams, raw: Any, slug: str) -> list[Link]:
    links: list[Link] = []
    for item in map(_plain, _listed(raw)):
        if isinstance(item, str):
            item = {"target": item}
        if not isinstance(item, dict) or not _text(item.get("target")):
            raise _bad(
                params,
                "Every link needs a target slug.",
                problem=f"The link {item!r} has no target.",
                cause="links are [{type, target, context}] with target a page slug.",
                field="links",
                value=None,
                drop=True,
            )
        if is_path_like(str(item["target"])):
            raise path_slug_error("link target", str(item["target"]))
        target = slugify(str(item["target"]))
        if not target or target == slug:
            continue
        kind = _text(item.get("type")) or "related"
        links.append(Link(type=kind, target=target, context=_text(item.get("context"))))
    return links


def _timeline(params: PutPageParams, raw: Any) -> list[TimelineEntry]:
    entries: list[TimelineEntry] = []
    for item in map(_plain, _listed(raw)):
        date = _text(item.get("date")) if isinstance(item, dict) else None
        text = _text(item.get("text")) if isinstance(item, dict) else None
        ok = False
        if date and text:
            try:
                parse_iso(date)
                ok = True
            except (ValueError, OverflowError):
                ok = False
        if not ok:
            kept = [e.model_dump() for e in entries]
            raise _bad(
                params,
                f"Timeline entry {item!r} needs an ISO 8601 date and a text.",
                problem=f"The timeline entry {item!r} is not usable.",
                cause="timeline entries are {date: ISO 8601 date/datetime, text: what happened}.",
                field="timeline",
                value=kept,
            )
        entries.append(TimelineEntry(date=date, text=text))  # type: ignore[arg-type]
    return entries


def index_page(deps: Deps, page: Page) -> bool:
    """Replace the page's chunks in a write-through index. True when the index reflects the page."""
    if not deps.search.write_through:
        return False
    docs, _problem = indexing.embed_docs(deps, indexing.docs_for_page(page))
    try:
        deps.search.replace_page(page.tenant, page.slug, docs)
    except PortError:
        return False
    return True


def unindex_page(deps: Deps, tenant: str, slug: str) -> bool:
    if not deps.search.write_through:
        return False
    try:
        deps.search.delete_page(tenant, slug)
    except PortError:
        return False
    return True


def _same(a: Page, b: Page) -> bool:
    fields = ("title", "type", "aliases", "summary", "visibility", "body", "links", "timeline", "frontmatter")
    return all(getattr(a, f) == getattr(b, f) for f in fields)


def expected_version(params: PutPageParams) -> dt.datetime | Literal[""] | None:
    """expected_updated_at as the store's condition (None = unconditional, "" = must not exist)."""
    raw = params.expected_updated_at
    if raw is None or not raw.strip():
        return None if raw is None else ""
    try:
        return parse_iso(raw.strip())
    except (ValueError, OverflowError):
        raise caller_error(
            f"expected_updated_at {raw!r} is not an ISO 8601 time.",
            problem=f"expected_updated_at={raw!r} is not a time.",
            cause='expected_updated_at is the updated_at get_page returned, or "" for a page that must not exist yet.',
            instead="pass the updated_at from get_page unchanged (or leave the argument out).",
            field="expected_updated_at",
            reason="not_a_time",
        ) from None


def _stale(slug: str, expected: dt.datetime | Literal[""], stored: Page | None) -> VerbError:
    """The refusal of a write whose expected_updated_at no longer matches the stored page."""
    stored_at = iso(stored.updated_at) if stored is not None else None
    if stored is None:
        problem = f"{slug} does not exist (it was deleted or never stored), but expected_updated_at was given."
    elif expected == "":
        problem = f'{slug} already exists (updated_at {stored_at}), but expected_updated_at was "".'
    else:
        problem = f"{slug} was changed since you loaded it: it is now at updated_at {stored_at}."
    why = "put_page with expected_updated_at writes only over the version it names, so no change is lost."
    instead = (
        f"call get_page {slug!r} again, merge your change into what it returns, and put_page again with "
        "expected_updated_at set to its new updated_at" + (' (or "" if the page is gone).' if stored is None else ".")
    )
    return VerbError(
        "invalid_params",
        f"{slug} was not written: the stored page is not the version expected_updated_at names.",
        f"Problem: {problem} Cause: {why} Fix: {instead}",
        why=why,
        detail={"field": "expected_updated_at", "reason": "stale_version", "stored_updated_at": stored_at},
        fix=Fix(why=instead, verify={"mcp": {"tool": "get_page", "arguments": {"slug": slug}}}),
        klass="caller",
    )


def _matches(expected: dt.datetime | Literal[""], stored: Page | None) -> bool:
    if expected == "":
        return stored is None
    return stored is not None and iso(stored.updated_at) == iso(expected)


#: Read-and-write rounds of an unconditional remote put_page whose page another writer changed
#: between the read and the write, before the call answers `unavailable` (retryable).
_WRITE_ROUNDS = 8


def _slug_taken(slug: str) -> VerbError:
    """The refusal of a remote put_page over a page the caller cannot see (a private page): it is
    neither overwritten nor published, and nothing of it (title, text, times) is told."""
    return caller_error(
        f"{slug} was not written: the slug is taken by a page this caller cannot see.",
        problem=f"a page is already stored under {slug}, and it is not visible to remote callers.",
        cause="a remote writer never replaces a page it cannot read, so a private page cannot be overwritten "
        "or made world-visible from outside.",
        instead="put your page under another slug (list_pages shows the slugs you can use); only the "
        "brain owner's local CLI can change the page stored under this one.",
        field="slug",
        reason="slug_taken",
    )


def _seen(deps: Deps, caller: Caller, slug: str, expected: dt.datetime | Literal[""] | None) -> Page | None:
    """The stored page as this caller sees it. For a remote caller a private page is not there
    when expected_updated_at names a time (the answer a missing page gets: stale_version, no stored
    time); any other put over it is `_slug_taken`."""
    page = deps.pages.get(caller.tenant, slug)
    if page is None or not caller.remote or page.visibility == "world":
        return page
    if expected is None or expected == "":
        raise _slug_taken(slug)
    return None


def _condition(
    caller: Caller, expected: dt.datetime | Literal[""] | None, seen: Page | None
) -> dt.datetime | Literal[""] | None:
    """The store's condition for the write: the caller's expected_updated_at when given; for a remote
    caller without it, the version it was decided on (or "" when there was none), so a page made
    private between the read and the write is never overwritten; none for the trusted local CLI."""
    if expected is not None or not caller.remote:
        return expected
    return seen.updated_at if seen is not None else ""


def _busy(params: PutPageParams) -> VerbError:
    return retry_later(
        f"{params.slug} was not written: other writes kept changing it at the same moment.",
        wait_s=1,
        why="put_page writes over the version it read; concurrent writers changed the page each time.",
        fix_why="A retry reads the page again and writes over the version it then finds.",
        reason="write_contention",
        mcp={"tool": TOOL, "arguments": common.given_args(params)},
    )
