"""Pages: the list (`list_pages`, by type, page by page) with a search (`recall`'s page hits), one page
as stored (`get_page`), and, with the write scope, new / edit (`put_page`) and delete (`delete_page`).

The edit form carries the `updated_at` it was loaded at and saves with put_page's
`expected_updated_at` (a new page with ""), so the server refuses, atomically, a save over a version
someone else saved meanwhile; the form shows that refusal with the user's text kept.
"""

from __future__ import annotations

from typing import Any

from starlette.responses import Response

from fleetmem.web.client import ToolFailed
from fleetmem.web.view import View, screen

PAGE_SIZE = 50
NEW_PAGE_TEMPLATE = "---\ntitle: \ntype: \naliases: []\nsummary: \n---\n"


def _slug(view: View) -> str:
    return str(view.request.path_params.get("slug", "")).strip()


async def _page_or_404(view: View, slug: str) -> tuple[dict[str, Any] | None, Response | None]:
    page, error = await view.attempt("get_page", {"slug": slug})
    if error is None:
        return page, None
    if error.code == "not_found":
        return None, view.render("page_missing.html", status=404, title="Page not found", slug=slug, error=error)
    raise error


@screen("/pages")
async def pages(view: View) -> Response:
    q = view.field("q").strip()
    kind = view.field("type").strip()
    cursor = view.field("cursor").strip()
    hits: list[dict[str, Any]] | None = None
    listing: dict[str, Any] = {"pages": [], "next_cursor": None}
    error: ToolFailed | None = None
    if q:
        found, error = await view.attempt("recall", {"query": q})
        hits = (found or {}).get("results") or []
    else:
        limit = view.field("limit").strip()
        arguments: dict[str, Any] = {"limit": int(limit) if limit.isdigit() else PAGE_SIZE}
        if kind:
            arguments["type"] = kind
        if cursor:
            arguments["cursor"] = cursor
        got, error = await view.attempt("list_pages", arguments)
        listing = got or listing
    return view.render(
        "pages.html",
        title="Pages",
        q=q,
        type=kind,
        cursor=cursor,
        limit=view.field("limit").strip(),
        hits=hits,
        listing=listing,
        error=error,
    )


def _edit_form(
    view: View, *, slug: str, content: str, loaded_at: str, new: bool, error: ToolFailed | None = None
) -> Response:
    status = 200 if error is None else (error.status if 400 <= error.status < 600 else 502)
    return view.render(
        "page_edit.html",
        status=status,
        title=("New page" if new else f"Edit {slug}"),
        slug=slug,
        content=content,
        loaded_at=loaded_at,
        new=new,
        error=error,
    )


@screen("/new-page", methods=("GET", "POST"), scope="write")
async def new_page(view: View) -> Response:
    slug = view.field("slug").strip()
    content = view.field("content", NEW_PAGE_TEMPLATE)
    if view.request.method == "GET":
        return _edit_form(view, slug=slug, content=content, loaded_at="", new=True)
    _, error = await view.attempt("put_page", {"slug": slug, "content": content, "expected_updated_at": ""})
    if error is not None:
        if _stale(error)[0]:
            error = ToolFailed(
                "conflict",
                f"A page {slug} already exists, so nothing was saved (it is not overwritten).",
                "Pick another slug, or open that page and edit it there; your text is kept below.",
                status=409,
            )
        return _edit_form(view, slug=slug, content=content, loaded_at="", new=True, error=error)
    return view.redirect(f"/pages/{slug}")


def _stale(error: ToolFailed) -> tuple[bool, bool]:
    """(whether put_page refused a save over another version, whether the page is gone meanwhile)."""
    detail = (error.envelope or {}).get("detail") or {}
    stale = isinstance(detail, dict) and detail.get("reason") == "stale_version"
    return stale, stale and detail.get("stored_updated_at") is None


@screen("/edit-page/{slug:path}", methods=("GET", "POST"), scope="write")
async def edit_page(view: View) -> Response:
    slug = _slug(view)
    if view.request.method == "GET":
        page, missing = await _page_or_404(view, slug)
        if page is None:
            return missing  # type: ignore[return-value]
        return _edit_form(view, slug=slug, content=page["content"], loaded_at=page["updated_at"], new=False)
    content = view.field("content")
    loaded_at = view.field("loaded_at")
    _, error = await view.attempt("put_page", {"slug": slug, "content": content, "expected_updated_at": loaded_at})
    if error is None:
        return view.redirect(f"/pages/{slug}")
    stale, gone = _stale(error)
    if gone:
        # deleted while it was being edited: keep the text and offer to save it as the page anew
        return _edit_form(
            view,
            slug=slug,
            content=content,
            loaded_at="",
            new=True,
            error=ToolFailed(
                "conflict",
                f"The page {slug} was deleted after you opened it, so your edit was not saved.",
                "Your text is kept below: press Save to re-create the page with it, or leave to let it go.",
                status=409,
            ),
        )
    if stale:
        error = ToolFailed(
            "conflict",
            f"{slug} was changed by someone else after you opened it, so your edit was not saved.",
            "Your text is kept below: copy your change, open the page again in another tab, and re-apply it there.",
            status=409,
        )
    return _edit_form(view, slug=slug, content=content, loaded_at=loaded_at, new=False, error=error)


@screen("/delete-page/{slug:path}", methods=("GET", "POST"), scope="write")
async def delete_page(view: View) -> Response:
    slug = _slug(view)
    page, missing = await _page_or_404(view, slug)
    if page is None:
        return missing  # type: ignore[return-value]
    if view.request.method == "GET":
        return view.render("page_delete.html", title=f"Delete {slug}", page=page, error=None)
    _, error = await view.attempt("delete_page", {"slug": slug})
    if error is not None:
        return view.render(
            "page_delete.html", status=error.status or 502, title=f"Delete {slug}", page=page, error=error
        )
    return view.redirect("/pages", done="page-deleted")


@screen("/pages/{slug:path}")
async def show_page(view: View) -> Response:
    slug = _slug(view)
    page, missing = await _page_or_404(view, slug)
    if page is None:
        return missing  # type: ignore[return-value]
    return view.render("page.html", title=page["title"] or slug, page=page)
