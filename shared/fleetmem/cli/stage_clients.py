"""`fleetmem stage clients sync`: the deploy config's `clients` as data on a deployed stage.

A stage's template does not name its clients (a stage with 1,000 clients synthesizes to the same
template as one with 1). After a deploy, this command makes each configured client exist: a
Cognito app client named `<prefix>-<client_id>` in the stage's user pool (client-credentials
grant, the client's scopes, the config's access-token lifetime), created through the Cognito API
when the pool has none of that name, and its mapping to (tenant, client_id, tier) in the clients
table (`fleetmem.tokens.map_cognito_client`), which the authorizer reads. It is idempotent: a rerun
creates nothing and reports every client `unchanged`. A mapping that differs from the config (the
client moved tenant or tier) is not rewritten: an app client keeps the identity its tokens were
issued under; the report says how to replace it.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fleetmem.cli.framework import Parser
from fleetmem.cli.stage import aws_backend_option
from fleetmem.console import EXIT_FAILED, EXIT_OK, CommandFailed, Output
from fleetmem.protocol import Scope

#: The resource server of the stage's pool (`infra/constructs/client_auth.py`): scopes are `fleetmem/<scope>`.
RESOURCE_SERVER = "fleetmem"
#: `ClientConfig.tier`'s default (infra/config_sections.py)
CLIENT_TIER_DEFAULT = "standard"


@dataclass(frozen=True)
class ConfiguredClient:
    client_id: str
    tenant: str
    scopes: tuple[Scope, ...]
    tier: str


def add_commands(sub: Any, common: Parser) -> None:
    st = sub.add_parser("stage", parents=[common], help="operate a deployed AWS stage's clients")
    ssub = st.add_subparsers(dest="stage_command", metavar="ACTION", parser_class=Parser, required=True)
    cl = ssub.add_parser("clients", parents=[common], help="the deploy config's clients on the stage")
    csub = cl.add_subparsers(dest="clients_command", metavar="ACTION", parser_class=Parser, required=True)
    p = csub.add_parser(
        "sync", parents=[common], help="create the configured clients' Cognito app clients and map them (idempotent)"
    )
    aws_backend_option(p)
    p.add_argument(
        "--config", default=None, help="deploy config (default: $FLEETMEM_DEPLOY_CONFIG, else ./fleetmem.deploy.json)"
    )
    p.add_argument(
        "--user-pool-id",
        default=None,
        help="the stage's UserPoolId stack output (default: the pool FLEETMEM_COGNITO_ISSUER names)",
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_clients_sync)


def configured_clients(doc: Mapping[str, Any]) -> list[ConfiguredClient]:
    """The deploy config's clients, each checked as a token request is (ids, scopes) and its tier
    against the config's tiers. Raises `CommandFailed` (usage) naming the first bad one."""
    from fleetmem.tokens import MintRefused, mint_request

    tiers = doc.get("tiers") or {}
    out = []
    for raw in doc.get("clients") or ():
        tier = str(raw.get("tier") or CLIENT_TIER_DEFAULT)
        try:
            req = mint_request(
                tenant=str(raw.get("tenant") or ""),
                client=str(raw.get("client_id") or ""),
                scopes=raw.get("scopes") or ("read",),
                tier=tier,
            )
        except MintRefused as refused:
            raise CommandFailed.usage(
                f"deploy config client {raw.get('client_id')!r}: {refused.message}",
                "Fix the client in the deploy config.",
            ) from None
        if tier not in tiers:
            raise CommandFailed.usage(
                f"deploy config client {req.client_id!r}: unknown tier {tier!r}",
                f"Use one of the config's tiers: {', '.join(sorted(tiers)) or '(none)'}.",
            )
        out.append(ConfiguredClient(req.client_id, req.tenant, tuple(sorted(req.scopes)), tier))
    return out


def app_clients_by_name(cognito: Any, pool_id: str) -> dict[str, str]:
    """The pool's app clients: name -> app client id."""
    found: dict[str, str] = {}
    kwargs: dict[str, Any] = {"UserPoolId": pool_id, "MaxResults": 60}
    while True:
        page = cognito.list_user_pool_clients(**kwargs)
        for c in page.get("UserPoolClients", []):
            found[c["ClientName"]] = c["ClientId"]
        if not page.get("NextToken"):
            return found
        kwargs["NextToken"] = page["NextToken"]


def create_app_client(cognito: Any, pool_id: str, name: str, scopes: tuple[str, ...], token_minutes: int) -> str:
    """A client-credentials app client as the template made them (a secret, short-lived access
    tokens: Cognito cannot revoke them), allowed the client's scopes; its id."""
    out = cognito.create_user_pool_client(
        UserPoolId=pool_id,
        ClientName=name,
        GenerateSecret=True,
        AllowedOAuthFlows=["client_credentials"],
        AllowedOAuthFlowsUserPoolClient=True,
        AllowedOAuthScopes=[f"{RESOURCE_SERVER}/{s}" for s in scopes],
        AccessTokenValidity=token_minutes,
        TokenValidityUnits={"AccessToken": "minutes"},
        PreventUserExistenceErrors="ENABLED",
        EnableTokenRevocation=True,
    )
    return str(out["UserPoolClient"]["ClientId"])


def sync_clients(
    clients: list[ConfiguredClient],
    *,
    cognito: Any,
    pool_id: str,
    prefix: str,
    token_minutes: int,
    store: Any,
    clock: Any,
) -> list[dict[str, Any]]:
    """Make every configured client exist on the stage; one row per client: its app client id,
    `app_client` (created | existing | none) and `mapping` (created | unchanged | differs |
    revoked | tenant_deleted: no app client is made for a deleted tenant)."""
    from fleetmem.tokens import COGNITO_MAP_ID_PREFIX, cognito_client_mapping, map_cognito_client, tenant_deleted

    existing = app_clients_by_name(cognito, pool_id)
    rows = []
    for c in clients:
        name = f"{prefix}-{c.client_id}"
        app_id = existing.get(name)
        row: dict[str, Any] = {"client_id": c.client_id, "tenant": c.tenant, "tier": c.tier}
        if tenant_deleted(store, c.tenant):  # no app client (nor its monthly fee) for a deleted tenant
            rows.append(row | {"app_client_id": app_id, "app_client": "existing" if app_id else "none"})
            rows[-1]["mapping"] = "tenant_deleted"
            continue
        made = app_id is None
        if app_id is None:
            app_id = create_app_client(cognito, pool_id, name, c.scopes, token_minutes)
        row |= {
            "app_client_id": app_id,
            "app_client": "created" if made else "existing",
            "token_id": COGNITO_MAP_ID_PREFIX + app_id,
        }
        record, written = map_cognito_client(
            store, clock, app_client_id=app_id, tenant=c.tenant, client_id=c.client_id, scopes=c.scopes, tier=c.tier
        )
        if written:
            row["mapping"] = "created"
        elif cognito_client_mapping(store, app_id, clock.now()) is None:
            row["mapping"] = "revoked"
        elif (record.tenant, record.client_id, record.tier or None) != (c.tenant, c.client_id, c.tier):
            row["mapping"] = "differs"
            row["mapped"] = {"tenant": record.tenant, "client_id": record.client_id, "tier": record.tier}
        else:
            row["mapping"] = "unchanged"
        rows.append(row)
    return rows


def _config_doc(path: str | None) -> dict[str, Any]:
    named = path or os.environ.get("FLEETMEM_DEPLOY_CONFIG") or "fleetmem.deploy.json"
    try:
        doc: dict[str, Any] = json.loads(Path(named).read_text())
        return doc
    except FileNotFoundError:
        raise CommandFailed.usage(
            f"deploy config {named} does not exist",
            "Pass --config with the file the stage was deployed from, or set FLEETMEM_DEPLOY_CONFIG.",
        ) from None
    except ValueError as exc:
        raise CommandFailed.usage(f"deploy config {named} is not JSON: {exc}", "Fix the file.") from None


def _pool_id(args: argparse.Namespace) -> str:
    from fleetmem.config import ENV_COGNITO_ISSUER

    pool = args.user_pool_id or os.environ.get(ENV_COGNITO_ISSUER, "").rstrip("/").rsplit("/", 1)[-1]
    if not pool:
        raise CommandFailed.usage(
            "no user pool named",
            "Pass --user-pool-id with the stack's UserPoolId output, or set FLEETMEM_COGNITO_ISSUER as the "
            "authorizer has it.",
        )
    return pool


def cmd_clients_sync(args: argparse.Namespace, out: Output) -> int:
    from fleetmem.lanes import open_deps, settings_from
    from fleetmem.wiring import sdk_client

    doc = _config_doc(args.config)
    clients = configured_clients(doc)
    pool = _pool_id(args)
    settings = settings_from(args, backend="aws", embedder="none")
    deps = open_deps(settings)
    minutes = int((doc.get("cognito") or {}).get("access_token_minutes", 15))
    rows = sync_clients(
        clients,
        cognito=sdk_client("stage_clients", region=settings.aws.region),
        pool_id=pool,
        prefix=settings.aws.table_prefix,
        token_minutes=minutes,
        store=deps.clients,
        clock=deps.clock,
    )
    problems = [r for r in rows if r["mapping"] in {"differs", "revoked", "tenant_deleted"}]
    if out.as_json:
        out.document({"clients": rows, "problems": len(problems)})
    else:
        for r in rows:
            out.text(
                f"{r['client_id']}  tenant {r['tenant']}  tier {r['tier']}  app client {r['app_client_id']} "
                f"({r['app_client']})  mapping {r['mapping']}"
            )
        if not rows:
            Output.err("The deploy config names no clients; nothing to do.")
    for r in problems:
        if r["mapping"] == "tenant_deleted":
            Output.err(f"{r['client_id']}: tenant {r['tenant']} was deleted; remove the client from the deploy config.")
            continue
        Output.err(
            f"{r['client_id']}: mapping {r['mapping']}. An app client keeps the identity its tokens were issued "
            f"under: to move it, delete app client {r['app_client_id']} from the user pool "
            f"(aws cognito-idp delete-user-pool-client), `fleetmem token revoke {r['token_id']}` if it is live, "
            "then run this command again (it creates a new app client; hand its secret to the client)."
        )
    return EXIT_FAILED if problems else EXIT_OK
