"""Portability commands (docs/portability.md): `fleetmem export`, `fleetmem import --pack`,
`fleetmem backup` and `fleetmem tenant delete`. `fleetmem.cli.app` registers them (`add_commands`) and
`fleetmem.cli.importer` routes `import --pack` here.
"""

from __future__ import annotations

import argparse
import shlex
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fleetmem.cli.framework import Parser, backend_option
from fleetmem.cli.stage import search_index
from fleetmem.console import EXIT_CONFIRM, EXIT_FAILED, EXIT_OK, CommandFailed, Output
from fleetmem.lanes import open_deps, settings_from, store_state
from fleetmem.protocol import CONTRACT_VERSION

STATES = ("active", "forgotten", "superseded", "expired")


def add_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "export", parents=[common], help="write a tenant's pages, facts and audit trail to a memory pack"
    )
    p.add_argument("pack", metavar="PACK", help="the pack file to write (e.g. brain.fmpack)")
    p.add_argument("--tenant", default="default", help="tenant (brain) to export (default: default)")
    p.add_argument("--entity", default=None, metavar="SLUG", help="only this entity's page and facts")
    p.add_argument("--since", default=None, metavar="ISO", help="only what was written or retracted after this time")
    p.add_argument("--state", choices=STATES, default=None, help="only facts in this state (no pages)")
    p.add_argument("--force", action="store_true", help="replace PACK if it exists")
    backend_option(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_export)

    p = sub.add_parser(
        "backup", parents=[common], help="a consistent copy of the live local memory into a new data directory"
    )
    p.add_argument("dest", metavar="DEST", help="new data directory for the copy (must not hold a memory)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_backup)

    ten = sub.add_parser("tenant", parents=[common], help="delete a tenant (brain) from every store")
    tsub = ten.add_subparsers(dest="tenant_command", metavar="ACTION", parser_class=Parser, required=True)
    p = tsub.add_parser(
        "delete", parents=[common], help="remove every page, fact, audit event, cursor, token and search doc of TENANT"
    )
    p.add_argument("tenant", metavar="TENANT")
    p.add_argument("--dry-run", action="store_true", help="report what would be deleted; delete nothing")
    p.add_argument("--yes", action="store_true", help="confirm the deletion (without it: exit 3, nothing deleted)")
    p.add_argument(
        "--no-wait",
        action="store_true",
        help="--backend aws: do not wait out the authorizer cache after revoking (only when nothing serves the API)",
    )
    backend_option(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_tenant_delete)


def add_import_options(p: argparse.ArgumentParser) -> None:
    """The options `fleetmem import` takes for a pack (beside its markdown folder argument)."""
    backend_option(p)
    p.add_argument("--pack", default=None, metavar="FILE", help="import a memory pack (fleetmem export) instead")
    p.add_argument(
        "--from-tenant",
        default=None,
        metavar="TENANT",
        help="with --pack: the tenant the pack was exported from, to load it into another --tenant",
    )


def _progress(verb: str) -> Any:
    def report(member: str, n: int) -> None:
        Output.err(f"{verb}: {member} {n}")

    return report


def _failed(exc: Any) -> CommandFailed:
    return CommandFailed.usage(exc.message, exc.fix, code="invalid_pack")


def cmd_export(args: argparse.Namespace, out: Output) -> int:
    from fleetmem.pack import MEMBERS, PackError, PackFilter
    from fleetmem.pack_transfer import export_pack
    from fleetmem.timefmt import parse_iso

    path = Path(args.pack).expanduser()
    if path.exists() and not args.force:
        raise CommandFailed.usage(
            f"{path} already exists; nothing was written.",
            f"Choose another file name, or replace it: fleetmem export {shlex.quote(str(path))} --force",
        )
    if not path.parent.is_dir():
        raise CommandFailed.usage(
            f"The folder of {path} does not exist.",
            "Create the folder first, or pass another path.",
        )
    try:
        since = parse_iso(args.since) if args.since else None
    except (ValueError, OverflowError):
        raise CommandFailed.usage(
            f"--since {args.since!r} is not an ISO 8601 date or datetime.",
            "Pass e.g. --since 2026-06-01 or --since 2026-06-01T09:30:00Z.",
        ) from None
    deps = open_deps(settings_from(args, embedder="none"))
    try:
        manifest = export_pack(
            path,
            deps,
            tenant=args.tenant,
            filter=PackFilter(entity=args.entity, since=since, state=args.state),
            progress=_progress("export"),
        )
    except PackError as exc:
        raise _failed(exc) from None
    counts = {m: manifest.members[m].count for m in MEMBERS}  # type: ignore[index]
    Output.err(
        f"Exported tenant {args.tenant!r} to {path}: {counts['pages.jsonl']} page(s), {counts['facts.jsonl']} "
        f"fact(s), {counts['audit.jsonl']} audit event(s)."
    )
    if out.as_json:
        out.document(
            {
                "pack": str(path),
                "tenant": args.tenant,
                "counts": counts,
                "format_version": manifest.format_version,
                "contract_version": CONTRACT_VERSION,
            }
        )
    return EXIT_OK


def cmd_import_pack(args: argparse.Namespace, out: Output) -> int:
    from fleetmem.errors import PortError
    from fleetmem.pack import MEMBERS, PackError, PackReader
    from fleetmem.pack_transfer import check_tenant, import_pack

    path = Path(args.pack).expanduser()
    if not path.is_file():
        raise CommandFailed.usage(
            f"{path} is not a file; nothing was written.",
            "Pass the pack `fleetmem export` wrote: fleetmem import --pack brain.fmpack",
        )
    tenant = args.tenant or "default"
    try:
        with PackReader(path) as reader:
            check_tenant(reader.manifest, tenant=tenant, from_tenant=args.from_tenant)
            counts = reader.verify(progress=_progress("check"))
            settings = settings_from(args)
            if settings.backend == "aws":  # the stage's stream indexer embeds what the import writes
                settings = settings_from(args, embedder="none")
            deps = open_deps(settings, creates=True)
            report = import_pack(reader, deps, tenant=tenant, progress=_progress("import"))
    except PackError as exc:
        raise _failed(exc) from None
    except PortError as exc:  # the store failed part-way: what was written stays, a rerun completes it
        raise CommandFailed(
            "unavailable",
            f"The import stopped part-way: the store failed ({exc}). What was written stays written.",
            f"Run the same import again to complete it (items already stored are skipped): fleetmem import "
            f"--pack {shlex.quote(str(path))}",
        ) from None
    names = {"pages.jsonl": "page(s)", "facts.jsonl": "fact(s)", "audit.jsonl": "audit event(s)"}
    Output.err(
        f"Imported {path} into tenant {tenant!r}: "
        + "; ".join(
            f"{report.written[m]} of {counts[m]} {names[m]} written, {report.unchanged[m]} unchanged" for m in MEMBERS
        )
        + (f"; {len(report.kept)} kept as stored (the store's version differs and is not older)" if report.kept else "")
        + "."
    )
    for line in report.kept[:20]:
        Output.err(f"  kept: {line}")
    if report.search_problem:
        Output.err(f"Note [search_degraded]: {report.search_problem}")
    if out.as_json:
        out.document(
            {
                "pack": str(path),
                "tenant": tenant,
                "total": counts,
                "written": report.written,
                "unchanged": report.unchanged,
                "kept": report.kept,
                "search_problem": report.search_problem,
                "contract_version": CONTRACT_VERSION,
            }
        )
    return EXIT_OK


def cmd_backup(args: argparse.Namespace, out: Output) -> int:
    from fleetmem.errors import Unavailable
    from fleetmem.wiring import DB_FILENAME, backup

    settings = settings_from(args, embedder="none")
    if settings.backend != "local":
        raise CommandFailed.usage(
            f"fleetmem backup copies a local data directory; this configuration names the {settings.backend} backend.",
            "On AWS the tables use point-in-time recovery (docs/deploy.md); for a portable copy use fleetmem export.",
        )
    state = store_state(settings)
    if state != "ok":
        open_deps(settings)  # raises the data-directory failure that names the fix
    dest = Path(args.dest).expanduser()
    if dest.exists() and not dest.is_dir():
        raise CommandFailed.usage(
            f"{dest} is a file, not a directory; nothing was written.",
            "Pass the path of a new directory for the copy.",
        )
    if (dest / DB_FILENAME).exists():
        raise CommandFailed.usage(
            f"{dest} already holds a fleetmem memory; nothing was written.",
            "Pass a new directory: a backup never overwrites a memory.",
        )
    source = Path(settings.data_dir) / DB_FILENAME
    try:
        target, check = backup(source, dest)
    except Unavailable as exc:
        raise CommandFailed(
            "unavailable", str(exc), "Check the destination is writable and has room, then retry."
        ) from None
    ok = check == "ok"
    Output.err(
        f"Backed up {source} to {target} (integrity_check: {check}). Restore: stop the server, then serve the "
        f"copy (fleetmem serve --data-dir {shlex.quote(str(dest))}) or move it into place (docs/portability.md)."
    )
    if out.as_json:
        out.document(
            {
                "source": str(source),
                "backup": str(target),
                "integrity_check": check,
                "contract_version": CONTRACT_VERSION,
            }
        )
    return EXIT_OK if ok else EXIT_FAILED


def cmd_tenant_delete(args: argparse.Namespace, out: Output) -> int:
    settings = settings_from(args, embedder="none")
    if settings.backend == "aws":
        return _delete_tenant_aws(args, out, settings)
    from fleetmem.wiring import count_tenant, delete_tenant, open_local

    if store_state(settings) != "ok":
        open_deps(settings)  # raises the data-directory failure that names the fix
    with open_local(settings.data_dir) as stores:
        db = stores.db
        return _delete_tenant(
            args,
            out,
            where=str(settings.data_dir),
            unit="row(s)",
            count=lambda: count_tenant(db, args.tenant),
            delete=lambda: delete_tenant(db, args.tenant),
            left=lambda: count_tenant(db, args.tenant),
            caveat="Backups and packs taken before still hold it (docs/portability.md).",
        )


#: Seconds added to the edge's invoke read timeout for a call the API let in just before its cached
#: answer expired: the edge's own work before and after the verb function it invokes.
IN_FLIGHT_MARGIN_S = 3
#: Revoke passes before the deletion goes ahead without a clean one (a token minted while the
#: tombstone was being written is revoked by the next pass, then waited out again).
REVOKE_ROUNDS = 3
#: Looks at the search index for documents the stream indexer re-created from writes made before
#: the deletion (each followed by another delete), and the pause between them.
SEARCH_SETTLE_ROUNDS = 10
SEARCH_SETTLE_PAUSE_S = 2.0


def _wait_bound() -> tuple[int, int]:
    """(authorizer cache TTL, in-flight bound) in seconds, from the stage's settings as its
    functions have them (FLEETMEM_AUTHORIZER_CACHE_TTL_S, FLEETMEM_INVOKE_READ_TIMEOUT_S)."""
    from fleetmem.config import AuthSettings, EdgeSettings
    from fleetmem.lanes import from_env

    ttl = from_env(AuthSettings.from_env).authorizer_cache_ttl_s
    in_flight = from_env(EdgeSettings.from_env).invoke_read_timeout_s + IN_FLIGHT_MARGIN_S
    return max(0, ttl), in_flight


def _wait(seconds: int, why: str, sleep: Callable[[float], None]) -> None:
    Output.err(f"wait: {seconds} s, {why}")
    left = float(seconds)
    while left > 0:
        step = min(10.0, left)
        sleep(step)
        left -= step
        if left > 0:
            Output.err(f"wait: {int(left)} s left")


def _revoke_tenant(tenant: str, stores: Any, *, no_wait: bool) -> dict[str, Any]:
    """Tombstone, revoke, wait: after this no credential of the tenant can reach a verb, however
    long an API Gateway cache keeps its Allow (`docs/portability.md`)."""
    from fleetmem.tokens import COGNITO_MAP_ID_PREFIX, deny_cognito_client, mark_tenant_deleted
    from fleetmem.wiring import SystemClock, revoke_clients

    clock = SystemClock()
    mark_tenant_deleted(stores.clients, clock, tenant)
    Output.err(f"revoke: tenant {tenant!r} marked deleted (no token is minted for it from now on)")
    # the tenant's Cognito app clients (their mappings in the clients table; revoked below with
    # its API tokens): denied as well, so no token of theirs is accepted whatever a cache holds
    mapped = sorted(
        r.token_id.removeprefix(COGNITO_MAP_ID_PREFIX)
        for r in stores.clients.list(tenant)
        if r.token_id.startswith(COGNITO_MAP_ID_PREFIX)
    )
    for app_client in mapped:
        deny_cognito_client(stores.clients, clock, app_client_id=app_client)
    if mapped:
        Output.err(f"revoke: {len(mapped)} Cognito app client(s) mapped to it denied: {', '.join(mapped)}")
    ttl, in_flight = _wait_bound()
    revoked = waited = 0
    for _ in range(REVOKE_ROUNDS):
        now = revoke_clients(stores.clients, tenant, at=clock.now())
        revoked += now
        Output.err(f"revoke: {now} API token(s) revoked")
        if waited and not now:
            break  # a clean pass after a full wait: nothing of the tenant is authorized any more
        if no_wait:
            Output.err(
                "wait: skipped (--no-wait). A call the API let in with a cached answer may still write; "
                "use it only when nothing serves the stage's API."
            )
            break
        _wait(
            ttl + in_flight,
            f"so that no revoked token is still let in: API Gateway may serve a cached Allow for {ttl} s after a "
            f"revoke (api.authorizer_cache_ttl_s, FLEETMEM_AUTHORIZER_CACHE_TTL_S), and a call it let in may run "
            f"{in_flight} s more (FLEETMEM_INVOKE_READ_TIMEOUT_S + {IN_FLIGHT_MARGIN_S} s)",
            time.sleep,
        )
        waited += ttl + in_flight
    return {"revoked": revoked, "cognito_denied": mapped, "waited_s": waited}


def _delete_tenant_aws(args: argparse.Namespace, out: Output, settings: Any) -> int:
    from fleetmem.errors import PortError
    from fleetmem.wiring import QUEUES, SEARCH, TenantQueues, TenantTables, open_aws, sdk_client

    stores = open_aws(settings)
    search = search_index(
        stores.search,
        doing="tenant delete --backend aws also deletes the tenant's search documents",
        nothing="deleted",
    )
    tables = TenantTables(stores.aws.dynamodb, settings.aws.table_prefix)
    queues = TenantQueues(sdk_client("tenant_queues", region=settings.aws.region), settings.aws.table_prefix)
    tenant = args.tenant

    def count(confirm: bool = False, with_queues: bool = False) -> dict[str, int]:
        found = {**tables.count(tenant, confirm=confirm), SEARCH: search.tenant_doc_count(tenant)}
        return {**found, QUEUES: queues.count(tenant)} if with_queues else found

    def delete() -> dict[str, int]:
        deleted = tables.delete(tenant, progress=_progress("delete"))
        deleted[SEARCH] = search.delete_tenant(tenant)
        Output.err(f"delete: {SEARCH} {deleted[SEARCH]}")
        deleted[QUEUES] = queues.delete(tenant)
        Output.err(f"delete: {QUEUES} {deleted[QUEUES]}")
        return deleted

    def left() -> dict[str, int]:
        # The stream indexer may still apply writes made before the deletion (each item's removal
        # follows on its stream); the index is looked at again, and cleared again, until it settles.
        remaining = count(confirm=True, with_queues=True)
        for _ in range(SEARCH_SETTLE_ROUNDS):
            if not remaining[SEARCH]:
                break
            Output.err(f"verify: {SEARCH} {remaining[SEARCH]} document(s) re-indexed from earlier writes; deleting")
            search.delete_tenant(tenant)
            time.sleep(SEARCH_SETTLE_PAUSE_S)
            remaining[SEARCH] = search.tenant_doc_count(tenant)
        Output.err("verify: " + ", ".join(f"{t} {n}" for t, n in remaining.items()))
        return remaining

    try:
        return _delete_tenant(
            args,
            out,
            where=f"stage {settings.aws.table_prefix!r} (its tables, search index and queues)",
            unit="item(s)",
            count=lambda: count(with_queues=args.dry_run),
            delete=delete,
            left=left,
            backend=("--backend", "aws"),
            before=lambda: _revoke_tenant(tenant, stores, no_wait=args.no_wait),
            caveat="Point-in-time recovery keeps deleted items restorable for its window, index snapshots until "
            "they age out, and packs taken before still hold it; heartbeat events already sent to an https "
            "destination are the receiver's (docs/portability.md).",
        )
    except PortError as exc:  # a store failed part-way: what was deleted stays deleted, a rerun completes it
        raise CommandFailed(
            "unavailable",
            f"The deletion stopped part-way: the store failed ({exc}). What was deleted stays deleted.",
            f"Run the same command again to complete it: fleetmem tenant delete {shlex.quote(tenant)} --backend aws "
            "--yes",
        ) from None


def _delete_tenant(
    args: argparse.Namespace,
    out: Output,
    *,
    where: str,
    unit: str,
    count: Callable[[], dict[str, int]],
    delete: Callable[[], dict[str, int]],
    left: Callable[[], dict[str, int]],
    caveat: str,
    backend: tuple[str, ...] = (),
    before: Callable[[], dict[str, Any]] | None = None,
) -> int:
    found = count()
    total = sum(found.values())
    if args.dry_run or not args.yes or total == 0:
        if total == 0:
            Output.err(f"Tenant {args.tenant!r} holds nothing in {where}; nothing to delete.")
        else:
            Output.err(
                f"Tenant {args.tenant!r} holds {total} {unit} in {where}: "
                + ", ".join(f"{t} {n}" for t, n in found.items() if n)
                + (". Dry run: nothing was deleted." if args.dry_run else ". Nothing was deleted.")
            )
            if not args.dry_run:
                again = shlex.join(["fleetmem", "tenant", "delete", args.tenant, *backend, "--yes"])
                Output.err(f"  To delete them (this cannot be undone): {again}")
        if out.as_json:
            out.document(
                {
                    "tenant": args.tenant,
                    "dry_run": True,
                    "rows": found,
                    "deleted": False,
                    "contract_version": CONTRACT_VERSION,
                }
            )
        return EXIT_OK if (args.dry_run or total == 0) else EXIT_CONFIRM
    revoked = before() if before is not None else {}
    deleted = delete()
    remaining = left()
    n_left = sum(remaining.values())
    Output.err(
        f"Deleted tenant {args.tenant!r} from {where}: {sum(deleted.values())} {unit} ("
        + ", ".join(f"{t} {n}" for t, n in deleted.items())
        + f"); {n_left} left. {caveat}"
    )
    if n_left:
        Output.err("  Left: " + ", ".join(f"{t} {n}" for t, n in remaining.items() if n) + ". Run it again.")
    if out.as_json:
        out.document(
            {
                "tenant": args.tenant,
                "dry_run": False,
                "rows": deleted,
                "deleted": True,
                "left": n_left,
                "left_by_store": remaining,
                **revoked,
                "contract_version": CONTRACT_VERSION,
            }
        )
    return EXIT_OK if n_left == 0 else EXIT_FAILED
