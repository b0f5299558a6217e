"""fleetmem — long-term memory for fleets of AI agents, spoken over MCP (MEMORY_VERBS v1)."""

__version__ = "0.1.0"
