"""`put_page(slug, content, …)` — create or replace a page (full surface, write scope, D2 idempotent).

Public API: `PutPageParams`, `run(deps, caller, params, ctx) -> Outcome`, `SPEC` (registered),
`index_page(deps, page) -> bool`, `unindex_page(deps, tenant, slug) -> bool`.

- `content` is markdown with optional YAML frontmatter (`pagefmt.parse_page_content`): title, type,
  aliases, summary, visibility (world|private), links [{type, target, context}], timeline
  [{date, text}]; other keys are kept verbatim in `Page.frontmatter`. Explicit arguments of the
  same names override the frontmatter. `[[slug]]` in the body become `mentions` links.
- `slug` must already be in slugified form (`slugs.SLUG_GRAMMAR`: lowercase letters and digits of any
  script and "-" per "/" segment); otherwise invalid_params whose fix carries the slugified slug. A
  path ("." or ".." segment, backslash) is invalid_params WITHOUT a guessed slug. Link targets
  (frontmatter links and `[[...]]` mentions) are slugified; a target that is a path is refused the
  same way (never stored as the folded "x" of "../../x").
- title: argument > frontmatter > first `# ` heading > the last slug segment.
- Size limits (D16), checked before anything is stored: slug <= 200 characters with each segment
  <= 100; a given title (argument or frontmatter) <= 300 (a title taken from the first heading is
  clipped to 300 instead); each alias <= 200 and at most 50 aliases. Over -> invalid_params whose
  fix has no runnable step (a shortened name is a different name) and says what to do instead.
- Body larger than 350 KB (UTF-8), or a page larger than `PAGE_STORED_MAX_BYTES` (384 KB) as stored
  (`stored_bytes`: the body plus every other field re-serialized) -> invalid_params; `content`
  itself larger than `PAGE_CONTENT_MAX_BYTES` (1 MiB, UTF-8) is refused the same way before it is
  parsed. Bad YAML, or
  YAML that uses an alias (`pagefmt`: refused before it expands) -> invalid_params with no run-fix
  (only the writer can correct it).
- status: created | updated | unchanged (unchanged writes nothing, so delta does not re-deliver).
  A remote caller may write a private page but cannot read it back, and never replaces a page it
  cannot see: over a stored private page its put is refused (`invalid_params`, detail.reason
  "slug_taken", nothing of the page told) unless expected_updated_at names a time, which answers as
  for a missing page (stale_version, `stored_updated_at` null). A remote write without
  expected_updated_at is still conditional in the store, on the version it was decided on ("" when
  none), so a page made private between the read and the write is not overwritten either; when
  other writers win that race `_WRITE_ROUNDS` times the answer is `unavailable` (retryable). The
  trusted local CLI writes unconditionally.
- Write-through search (`deps.search.write_through`): old chunks deleted, `indexing.docs_for_page`
  embedded (`indexing.embed_docs`) and upserted -> `search_state: current`; otherwise `pending`.
- `expected_updated_at` (optional): the updated_at get_page returned, or "" = the page must not exist
  yet. Checked by the store in the same atomic step as the write (`PageStore.put`); a mismatch
  writes nothing -> invalid_params, detail.reason "stale_version" with `stored_updated_at`, whose
  fix says: get_page again, merge, put again with the new updated_at. Checked before "unchanged".
- Audit event "put_page". Response `{slug, status, search_state, protocol_version}`.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from fleetmem.errors import Conflict, Fix, Outcome, PortError, TooLarge, VerbError, caller_error, retry_later
from fleetmem.memory import common, indexing
from fleetmem.memory.pagefmt import PageFormatError, clip, first_h1, mentions, parse_page_content
from fleetmem.memory.params import Params, VisibilityArg
from fleetmem.memory.registry import ToolSpec, register
from fleetmem.memory.slugs import (
    SLUG_GRAMMAR,
    is_canonical_slug,
    is_path_like,
    last_segment,
    path_slug_error,
    shorten_slug,
    slug_size_problem,
    slugify,
)
from fleetmem.models import AuditEvent, Caller, Link, Page, TimelineEntry, Wire
from fleetmem.ports import CallContext, Deps
from fleetmem.protocol import (
    ALIAS_MAX,
    ALIASES_MAX,
    MENTION_LINK_TYPE,
    PAGE_BODY_MAX_BYTES,
    PAGE_CONTENT_MAX_BYTES,
    PROTOCOL_VERSION,
    SLUG_MAX,
    TITLE_MAX,
    VISIBILITIES,
    SearchState,
)
from fleetmem.timefmt import iso, parse_iso

TOOL = "put_page"
KNOWN_KEYS = ("title", "type", "aliases", "summary", "visibility", "links", "timeline")
MENTIONS = MENTION_LINK_TYPE


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
    model_config = ConfigDict(extra="ignore")

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


class PutPageResult(Wire):
    slug: str
    status: Literal["created", "updated", "unchanged"]
    search_state: SearchState
    protocol_version: int
    idempotent_replay: bool | None = None


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


_LIMIT_CAUSE = "pages have size limits so one name cannot crowd every budgeted read or lookup."


def _over_limit(message: str, problem: str, instead: str, limit: tuple[str, int]) -> VerbError:
    """A page name over one of its size limits; `limit` is the (detail key, maximum) it broke."""
    key, most = limit
    return common.too_long(message, problem=problem, cause=_LIMIT_CAUSE, instead=instead, detail={key: most})


def _slug_too_long(slug: str, problem: str) -> VerbError:
    example = shorten_slug(slug)
    return _over_limit(
        f"slug is too long: {problem}.",
        f"The slug {slug[:60]!r}… is too long: {problem}.",
        f"choose a shorter slug (for example {example!r}) and put the full name in the title.",
        ("max_slug", SLUG_MAX),
    )


def _check_names(slug: str, title: str | None, aliases: tuple[str, ...]) -> None:
    if title is not None and len(title) > TITLE_MAX:
        raise _over_limit(
            f"title is longer than {TITLE_MAX} characters ({len(title)}).",
            f"The title of {slug} is {len(title)} characters long; a title holds at most {TITLE_MAX}.",
            "give a shorter title and move the rest into the summary or the body.",
            ("max_title", TITLE_MAX),
        )
    if len(aliases) > ALIASES_MAX:
        raise _over_limit(
            f"{len(aliases)} aliases given; a page holds at most {ALIASES_MAX}.",
            f"{slug} has {len(aliases)} aliases; a page holds at most {ALIASES_MAX}.",
            f"keep the {ALIASES_MAX} names people actually use and mention the others in the body.",
            ("max_aliases", ALIASES_MAX),
        )
    for alias in aliases:
        if len(alias) > ALIAS_MAX:
            raise _over_limit(
                f"alias {alias[:40]!r}… is longer than {ALIAS_MAX} characters ({len(alias)}).",
                f"An alias of {slug} is {len(alias)} characters long; an alias holds at most {ALIAS_MAX}.",
                "use a short name as the alias and put descriptions in the summary or the body.",
                ("max_alias", ALIAS_MAX),
            )


#: The most a page may take as stored, whatever its input looked like: the body (at most
#: PAGE_BODY_MAX_BYTES) plus everything else re-serialized. It keeps one page within one DynamoDB
#: item (400 KB) on AWS and holds the local store to the same size.
PAGE_STORED_MAX_BYTES = 384 * 1024


def stored_bytes(page: Page) -> int:
    """The size of a page as the stores keep it: the UTF-8 body plus its other fields as JSON."""
    rest = [
        page.title,
        page.type,
        list(page.aliases),
        page.summary,
        [link.model_dump() for link in page.links],
        [t.model_dump() for t in page.timeline],
        page.frontmatter,
    ]
    return len(page.body.encode("utf-8")) + len(json.dumps(rest, ensure_ascii=False, default=str).encode("utf-8"))


def _too_big(message: str, problem: str, why: str, detail: dict[str, int]) -> VerbError:
    return VerbError(
        "invalid_params",
        message,
        f"Problem: {problem}. Cause: {why} Fix: split it into several pages (e.g. one per section) linked "
        "with [[slug]] mentions, then put each.",
        why=why,
        detail=detail,
        fix=Fix(why=why, actor="agent"),
        klass="caller",
    )


def _check_content_size(slug: str, content: str) -> None:
    """Content that can never be stored (PAGE_CONTENT_MAX_BYTES, several times what a page holds) is
    refused before it is parsed, chunked or embedded; below it the body and stored-size limits decide."""
    if len(content) <= PAGE_CONTENT_MAX_BYTES // 4:  # at most 4 UTF-8 bytes per character
        return
    size = len(content.encode("utf-8"))
    if size > PAGE_CONTENT_MAX_BYTES:
        why = (
            f"A page holds at most {PAGE_BODY_MAX_BYTES // 1024} KB of body and {PAGE_STORED_MAX_BYTES // 1024} KB "
            f"as stored; content over {PAGE_CONTENT_MAX_BYTES // 1024} KB is refused before any of it is read."
        )
        raise _too_big(
            f"The page content is larger than {PAGE_CONTENT_MAX_BYTES // 1024} KB.",
            f"the content of {slug} is {size // 1024} KB",
            why,
            {"max_content_bytes": PAGE_CONTENT_MAX_BYTES, "content_bytes": size, "max_bytes": PAGE_BODY_MAX_BYTES},
        )


def _same(a: Page, b: Page) -> bool:
    fields = ("title", "type", "aliases", "summary", "visibility", "body", "links", "timeline", "frontmatter")
    return all(getattr(a, f) == getattr(b, f) for f in fields)


def _expected(params: PutPageParams) -> dt.datetime | Literal[""] | None:
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


def run(deps: Deps, caller: Caller, params: PutPageParams, ctx: CallContext) -> Outcome:
    raw_slug = (params.slug or "").strip()
    if is_path_like(raw_slug):
        raise path_slug_error("slug", raw_slug)
    too_long = slug_size_problem(raw_slug) and slug_size_problem(slugify(raw_slug) or raw_slug)
    if too_long:
        raise _slug_too_long(slugify(raw_slug) or raw_slug, too_long)
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
    slug = raw_slug
    content = params.content or ""
    _check_content_size(slug, content)
    try:
        meta, body = parse_page_content(content)
    except PageFormatError as exc:
        # No run-fix: dropping the frontmatter would silently lose the title, aliases, links and
        # visibility it holds (a private page would be stored world-visible). Only the writer can
        # correct the YAML.
        cause = "frontmatter must be a YAML mapping (key: value lines) between '---' lines."
        instead = (
            f"Correct the YAML at the place named ({exc}) and put the page again; "
            + (exc.instead or "quote values that hold ':' or start with '[', '{', '*', '&' or '#'.")
            + " Title, aliases, type, summary and visibility may also be passed as arguments instead of "
            "frontmatter."
        )
        raise caller_error(
            f"The page frontmatter of {slug} could not be read: {exc}.",
            problem=f"The YAML frontmatter of {slug} does not parse.",
            cause=cause,
            instead=instead,
            field="content",
            reason="frontmatter_yaml",
        ) from None
    if len(body.encode("utf-8")) > PAGE_BODY_MAX_BYTES:
        why = f"A page body holds at most {PAGE_BODY_MAX_BYTES // 1024} KB of UTF-8 text."
        raise _too_big(
            f"The page body is larger than {PAGE_BODY_MAX_BYTES // 1024} KB.",
            f"the body of {slug} is {len(body.encode('utf-8')) // 1024} KB",
            why,
            {"max_bytes": PAGE_BODY_MAX_BYTES},
        )

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
    explicit_mentions = {(link.target) for link in links if link.type == MENTIONS}
    for target in mentions(body):
        if is_path_like(target):
            raise path_slug_error("link target", target)
        target_slug = slugify(target)
        if target_slug and target_slug != slug and target_slug not in explicit_mentions:
            explicit_mentions.add(target_slug)
            links.append(Link(type=MENTIONS, target=target_slug))
    timeline = _timeline(params, pick("timeline"))
    given_title = _text(pick("title"))
    aliases = _aliases(pick("aliases"))
    _check_names(slug, given_title, aliases)
    heading = first_h1(body)
    title = given_title or (clip(heading, TITLE_MAX) if heading else None) or last_segment(slug)

    expected = _expected(params)
    now = deps.clock.now()
    draft = Page(
        tenant=caller.tenant,
        slug=slug,
        title=title,
        type=_text(pick("type")),
        aliases=aliases,
        summary=_text(pick("summary")),
        visibility=visibility,  # type: ignore[arg-type]
        body=body,
        links=tuple(links),
        timeline=tuple(timeline),
        frontmatter={k: _jsonable(v) for k, v in meta.items() if k not in KNOWN_KEYS},
        created_at=now,
        updated_at=now,
        author=caller.client_id,
    )
    stored = stored_bytes(draft)
    if stored > PAGE_STORED_MAX_BYTES:
        why = (
            f"A page as stored (body plus title, aliases, summary, links, timeline and the other "
            f"frontmatter, re-serialized) holds at most {PAGE_STORED_MAX_BYTES // 1024} KB."
        )
        raise _too_big(
            f"The page is larger than {PAGE_STORED_MAX_BYTES // 1024} KB as stored.",
            f"{slug} would be stored as {stored // 1024} KB",
            why,
            {"max_stored_bytes": PAGE_STORED_MAX_BYTES, "stored_bytes": stored},
        )
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
            return Outcome(
                body={
                    "slug": slug,
                    "status": "unchanged",
                    "search_state": "current",
                    "protocol_version": PROTOCOL_VERSION,
                }
            )
        status = "updated" if existing is not None else "created"
        try:
            deps.pages.put(page, expected_updated_at=_condition(caller, expected, existing))
        except Conflict:  # changed between the read above and the write: nothing was written
            if expected is None:
                continue  # an unconditional remote write: read the page again and decide again
            raise _stale(slug, expected, _seen(deps, caller, slug, expected)) from None
        except TooLarge:
            why = "The store refused the page as too large (aliases, links and timeline count too)."
            raise VerbError(
                "invalid_params",
                "The page is too large to store.",
                f"Problem: {slug} could not be stored. Cause: {why} Fix: split it into smaller pages.",
                why=why,
                fix=Fix(why=why, actor="agent"),
                klass="caller",
            ) from None
        break
    else:
        raise _busy(params)
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
    indexed = index_page(deps, page)
    return Outcome(
        body={
            "slug": slug,
            "status": status,
            "search_state": "current" if indexed else "pending",
            "protocol_version": PROTOCOL_VERSION,
        }
    )


SPEC = register(
    ToolSpec(
        name=TOOL,
        description=(
            "Create or replace a page (a person, company, project or topic) from markdown with optional YAML "
            'frontmatter. Example: {"slug": "people/alice-example", "content": "---\\ntitle: Alice '
            "Example\\ntype: person\\naliases: [Alice]\\n---\\nAlice runs payments at "
            '[[companies/acme-example]]."}. Explicit title/type/aliases/links/timeline/visibility/summary '
            "arguments override the frontmatter. "
            "status says created | updated | unchanged."
        ),
        params=PutPageParams,
        result=PutPageResult,
        run=run,
        scope="write",
        surface="full",
        writes=True,
        annotations={"idempotentHint": True},
        idempotency=True,
    )
)
