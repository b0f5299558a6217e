"""Fixtures of the AWS adapter tests: real local engines on 127.0.0.1 free ports."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

_ROOT = Path(__file__).resolve().parents[2]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from tests.aws import engines  # noqa: E402


@pytest.fixture(scope="session")
def moto_endpoint(request: pytest.FixtureRequest) -> str:
    return engines.moto_endpoint(request.config)


@pytest.fixture(scope="session")
def dynamodb_local_endpoint(request: pytest.FixtureRequest) -> str:
    return engines.dynamodb_local_endpoint(request.config)


@pytest.fixture(params=["moto", "dynamodb-local"])
def ddb_endpoint(request: pytest.FixtureRequest) -> str:
    """Each test using this runs on both local DynamoDB engines."""
    if request.param == "moto":
        return engines.moto_endpoint(request.config)
    return engines.dynamodb_local_endpoint(request.config)
