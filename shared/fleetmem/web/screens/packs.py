"""Packs (admin): export the tenant, an entity or a selection as a memory pack download
(`export_pack`, the file `fleetmem export` writes), and import an uploaded pack (`import_pack`):
a dry run first that writes nothing and shows what would be written, unchanged or kept, then
**Import**, confirmed with the signed-in token (`step_up`). The uploaded pack waits in the session
between the two steps (one per session, at most the form limit); the result is its own page after a
redirect, so a reload imports nothing twice."""

from __future__ import annotations

import base64
import re
import secrets
from typing import Any

from starlette.datastructures import UploadFile
from starlette.responses import Response

from fleetmem.web.client import ToolFailed
from fleetmem.web.screens.tokens import step_up
from fleetmem.web.view import View, screen

STATES = ("active", "forgotten", "superseded", "expired")
PENDING = "pack"
DONE = "pack-imported"


def _page(view: View, *, status: int = 200, **context: Any) -> Response:
    base: dict[str, Any] = {
        "states": STATES,
        "chosen": {k: view.field(k) for k in ("entity", "since", "state")},
        "export_error": None,
        "import_error": None,
        "check": None,
        "pending": None,
    }
    return view.render("packs.html", status=status, title="Packs", **{**base, **context})


def _status(failed: ToolFailed) -> int:
    return failed.status if 400 <= failed.status < 500 else 502


@screen("/packs", scope="admin")
async def packs(view: View) -> Response:
    return _page(view)


@screen("/packs/export", scope="admin")
async def export(view: View) -> Response:
    args = {k: view.field(k).strip() for k in ("entity", "since", "state")}
    made, failed = await view.attempt("export_pack", {k: v for k, v in args.items() if v})
    if failed is not None:
        return _page(view, status=_status(failed), export_error=failed)
    assert made is not None
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", str(made.get("filename") or "memory.fmpack"))[:120]
    return Response(
        base64.b64decode(made["pack"]),
        media_type="application/gzip",
        headers={"content-disposition": f'attachment; filename="{name}"'},
    )


def _refused(message: str, fix: str) -> ToolFailed:
    return ToolFailed("invalid_params", message, fix, status=400)


@screen("/packs/check", methods=("POST",), scope="admin")
async def check(view: View) -> Response:
    """The dry run: the upload is checked by `import_pack` with `dry_run`, nothing is written."""
    assert view.form is not None and view.session is not None
    upload = view.form.get("pack")
    data = await upload.read() if isinstance(upload, UploadFile) else b""
    from_tenant = view.field("from_tenant").strip()
    if not data:
        return _page(
            view,
            status=400,
            import_error=_refused("No pack was uploaded; nothing was written.", "Choose a pack file, then check it."),
        )
    args: dict[str, Any] = {"pack": base64.b64encode(data).decode("ascii"), "dry_run": True}
    if from_tenant:
        args["from_tenant"] = from_tenant
    result, failed = await view.attempt("import_pack", args)
    if failed is not None:
        view.session.flash.pop(PENDING, None)
        return _page(view, status=_status(failed), import_error=failed, from_tenant=from_tenant)
    name = upload.filename if isinstance(upload, UploadFile) and upload.filename else "pack"
    pending = {"id": secrets.token_urlsafe(16), "args": {**args, "dry_run": False}, "name": name[:200], "check": result}
    view.session.flash[PENDING] = pending
    return _page(view, check=result, pending=pending)


@screen("/packs/import", methods=("POST",), scope="admin")
async def apply(view: View) -> Response:
    assert view.session is not None
    pending = view.session.flash.get(PENDING)
    if pending is None or view.field("pending") != pending["id"]:
        return _page(
            view,
            status=409,
            import_error=_refused(
                "That checked pack is no longer waiting (it was imported, replaced by another upload, or the "
                "session restarted); nothing was written.",
                "Upload the pack again and check it.",
            ),
        )
    refused = step_up(view)
    if refused is not None:
        return _page(view, status=403, import_error=refused, pending=pending, check=pending.get("check"))
    done, failed = await view.attempt("import_pack", pending["args"])
    if failed is not None:
        return _page(view, status=_status(failed), import_error=failed)
    view.session.flash.pop(PENDING, None)
    view.session.flash[DONE] = {"result": done, "name": pending["name"]}
    return view.redirect("/packs/imported")


@screen("/packs/imported", scope="admin")
async def imported(view: View) -> Response:
    """What the import wrote, once: a reload finds it gone and imports nothing."""
    done = view.session.flash.pop(DONE, None) if view.session else None
    if done is None:
        return view.redirect("/packs")
    return view.render("packs_imported.html", title="Pack imported", done=done["result"], name=done["name"])
