from __future__ import annotations

import pytest

from .authorization_server import issuer


@pytest.fixture(scope="session")
def oauth_issuer(request: pytest.FixtureRequest) -> str:
    return issuer(request.config)
