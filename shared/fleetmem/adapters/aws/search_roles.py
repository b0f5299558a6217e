"""Fine-grained access control's roles and role mappings on a managed OpenSearch domain.

With fine-grained access control on (the production preset), OpenSearch checks its own roles on
top of IAM: a function role that is allowed an index path by IAM is still refused until it is
mapped to an OpenSearch role. The deploy maps them itself (infra/constructs/search_rolemap.py,
a CloudFormation custom resource): two roles, `fleetmem_reader` (read on `<prefix>-docs-*`) and
`fleetmem_indexer` (crud, create_index, manage_aliases on the same indices), and their role
mappings, whose `backend_roles` are the function role ARNs. Every request is an idempotent PUT
of the whole document, so an update or a retry writes the same state again.

Only the master user may call the security API. It is the stage's search-admin IAM role, so the
caller assumes it with a session policy that leaves exactly the four PUTs (`session_policy`):
the credentials the caller holds for those minutes can do nothing else on the domain.
"""

from __future__ import annotations

import json
from typing import Any

READER = "fleetmem_reader"
INDEXER = "fleetmem_indexer"
#: The security API's paths, under the domain's endpoint.
ROLES_PATH = "_plugins/_security/api/roles"
MAPPINGS_PATH = "_plugins/_security/api/rolesmapping"
#: Seconds the assumed search-admin session lasts (STS's minimum; the four PUTs take seconds).
SESSION_SECONDS = 900
SESSION_NAME = "fleetmem-search-rolemap"


class SecurityApiRefused(RuntimeError):
    """The domain's security API refused a PUT (or could not be reached): the deploy fails."""


def role_requests(index_pattern: str, readers: list[str], indexers: list[str]) -> list[tuple[str, dict[str, Any]]]:
    """(path, body) of every PUT, roles before their mappings: what the deploy writes."""
    return [
        (
            f"{ROLES_PATH}/{READER}",
            {
                "cluster_permissions": ["cluster_composite_ops_ro"],
                "index_permissions": [{"index_patterns": [index_pattern], "allowed_actions": ["read"]}],
            },
        ),
        (
            f"{ROLES_PATH}/{INDEXER}",
            {
                "cluster_permissions": ["cluster_composite_ops"],
                "index_permissions": [
                    {"index_patterns": [index_pattern], "allowed_actions": ["crud", "create_index", "manage_aliases"]}
                ],
            },
        ),
        (f"{MAPPINGS_PATH}/{READER}", {"backend_roles": list(readers)}),
        (f"{MAPPINGS_PATH}/{INDEXER}", {"backend_roles": list(indexers)}),
    ]


def session_policy(domain_arn: str) -> dict[str, Any]:
    """The assumed search-admin session may PUT exactly the two roles and their two mappings."""
    paths = [f"{base}/{name}" for base in (ROLES_PATH, MAPPINGS_PATH) for name in (READER, INDEXER)]
    return {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": "es:ESHttpPut", "Resource": [f"{domain_arn}/{p}" for p in paths]}],
    }


def admin_client(endpoint: str, *, admin_role_arn: str, domain_arn: str, region: str) -> Any:
    """An OpenSearch client signed (SigV4) as the search-admin role, narrowed by `session_policy`."""
    from fleetmem.adapters.aws import sdk_client
    from fleetmem.adapters.aws.opensearch import build_client
    from fleetmem.adapters.aws.sdk_clients import new_session

    creds = sdk_client("search_admin_session", region=region).assume_role(
        RoleArn=admin_role_arn,
        RoleSessionName=SESSION_NAME,
        Policy=json.dumps(session_policy(domain_arn)),
        DurationSeconds=SESSION_SECONDS,
    )["Credentials"]
    session = new_session(
        aws_access_key_id=creds["AccessKeyId"],
        aws_secret_access_key=creds["SecretAccessKey"],
        aws_session_token=creds["SessionToken"],
        region_name=region,
    )
    return build_client(endpoint, service="es", region=region, session=session, purpose="search_roles")


def put_roles(client: Any, index_pattern: str, readers: list[str], indexers: list[str]) -> list[str]:
    """PUT every role and mapping (`role_requests`), in order; the paths written. The first refusal
    stops it with `SecurityApiRefused`, naming the path, the status and OpenSearch's reason."""
    from opensearchpy.exceptions import OpenSearchException, TransportError

    done = []
    for path, body in role_requests(index_pattern, readers, indexers):
        try:
            client.transport.perform_request("PUT", f"/{path}", body=body)
        except TransportError as exc:
            status = exc.status_code if isinstance(exc.status_code, int) else "no answer"
            raise SecurityApiRefused(
                f"the search domain's security API refused PUT /{path} (status {status}): {_reason(exc)}. "
                "The search-admin role must be the domain's fine-grained access control master "
                "(docs/deploy.md section 4f)"
            ) from None
        except OpenSearchException as exc:
            raise SecurityApiRefused(f"PUT /{path} to the search domain failed: {type(exc).__name__}") from None
        done.append(path)
    return done


def _reason(exc: Any) -> str:
    """OpenSearch's own words for a refusal (its `message`/`reason`), shortened; never a header."""
    info = exc.info if isinstance(exc.info, dict) else {}
    error = info.get("error")
    text = (
        info.get("message")
        or (error.get("reason") if isinstance(error, dict) else error)
        or exc.error
        or "no reason given"
    )
    return str(text)[:300]
