"""One module per console screen; importing this package registers them all (`app.screen`)."""

from fleetmem.web.screens import login, overview  # noqa: F401
