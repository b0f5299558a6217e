"""The lanes a command acts through, beneath the CLI: the trusted-local one on a data directory
(`LocalLane`, `local_caller`, `open_deps`) and the shape every lane answers in (`Lane`,
`ToolReply`; the hooks' lane over the typed client is `fleetmem.hooks.calls.ClientLane`). The CLI's
tool subcommands, the typed client's local mode and the hook and heartbeat commands share them, so
a local call is the same dispatch everywhere.
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from fleetmem.console import CommandFailed, Output
from fleetmem.protocol import SCOPES, Scope

T = TypeVar("T")

LOCAL_CLIENT_ID = "local"
ALL_SCOPES: frozenset[Scope] = frozenset(SCOPES)


def settings_from(args: argparse.Namespace, **overrides: Any) -> Any:
    from fleetmem.config import Settings

    values: dict[str, Any] = {"data_dir": getattr(args, "data_dir", None)}
    for name in ("backend", "embedder", "surface", "model_dir"):
        if getattr(args, name, None) is not None:
            values[name] = getattr(args, name)
    values.update(overrides)
    serve = {name: getattr(args, name, None) for name in ("host", "port", "call_threads", "console")}
    return from_env(lambda: Settings.from_env(serve=serve, **values))


def from_env(read: Callable[[], T]) -> T:
    """`read()` (settings from the environment); a FLEETMEM_* variable that does not parse is the
    command's `invalid_config`, naming the variable and the fix."""
    try:
        return read()
    except ValueError as exc:  # a FLEETMEM_* variable that does not parse
        problem, _, fix = str(exc).partition("; ")
        raise CommandFailed.usage(
            f"The configuration from the environment is not valid: {problem}",
            fix or "Correct or unset the FLEETMEM_* variable it names, then run: fleetmem doctor",
            code="invalid_config",
        ) from None


def store_state(settings: Any) -> str:
    """The local data directory as a command finds it: `ok` (it holds a database), `missing` (no
    such directory, or no database in it), `file` (the path is not a directory); `ok` off-local."""
    from fleetmem.wiring import DB_FILENAME

    if settings.backend != "local":
        return "ok"
    data_dir = Path(settings.data_dir)
    if data_dir.exists() and not data_dir.is_dir():
        return "file"
    return "ok" if (data_dir / DB_FILENAME).is_file() else "missing"


def data_dir_failure(settings: Any, state: str) -> CommandFailed:
    data_dir = Path(settings.data_dir)
    quoted = shlex.quote(str(data_dir))
    if state == "file":
        return CommandFailed.usage(
            f"The data directory {data_dir} is a file, not a directory; nothing was read or written.",
            "Pass the directory that holds fleetmem.db (`fleetmem serve` prints it at startup), or the "
            "path of a new directory for a new memory: --data-dir DIR",
        )
    why = "no such directory" if not data_dir.exists() else "no fleetmem.db in it"
    return CommandFailed.usage(
        f"No fleetmem memory in {data_dir} ({why}); nothing was read.",
        "Check the path: `fleetmem serve` prints its data directory at startup (without --data-dir it is "
        f"$FLEETMEM_DATA_DIR or the per-user directory). To start a new, empty memory there: "
        f"fleetmem init --data-dir {quoted}",
        code="data_dir_not_found",
    )


def open_deps(settings: Any, *, creates: bool = False, announce: bool = True) -> Any:
    """The stores for a command. A command that only reads (`creates=False`) refuses a data
    directory without a database: a mistyped --data-dir would otherwise read an empty memory and
    report nothing found. A command that stores (remember, put-page, import, token create) starts a
    new memory there and says so on stderr."""
    from fleetmem.wiring import build_deps

    state = store_state(settings)
    if state == "file" or (state == "missing" and not creates):
        raise data_dir_failure(settings, state)
    try:
        deps = build_deps(settings)
    except Exception as exc:  # the store could not be opened: say where and how to fix it
        raise CommandFailed(
            "unavailable",
            f"Could not open the {settings.backend} store: {type(exc).__name__}: {exc}",
            f"Check that the data directory {settings.data_dir} is writable, then run: fleetmem doctor",
        ) from exc
    if state == "missing" and announce:
        Output.err(
            f"Note [data_dir_created]: {settings.data_dir} held no fleetmem memory; a new, empty one was "
            "started there (a server on another --data-dir does not see it)."
        )
    return deps


def local_caller(tenant: str | None) -> Any:
    from fleetmem.models import Caller

    return Caller(tenant=tenant or "default", client_id=LOCAL_CLIENT_ID, scopes=ALL_SCOPES, remote=False)


def render_notices(notices: Sequence[Any]) -> list[dict[str, Any]]:
    """Notices as the wire shows them (ordered by kind, `fix.next` computed for the CLI)."""
    from fleetmem.contract.envelope import order_notices, render_notice

    return [render_notice(n, "cli") for n in order_notices(notices)]


# --------------------------------------------------------------------------- lanes


@dataclass
class ToolReply:
    body: dict[str, Any]
    is_error: bool = False
    notices: list[dict[str, Any]] = field(default_factory=list)


class Lane(Protocol):
    #: A label for logs and state keys: the endpoint URL or `local:<data dir>`.
    label: str
    remote: bool

    def warm(self) -> None: ...

    def call_many(self, calls: Sequence[tuple[str, dict[str, Any]]]) -> list[ToolReply]: ...


class LocalLane:
    """The trusted-local lane: the CLI's own dispatch on a data directory (remote=False)."""

    remote = False

    def __init__(
        self,
        data_dir: str | None = None,
        tenant: str | None = None,
        embedder: str | None = None,
        *,
        creates: bool = False,
    ) -> None:
        """`creates`: a data directory without a memory starts a new one (the Python client's local
        mode); otherwise it is refused, as a read command refuses it (`open_deps`)."""
        ns = argparse.Namespace(data_dir=data_dir, embedder=embedder)
        self.settings = settings_from(ns)
        self.tenant = tenant
        self.creates = creates
        self.label = f"local:{self.settings.data_dir}"
        self._deps: Any = None

    def warm(self) -> None:
        import fleetmem.transport.dispatch
        import fleetmem.wiring  # noqa: F401

    def call_many(self, calls: Sequence[tuple[str, dict[str, Any]]]) -> list[ToolReply]:
        from fleetmem.transport.dispatch import dispatch

        if self._deps is None:
            self._deps = open_deps(self.settings, creates=self.creates, announce=not self.creates)
        caller = local_caller(self.tenant)
        out = []
        for tool, arguments in calls:
            result = dispatch(tool, arguments, caller, self._deps, transport="cli")
            out.append(ToolReply(dict(result.body), bool(result.is_error), render_notices(result.notices)))
        return out

    def call(self, tool: str, arguments: dict[str, Any]) -> ToolReply:
        return self.call_many([(tool, arguments)])[0]
