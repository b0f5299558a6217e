"""fleetmem from Python: `Client` and `AsyncClient`, one method per tool, over `/v1` (default), MCP
or an in-process data directory; every refusal is a `FleetmemError` with the server's envelope.

Light at import: httpx2, pydantic and fleetmem's contract modules; the server stack (transports,
stores, the MCP SDK) is never imported by it. docs/python-client.md has an example.
"""

from fleetmem.client.core import AsyncClient, AsyncDeltaFollower, Client, DeltaFollower
from fleetmem.client.errors import FleetmemError

__all__ = ["AsyncClient", "AsyncDeltaFollower", "Client", "DeltaFollower", "FleetmemError"]
