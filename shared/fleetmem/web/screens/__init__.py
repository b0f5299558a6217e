"""One module per console screen; importing this package registers them all (`app.screen`)."""

from fleetmem.web.screens import (  # noqa: F401
    activity,
    context,
    corrections,
    entities,
    facts,
    followers,
    login,
    memories,
    overview,
    packs,
    pages,
    tokens,
)
