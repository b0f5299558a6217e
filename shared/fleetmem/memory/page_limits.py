"""put_page's size limits (D16): names (slug, title, aliases), the content before it is parsed, the
body, and the page as stored. Each refusal is `invalid_params` whose fix says what to do instead."""

from __future__ import annotations

import json

from fleetmem.errors import Fix, VerbError
from fleetmem.memory import common
from fleetmem.memory.slugs import shorten_slug
from fleetmem.models import Page
from fleetmem.protocol import ALIAS_MAX, ALIASES_MAX, PAGE_BODY_MAX_BYTES, PAGE_CONTENT_MAX_BYTES, SLUG_MAX, TITLE_MAX

_LIMIT_CAUSE = "pages have size limits so one name cannot crowd every budgeted read or lookup."


def _over_limit(message: str, problem: str, instead: str, limit: tuple[str, int]) -> VerbError:
    """A page name over one of its size limits; `limit` is the (detail key, maximum) it broke."""
    key, most = limit
    return common.too_long(message, problem=problem, cause=_LIMIT_CAUSE, instead=instead, detail={key: most})


def slug_too_long(slug: str, problem: str) -> VerbError:
    example = shorten_slug(slug)
    return _over_limit(
        f"slug is too long: {problem}.",
        f"The slug {slug[:60]!r}… is too long: {problem}.",
        f"choose a shorter slug (for example {example!r}) and put the full name in the title.",
        ("max_slug", SLUG_MAX),
    )


def check_names(slug: str, title: str | None, aliases: tuple[str, ...]) -> None:
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


def check_content_size(slug: str, content: str) -> None:
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


def check_body_size(slug: str, body: str) -> None:
    if len(body.encode("utf-8")) > PAGE_BODY_MAX_BYTES:
        why = f"A page body holds at most {PAGE_BODY_MAX_BYTES // 1024} KB of UTF-8 text."
        raise _too_big(
            f"The page body is larger than {PAGE_BODY_MAX_BYTES // 1024} KB.",
            f"the body of {slug} is {len(body.encode('utf-8')) // 1024} KB",
            why,
            {"max_bytes": PAGE_BODY_MAX_BYTES},
        )


def check_stored_size(draft: Page) -> None:
    stored = stored_bytes(draft)
    if stored > PAGE_STORED_MAX_BYTES:
        why = (
            f"A page as stored (body plus title, aliases, summary, links, timeline and the other "
            f"frontmatter, re-serialized) holds at most {PAGE_STORED_MAX_BYTES // 1024} KB."
        )
        raise _too_big(
            f"The page is larger than {PAGE_STORED_MAX_BYTES // 1024} KB as stored.",
            f"{draft.slug} would be stored as {stored // 1024} KB",
            why,
            {"max_stored_bytes": PAGE_STORED_MAX_BYTES, "stored_bytes": stored},
        )


def too_large_to_store(slug: str) -> VerbError:
    """The store refused the page as too large (its own limit, past the checks above)."""
    why = "The store refused the page as too large (aliases, links and timeline count too)."
    return VerbError(
        "invalid_params",
        "The page is too large to store.",
        f"Problem: {slug} could not be stored. Cause: {why} Fix: split it into smaller pages.",
        why=why,
        fix=Fix(why=why, actor="agent"),
        klass="caller",
    )
