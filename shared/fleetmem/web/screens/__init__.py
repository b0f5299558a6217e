"""One module per console screen; importing this package registers them all (`app.screen`)."""

from fleetmem.web.screens import facts, login, memories, overview, tokens  # noqa: F401
