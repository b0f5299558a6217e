"""remember's notices: `new_entity` (the fact starts a slug no page or visible fact uses),
`already_expired` (born past its valid_until) and `probable_update` (saved beside an active fact it
probably gives a new value to)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from fleetmem.errors import Notice
from fleetmem.memory.common import fix_call, given_args
from fleetmem.memory.entities import EntityTarget, near_misses
from fleetmem.models import Caller, Fact
from fleetmem.ports import Deps
from fleetmem.protocol import SUGGESTIONS_MAX
from fleetmem.timefmt import iso

if TYPE_CHECKING:
    from fleetmem.memory.remember_params import RememberParams

TOOL = "remember"


def probable_update_notice(params: RememberParams, old: Fact) -> Notice:
    """`probable_update`: the new fact was saved beside an active fact it probably updates (same
    subject and attribute, another value; `sameness.probable_update`). Nothing was superseded; the
    fix is the same call with `supersedes` naming the older fact."""
    args = given_args(params)
    args.pop("idempotency_key", None)  # a new call: the old key would replay the first result
    args["supersedes"] = old.fact_id
    return Notice(
        code="probable_update",
        kind="info",
        why=f"This fact probably gives a new value to what fact #{old.seq} ({old.fact_id}) says: "
        f"{_quote(old.text)}. Both are active now. If the new value replaces the old one, run the fix: the "
        "same remember call with `supersedes`, which expires the older fact (superseded_by the new one) "
        "and keeps the new text once. If both are true, do nothing.",
        fix=fix_call(TOOL, args, f"Replace fact {old.fact_id} with this one."),
    )


def _quote(text: str, limit: int = 200) -> str:
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


def new_entity_notice(
    deps: Deps, caller: Caller, params: RememberParams, target: EntityTarget, pool: list[Fact]
) -> Notice | None:
    """`new_entity` when the fact starts a slug: no page resolved and no fact the caller can see
    is filed under it yet. Suggestions: the pages that tied at an exact rank, then near-misses."""
    if target.page is not None or not target.slug:
        return None
    if any(
        f.entity_slug == target.slug
        and (not caller.remote or f.visibility == "world" or f.client_id == caller.client_id)
        for f in pool
    ):
        return None
    name = (params.entity or "").strip()
    picks = [{"slug": h.slug, "title": h.title} for h in target.ambiguous[:SUGGESTIONS_MAX]]
    if len(picks) < SUGGESTIONS_MAX:
        taken = (*(p["slug"] for p in picks), target.slug)
        more = near_misses(deps, caller.tenant, name, world_only=caller.remote, exclude=taken)
        picks += [{"slug": m["slug"], "title": m["title"]} for m in more][: SUGGESTIONS_MAX - len(picks)]
    why = f"No page matches entity {name!r}, so the fact was filed under the new slug {target.slug!r}."
    if target.ambiguous:
        why += " The name matches several pages exactly, so none was chosen."
    if not picks:
        why += " No similar page exists yet; a page for the entity would give it a card."
        page = {"slug": target.slug, "content": f"# {name or target.slug}\n"}
        # Shown only to a caller that can write pages (the edge drops a step it cannot call).
        return Notice(
            code="new_entity", kind="info", why=why, fix=fix_call("put_page", page, "Create the entity's page.")
        )
    listed = "; ".join(f"{p['slug']} ({p['title']})" for p in picks)
    best = picks[0]["slug"]
    why += (
        f" Similar pages: {listed}. If you meant {best}, forget the fact just saved and run the fix, "
        "which saves it again under that page's slug."
    )
    args = given_args(params)
    args.pop("idempotency_key", None)  # a new call: the old key would replay the first result
    args["entity"] = best
    return Notice(
        code="new_entity",
        kind="info",
        why=why,
        fix=fix_call(TOOL, args, f"The same fact filed under {best}, the closest existing page."),
    )


def already_expired_notice(valid_until: datetime) -> Notice:
    return Notice(
        code="already_expired",
        kind="info",
        why=f"valid_until {iso(valid_until)} is already past, so the fact was stored expired: it replaced "
        "or merged with no other fact, and recall shows it only with include_expired: true. Omit ttl "
        "or give a future date to save a current fact.",
    )
