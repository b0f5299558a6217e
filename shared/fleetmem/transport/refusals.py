"""HTTP-level refusals as the one envelope every error uses (AGENT_OPERATOR): 401 (`unauthorized_error`,
its fix the server's own `token create`), 400, 404, 405, 406, 413, 403/421 and 5xx, for answers the
guard gives and for non-JSON answers from below it (`status_refusal`)."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from starlette.responses import JSONResponse, Response

from fleetmem.contract.correlation import new_correlation_id
from fleetmem.contract.envelope import ErrorEnvelope, http_envelope, internal_envelope
from fleetmem.contract.routes import served
from fleetmem.contract.status import CORRELATION_HEADER
from fleetmem.errors import Fix, VerbError
from fleetmem.protocol import ErrorCode
from fleetmem.transport.http_api import not_json_error

#: What mints a token for this server when nothing more specific is known (`build_mcp_app`'s
#: `token_command` names the server's own store, e.g. the local server's `--data-dir`).
DEFAULT_TOKEN_COMMAND = ("fleetmem", "token", "create", "--client", "my-agent", "--scopes", "read,write")
#: How the operator fills in the `<data_dir>` of a token command that does not show the path.
DATA_DIR_HOW = "the data directory `fleetmem serve` printed at startup (its --data-dir)"


def without_data_dir(
    token_command: Sequence[str], inputs: Sequence[Mapping[str, str]]
) -> tuple[list[str], list[dict[str, str]]]:
    """The token command with its `--data-dir` path replaced by the `<data_dir>` input: a 401 answers
    anyone who reaches the port (another local user, a page in a browser), so it never names the
    server's directory; the startup banner and an authenticated refusal still do."""
    argv, needs = list(token_command), [dict(i) for i in inputs]
    at = argv.index("--data-dir") + 1 if "--data-dir" in argv[:-1] else 0
    if at and argv[at] != "<data_dir>":
        argv[at] = "<data_dir>"
        needs.append({"name": "data_dir", "how": DATA_DIR_HOW})
    return argv, needs


def unauthorized_error(
    *,
    token_presented: bool,
    token_command: Sequence[str] = DEFAULT_TOKEN_COMMAND,
    inputs: Sequence[Mapping[str, str]] = (),
) -> VerbError:
    token_command, inputs = without_data_dir(token_command, inputs)
    command = shlex.join(token_command)
    return VerbError(
        "unauthorized",
        "The token is missing, unknown or revoked." if token_presented else "No bearer token was sent.",
        "Send `Authorization: Bearer <token>` with a valid fleetmem token; the memory host's operator "
        "creates one with the command below.",
        why="Every MCP call is authenticated; the tenant and scopes come from the token.",
        fix=Fix(
            why="Mints a token for one client in the store this server reads; it is printed once.",
            argv=list(token_command),
            actor="host_admin",
            user_message="The memory server did not accept my token. Its operator can create one with "
            f"`{command}`; add it to my MCP configuration as an Authorization: Bearer header.",
            inputs=tuple(dict(i) for i in inputs),
        ),
    )


#: The largest request body POST /mcp accepts (4 MiB, the SDK's own default, which we set
#: explicitly). A page body holds at most 350 KB of UTF-8, which stays far below this even fully
#: JSON-escaped; larger requests answer 413 before anything is parsed.
MAX_REQUEST_BYTES = 4 * 1024 * 1024

#: What this server answers, named in 404 and 405 envelopes.
SERVED = served()


def refusal(
    status: int,
    message: str,
    suggestion: str,
    fix_why: str,
    *,
    code: ErrorCode = "invalid_params",
    detail: Any = None,
    headers: Mapping[str, str] | None = None,
) -> Response:
    """An HTTP-level refusal as the same envelope every error uses (AGENT_OPERATOR). No corrected
    MCP call exists for a malformed HTTP request, so the fix has no step (`next: report`) and its
    `why` says what the client must send instead."""
    error = VerbError(code, message, suggestion, detail=detail, fix=Fix(why=fix_why), klass="caller")
    return refusal_of(status, error, headers)


def refusal_of(status: int, error: VerbError, headers: Mapping[str, str] | None = None) -> Response:
    """`error` as the envelope of an HTTP answer (no call to echo: the `http` transport)."""
    return envelope_response(status, http_envelope(error, correlation_id=new_correlation_id()), headers)


def envelope_response(status: int, envelope: ErrorEnvelope, headers: Mapping[str, str] | None = None) -> Response:
    """The JSON answer carrying `envelope`, with its correlation id as `X-Correlation-Id`."""
    cid = envelope.correlation_id
    return JSONResponse(envelope.body(), status_code=status, headers={CORRELATION_HEADER: cid, **(headers or {})})


def status_refusal(status: int, method: str, path: str, headers: Mapping[str, str] | None = None) -> Response:
    """The envelope for a non-2xx answer produced below the guard (Starlette's router, the SDK's
    transport checks), by status: every non-2xx answer of this server is the JSON envelope."""
    where = f"{method} {path[:200]}"
    if status == 404:
        return refusal(
            404,
            f"Nothing is served at {where}.",
            f"Problem: the path does not exist on this server. Cause: it serves {SERVED} only. "
            "Fix: send MCP messages as POST /mcp.",
            f"The MCP endpoint is POST /mcp; this server serves {SERVED}.",
            code="not_found",
        )
    if status == 405:
        allow = (headers or {}).get("allow", "")
        return refusal(
            405,
            f"{where} is not served: this path answers {allow or 'other methods'} only.",
            f"Problem: the request used a method this path does not answer. Cause: the server serves "
            f"{SERVED}. Fix: use the method the path answers.",
            f"This path answers {allow or 'other methods'}; the MCP endpoint answers POST only.",
            headers={"Allow": allow} if allow else None,
        )
    if status == 413:
        return too_large()
    if status == 400:
        return bad_content_type(f"{method} {path[:200]}")
    if status in (403, 421):
        header, problem = (
            ("Host", "the request is addressed to another host name")
            if status == 421
            else ("Origin", "the request comes from a web page of a foreign origin")
        )
        return refusal(
            status,
            f"{where} was refused: the {header} header does not name this server.",
            f"Problem: {problem}. "
            "Cause: a local server answers only requests for its own address, from its own address "
            "(DNS-rebinding protection). Fix: connect to the URL the server printed at startup, e.g. "
            "http://127.0.0.1:8765/mcp, from a client rather than a web page.",
            "Use the URL the server printed at startup; requests for other host names or from other "
            "web origins are refused.",
            detail={"header": header.lower()},
        )
    if status >= 500:
        return envelope_response(status, internal_envelope(new_correlation_id(), path[:64], transport="http"))
    return refusal(
        status,
        f"{where} was refused (HTTP {status}).",
        f"Problem: the HTTP request was refused. Cause: this server serves {SERVED}. Fix: send MCP "
        "messages as POST /mcp with `Content-Type: application/json` and "
        "`Accept: application/json, text/event-stream`.",
        "The request does not match what the MCP endpoint accepts.",
    )


def too_large() -> Response:
    return refusal(
        413,
        f"The request body is larger than {MAX_REQUEST_BYTES} bytes.",
        f"Problem: the request body exceeds the server's limit of {MAX_REQUEST_BYTES} bytes "
        f"({MAX_REQUEST_BYTES // (1024 * 1024)} MiB). Cause: one request carries one MCP message, and "
        "no tool takes that much text (a page body holds at most 350 KB). Fix: split the content, "
        "e.g. one put_page per section linked with [[slug]] mentions.",
        "Send less in one request: split long text into several pages or facts.",
        detail={"max_bytes": MAX_REQUEST_BYTES},
    )


def bad_content_type(where: str = "POST /mcp") -> Response:
    return refusal_of(400, not_json_error(where))
