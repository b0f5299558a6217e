"""Settings, read once from the environment (and CLI flags that override them).

Every knob the wiring needs lives here, so `fleetmem doctor` can show them and `wiring.py` can
build adapters from one object. Nothing here connects to anything. The environment variable
names are defined once, below; the CDK app (`infra/`) imports them to set them on the functions.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from fleetmem.protocol import CORE_CHARS_DEFAULT, IDEMPOTENCY_LEASE_SECONDS, IDEMPOTENCY_TTL_HOURS, Surface

# Environment variable names (the CDK app sets them with these constants).
ENV_BACKEND = "FLEETMEM_BACKEND"
ENV_DATA_DIR = "FLEETMEM_DATA_DIR"
ENV_MODEL_DIR = "FLEETMEM_MODEL_DIR"
ENV_EMBEDDER = "FLEETMEM_EMBEDDER"
ENV_LLM = "FLEETMEM_LLM"
ENV_SURFACE = "FLEETMEM_SURFACE"
ENV_DEADLINE_MS = "FLEETMEM_DEADLINE_MS"
#: D32: the context_pack core block's character limit (0: core memory off)
ENV_CORE_CHARS = "FLEETMEM_CORE_CHARS"
ENV_TABLE_PREFIX = "FLEETMEM_TABLE_PREFIX"
ENV_OPENSEARCH_ENDPOINT = "FLEETMEM_OPENSEARCH_ENDPOINT"
ENV_OPENSEARCH_SERVICE = "FLEETMEM_OPENSEARCH_SERVICE"
ENV_OPENSEARCH_INDEX_PREFIX = "FLEETMEM_OPENSEARCH_INDEX_PREFIX"
ENV_OPENSEARCH_WRITE_THROUGH = "FLEETMEM_OPENSEARCH_WRITE_THROUGH"
#: replicas of a docs index this stage creates (node count - 1, capped; 0: a one-node domain stays green)
ENV_OPENSEARCH_REPLICAS = "FLEETMEM_OPENSEARCH_REPLICAS"
ENV_BEDROCK_EMBEDDING_MODEL = "FLEETMEM_BEDROCK_EMBEDDING_MODEL"
ENV_BEDROCK_EMBEDDING_DIM = "FLEETMEM_BEDROCK_EMBEDDING_DIM"
ENV_BEDROCK_LLM_MODEL = "FLEETMEM_BEDROCK_LLM_MODEL"
ENV_AUTHORIZATION_SERVER = "FLEETMEM_AUTHORIZATION_SERVER"
ENV_PUBLIC_URL = "FLEETMEM_PUBLIC_URL"
#: tool name -> deployed function name (JSON), on the edge
ENV_TOOL_FUNCTIONS = "FLEETMEM_TOOL_FUNCTIONS"
ENV_COGNITO_ISSUER = "FLEETMEM_COGNITO_ISSUER"
ENV_COGNITO_RESOURCE_SERVER = "FLEETMEM_COGNITO_RESOURCE_SERVER"
#: The stage's OAuth authorization server for people (its issuer URL), the JWKS its access tokens
#: are signed with (default: `<issuer>/.well-known/jwks.json`), and the stage's `/mcp` URL, the
#: audience those tokens must name (RFC 8707).
ENV_OAUTH_ISSUER = "FLEETMEM_OAUTH_ISSUER"
ENV_OAUTH_JWKS_URL = "FLEETMEM_OAUTH_JWKS_URL"
ENV_OAUTH_RESOURCE = "FLEETMEM_OAUTH_RESOURCE"
#: tier -> Secrets Manager ARN of that tier's usage-plan key (JSON), on the authorizer
ENV_USAGE_KEY_SECRETS = "FLEETMEM_USAGE_KEY_SECRETS"
#: the tier of a client whose clients-table item names none (or a tier the stage does not have)
ENV_DEFAULT_TIER = "FLEETMEM_DEFAULT_TIER"
#: Secrets Manager ARN of the per-stage HMAC key the edge signs invoke payloads with
ENV_INVOKE_SIGNING_SECRET_ARN = "FLEETMEM_INVOKE_SIGNING_SECRET_ARN"  # noqa: S105 (a variable name)
#: seconds a sandbox keeps the signing keys it read before reading them again (key rotation)
ENV_SIGNING_KEY_TTL_S = "FLEETMEM_SIGNING_KEY_TTL_S"
DEFAULT_SIGNING_KEY_TTL_S = 300
#: D14 on DynamoDB: milliseconds a change must be old before delta lists it (covers GSI propagation)
ENV_CHANGE_SETTLE_MS = "FLEETMEM_CHANGE_SETTLE_MS"
#: seconds the edge waits for a verb function's answer (below the API integration timeout)
ENV_INVOKE_READ_TIMEOUT_S = "FLEETMEM_INVOKE_READ_TIMEOUT_S"
#: JSON tool -> seconds the edge waits for that tool's function (set by the CDK app).
ENV_INVOKE_DEADLINES_S = "FLEETMEM_INVOKE_DEADLINES_S"
#: How long API Gateway caches an authorizer answer (seconds): the bound on revocation on AWS.
ENV_AUTHORIZER_CACHE_TTL_S = "FLEETMEM_AUTHORIZER_CACHE_TTL_S"
DEFAULT_AUTHORIZER_CACHE_TTL_S = 30
#: The stage's heartbeats, set at deploy: name -> {tenant, client_id, session_id, budget_tokens, destination}.
ENV_HEARTBEATS = "FLEETMEM_HEARTBEATS"
#: threads `fleetmem serve` runs calls on at once (the rest wait their turn)
ENV_CALL_THREADS = "FLEETMEM_CALL_THREADS"
ENV_CONSOLE = "FLEETMEM_CONSOLE"
#: D2: seconds an in-flight idempotency claim holds its key before a retry may take it over
ENV_IDEMPOTENCY_LEASE_S = "FLEETMEM_IDEMPOTENCY_LEASE_S"
#: client side: a saved endpoint, the bearer token, where profiles and hook state live, the MCP
#: mode of the remote lane, the hook timeout, and the verb subcommands' exit code on an empty result
ENV_PROFILE = "FLEETMEM_PROFILE"
ENV_TOKEN = "FLEETMEM_TOKEN"  # noqa: S105 (a variable name)
ENV_CONFIG_DIR = "FLEETMEM_CONFIG_DIR"
ENV_STATE_DIR = "FLEETMEM_STATE_DIR"
ENV_MCP_MODE = "FLEETMEM_MCP_MODE"
ENV_HOOK_TIMEOUT = "FLEETMEM_HOOK_TIMEOUT"
ENV_FAIL_ON_EMPTY = "FLEETMEM_FAIL_ON_EMPTY"
#: D29: the operator's addition to the MCP server instructions (a deployment identity), after the
#: operating contract; capped (`fleetmem.transport.instructions.OPERATOR_MAX_CHARS`).
ENV_MCP_INSTRUCTIONS = "FLEETMEM_MCP_INSTRUCTIONS"

ENV_REGION = "AWS_REGION"
#: D30: an OpenAI-compatible chat-completions server for synthesize (FLEETMEM_LLM=openai)
ENV_LLM_BASE_URL = "FLEETMEM_LLM_BASE_URL"
ENV_LLM_MODEL = "FLEETMEM_LLM_MODEL"
ENV_LLM_API_KEY = "FLEETMEM_LLM_API_KEY"
ENV_LLM_TIMEOUT_S = "FLEETMEM_LLM_TIMEOUT_S"
#: D30: synthesize's quote check (on by default; off leaves the model's quotes as written)
ENV_QUOTE_CHECK = "FLEETMEM_QUOTE_CHECK"
ENV_DEFAULT_REGION = "AWS_DEFAULT_REGION"


def default_data_dir() -> Path:
    env = os.environ.get(ENV_DATA_DIR)
    if env:
        return Path(env).expanduser()
    from platformdirs import user_data_dir

    return Path(user_data_dir("fleetmem", appauthor=False))


def default_model_dir() -> Path:
    env = os.environ.get(ENV_MODEL_DIR)
    if env:
        return Path(env).expanduser()
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("fleetmem", appauthor=False)) / "models"


def _env(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


#: `fleetmem serve`'s call threads: a few per core. The server's Python work holds one interpreter
#: lock, so dozens of threads mostly wait on each other (README, "Fleet throughput").
DEFAULT_CALL_THREADS = 8
CALL_THREADS_MAX = 256


def whole_number(text: str, low: int, high: int) -> int:
    """`text` as a whole number in low..high, else ValueError saying so (for flags and variables)."""
    try:
        value = int(text)
    except ValueError:
        value = low - 1
    if not low <= value <= high:
        raise ValueError(f"must be a whole number from {low} to {high} (got {text!r})")
    return value


def call_threads_value(text: str) -> int:
    """`$FLEETMEM_CALL_THREADS`: 1..CALL_THREADS_MAX; the error names the variable and the fix."""
    try:
        return whole_number(text, 1, CALL_THREADS_MAX)
    except ValueError as exc:
        raise ValueError(
            f"{ENV_CALL_THREADS} {exc}; Unset {ENV_CALL_THREADS} or pass --threads {DEFAULT_CALL_THREADS}."
        ) from None


def replicas_value(text: str) -> int:
    """`$FLEETMEM_OPENSEARCH_REPLICAS`: 0..15 replicas per docs index."""
    try:
        return whole_number(text, 0, 15)
    except ValueError as exc:
        raise ValueError(f"{ENV_OPENSEARCH_REPLICAS} {exc}; Unset it for 0 (a one-node domain).") from None


def idempotency_lease_value(text: str) -> int:
    """`$FLEETMEM_IDEMPOTENCY_LEASE_S`: whole seconds, at least 1 and at most the key's lifetime."""
    try:
        return whole_number(text, 1, IDEMPOTENCY_TTL_HOURS * 3600)
    except ValueError as exc:
        raise ValueError(
            f"{ENV_IDEMPOTENCY_LEASE_S} {exc}; Unset {ENV_IDEMPOTENCY_LEASE_S} for the default "
            f"({IDEMPOTENCY_LEASE_SECONDS} s)."
        ) from None


def _flag(name: str) -> bool:
    return _env(name).lower() in {"1", "true", "yes"}


def _switch(name: str, default: bool) -> bool:
    """An on/off environment variable (`default` when unset), else a ValueError naming it."""
    text = _env(name).lower()
    if not text:
        return default
    if text in {"1", "true", "yes", "on"}:
        return True
    if text in {"0", "false", "no", "off"}:
        return False
    raise ValueError(f"{name} must be on or off (got {text!r}); unset it for {'on' if default else 'off'}")


def _int(name: str, default: int) -> int:
    """The whole number in environment variable `name` (`default` when unset), else a ValueError
    that names the variable."""
    text = _env(name)
    if not text:
        return default
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{name} must be a whole number (got {text!r}); unset it for {default}") from None


# Settings are grouped by who reads them. `Settings` is what every process that opens the
# backend reads (verbs, `fleetmem serve`, the CLI); the edge, the authorizer, the scheduled jobs
# and the client each read their own group, so a verb function never parses what it does not use.


@dataclass(frozen=True)
class ServeSettings:
    """`fleetmem serve`, the local MCP server."""

    host: str = "127.0.0.1"
    port: int = 8765
    #: calls run on at most this many threads at once
    call_threads: int = DEFAULT_CALL_THREADS
    #: Cognito issuer for the protected-resource metadata document (the edge's MCP app too).
    authorization_server: str = ""
    #: the memory console at /console (`--no-console` or FLEETMEM_CONSOLE=off turns it off)
    console: bool = True

    @classmethod
    def from_env(cls) -> ServeSettings:
        return cls(
            call_threads=call_threads_value(_env(ENV_CALL_THREADS) or str(DEFAULT_CALL_THREADS)),
            authorization_server=_env(ENV_AUTHORIZATION_SERVER),
            console=_switch(ENV_CONSOLE, True),
        )


@dataclass(frozen=True)
class AwsSettings:
    """The AWS backend's DynamoDB stores."""

    region: str = ""
    table_prefix: str = "fleetmem"
    #: D14 settle horizon for the DynamoDB change indexes (0: read them as written, e.g. DynamoDB Local)
    change_settle_ms: int = 0

    @classmethod
    def from_env(cls) -> AwsSettings:
        return cls(
            region=_env(ENV_REGION, _env(ENV_DEFAULT_REGION, "")),
            table_prefix=_env(ENV_TABLE_PREFIX, "fleetmem"),
            change_settle_ms=_int(ENV_CHANGE_SETTLE_MS, 0),
        )


@dataclass(frozen=True)
class SearchSettings:
    """The AWS backend's OpenSearch index."""

    endpoint: str = ""
    service: str = "es"  # es (managed domain) | aoss (serverless)
    index_prefix: str = "fleetmem"
    replicas: int = 0
    #: index writes synchronously (no stream indexer runs, e.g. DynamoDB Local + a local engine)
    write_through: bool = False

    @classmethod
    def from_env(cls) -> SearchSettings:
        return cls(
            endpoint=_env(ENV_OPENSEARCH_ENDPOINT),
            service=_env(ENV_OPENSEARCH_SERVICE, "es"),
            index_prefix=_env(ENV_OPENSEARCH_INDEX_PREFIX, "fleetmem"),
            replicas=replicas_value(_env(ENV_OPENSEARCH_REPLICAS) or "0"),
            write_through=_flag(ENV_OPENSEARCH_WRITE_THROUGH),
        )


@dataclass(frozen=True)
class BedrockSettings:
    """The AWS backend's embedding model and LLM."""

    embedding_model: str = "amazon.titan-embed-text-v2:0"
    embedding_dim: int = 1024
    llm_model: str = ""

    @classmethod
    def from_env(cls) -> BedrockSettings:
        return cls(
            embedding_model=_env(ENV_BEDROCK_EMBEDDING_MODEL, "amazon.titan-embed-text-v2:0"),
            embedding_dim=_int(ENV_BEDROCK_EMBEDDING_DIM, 1024),
            llm_model=_env(ENV_BEDROCK_LLM_MODEL),
        )


@dataclass(frozen=True)
class LlmSettings:
    """synthesize's model when `FLEETMEM_LLM=openai` (any OpenAI-compatible chat-completions
    server: Ollama, llama.cpp's server, vLLM), and the quote check switch (every backend)."""

    base_url: str = ""
    model: str = ""
    api_key: str = field(default="", repr=False)
    timeout_s: int = 60
    quote_check: bool = True

    @classmethod
    def from_env(cls) -> LlmSettings:
        return cls(
            base_url=_env(ENV_LLM_BASE_URL),
            model=_env(ENV_LLM_MODEL),
            api_key=_env(ENV_LLM_API_KEY),
            timeout_s=_int(ENV_LLM_TIMEOUT_S, 60),
            quote_check=_switch(ENV_QUOTE_CHECK, True),
        )


@dataclass(frozen=True)
class SigningSettings:
    """The invoke-payload key: the edge signs with it, every verb function checks with it."""

    secret_arn: str = ""
    key_ttl_s: int = DEFAULT_SIGNING_KEY_TTL_S

    @classmethod
    def from_env(cls) -> SigningSettings:
        ttl = _int(ENV_SIGNING_KEY_TTL_S, DEFAULT_SIGNING_KEY_TTL_S)
        return cls(secret_arn=_env(ENV_INVOKE_SIGNING_SECRET_ARN), key_ttl_s=ttl)


@dataclass(frozen=True)
class Settings:
    """What a process that opens the backend reads: a verb, `fleetmem serve`, the CLI."""

    backend: str = "local"  # local | aws
    data_dir: Path = field(default_factory=default_data_dir)
    #: local embedder: "minilm" (ONNX MiniLM from model_dir), "hash" (tests only), "none"
    embedder: str = "minilm"
    model_dir: Path = field(default_factory=default_model_dir)
    llm: str = "none"  # none | bedrock | openai
    surface: Surface = "full"
    deadline_ms: int = 2000
    #: D2: seconds an in-flight idempotency claim holds its key (keep it above any write's run time)
    idempotency_lease_s: int = IDEMPOTENCY_LEASE_SECONDS
    serve: ServeSettings = ServeSettings()
    aws: AwsSettings = AwsSettings()
    search: SearchSettings = SearchSettings()
    bedrock: BedrockSettings = BedrockSettings()
    signing: SigningSettings = SigningSettings()
    chat: LlmSettings = LlmSettings()
    #: D32: the most characters of the context_pack core block (0: core memory off)
    core_chars: int = CORE_CHARS_DEFAULT

    @classmethod
    def from_env(cls, *, serve: dict[str, Any] | None = None, **overrides: object) -> Settings:
        """From the environment; `overrides` (None values ignored) replace fields, `serve` the
        local server's."""
        s = cls(
            backend=_env(ENV_BACKEND, "local"),
            embedder=_env(ENV_EMBEDDER, "minilm"),
            llm=_env(ENV_LLM, "none"),
            surface=_env(ENV_SURFACE, "full"),  # type: ignore[arg-type]
            deadline_ms=_int(ENV_DEADLINE_MS, 2000),
            idempotency_lease_s=idempotency_lease_value(
                _env(ENV_IDEMPOTENCY_LEASE_S) or str(IDEMPOTENCY_LEASE_SECONDS)
            ),
            serve=ServeSettings.from_env(),
            aws=AwsSettings.from_env(),
            search=SearchSettings.from_env(),
            bedrock=BedrockSettings.from_env(),
            signing=SigningSettings.from_env(),
            chat=LlmSettings.from_env(),
            core_chars=max(0, _int(ENV_CORE_CHARS, CORE_CHARS_DEFAULT)),
        )
        clean = {k: v for k, v in overrides.items() if v is not None}
        if "data_dir" in clean:
            clean["data_dir"] = Path(str(clean["data_dir"])).expanduser()
        served = {k: v for k, v in (serve or {}).items() if v is not None}
        if served:
            clean["serve"] = replace(s.serve, **served)
        return replace(s, **clean)  # type: ignore[arg-type]


@dataclass(frozen=True)
class EdgeSettings:
    """The edge function (MCP and /v1 on Lambda): where it is reached and the verb functions it
    invokes. JSON values stay text so the settings stay hashable; the properties parse."""

    public_url: str = ""
    #: tool -> deployed function name (JSON)
    tool_functions_json: str = ""
    invoke_read_timeout_s: int = 26
    invoke_deadlines_json: str = ""

    @property
    def tool_functions(self) -> dict[str, str]:
        """tool -> deployed function name."""
        return _json(self.tool_functions_json, {})

    @property
    def invoke_deadlines(self) -> dict[str, int]:
        """tool -> seconds the edge waits for its function (at most `invoke_read_timeout_s`)."""
        return {str(k): int(v) for k, v in _json(self.invoke_deadlines_json, {}).items()}

    @classmethod
    def from_env(cls) -> EdgeSettings:
        return cls(
            public_url=_env(ENV_PUBLIC_URL).rstrip("/"),
            tool_functions_json=_env(ENV_TOOL_FUNCTIONS),
            invoke_read_timeout_s=_int(ENV_INVOKE_READ_TIMEOUT_S, 26),
            invoke_deadlines_json=_env(ENV_INVOKE_DEADLINES_S),
        )


@dataclass(frozen=True)
class AuthSettings:
    """The authorizer's: Cognito access tokens (their app clients are mapped in the clients table),
    people's access tokens from the stage's OAuth issuer (people mapped there too), and the
    usage-plan key of each tier it hands API Gateway."""

    cognito_issuer: str = ""
    cognito_resource_server: str = "fleetmem"
    #: people's tokens: the one OAuth issuer, its JWKS and the audience they must name (empty: off)
    oauth_issuer: str = ""
    oauth_jwks_url: str = ""
    oauth_resource: str = ""
    usage_key_secrets_json: str = ""
    default_tier: str = "standard"
    authorizer_cache_ttl_s: int = DEFAULT_AUTHORIZER_CACHE_TTL_S

    @property
    def usage_key_secrets(self) -> dict[str, str]:
        """tier -> Secrets Manager ARN of its usage-plan key."""
        return _json(self.usage_key_secrets_json, {})

    @classmethod
    def from_env(cls) -> AuthSettings:
        return cls(
            cognito_issuer=_env(ENV_COGNITO_ISSUER),
            cognito_resource_server=_env(ENV_COGNITO_RESOURCE_SERVER, "fleetmem"),
            oauth_issuer=_env(ENV_OAUTH_ISSUER),
            oauth_jwks_url=_env(ENV_OAUTH_JWKS_URL),
            oauth_resource=_env(ENV_OAUTH_RESOURCE),
            usage_key_secrets_json=_env(ENV_USAGE_KEY_SECRETS),
            default_tier=_env(ENV_DEFAULT_TIER, "standard"),
            authorizer_cache_ttl_s=_int(ENV_AUTHORIZER_CACHE_TTL_S, DEFAULT_AUTHORIZER_CACHE_TTL_S),
        )


@dataclass(frozen=True)
class JobSettings:
    """The scheduled jobs' (heartbeats)."""

    heartbeats_json: str = ""

    @property
    def heartbeats(self) -> dict[str, dict[str, Any]]:
        """heartbeat name -> its wake payload, as the deploy config defines it."""
        return _json(self.heartbeats_json, {})

    @classmethod
    def from_env(cls) -> JobSettings:
        return cls(heartbeats_json=_env(ENV_HEARTBEATS))


@dataclass(frozen=True)
class ClientSettings:
    """The client side's (the CLI on an endpoint, hooks, profiles); read when a command needs them."""

    #: a saved endpoint (`fleetmem profile`)
    profile: str = ""
    #: the bearer token when no token file is named
    token: str = ""
    config_dir: Path | None = None
    state_dir: Path | None = None
    #: how the remote lane speaks MCP (empty: its default)
    mcp_mode: str = ""
    #: seconds a hook waits for the memory (None: the hook's own default)
    hook_timeout_s: float | None = None
    #: verb subcommands exit non-zero on an empty result
    fail_on_empty: bool = False

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ClientSettings:
        env = os.environ if env is None else env
        return cls(
            profile=env.get(ENV_PROFILE, ""),
            token=env.get(ENV_TOKEN, "").strip(),
            config_dir=_path(env.get(ENV_CONFIG_DIR)),
            state_dir=_path(env.get(ENV_STATE_DIR)),
            mcp_mode=env.get(ENV_MCP_MODE, ""),
            hook_timeout_s=_positive(env.get(ENV_HOOK_TIMEOUT, "")),
            fail_on_empty=env.get(ENV_FAIL_ON_EMPTY) == "1",
        )


def _path(text: str | None) -> Path | None:
    return Path(text).expanduser() if text else None


def _positive(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if value > 0 else None


def _json(text: str, default: Any) -> Any:
    return json.loads(text) if text.strip() else default


def mcp_instructions_from_env(env: Mapping[str, str] | None = None) -> str | None:
    """`$FLEETMEM_MCP_INSTRUCTIONS`, or None when unset or blank."""
    value = (os.environ if env is None else env).get(ENV_MCP_INSTRUCTIONS, "")
    return value if value.strip() else None
