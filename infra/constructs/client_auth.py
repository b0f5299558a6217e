"""Client credentials: a Cognito user pool for OAuth client-credentials callers and the clients
table (API tokens, created by `fleetmem token create --backend aws`). The pool has no human users:
it is a machine-to-machine token issuer whose resource server exposes the protocol's scopes.

The pool's app clients are not in the template: `fleetmem stage clients sync` creates one per
configured client through the Cognito API and maps it to (tenant, client, tier) in the clients
table, so a stage's template does not grow with its clients (docs/deploy.md, "Clients and tiers")."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_cognito as cognito

from constructs import Construct
from fleetmem.protocol import SCOPES

from ..config import DeployConfig
from .common import acknowledge

RESOURCE_SERVER = "fleetmem"
_SCOPE_TEXT = {
    "read": "Read memory: recall, entity, synthesize, context_pack, delta, get_page, list_pages",
    "write": "Write memory: remember, forget, put_page, delete_page (implies read)",
    "admin": "Administer memory: trace_fact, purge_fact, credentials (implies write)",
}


class ClientAuth(Construct):
    def __init__(self, scope: Construct, id: str, *, config: DeployConfig) -> None:
        super().__init__(scope, id)
        stack = cdk.Stack.of(self)
        self.pool = cognito.UserPool(
            self,
            "Pool",
            user_pool_name=config.prefix,
            self_sign_up_enabled=False,
            password_policy=cognito.PasswordPolicy(
                min_length=14,
                require_digits=True,
                require_lowercase=True,
                require_uppercase=True,
                require_symbols=True,
            ),
            mfa=cognito.Mfa.REQUIRED,
            mfa_second_factor=cognito.MfaSecondFactor(otp=True, sms=False),
            account_recovery=cognito.AccountRecovery.NONE,
            deletion_protection=config.tables.deletion_protection,
            removal_policy=cdk.RemovalPolicy.RETAIN if config.tables.retain_on_delete else cdk.RemovalPolicy.DESTROY,
        )
        acknowledge(
            self.pool,
            "AwsSolutions-COG3",
            "The pool has no users (self sign-up off; only client-credentials app clients), so "
            "user-risk threat protection (Plus plan) has nothing to protect.",
        )
        acknowledge(
            self.pool,
            "AwsSolutions-COG8",
            "Plus-plan features (threat protection, passwordless) protect human users; this pool "
            "issues client-credentials tokens only.",
        )
        self.scopes = {s: cognito.ResourceServerScope(scope_name=s, scope_description=_SCOPE_TEXT[s]) for s in SCOPES}
        self.resource_server = self.pool.add_resource_server(
            "ResourceServer", identifier=RESOURCE_SERVER, scopes=list(self.scopes.values())
        )
        self.domain = self.pool.add_domain(
            "Domain", cognito_domain=cognito.CognitoDomainOptions(domain_prefix=config.cognito_domain_prefix)
        )
        self.token_endpoint = (
            f"https://{config.cognito_domain_prefix}.auth.{stack.region}.amazoncognito.com/oauth2/token"
        )
        self.issuer = f"https://cognito-idp.{stack.region}.amazonaws.com/{self.pool.user_pool_id}"
