"""Process-wide state of one Lambda sandbox, built on first use from `Settings.from_env()`."""

from __future__ import annotations

import functools
from typing import Any

from fleetmem.config import Settings
from fleetmem.ports import Auth, Deps


@functools.lru_cache(maxsize=1)
def settings() -> Settings:
    return Settings.from_env()


def get_deps() -> Deps:
    from fleetmem.wiring import build_deps

    return build_deps(settings())


def get_auth(deps: Deps | None = None) -> Auth:
    from fleetmem.wiring import build_auth

    return build_auth(deps or get_deps(), settings())


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

    return build_lambda_invoker(settings(), signer())


@functools.lru_cache(maxsize=1)
def delivery() -> Any:
    from fleetmem.wiring import build_delivery

    return build_delivery(settings())


def reset() -> None:
    """Forget everything cached (tests change the environment between cases)."""
    from fleetmem.wiring import clear_auth_cache

    for cached in (settings, signer, edge_invoker, delivery):
        getattr(cached, "cache_clear", lambda: None)()  # tests may have replaced one
    clear_auth_cache()
