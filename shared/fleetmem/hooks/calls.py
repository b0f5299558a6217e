"""How the hook and heartbeat commands call memory: through the typed client (`fleetmem.client`),
over `/v1` to an endpoint or in-process on a data directory, answering each call as a lane does
(`fleetmem.lanes.ToolReply`: the tool's body, or its envelope as an error).

A call is never retried (`retry_wait_s=0`: a hook never waits on a throttle). A server that gave no
usable answer raises `RemoteUnavailable` (the caller logs it, or the CLI says it), and a local data
directory that cannot be used raises its `CommandFailed` (a configuration the user must fix).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fleetmem.client import Client, FleetmemError
from fleetmem.client.errors import NOT_JSON
from fleetmem.client.transports import HttpTransport, LocalTransport
from fleetmem.console import CommandFailed
from fleetmem.lanes import ToolReply
from fleetmem.remote import NOTICES_KEY, Endpoint, RemoteUnavailable


class ClientLane:
    """A `Client` answering as a lane: `label` keys the heartbeat's state (the endpoint URL, or
    `local:<data dir>`), `remote` says whether the server decides visibility."""

    def __init__(self, client: Client, *, label: str, remote: bool, timeout: float | None = None) -> None:
        self.client = client
        self.label = label
        self.remote = remote
        #: each request's bound, named when one ran out
        self.timeout = timeout

    def warm(self) -> None:
        """Import what the first call needs now, so a caller's time limit measures the memory."""
        if not self.remote:
            import fleetmem.transport.dispatch
            import fleetmem.wiring  # noqa: F401

    def call(self, tool: str, arguments: dict[str, Any]) -> ToolReply:
        try:
            body = self.client.call(tool, arguments)
        except FleetmemError as err:
            if isinstance(err.__cause__, CommandFailed):  # the local data directory is not usable
                raise err.__cause__ from None
            if err.unanswered is not None:
                raise RemoteUnavailable(self.label, self._why(err)) from None
            return ToolReply(err.envelope, is_error=True)
        notices = body.pop(NOTICES_KEY, None)
        return ToolReply(body, notices=list(notices) if isinstance(notices, list) else [])

    def _why(self, err: FleetmemError) -> str:
        """Why no answer came, as the remote lane said it: a bound that ran out, else the error."""
        if err.unanswered == NOT_JSON:
            return err.message
        if self.timeout is not None and str(err.unanswered).endswith("Timeout"):
            return f"no answer within {self.timeout:g} s"
        return str(err.unanswered)

    def call_many(self, calls: Sequence[tuple[str, dict[str, Any]]]) -> list[ToolReply]:
        """Each call in turn, over the client's one keep-alive connection."""
        return [self.call(tool, arguments) for tool, arguments in calls]

    def close(self) -> None:
        self.client.close()


def client_lane(endpoint: Endpoint | None, data_dir: str | None, tenant: str | None = None) -> ClientLane:
    """The endpoint's lane over `/v1` (its token, its timeout per request), else the data
    directory's, opened as the ambient verbs need it: no embedder, an existing memory only."""
    if endpoint is not None:
        client = Client.over(HttpTransport(endpoint), retry_wait_s=0)
        return ClientLane(client, label=endpoint.url, remote=True, timeout=endpoint.timeout)
    local = LocalTransport(data_dir, tenant, embedder="none", creates=False)
    return ClientLane(Client.over(local, retry_wait_s=0), label=local.label, remote=False)
