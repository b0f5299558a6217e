"""Settings are read by role: a verb function reads what opening the backend needs, and a setting
only the edge, the authorizer or the client uses cannot stop it."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetmem.config import (
    ENV_AUTHORIZER_CACHE_TTL_S,
    ENV_HOOK_TIMEOUT,
    ENV_INVOKE_READ_TIMEOUT_S,
    ENV_STATE_DIR,
    ENV_TABLE_PREFIX,
    ENV_USAGE_KEY_SECRETS,
    AuthSettings,
    ClientSettings,
    EdgeSettings,
    Settings,
)


def test_a_verb_function_starts_whatever_the_edge_and_authorizer_settings_hold(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(ENV_AUTHORIZER_CACHE_TTL_S, "thirty")
    monkeypatch.setenv(ENV_INVOKE_READ_TIMEOUT_S, "soon")
    monkeypatch.setenv(ENV_USAGE_KEY_SECRETS, "[not json")
    monkeypatch.setenv(ENV_TABLE_PREFIX, "acme")
    assert Settings.from_env().aws.table_prefix == "acme"
    with pytest.raises(ValueError, match=ENV_AUTHORIZER_CACHE_TTL_S):
        AuthSettings.from_env()
    with pytest.raises(ValueError, match=ENV_INVOKE_READ_TIMEOUT_S):
        EdgeSettings.from_env()


def test_the_client_settings_come_from_one_place(tmp_path: Path):
    env = {ENV_HOOK_TIMEOUT: "2.5", ENV_STATE_DIR: str(tmp_path), "FLEETMEM_FAIL_ON_EMPTY": "1"}
    client = ClientSettings.from_env(env)
    assert (client.hook_timeout_s, client.state_dir, client.fail_on_empty) == (2.5, tmp_path, True)
    assert ClientSettings.from_env({ENV_HOOK_TIMEOUT: "-1"}).hook_timeout_s is None
