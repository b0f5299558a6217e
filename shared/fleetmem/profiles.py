"""Named remote endpoints for the CLI: `fleetmem profile add NAME --url URL --token-file PATH`.

A profile is a URL and the PATH of a token file, never the token itself, so the profile file can be
shown or backed up without leaking a credential. The file lives in the per-user config directory
(`$FLEETMEM_CONFIG_DIR`, else platformdirs' user config dir, e.g. `~/.config/fleetmem/profiles.json`)
and is written atomically with mode 0600.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fleetmem.config import ClientSettings

PROFILE_FILE = "profiles.json"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def config_dir() -> Path:
    env = ClientSettings.from_env().config_dir
    if env:
        return env
    from platformdirs import user_config_dir

    return Path(user_config_dir("fleetmem", appauthor=False))


def state_dir() -> Path:
    """Per-user state (hook banks, heartbeat last-seen times): `$FLEETMEM_STATE_DIR` or platformdirs'."""
    env = ClientSettings.from_env().state_dir
    if env:
        return env
    from platformdirs import user_state_dir

    return Path(user_state_dir("fleetmem", appauthor=False))


def profile_path() -> Path:
    return config_dir() / PROFILE_FILE


@dataclass(frozen=True)
class Profile:
    name: str
    url: str
    token_file: str | None

    def doc(self) -> dict[str, Any]:
        return {"name": self.name, "url": self.url, "token_file": self.token_file}


def valid_name(name: str) -> bool:
    return bool(_NAME.match(name))


def load_profiles(path: Path | None = None) -> dict[str, Profile]:
    """Every stored profile; an absent file is no profiles. A corrupt file raises ValueError."""
    path = path or profile_path()
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"cannot read {path}: {exc}") from exc
    out: dict[str, Profile] = {}
    for name, entry in (raw.get("profiles") or {}).items():
        if isinstance(entry, dict) and isinstance(entry.get("url"), str):
            token_file = entry.get("token_file")
            out[name] = Profile(name, entry["url"], token_file if isinstance(token_file, str) else None)
    return out


def write_private_json(path: Path, doc: Any, *, sort_keys: bool = True) -> None:
    """Write `doc` to `path` atomically, readable by the owner only (0600), parents created 0700."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=2, sort_keys=sort_keys)
            fh.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save_profiles(profiles: dict[str, Profile], path: Path | None = None) -> Path:
    path = path or profile_path()
    doc = {
        "profiles": {
            p.name: {k: v for k, v in p.doc().items() if k != "name" and v is not None}
            for p in sorted(profiles.values(), key=lambda p: p.name)
        }
    }
    write_private_json(path, doc)
    return path
