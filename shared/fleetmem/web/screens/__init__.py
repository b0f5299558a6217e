"""One module per console screen; importing this package registers them all (`app.screen`)."""

from fleetmem.web.screens import context, entities, followers, login, overview, pages  # noqa: F401
