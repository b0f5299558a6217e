"""Process-wide state of one Lambda sandbox, built on first use from the environment: `Settings`
(every function), and the edge's, the authorizer's and the scheduled jobs' own settings, read only
by the function that plays that role."""

from __future__ import annotations

import functools
from typing import Any

from fleetmem.config import AuthSettings, EdgeSettings, JobSettings, Settings
from fleetmem.ports import Auth, Deps


@functools.lru_cache(maxsize=1)
def settings() -> Settings:
    return Settings.from_env()


@functools.lru_cache(maxsize=1)
def edge_settings() -> EdgeSettings:
    return EdgeSettings.from_env()


@functools.lru_cache(maxsize=1)
def auth_settings() -> AuthSettings:
    return AuthSettings.from_env()


def job_settings() -> JobSettings:
    """Read on every wake (one variable): the heartbeat table as the stage has it now."""
    return JobSettings.from_env()


def get_deps() -> Deps:
    from fleetmem.wiring import build_deps

    return build_deps(settings())


def get_auth(deps: Deps | None = None) -> Auth:
    from fleetmem.wiring import build_auth

    return build_auth(deps or get_deps(), auth_settings() if settings().backend == "aws" else None)


@functools.lru_cache(maxsize=1)
def signer() -> Any:
    """The invoke-payload signer: one per sandbox, holding the stage's current and previous HMAC
    keys from Secrets Manager, re-read every `signing_key_ttl_s` and when a signature names a key
    it does not hold (`fleetmem.adapters.aws.signing_keys`)."""
    from fleetmem.wiring import build_signer

    return build_signer(settings())


@functools.lru_cache(maxsize=1)
def edge_invoker() -> Any:
    from fleetmem.wiring import build_lambda_invoker

    return build_lambda_invoker(settings(), edge_settings(), signer())


@functools.lru_cache(maxsize=1)
def delivery() -> Any:
    from fleetmem.wiring import build_delivery

    return build_delivery(settings())


def reset() -> None:
    """Forget everything cached (tests change the environment between cases)."""
    from fleetmem.wiring import clear_auth_cache

    for cached in (settings, edge_settings, auth_settings, signer, edge_invoker, delivery):
        getattr(cached, "cache_clear", lambda: None)()  # tests may have replaced one
    clear_auth_cache()
