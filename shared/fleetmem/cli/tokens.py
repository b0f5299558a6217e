"""`fleetmem token`: create, list and revoke API tokens, deny a Cognito app client, and map a person
signed in through the stage's OAuth issuer to a tenant."""

from __future__ import annotations

import argparse
import shlex
from typing import Any

from fleetmem.cli.framework import Parser, backend_option
from fleetmem.console import EXIT_OK, CommandFailed, Output
from fleetmem.lanes import from_env, open_deps, settings_from
from fleetmem.protocol import SCOPES


def add_commands(sub: Any, common: Parser) -> None:
    tok = sub.add_parser("token", parents=[common], help="create, list and revoke API tokens")
    tsub = tok.add_subparsers(dest="token_command", metavar="ACTION", parser_class=Parser, required=True)
    p = tsub.add_parser("create", parents=[common], help="mint a token (printed once)")
    backend_option(p)
    p.add_argument("--client", required=True, help="client name (shown in audit rows and cursors)")
    p.add_argument("--scopes", required=True, help="comma-separated: read,write[,admin]")
    p.add_argument("--tenant", default="default", help="tenant (brain) the token belongs to")
    p.add_argument(
        "--tier",
        default=None,
        help="usage-plan tier on an AWS stage (a tier of the deploy config's `tiers`; default: its default_tier)",
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_token_create)
    p = tsub.add_parser("list", parents=[common], help="list tokens (never shows the tokens)")
    backend_option(p)
    p.add_argument("--tenant", default=None)
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_token_list)
    p = tsub.add_parser("revoke", parents=[common], help="revoke a token by its TOKEN_ID")
    backend_option(p)
    p.add_argument("token_id")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_token_revoke)
    p = tsub.add_parser("deny-cognito", parents=[common], help="refuse every access token of a Cognito app client")
    backend_option(p)
    p.add_argument("app_client_id")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_token_deny_cognito)
    p = tsub.add_parser(
        "map-person", parents=[common], help="map a person of the stage's OAuth issuer to a tenant and client"
    )
    backend_option(p)
    p.add_argument("--issuer", required=True, help="the OAuth issuer URL (the deploy config's oauth.issuer)")
    p.add_argument("--subject", required=True, help="the person's `sub` at that issuer")
    p.add_argument("--tenant", required=True, help="tenant (brain) the person acts in")
    p.add_argument("--client", required=True, help="client name the person's calls carry")
    p.add_argument("--scopes", required=True, help="the most the person may use: read,write[,admin]")
    p.add_argument("--tier", default=None, help="usage-plan tier (default: the stage's default_tier)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_token_map_person)


def _token_deps(args: argparse.Namespace, *, creates: bool = False) -> Any:
    # Token management needs only the client store: never load the embedder for it.
    return open_deps(settings_from(args, embedder="none"), creates=creates)


def _token_hint(args: argparse.Namespace) -> list[str]:
    """`fleetmem token create` for the tenant and data directory this command was given."""
    from fleetmem.transport.errors import TOKEN_CREATE, token_create_argv

    options = {"client": "NAME", "scopes": "read,write"}
    options |= {"tenant": args.tenant} if getattr(args, "tenant", None) else {}
    options |= {"data_dir": str(args.data_dir)} if getattr(args, "data_dir", None) else {}
    return token_create_argv(TOKEN_CREATE, **options)


def _client_doc(rec: Any) -> dict[str, Any]:
    from fleetmem.timefmt import iso

    return {
        "token_id": rec.token_id,
        "client": rec.client_id,
        "tenant": rec.tenant,
        "scopes": sorted(rec.scopes),
        "created": iso(rec.created_at),
        "revoked": iso(rec.revoked_at),
        "tier": rec.tier,
    }


def cmd_token_create(args: argparse.Namespace, out: Output) -> int:
    from fleetmem.tokens import ID_FIX, MintRefused, TenantDeleted, mint, mint_request

    if args.tier is not None and settings_from(args, embedder="none").backend != "aws":
        raise CommandFailed.usage(
            "--tier applies to an AWS stage's usage plans; the local server has none",
            "Drop --tier, or add --backend aws to mint the token on the stage the environment names.",
        )
    try:
        request = mint_request(tenant=args.tenant, client=args.client, scopes=args.scopes.split(","), tier=args.tier)
    except MintRefused as refused:
        if refused.field == "scopes":
            raise CommandFailed.usage(
                refused.message,
                f"Use a comma-separated subset of {','.join(SCOPES)}, e.g. --scopes read,write",
            ) from None
        if not args.client.strip():
            raise CommandFailed.usage("--client is blank", "Name the client, e.g. --client my-agent") from None
        raise CommandFailed.usage(refused.message, ID_FIX) from None
    deps = _token_deps(args, creates=True)
    try:
        token, rec = mint(deps.clients, deps.clock, request)
    except TenantDeleted as refused:
        raise CommandFailed.usage(
            refused.message, "Name another tenant: a deleted tenant's id is not reused (docs/portability.md)."
        ) from None
    doc = {
        "token": token,
        "client": rec.client_id,
        "tenant": rec.tenant,
        "scopes": sorted(rec.scopes),
        "token_id": rec.token_id,
        "tier": rec.tier,
    }
    if out.as_json:
        out.document(doc)
    else:
        tier = f", tier {rec.tier}" if rec.tier else ""
        Output.err(
            f"Token {rec.token_id} for client '{rec.client_id}' (tenant {rec.tenant}, scopes "
            f"{','.join(sorted(rec.scopes))}{tier}). It is shown once and stored only as a SHA-256:"
        )
        out.text(token)
    return EXIT_OK


def cmd_token_list(args: argparse.Namespace, out: Output) -> int:
    deps = _token_deps(args)
    records = deps.clients.list(args.tenant) if args.tenant else deps.clients.list()
    docs = [_client_doc(r) for r in sorted(records, key=lambda r: (r.created_at, r.token_id))]
    if out.as_json:
        out.document({"tokens": docs})
        return EXIT_OK
    if not docs:
        Output.err(f"No tokens. Create one: {shlex.join(_token_hint(args))}")
        return EXIT_OK
    header = ("TOKEN_ID", "CLIENT", "TENANT", "SCOPES", "CREATED", "REVOKED")
    rows = [
        (
            d["token_id"],
            d["client"],
            d["tenant"],
            ",".join(d["scopes"]),
            d["created"] or "",
            d["revoked"] or "-",
        )
        for d in docs
    ]
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=False)]
    for row in (header, *rows):
        out.text("  ".join(str(x).ljust(w) for x, w in zip(row, widths, strict=True)).rstrip())
    return EXIT_OK


def cmd_token_revoke(args: argparse.Namespace, out: Output) -> int:
    deps = _token_deps(args)
    if not deps.clients.revoke(args.token_id, at=deps.clock.now()):
        raise CommandFailed.usage(
            f"No active token with id {args.token_id}",
            "Token ids come from `fleetmem token list` (the TOKEN_ID column, not the token itself).",
            code="not_found",
        )
    from fleetmem.config import AuthSettings
    from fleetmem.tokens import revocation_bound_s, revocation_text

    settings = settings_from(args, embedder="none")
    bound = revocation_bound_s(settings.backend, from_env(AuthSettings.from_env).authorizer_cache_ttl_s)
    if out.as_json:
        out.document({"token_id": args.token_id, "revoked": True, "refused_within_s": bound})
    else:
        Output.err(f"Revoked {args.token_id}; {revocation_text(bound)}.")
    return EXIT_OK


def cmd_token_deny_cognito(args: argparse.Namespace, out: Output) -> int:
    from fleetmem.tokens import deny_cognito_client

    deps = _token_deps(args, creates=True)
    record = deny_cognito_client(deps.clients, deps.clock, app_client_id=args.app_client_id)
    if out.as_json:
        out.document({"app_client_id": args.app_client_id, "token_id": record.token_id, "denied": True})
    else:
        Output.err(
            f"Denied Cognito app client {args.app_client_id}; the authorizer refuses its access tokens "
            "(at once for new tokens, after the authorizer cache TTL for cached ones)."
        )
    return EXIT_OK


def cmd_token_map_person(args: argparse.Namespace, out: Output) -> int:
    from fleetmem.tokens import ID_FIX, MintRefused, TenantDeleted, map_person

    deps = _token_deps(args, creates=True)
    try:
        record, written = map_person(
            deps.clients,
            deps.clock,
            issuer=args.issuer,
            subject=args.subject,
            tenant=args.tenant,
            client_id=args.client,
            scopes=args.scopes.split(","),
            tier=args.tier,
        )
    except TenantDeleted as refused:
        raise CommandFailed.usage(
            refused.message, "Name another tenant: a deleted tenant's id is not reused."
        ) from None
    except MintRefused as refused:
        fix = f"Use a comma-separated subset of {','.join(SCOPES)}" if refused.field == "scopes" else ID_FIX
        raise CommandFailed.usage(refused.message, fix) from None
    except ValueError as refused:
        raise CommandFailed.usage(str(refused), "Give the issuer URL and the person's subject.") from None
    doc = {**_client_doc(record), "mapped": written}
    if out.as_json:
        out.document(doc)
    else:
        state = "Mapped" if written else "Already mapped (unchanged)"
        Output.err(
            f"{state}: {record.token_id} acts as client '{record.client_id}' in tenant {record.tenant} with at "
            f"most {','.join(sorted(record.scopes))}; end it with `fleetmem token revoke {record.token_id}`."
        )
    return EXIT_OK
