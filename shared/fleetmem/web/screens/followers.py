"""Followers: every live delta session of the tenant (`list_followers`), the most recently woken first."""

from __future__ import annotations

from starlette.responses import Response

from fleetmem.web.view import View, screen

#: Where list_followers stops counting pending changes (its one `pending_capped` flag says a count
#: stopped there; the count that did is the one at the cap).
PENDING_CAP = 1000


def pending(n: int, capped: bool) -> str:
    """A pending count as shown: "1000+" when the server stopped counting at its cap."""
    return f"{n}+" if capped and n >= PENDING_CAP else str(n)


@screen("/followers")
async def followers(view: View) -> Response:
    body = await view.call("list_followers", {"limit": 200})
    rows = sorted(body.get("followers") or [], key=lambda f: str(f.get("last_wake") or ""), reverse=True)
    return view.render("followers.html", title="Followers", followers=rows, pending=pending)
