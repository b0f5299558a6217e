"""Settings, read once from the environment (and CLI flags that override them).

Every knob the wiring needs lives here, so `fleetmem doctor` can show them and `wiring.py` can
build adapters from one object. Nothing here connects to anything.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path

from fleetmem.protocol import Surface


def default_data_dir() -> Path:
    env = os.environ.get("FLEETMEM_DATA_DIR")
    if env:
        return Path(env).expanduser()
    from platformdirs import user_data_dir

    return Path(user_data_dir("fleetmem", appauthor=False))


def default_model_dir() -> Path:
    env = os.environ.get("FLEETMEM_MODEL_DIR")
    if env:
        return Path(env).expanduser()
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("fleetmem", appauthor=False)) / "models"


def _env(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


@dataclass(frozen=True)
class Settings:
    backend: str = "local"  # local | aws
    data_dir: Path = field(default_factory=default_data_dir)
    #: local embedder: "minilm" (ONNX MiniLM from model_dir), "hash" (tests only), "none"
    embedder: str = "minilm"
    model_dir: Path = field(default_factory=default_model_dir)
    llm: str = "none"  # none | bedrock
    surface: Surface = "full"
    host: str = "127.0.0.1"
    port: int = 8765
    deadline_ms: int = 2000
    #: AWS backend
    region: str = ""
    table_prefix: str = "fleetmem"
    opensearch_endpoint: str = ""
    opensearch_service: str = "es"  # es (managed domain) | aoss (serverless)
    opensearch_index_prefix: str = "fleetmem"
    #: index writes synchronously (no stream indexer runs, e.g. DynamoDB Local + a local engine)
    opensearch_write_through: bool = False
    bedrock_embedding_model: str = "amazon.titan-embed-text-v2:0"
    bedrock_embedding_dim: int = 1024
    bedrock_llm_model: str = ""
    #: Cognito issuer for the protected-resource metadata document (AWS); empty locally.
    authorization_server: str = ""

    @classmethod
    def from_env(cls, **overrides: object) -> Settings:
        s = cls(
            backend=_env("FLEETMEM_BACKEND", "local"),
            embedder=_env("FLEETMEM_EMBEDDER", "minilm"),
            llm=_env("FLEETMEM_LLM", "none"),
            surface=_env("FLEETMEM_SURFACE", "full"),  # type: ignore[arg-type]
            deadline_ms=int(_env("FLEETMEM_DEADLINE_MS", "2000")),
            region=_env("AWS_REGION", _env("AWS_DEFAULT_REGION", "")),
            table_prefix=_env("FLEETMEM_TABLE_PREFIX", "fleetmem"),
            opensearch_endpoint=_env("FLEETMEM_OPENSEARCH_ENDPOINT"),
            opensearch_service=_env("FLEETMEM_OPENSEARCH_SERVICE", "es"),
            opensearch_index_prefix=_env("FLEETMEM_OPENSEARCH_INDEX_PREFIX", "fleetmem"),
            opensearch_write_through=_env("FLEETMEM_OPENSEARCH_WRITE_THROUGH").lower()
            in {"1", "true", "yes"},
            bedrock_embedding_model=_env("FLEETMEM_BEDROCK_EMBEDDING_MODEL", "amazon.titan-embed-text-v2:0"),
            bedrock_embedding_dim=int(_env("FLEETMEM_BEDROCK_EMBEDDING_DIM", "1024")),
            bedrock_llm_model=_env("FLEETMEM_BEDROCK_LLM_MODEL"),
            authorization_server=_env("FLEETMEM_AUTHORIZATION_SERVER"),
        )
        clean = {k: v for k, v in overrides.items() if v is not None}
        if "data_dir" in clean:
            clean["data_dir"] = Path(str(clean["data_dir"])).expanduser()
        return replace(s, **clean)  # type: ignore[arg-type]
