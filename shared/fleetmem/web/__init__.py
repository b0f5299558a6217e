"""The memory console: a browser UI over the same `/v1` tools every client calls (docs/console.md).

`fleetmem serve` mounts it at `/console` (`console_routes`); `fleetmem console --profile NAME`
serves it on this machine against a deployed stage (`Console` over `ToolClient.remote`).
"""

from fleetmem.web.app import Console, console_routes
from fleetmem.web.client import ToolClient, ToolFailed

__all__ = ["Console", "ToolClient", "ToolFailed", "console_routes"]
