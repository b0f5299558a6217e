"""The deployed AWS shape on 127.0.0.1 (`scripts/stack`; the end-to-end test shares one per session).

What runs, each a real component:

- DynamoDB Local (streams on) with the stage's tables; the OpenSearch 2.19.1 + k-NN test node with
  the stage's index; moto's server for Secrets Manager (the invoke-signing key and one usage-plan
  key per tier), SQS and EventBridge (heartbeat destinations) — the engines of tests/aws/engines.py.
- The Lambda asset `scripts/build-lambda` builds (reused while its sources are unchanged), and every
  function of `functions/` as its own process from it: the AWS Lambda Runtime Interface Emulator
  (`aws-lambda-rie`, built from its Go module by scripts/lib/rie.sh) running the deployed Python
  with `awslambdaric`, the runtime interface client, so events and answers are marshalled by AWS's
  own code. The runtime directory (boto3 + awslambdaric, as /var/runtime holds them) sits after
  the asset on the path; the asset itself ships neither.
- The Lambda Invoke API (`InvokeRouter`): `POST /2015-03-31/functions/<name>/invocations` to the
  named function's emulator. The edge's boto3 Lambda client reaches it through
  `AWS_ENDPOINT_URL_LAMBDA`, with the signed payloads of a deployed stage.
- The DynamoDB Streams event source mapping (`RetryingPump`): the streams are polled and each batch
  (at most the deployed `BATCH_SIZE` records) goes to the indexer function as a DynamoDB Streams
  event; a partial-batch answer is retried from its lowest failed record, up to the deployed
  `RETRY_ATTEMPTS`, then the batch is skipped (what the deployed mapping sends its DLQ is kept in
  `pump.discarded`). The replay queue (`<prefix>-indexer-replay`) is an SQS queue on moto.
- API Gateway (`Gateway` of tests/functions/gateway.py): HTTP on 127.0.0.1 turned into REST API
  proxy events (payload 1.0, as the CDK `RestApi` sends), the REQUEST authorizer function first,
  its Allow answers cached per Authorization header for `api.authorizer_cache_ttl_s` as the CDK app
  configures, `/mcp` and `GET /v1/tools|openapi.json` to the edge, `POST /v1/<tool>` to the tool's
  function.
- Bedrock embeddings (`BedrockStandIn`): Bedrock cannot run here, so a local endpoint with Bedrock
  Runtime's `InvokeModel` shape answers for one model id, `fleetmem-local.all-minilm-l6-v2`, with
  the local MiniLM vector (384 dimensions) zero-padded to 512 — a Titan V2 size the unchanged
  `BedrockEmbedder` accepts, and cosine is unchanged by zero padding. The functions run with the
  deployed `FLEETMEM_EMBEDDER=bedrock`; only the model id, dimension and Bedrock endpoint differ.
  The same stand-in answers Bedrock Runtime's `Converse` for one chat model id,
  `fleetmem-local.scripted-chat`, with the scripted model of tests/llm_standin.py (no language
  model can run here): the synthesize function runs with `FLEETMEM_LLM=bedrock` and that model id,
  through the unchanged `BedrockLLM`; the other functions have no LLM, as a stage's.

People's OAuth sign-in, when a stack is given `oauth_issuer` (a deploy config's `oauth`): the
authorizer checks people's tokens from that issuer for this stack's `/mcp`, and the front answers the
authorizer's Deny with the ACCESS_DENIED gateway response (403); tests/stack/test_stack_oauth.py runs
the suite's authorization server (tests/oauth) as that issuer.

Usage plans are emulated as far as their keys: the front refuses an Allow answer whose
`usageIdentifierKey` is not one of the tiers' keys with API Gateway's 403, and counts the tier of
each key it accepts (`gateway.usage_by_tier`). Not emulated: usage-plan throttles and quotas, API
Gateway throttling, WAF, IAM, Cognito's hosted token
endpoint; each function has one sandbox, so concurrent calls to one function wait for each other.
Data lives in memory: it is gone when the stack stops.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.aws import engines  # noqa: E402
from tests.functions.asset import (  # noqa: E402
    build_asset,
    deployed_python,
    install_runtime_sdk,
    interpreter_for,
)
from tests.functions.gateway import FunctionError, Gateway, StreamPump  # noqa: E402

#: The port `scripts/stack` serves on unless `--port` says otherwise (fleetmem serve uses 8765).
DEFAULT_PORT = 8766
STAGE = "local"
PREFIX = "fleetmem-local"
#: The one embedding model id the Bedrock stand-in answers for (local stack only).
LOCAL_EMBEDDING_MODEL = "fleetmem-local.all-minilm-l6-v2"
LOCAL_EMBEDDING_DIM = 512
#: The one chat model id the Bedrock stand-in answers Converse for (the synthesize function's).
LOCAL_CHAT_MODEL = "fleetmem-local.scripted-chat"
REGION = "us-east-1"
#: The stage's configured heartbeat: its name, tenant and client (its session and queue per stack).
HEARTBEAT, HEARTBEAT_TENANT, HEARTBEAT_CLIENT = "stack-heartbeat", "heartbeat", "hb-stack"
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "fleetmem"
#: Seconds a function keeps the signing keys it read (FLEETMEM_SIGNING_KEY_TTL_S): short here, so
#: a rotation reaches every function within seconds (the deploy's default is 300 s).
SIGNING_KEY_TTL_S = 2
#: Every function the CDK app deploys, as the folder names of functions/.
GROUPS = tuple(sorted(p.name for p in (ROOT / "functions").iterdir() if (p / "handler.py").exists()))


def rie_binary() -> Path:
    """Where scripts/lib/rie.sh builds the emulator (same defaults as the script)."""
    script = (ROOT / "scripts" / "lib" / "rie.sh").read_text()
    version = script.split('FM_RIE_VERSION="', 1)[1].split('"', 1)[0]
    base = Path(os.environ["FLEETMEM_RIE_DIR"]) if os.environ.get("FLEETMEM_RIE_DIR") else None
    return (base or CACHE / "engines" / f"aws-lambda-rie-{version}") / "aws-lambda-rie"


def awslambdaric_requirement() -> str:
    """The runtime interface client pinned in pyproject.toml's `stack` extra."""
    text = (ROOT / "pyproject.toml").read_text()
    for line in text.split("stack = [", 1)[1].split("]", 1)[0].splitlines():
        line = line.strip().strip(",").strip('"')
        if line.startswith("awslambdaric"):
            return line
    raise RuntimeError("pyproject.toml's `stack` extra pins no awslambdaric")


# ---------------------------------------------------------------------------------------------
# the asset and the runtime directory


def _sources_digest(python_version: str) -> str:
    h = hashlib.sha256(f"{python_version} {awslambdaric_requirement()}".encode())
    for base in (
        "shared/fleetmem",
        "functions",
        "infra/requirements-lambda.txt",
        "infra/requirements-lambda-nodeps.txt",
        "scripts/build-lambda",
        "scripts/lib/compile_asset.py",
    ):
        path = ROOT / base
        files = sorted(path.rglob("*")) if path.is_dir() else [path]
        for f in files:
            if f.is_file() and "__pycache__" not in f.parts:
                h.update(str(f.relative_to(ROOT)).encode())
                h.update(f.read_bytes())
    return h.hexdigest()


#: Built assets unused for this long are removed when another one is built.
ASSET_KEEP_DAYS = 7


def ensure_asset(work: Path, log: Callable[[str], None]) -> tuple[Path, Path, Path]:
    """(python, asset, runtime): the built asset for this host's architecture and the deployed
    Python, in `work/<digest of its sources>/`: built once per source state (into a temporary
    directory, then renamed, so a stack that runs from another build is never touched)."""
    version = deployed_python()
    python = interpreter_for(version)
    if python is None:
        raise RuntimeError(f"the deployed python_runtime {version} is not on this machine (pyenv)")
    home = work / _sources_digest(version)[:16]
    if (home / "complete").exists():
        os.utime(home / "complete")
        log(f"reusing the Lambda asset in {home / 'asset'}")
        return python, home / "asset", home / "runtime"
    log(f"building the Lambda asset for python {version} into {home / 'asset'}")
    work.mkdir(parents=True, exist_ok=True)
    build = Path(tempfile.mkdtemp(prefix=".build-", dir=work))
    try:
        built = build_asset(build / "asset", version)
        if built.returncode != 0:
            raise RuntimeError(f"scripts/build-lambda failed:\n{built.stdout[-2000:]}\n{built.stderr[-3000:]}")
        install_runtime_sdk(build / "runtime", version, (awslambdaric_requirement(),))
        (build / "complete").touch()
        try:
            build.rename(home)
        except OSError:  # another run built the same sources meanwhile
            pass
    finally:
        shutil.rmtree(build, ignore_errors=True)
    for old in work.iterdir():
        done = old / "complete"
        if old != home and done.exists() and time.time() - done.stat().st_mtime > ASSET_KEEP_DAYS * 86400:
            shutil.rmtree(old, ignore_errors=True)
    return python, home / "asset", home / "runtime"


# ---------------------------------------------------------------------------------------------
# small HTTP servers on 127.0.0.1


class _Quiet(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # The headers and the body go out in two writes; with Nagle's algorithm on, the body waits for
    # the client's delayed ACK of the headers (~40 ms on Linux) on every keep-alive request.
    disable_nagle_algorithm = True

    def send(self, status: int, raw: bytes, headers: dict[str, str]) -> None:
        self.send_response(status)
        for k, v in {"Content-Type": "application/json", **headers, "Content-Length": str(len(raw))}.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *args: Any) -> None:
        return None


class _Server:
    """A threading HTTP server on a free 127.0.0.1 port, serving `handler`."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


# ---------------------------------------------------------------------------------------------
# the functions' way to the search node: a TCP forwarder the tests can freeze


class Forwarder:
    """TCP from a free 127.0.0.1 port to `target` ("http://host:port"), byte for byte.

    `freeze()` stops moving bytes in both directions while every connection stays open, and new
    connections are still accepted (the kernel does that for a paused process too): what a client
    sees of a SIGSTOPped node. `thaw()` moves what was held and carries on. The OpenSearch node is
    shared by every test module and xdist worker, so the stack pauses its own way to it, never the
    node itself."""

    def __init__(self, target: str) -> None:
        host, port = target.rsplit("//", 1)[-1].rsplit(":", 1)
        self.target = (host, int(port))
        self.flowing = threading.Event()
        self.flowing.set()
        self.refusing = threading.Event()
        self._closed = threading.Event()
        self._conns: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def freeze(self) -> None:
        self.flowing.clear()

    def thaw(self) -> None:
        self.flowing.set()

    def refuse(self) -> None:
        """Stopped, as a node that went away: open connections are closed and every new one is
        closed as soon as it is accepted (the client sees the connection fail at once). `resume()`
        undoes it. Only this stack's way to the node stops: the node is shared with the other
        test modules and xdist workers, which carry on."""
        self.refusing.set()
        with self._lock:
            conns = list(self._conns)
        for sock in conns:
            self._close(sock)

    def resume(self) -> None:
        self.refusing.clear()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
                if self.refusing.is_set():
                    client.close()
                    continue
                upstream = socket.create_connection(self.target)
            except OSError:
                continue
            with self._lock:
                self._conns |= {client, upstream}
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(src, dst), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                self.flowing.wait()
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                self._close(sock)

    def _close(self, sock: socket.socket) -> None:
        with self._lock:
            self._conns.discard(sock)
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        sock.close()

    def stop(self) -> None:
        self._closed.set()
        self.flowing.set()
        self._listener.close()
        with self._lock:
            conns = list(self._conns)
        for sock in conns:
            self._close(sock)


# ---------------------------------------------------------------------------------------------
# Bedrock's InvokeModel, answered by the local MiniLM model


class BedrockStandIn(_Server):
    """`POST /model/<id>/invoke` with a Titan V2 request -> `{embedding, inputTextTokenCount}`;
    `POST /model/<LOCAL_CHAT_MODEL>/converse` -> the scripted chat model of tests/llm_standin.py in
    Converse's response shape (a `standin-error` question -> `ThrottlingException`)."""

    def __init__(self) -> None:
        from fleetmem.adapters.local.embedder import load_local_embedder
        from fleetmem.config import default_model_dir

        embedder, problem = load_local_embedder(default_model_dir())
        if embedder is None:
            raise RuntimeError(f"the local MiniLM model is missing: {problem}")
        self.embedder = embedder
        self.calls = 0
        self.converse_calls = 0
        stand_in = self

        class Handler(_Quiet):
            def do_POST(self) -> None:
                parts = self.path.split("/")
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                model = urllib.request.unquote(parts[2]) if len(parts) > 3 else ""
                if parts[-1] == "converse" and model == LOCAL_CHAT_MODEL:
                    self._converse(body)
                    return
                if parts[-1] != "invoke" or model != LOCAL_EMBEDDING_MODEL:
                    self._answer(
                        400,
                        {"message": f"The local stack serves only InvokeModel for {LOCAL_EMBEDDING_MODEL}."},
                        "ValidationException",
                    )
                    return
                dim = int(body.get("dimensions") or LOCAL_EMBEDDING_DIM)
                vec = [float(x) for x in stand_in.embedder.embed([str(body.get("inputText", ""))])[0]]
                if dim < len(vec):
                    self._answer(400, {"message": f"dimensions must be >= {len(vec)}"}, "ValidationException")
                    return
                stand_in.calls += 1
                vec += [0.0] * (dim - len(vec))
                self._answer(200, {"embedding": vec, "inputTextTokenCount": len(str(body.get("inputText", ""))) // 4})

            def _converse(self, body: dict[str, Any]) -> None:
                from tests.llm_standin import ProviderError, converse_answer, scripted_reply

                system = "".join(b.get("text", "") for b in body.get("system") or [])
                prompt = "".join(c.get("text", "") for m in body.get("messages") or [] for c in m.get("content") or [])
                stand_in.converse_calls += 1
                try:
                    reply = scripted_reply(system, prompt)
                except ProviderError:
                    self._answer(429, {"message": "Too many requests (scripted)."}, "ThrottlingException")
                    return
                self._answer(200, converse_answer(reply))

            def _answer(self, status: int, body: dict[str, Any], error_type: str = "") -> None:
                self.send(status, json.dumps(body).encode(), {"x-amzn-ErrorType": error_type} if error_type else {})

        super().__init__(Handler)


# ---------------------------------------------------------------------------------------------
# the event source mapping with the deployed batch size, partial-batch retries and skip


class RetryingPump(StreamPump):
    """`StreamPump` as the deployed mapping behaves (infra/constructs/indexer.py): at most
    `batch_size` records per invocation; a `batchItemFailures` answer moves the shard's
    checkpoint to just before its lowest failed record and the next pump retries from there;
    after `retry_attempts` retries of one batch the mapping gives up on it and goes on after its
    last record, noting (stream, first, last sequence number) in `discarded` as the deployed
    mapping sends its DLQ. `failed_batches` counts the answers that reported failures."""

    def __init__(self, *args: Any, batch_size: int, retry_attempts: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.batch_size = batch_size
        self.retry_attempts = retry_attempts
        self.attempts: dict[tuple[str, str], int] = {}
        self.discarded: list[tuple[str, str, str]] = []
        self.failed_batches = 0
        self.records = 0  # records handed to the indexer, retries included

    def _shard(self, arn: str, shard: str) -> None:
        while True:
            records, iterator = self._read(arn, shard, Limit=self.batch_size)
            if not records:
                self._go_on(arn, shard, iterator, had_records=False)
                return
            result = self.invoke("indexer", {"Records": records})
            self.batches += 1
            self.records += len(records)
            seqs = [r["dynamodb"]["SequenceNumber"] for r in records]
            failed = {str(f["itemIdentifier"]) for f in (result or {}).get("batchItemFailures", [])}
            if failed:
                self.failed_batches += 1
                first = min(n for n, s in enumerate(seqs) if s in failed)
                tries = self.attempts.get((arn, shard), 0) + 1
                if tries <= self.retry_attempts:
                    self.attempts[(arn, shard)] = tries
                    if first:  # the records before the first failed one are done
                        self.last[(arn, shard)] = seqs[first - 1]
                    return  # the next pump retries from the checkpoint
                # give up on the batch (the DLQ gets its position)
                self.discarded.append((arn, seqs[first], seqs[-1]))
            self.attempts.pop((arn, shard), None)
            self.last[(arn, shard)] = seqs[-1]
            self._go_on(arn, shard, iterator, had_records=True)
            if not iterator:
                return


# ---------------------------------------------------------------------------------------------
# one function = one Runtime Interface Emulator process


def _post(url: str, payload: bytes, timeout: float) -> tuple[int, bytes]:
    req = urllib.request.Request(url, data=payload, method="POST", headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def function_error(raw: bytes) -> tuple[str, str] | None:
    """(errorType, errorMessage) when `raw` is the runtime's error answer. The emulator relays an
    uncaught exception as a 200 with the runtime's error document and no `X-Amz-Function-Error`;
    its keys are exactly these (plus requestId, stackTrace), which no handler's answer is."""
    try:
        body = json.loads(raw)
    except ValueError:
        return None
    if isinstance(body, dict) and {"errorType", "errorMessage"} <= body.keys() <= {
        "errorType",
        "errorMessage",
        "requestId",
        "stackTrace",
    }:
        return str(body["errorType"]), str(body["errorMessage"])
    return None


class _PortTaken(RuntimeError):
    """A function's emulator found one of its ports taken by another process (see `Stack._spawn`)."""


@dataclass
class Function:
    group: str
    name: str
    port: int
    process: subprocess.Popen[bytes]
    log_path: Path
    timeout_s: int
    lock: threading.Lock = field(default_factory=threading.Lock)
    invocations: int = 0

    def invoke_raw(self, payload: bytes) -> tuple[int, bytes]:
        """One invocation at a time: the emulator holds one sandbox and refuses a second one."""
        with self.lock:
            self.invocations += 1
            return _post(
                f"http://127.0.0.1:{self.port}/2015-03-31/functions/function/invocations",
                payload,
                timeout=self.timeout_s + 5,
            )

    def invoke(self, event: dict[str, Any]) -> Any:
        status, raw = self.invoke_raw(json.dumps(event).encode())
        if status != 200:
            raise FunctionError("Runtime.Emulator", f"the emulator answered {status}: {raw[:200]!r}")
        err = function_error(raw)
        if err is not None:
            raise FunctionError(*err)
        return json.loads(raw)


#: The faults `InvokeRouter.fault` injects into one function's invokes.
THROTTLE, SLOW = "throttle", "slow"


class InvokeRouter(_Server):
    """The Lambda Invoke API on 127.0.0.1: the function named in the path, through its emulator.
    A function error carries `X-Amz-Function-Error: Unhandled` as the service sets it; an unknown
    name answers the service's 404 `ResourceNotFoundException`.

    `invocations` counts every Invoke request per function group (whatever it was answered), and
    `fault(group, ...)` makes that function's invokes answer as an overloaded service does while
    the block runs: THROTTLE, the service's 429 `TooManyRequestsException` (the function does not
    run); SLOW, the function runs but its answer is held until the block ends, past any caller's
    deadline."""

    def __init__(self, functions: dict[str, Function]) -> None:
        self.invocations: dict[str, int] = {}
        self._faults: dict[str, tuple[str, threading.Event]] = {}
        self._lock = threading.Lock()
        router = self

        def by_name(name: str) -> Function | None:  # read at call time: functions start after the router
            return next((f for f in functions.values() if f.name == name), None)

        class Handler(_Quiet):
            def do_POST(self) -> None:
                payload = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                name = urllib.request.unquote(self.path.split("/functions/", 1)[-1].split("/", 1)[0])
                name = name.split(":function:", 1)[-1]  # an ARN names the function after `:function:`
                # `name:live` (the alias every deployed caller invokes) reaches the one version the stack runs
                fn = by_name(name.split(":", 1)[0])
                headers = {"Content-Type": "application/json"}
                if fn is None or not self.path.endswith("/invocations"):
                    status, raw = 404, json.dumps({"Type": "User", "message": f"Function not found: {name}"}).encode()
                    headers["x-amzn-ErrorType"] = "ResourceNotFoundException"
                    self.send(status, raw, {**headers, "X-Amz-Executed-Version": "$LATEST"})
                    return
                fault, released = router._count(fn.group)
                if fault == THROTTLE:
                    raw = json.dumps(
                        {
                            "Reason": "ReservedFunctionConcurrentInvocationLimitExceeded",
                            "Type": "User",
                            "message": "Rate Exceeded.",
                        }
                    ).encode()
                    self.send(429, raw, {**headers, "x-amzn-ErrorType": "TooManyRequestsException"})
                    return
                status, raw = fn.invoke_raw(payload)
                if status == 200 and function_error(raw) is not None:
                    headers["X-Amz-Function-Error"] = "Unhandled"
                elif status != 200:
                    status, raw = 502, json.dumps({"message": raw.decode(errors="replace")[:500]}).encode()
                    headers["x-amzn-ErrorType"] = "ServiceException"
                if fault == SLOW:
                    released.wait(timeout=300)
                try:
                    self.send(status, raw, {**headers, "X-Amz-Executed-Version": "$LATEST"})
                except OSError:  # the caller stopped waiting (a SLOW answer after its deadline)
                    self.close_connection = True

        super().__init__(Handler)

    def _count(self, group: str) -> tuple[str, threading.Event]:
        with self._lock:
            self.invocations[group] = self.invocations.get(group, 0) + 1
            return self._faults.get(group, ("", threading.Event()))

    @contextmanager
    def fault(self, group: str, kind: str) -> Iterator[None]:
        """While the block runs, `group`'s invokes answer with `kind` (THROTTLE or SLOW); held SLOW
        answers go out when it ends."""
        assert kind in {THROTTLE, SLOW}, kind
        released = threading.Event()
        with self._lock:
            self._faults[group] = (kind, released)
        try:
            yield
        finally:
            with self._lock:
                self._faults.pop(group, None)
            released.set()


#: A first invocation per function at start (the emulator initializes the runtime on the first
#: invoke): each is harmless — an unsigned payload the tool functions refuse, a health check, an
#: empty stream batch, a request without a credential.
def warm_event(group: str) -> dict[str, Any]:
    if group == "mcp":
        return {
            "resource": "/health",
            "path": "/health",
            "httpMethod": "GET",
            "headers": {},
            "body": None,
            "requestContext": {"stage": STAGE, "requestId": "warm", "resourcePath": "/health"},
        }
    if group == "authorizer":
        return {
            "type": "REQUEST",
            "headers": {},
            "methodArn": f"arn:aws:execute-api:{REGION}:000000000000:local/{STAGE}/GET/health",
        }
    if group == "indexer":
        return {"Records": []}
    return {}


# ---------------------------------------------------------------------------------------------
# the stack


class _Cleanups:
    """Stands in for pytest's config in tests/aws/engines.py when run as a command."""

    def __init__(self) -> None:
        self.fns: list[Callable[[], None]] = []

    def add_cleanup(self, fn: Callable[[], None]) -> None:
        self.fns.append(fn)

    def run(self) -> None:
        while self.fns:
            try:
                self.fns.pop()()
            except Exception as exc:  # keep stopping the rest
                print(f"stack: cleanup failed: {exc}", file=sys.stderr)


class Stack:
    """Start with `start()`, stop with `stop()` (idempotent). `config` is pytest's config when the
    test session shares its engines, else the stack owns them."""

    def __init__(
        self,
        *,
        port: int = 0,
        surface: str = "full",
        work: Path | None = None,
        config: Any = None,
        sync_index: bool = True,
        log: Callable[[str], None] | None = None,
        prefix: str = "",
        index_prefix: str = "",
        groups: tuple[str, ...] = GROUPS,
        oauth_issuer: str = "",
        oauth_jwks_url: str = "",
        authorizer_cache_ttl_s: int | None = None,
    ) -> None:
        """`prefix` / `index_prefix`: serve these existing tables / this index (e.g. a restored
        stage's), instead of new ones. `groups`: the functions to run (default: every one); an
        invoke of another is the service's not-found. `oauth_issuer` / `oauth_jwks_url`: the
        authorization server people sign in through (a deploy config's `oauth`), its tokens' audience
        this stack's `/mcp`. `authorizer_cache_ttl_s`: instead of the deploy config's (0: no cache)."""
        self.port = port or engines.free_port()
        self.surface = surface
        self.groups = groups
        self.oauth_issuer = oauth_issuer.rstrip("/")
        self.oauth_jwks_url = oauth_jwks_url
        self.authorizer_cache_ttl_s = authorizer_cache_ttl_s
        self.work = work or CACHE / "stack"
        self.own_cleanups = _Cleanups() if config is None else None
        self.config = config if config is not None else self.own_cleanups
        self.sync_index = sync_index
        self.log = log or (lambda line: print(f"stack: {line}", file=sys.stderr))
        self.prefix = PREFIX
        self._given = (prefix, index_prefix)
        self.functions: dict[str, Function] = {}
        self.run_dir = Path(tempfile.mkdtemp(prefix="fleetmem-stack-"))
        self._stops: list[Callable[[], None]] = []
        self._poller: threading.Thread | None = None
        self._stopping = threading.Event()

    # -- public ---------------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def mcp_url(self) -> str:
        return f"{self.base_url}/mcp"

    def invoke(self, group: str, event: dict[str, Any]) -> Any:
        return self.functions[group].invoke(event)

    def client_env(self) -> dict[str, str]:
        """What `fleetmem token create --backend aws` needs to reach this stack's client store."""
        return {
            "AWS_ACCESS_KEY_ID": "test",
            "AWS_SECRET_ACCESS_KEY": "test",
            "AWS_REGION": REGION,
            "AWS_ENDPOINT_URL_DYNAMODB": self.ddb,
            "FLEETMEM_TABLE_PREFIX": self.prefix,
        }

    def admin_env(self) -> dict[str, str]:
        """What `fleetmem admin ...` needs for this stack: the stage's settings as its functions have
        them (tables, search index and prefix, embedding model, the replay queue on moto), with the
        search node reached directly."""
        from fleetmem.config import (
            ENV_BEDROCK_EMBEDDING_DIM,
            ENV_BEDROCK_EMBEDDING_MODEL,
            ENV_EMBEDDER,
            ENV_OPENSEARCH_ENDPOINT,
            ENV_OPENSEARCH_INDEX_PREFIX,
            ENV_OPENSEARCH_SERVICE,
        )

        env = dict(self.environment["common"])
        env.update(self.environment.get("indexer", {}))
        env.pop("PATH", None)
        env.update(self.client_env())
        env.update(
            {
                "AWS_ENDPOINT_URL_BEDROCK_RUNTIME": self.bedrock.url,
                "AWS_ENDPOINT_URL_SQS": self.moto,
                ENV_EMBEDDER: "bedrock",
                ENV_BEDROCK_EMBEDDING_MODEL: LOCAL_EMBEDDING_MODEL,
                ENV_BEDROCK_EMBEDDING_DIM: str(LOCAL_EMBEDDING_DIM),
                ENV_OPENSEARCH_ENDPOINT: self.search_url,
                ENV_OPENSEARCH_SERVICE: "none",
                ENV_OPENSEARCH_INDEX_PREFIX: self.index_prefix,
            }
        )
        return env

    def token_command(self) -> str:
        env = " ".join(f"{k}={v}" for k, v in self.client_env().items())
        return f"{env} .venv/bin/fleetmem token create --backend aws --tenant local --client me --scopes read,write"

    def start(self) -> Stack:
        t0 = time.monotonic()
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        self.log(f"ready in {time.monotonic() - t0:.1f} s: {self.mcp_url}")
        return self

    def __enter__(self) -> Stack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stopping.set()
        while self._stops:
            try:
                self._stops.pop()()
            except Exception as exc:
                self.log(f"stopping: {exc}")
        if self.own_cleanups is not None:
            self.own_cleanups.run()
        shutil.rmtree(self.run_dir, ignore_errors=True)

    # -- start-up -----------------------------------------------------------------------------
    def _start(self) -> None:
        rie = rie_binary()
        if not rie.exists():
            engines.missing(
                f"the Lambda Runtime Interface Emulator ({rie})",
                "bash -c '. scripts/lib/bootstrap.sh && fm_ensure_rie'",
            )
        self.work.mkdir(parents=True, exist_ok=True)
        # Engines start on this thread: their processes die with the thread that started them
        # (PR_SET_PDEATHSIG), so never from a pool thread. The asset builds meanwhile.
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            asset = pool.submit(ensure_asset, self.work, self.log)
            bedrock = pool.submit(BedrockStandIn)
            self.ddb = engines.dynamodb_local_endpoint(self.config)
            self.moto = engines.moto_endpoint(self.config)
            self.search_url = engines.opensearch_endpoint(self.config)
            python, asset_dir, runtime = asset.result()
            self.bedrock = bedrock.result()
        self._stops.append(self.bedrock.stop)
        self.log(f"DynamoDB Local {self.ddb}, OpenSearch {self.search_url}, moto {self.moto}")
        # the functions reach the node through this (tests freeze it); the stack's own index
        # set-up and refreshes go to the node directly
        self.search_path = Forwarder(self.search_url)
        self._stops.append(self.search_path.stop)

        from fleetmem.adapters.aws.opensearch import OpenSearchIndex

        self.prefix = self._given[0] or f"{PREFIX}-{uuid.uuid4().hex[:6]}"
        engines.tables_for(self.ddb, self.prefix)
        self.index_prefix = self._given[1] or f"fmstack{uuid.uuid4().hex[:6]}"
        OpenSearchIndex(
            self.search_url,
            model_id=LOCAL_EMBEDDING_MODEL,
            dim=LOCAL_EMBEDDING_DIM,
            prefix=self.index_prefix,
            service="none",
        ).ensure_index()
        env = self._environment()
        self.environment = env

        names = {g: f"{self.prefix}-{g.replace('_', '-')}" for g in GROUPS}
        router_functions: dict[str, Function] = {}
        # the router's URL goes into the edge's environment, so it starts before the functions
        self.router = InvokeRouter(router_functions)
        self._stops.append(self.router.stop)
        env["common"]["AWS_ENDPOINT_URL_LAMBDA"] = self.router.url
        from infra.config import EXAMPLE, load_config

        cfg = load_config(default=EXAMPLE)
        #: what `fresh_function` starts another sandbox of a function with
        self._spawn_with = (python, asset_dir, runtime, rie, env, cfg, names)
        for group in self.groups:
            self.functions[group] = self._spawn(
                group, names[group], python, asset_dir, runtime, rie, {**env["common"], **env.get(group, {})}, cfg
            )
        router_functions.update(self.functions)
        self._warm()

        from infra.constructs.indexer import BATCH_SIZE, RETRY_ATTEMPTS

        self.pump = RetryingPump(
            self.ddb, self.prefix, invoke=self.invoke, batch_size=BATCH_SIZE, retry_attempts=RETRY_ATTEMPTS
        )
        self._refreshed_batches = self.pump.batches
        self._poller = threading.Thread(target=self._poll, daemon=True)
        self._poller.start()
        self.gateway = Gateway(
            stage=STAGE,
            invoke=self.invoke,
            authorizer_ttl_s=self.cache_ttl_s(cfg),
            after_call=self.drain if self.sync_index else None,
            usage_keys=self.usage_keys,
        )
        self.gateway.start(self.port)
        self._stops.append(self.gateway.stop)

    def cache_ttl_s(self, cfg: Any) -> int:
        """The authorizer cache TTL this stack runs with (its front's cache, the authorizer's bound)."""
        return cfg.api.authorizer_cache_ttl_s if self.authorizer_cache_ttl_s is None else self.authorizer_cache_ttl_s

    def _environment(self) -> dict[str, dict[str, str]]:
        """What the CDK app sets on each function (infra/stacks, infra/constructs), pointed at the
        local engines."""
        import boto3
        from infra.config import EXAMPLE, load_config
        from infra.constructs.common import ENV_VERSION, qualified_name

        from fleetmem import __version__
        from fleetmem.config import (
            ENV_AUTHORIZATION_SERVER,
            ENV_AUTHORIZER_CACHE_TTL_S,
            ENV_BACKEND,
            ENV_BEDROCK_EMBEDDING_DIM,
            ENV_BEDROCK_EMBEDDING_MODEL,
            ENV_BEDROCK_LLM_MODEL,
            ENV_DEADLINE_MS,
            ENV_DEFAULT_TIER,
            ENV_EMBEDDER,
            ENV_HEARTBEATS,
            ENV_INVOKE_DEADLINES_S,
            ENV_INVOKE_READ_TIMEOUT_S,
            ENV_INVOKE_SIGNING_SECRET_ARN,
            ENV_LLM,
            ENV_OAUTH_ISSUER,
            ENV_OAUTH_JWKS_URL,
            ENV_OAUTH_RESOURCE,
            ENV_OPENSEARCH_ENDPOINT,
            ENV_OPENSEARCH_INDEX_PREFIX,
            ENV_OPENSEARCH_SERVICE,
            ENV_PUBLIC_URL,
            ENV_SIGNING_KEY_TTL_S,
            ENV_SURFACE,
            ENV_TABLE_PREFIX,
            ENV_USAGE_KEY_SECRETS,
        )
        from fleetmem.lambda_routes import TOOL_FUNCTIONS_ENV, function_group, function_name
        from fleetmem.memory.verbs import REGISTRY

        cfg = load_config(default=EXAMPLE)
        #: seconds a replaced signing key may still be presented (the rotation function's window)
        self.signing_key_accepted_s = cfg.signing_key_accepted_s() - cfg.signing.key_ttl_s + SIGNING_KEY_TTL_S
        sm = boto3.client("secretsmanager", endpoint_url=self.moto, **engines.CREDENTIALS)
        tag = uuid.uuid4().hex[:8]
        signing = sm.create_secret(Name=f"{self.prefix}-invoke-signing-{tag}", SecretString=uuid.uuid4().hex * 2)
        self.signing_secret_arn = signing["ARN"]
        # one usage-plan key per tier, as the CDK app makes them; the front holds their values as
        # API Gateway's usage plans do (`usage_keys`: key value -> tier)
        self.usage_keys: dict[str, str] = {}
        usage_arns: dict[str, str] = {}
        for tier in cfg.tiers:
            value = uuid.uuid4().hex[:40]
            usage_arns[tier] = sm.create_secret(Name=f"{self.prefix}-usage-key-{tier}-{tag}", SecretString=value)["ARN"]
            self.usage_keys[value] = tier
        # The stage's one heartbeat (as the deploy config's `heartbeats` define them), to an SQS queue.
        sqs = boto3.client("sqs", endpoint_url=self.moto, **engines.CREDENTIALS)
        self.heartbeat_queue = sqs.create_queue(QueueName=f"{self.prefix}-{HEARTBEAT}-{tag}")["QueueUrl"]
        from fleetmem.adapters.aws.replay import ENV_REPLAY_QUEUE_URL, queue_name
        from fleetmem.adapters.aws.signing_keys import ENV_KEY_ACCEPTED_S

        self.replay_queue = sqs.create_queue(QueueName=queue_name(self.prefix))["QueueUrl"]
        heartbeats = {
            HEARTBEAT: {
                "tenant": HEARTBEAT_TENANT,
                "client_id": HEARTBEAT_CLIENT,
                "session_id": f"{HEARTBEAT}-{tag}",
                "budget_tokens": 2000,
                "destination": {"type": "sqs", "name": HEARTBEAT, "queue_url": self.heartbeat_queue},
            }
        }
        common = {
            "PATH": "/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "AWS_ACCESS_KEY_ID": "test",
            "AWS_SECRET_ACCESS_KEY": "test",
            "AWS_REGION": REGION,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_ENDPOINT_URL_DYNAMODB": self.ddb,
            "AWS_ENDPOINT_URL_SQS": self.moto,
            "AWS_ENDPOINT_URL_EVENTBRIDGE": self.moto,
            "AWS_ENDPOINT_URL_SECRETS_MANAGER": self.moto,
            "AWS_ENDPOINT_URL_BEDROCK_RUNTIME": self.bedrock.url,
            "AWS_LAMBDA_LOG_FORMAT": "JSON",
            "AWS_LAMBDA_LOG_LEVEL": "INFO",
            ENV_BACKEND: "aws",
            ENV_EMBEDDER: "bedrock",
            ENV_LLM: "none",
            ENV_SURFACE: self.surface,
            ENV_TABLE_PREFIX: self.prefix,
            ENV_OPENSEARCH_ENDPOINT: self.search_path.url,
            ENV_OPENSEARCH_SERVICE: "none",
            ENV_OPENSEARCH_INDEX_PREFIX: self.index_prefix,
            ENV_BEDROCK_EMBEDDING_MODEL: LOCAL_EMBEDDING_MODEL,
            ENV_BEDROCK_EMBEDDING_DIM: str(LOCAL_EMBEDDING_DIM),
            ENV_INVOKE_SIGNING_SECRET_ARN: signing["ARN"],
            ENV_SIGNING_KEY_TTL_S: str(SIGNING_KEY_TTL_S),
            "POWERTOOLS_METRICS_NAMESPACE": "fleetmem",
            "POWERTOOLS_LOG_LEVEL": "INFO",
            ENV_VERSION: __version__,
        }
        return {
            "common": common,
            "mcp": {
                TOOL_FUNCTIONS_ENV: json.dumps(
                    {t: qualified_name(function_name(self.prefix, function_group(t))) for t in REGISTRY}
                ),
                ENV_AUTHORIZATION_SERVER: self.oauth_issuer,
                ENV_INVOKE_READ_TIMEOUT_S: str(cfg.api.invoke_read_timeout_s),
                ENV_INVOKE_DEADLINES_S: json.dumps(cfg.invoke_deadlines(), sort_keys=True),
                ENV_PUBLIC_URL: self.base_url,
            },
            "heartbeat": {ENV_HEARTBEATS: json.dumps(heartbeats)},
            # the overlap window as the CDK app derives it, with the stack's own key TTL
            "signing_rotation": {ENV_KEY_ACCEPTED_S: str(self.signing_key_accepted_s)},
            "indexer": {ENV_REPLAY_QUEUE_URL: self.replay_queue},
            # a stage whose config names an `llm.model`, the model being the scripted stand-in's; its
            # gather shares 2 cores with every engine here, so the model is reached before the
            # per-call deadline falls back to the pages (a deployed function has its own cores)
            "synthesize": {ENV_LLM: "bedrock", ENV_BEDROCK_LLM_MODEL: LOCAL_CHAT_MODEL, ENV_DEADLINE_MS: "20000"},
            "authorizer": {
                ENV_USAGE_KEY_SECRETS: json.dumps(usage_arns),
                ENV_DEFAULT_TIER: cfg.default_tier,
                ENV_AUTHORIZER_CACHE_TTL_S: str(self.cache_ttl_s(cfg)),
                **(
                    {
                        ENV_OAUTH_ISSUER: self.oauth_issuer,
                        ENV_OAUTH_JWKS_URL: self.oauth_jwks_url or f"{self.oauth_issuer}/.well-known/jwks.json",
                        ENV_OAUTH_RESOURCE: self.mcp_url,
                    }
                    if self.oauth_issuer
                    else {}
                ),
            },
        }

    def _spawn(
        self,
        group: str,
        name: str,
        python: Path,
        asset: Path,
        runtime: Path,
        rie: Path,
        env: dict[str, str],
        cfg: Any,
    ) -> Function:
        """Start one function's emulator. A free port is picked, released, then bound by the
        emulator, so another process of the run (an xdist worker starting its own servers) can take
        it in between: the emulator then exits with "address already in use" in its log, and the
        function is started again on new ports (at most 3 times)."""
        for attempt in range(3):
            try:
                return self._spawn_once(group, name, python, asset, runtime, rie, env, cfg)
            except _PortTaken:
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def _spawn_once(
        self,
        group: str,
        name: str,
        python: Path,
        asset: Path,
        runtime: Path,
        rie: Path,
        env: dict[str, str],
        cfg: Any,
    ) -> Function:
        size = cfg.size_for(group)
        port, api_port = engines.free_port(), engines.free_port()
        handler = f"functions.{group}.handler.handler"
        log_path = self.run_dir / f"{group}.log"
        log = log_path.open("wb")
        proc = subprocess.Popen(
            [
                str(rie),
                "--log-level",
                "error",
                "--runtime-interface-emulator-address",
                f"127.0.0.1:{port}",
                "--runtime-api-address",
                f"127.0.0.1:{api_port}",
                str(python),
                "-S",  # no site-packages: the asset and the runtime directory only
                "-m",
                "awslambdaric",
                handler,
            ],
            cwd=asset,  # LAMBDA_TASK_ROOT
            env={
                **env,
                "PYTHONPATH": f"{asset}:{runtime}",
                "LAMBDA_TASK_ROOT": str(asset),
                "_HANDLER": handler,
                "AWS_LAMBDA_FUNCTION_NAME": name,
                "AWS_LAMBDA_FUNCTION_TIMEOUT": str(size.timeout_s),
                "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(size.memory_mb),
                "AWS_LAMBDA_LOG_GROUP_NAME": f"/aws/lambda/{name}",
                "POWERTOOLS_SERVICE_NAME": group,
            },
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=engines._die_with_parent,
            start_new_session=True,  # Ctrl-C reaches the stack, which stops the functions itself
        )
        log.close()

        self._stops.append(lambda: engines.stop_process(proc))
        try:
            engines._wait_port(port, proc, name=f"the {group} function's emulator")
        except RuntimeError:
            if proc.poll() is not None and b"address already in use" in log_path.read_bytes():
                raise _PortTaken(group) from None
            raise
        return Function(group, name, port, proc, log_path, size.timeout_s)

    def fresh_function(self, group: str) -> Function:
        """Another emulator of `group` beside the running one, as a new Lambda sandbox: nothing
        initialized until its first invoke (a cold start). Stopped with the stack, or by the caller
        (`engines.stop_process(fn.process)`)."""
        python, asset_dir, runtime, rie, env, cfg, names = self._spawn_with
        merged = {**env["common"], **env.get(group, {})}
        return self._spawn(group, names[group], python, asset_dir, runtime, rie, merged, cfg)

    def _warm(self) -> None:
        """Initialize every function's runtime at once (the emulator does it on the first invoke)."""

        def one(fn: Function) -> None:
            status, _ = fn.invoke_raw(json.dumps(warm_event(fn.group)).encode())
            if status != 200:
                raise RuntimeError(f"the {fn.group} function did not initialize:\n{self.function_log(fn.group)}")

        with concurrent.futures.ThreadPoolExecutor(max_workers=len(self.functions)) as pool:
            for f in [pool.submit(one, fn) for fn in self.functions.values()]:
                f.result()

    def drain(self) -> None:
        """Index everything the streams hold now and refresh the index, so the next request's
        search sees this one's writes (the default; `--async-index` leaves it to the poller and
        OpenSearch's 1 s refresh, as on AWS)."""
        # The poller may have indexed this call's batch a moment ago (pump waits for it): refresh
        # whenever any batch, the poller's too, was indexed since the last refresh.
        self.pump.pump()
        if self.pump.batches != self._refreshed_batches:
            self._refreshed_batches = self.pump.batches
            _post(f"{self.search_url}/{self.index_prefix}*/_refresh", b"", timeout=30)

    def function_log(self, group: str, tail: int = 4000) -> str:
        return self.functions[group].log_path.read_text(errors="replace")[-tail:]

    def _poll(self) -> None:
        """The event source mapping: poll the streams every 250 ms."""
        while not self._stopping.wait(0.25):
            try:
                self.pump.pump()
            except Exception as exc:
                self.log(f"stream indexer: {exc}")


def serve(port: int, surface: str, sync_index: bool) -> int:
    """`scripts/stack`: start, print how to use it, run until Ctrl-C / SIGTERM, stop everything."""
    import logging

    if port:
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError as exc:
                print(f"stack: port {port} is not free ({exc.strerror}); pass another --port", file=sys.stderr)
                return 1
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's server logs every request
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stack = Stack(port=port, surface=surface, sync_index=sync_index)
    try:
        stack.start()
    except KeyboardInterrupt:
        return 130
    except BaseException as exc:  # also a missing engine, reported the way the tests report it
        print(f"stack: could not start: {exc}", file=sys.stderr)
        return 1
    print(
        f"""
fleetmem local stack ({len(stack.functions)} functions under the Lambda Runtime Interface Emulator)
  MCP:      {stack.mcp_url}
  HTTP API: {stack.base_url}/v1/<tool>
  logs:     {stack.run_dir}/<function>.log

Mint a token (the client store is the stack's DynamoDB table):
  {stack.token_command()}

Ctrl-C stops everything (data lives in memory only).""",
        flush=True,
    )
    try:
        while not stop.wait(1):
            pass
    finally:
        print("stack: stopping", file=sys.stderr)
        stack.stop()
    return 0
