"""A consistent copy of a live local store (`fleetmem backup`), through SQLite's online backup API.

`backup(src, dest)` copies the database in one step from a read transaction of its own, so the
copy is the database as of one commit: every write committed before the copy started is in it,
none is half in it, and writers (a running `fleetmem serve`) go on meanwhile (WAL readers do not
block them). The copy is checked with `PRAGMA integrity_check` before it is reported done.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from fleetmem.adapters.local.sqlite.db import DB_FILENAME
from fleetmem.errors import Unavailable


def backup(source: Path, dest_dir: Path) -> tuple[Path, str]:
    """Copy the database `source` into `dest_dir`/fleetmem.db (a new data directory, private to its
    owner); returns the copy's path and its integrity_check result ("ok" when sound)."""
    dest_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    target = dest_dir / DB_FILENAME
    part = dest_dir / f".{DB_FILENAME}.part"
    os.close(os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600))
    try:
        src = sqlite3.connect(f"{source.resolve().as_uri()}?mode=ro", uri=True, timeout=30)
        dst = sqlite3.connect(part)
        try:
            src.execute("PRAGMA busy_timeout = 30000")
            src.backup(dst)  # one step: the copy is one consistent snapshot
            (check,) = dst.execute("PRAGMA integrity_check").fetchone()
        finally:
            dst.close()
            src.close()
    except sqlite3.Error as exc:
        part.unlink(missing_ok=True)
        raise Unavailable(f"the backup could not be taken ({exc})", reason="backup") from None
    os.replace(part, target)
    return target, str(check)
