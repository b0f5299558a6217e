"""Small per-user state files for the ambient commands (hook banks, heartbeat last-seen times).

Each file is one JSON object `{"entries": {key: {..., "updated_at": iso}}}` under the per-user
state directory (`$FLEETMEM_STATE_DIR`, else platformdirs' user state dir), mode 0600, replaced
atomically; a read-modify-write holds an advisory lock so two hooks firing together do not lose an
update. At most `max_entries` keys are kept: the least recently updated are evicted.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fleetmem.profiles import state_dir, write_private_json


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        import fcntl
    except ImportError:  # no advisory locks on this platform: last writer wins
        yield
        return
    with open(path.with_name(path.name + ".lock"), "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


class StateFile:
    def __init__(self, name: str, max_entries: int, directory: Path | None = None) -> None:
        self.path = (directory or state_dir()) / name
        self.max_entries = max_entries

    def _read(self) -> dict[str, dict[str, Any]]:
        try:
            doc = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError, RecursionError):
            return {}  # absent or damaged: state is a cache of hints, start over
        entries = doc.get("entries") if isinstance(doc, dict) else None
        return {k: v for k, v in (entries or {}).items() if isinstance(v, dict)}

    def get(self, key: str) -> dict[str, Any] | None:
        return self._read().get(key)

    def update(self, key: str, change: Callable[[dict[str, Any] | None], dict[str, Any]]) -> dict[str, Any]:
        with _locked(self.path):
            entries = self._read()
            entry = {**change(entries.get(key)), "updated_at": now_iso()}
            entries.pop(key, None)
            entries[key] = entry
            if len(entries) > self.max_entries:
                # Stable sort: entries updated within the same millisecond keep their update order.
                keep = sorted(entries.items(), key=lambda kv: str(kv[1].get("updated_at", "")))
                entries = dict(keep[-self.max_entries :])
            write_private_json(self.path, {"entries": entries}, sort_keys=False)
        return entry
