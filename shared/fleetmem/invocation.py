"""How `fleetmem` is run on this machine, for every command the CLI and the local server print.

Fixes, hints and the server's banner name commands the user is meant to paste. `fleetmem` works
only when that name on PATH is this installation; after `scripts/serve` (which does not activate
the venv) it is not, and a printed `fleetmem …` would exit 127. So the printed command is
`fleetmem` when PATH finds this installation's script, else that script's absolute path (e.g.
`/home/me/fleetmem/.venv/bin/fleetmem`), else `python -m fleetmem.cli` for an installation
without a console script. JSON documents keep `fleetmem` as the command's name (the protocol's
spelling); the human lines are what get rewritten.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

NAME = "fleetmem"


def _this_script(argv0: str, executable: str) -> Path | None:
    """The console script this process runs from: argv[0] when it is one, else the venv's."""
    if argv0 and Path(argv0).name == NAME and Path(argv0).is_file():
        return Path(argv0).absolute()
    script = Path(executable).parent / NAME
    return script.absolute() if script.is_file() else None


def _same_file(a: str | Path, b: str | Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _installed(argv0: str, executable: str) -> tuple[str, ...]:
    script = _this_script(argv0, executable)
    return (str(script),) if script is not None else (executable, "-m", "fleetmem.cli")


@functools.lru_cache(maxsize=8)
def _command(path_env: str, argv0: str, executable: str) -> tuple[str, ...]:
    script = _this_script(argv0, executable)
    found = shutil.which(NAME, path=path_env)
    if found and (script is None or _same_file(found, script)):
        return (NAME,)
    return _installed(argv0, executable)


def command() -> tuple[str, ...]:
    """The argv prefix that runs this installation's `fleetmem` from any directory."""
    return _command(os.environ.get("PATH", os.defpath), sys.argv[0] if sys.argv else "", sys.executable)


def installed_command() -> tuple[str, ...]:
    """This installation by absolute path, whatever PATH holds (for a machine-local file, such as
    a harness's personal settings, that another shell's PATH must not change)."""
    return _installed(sys.argv[0] if sys.argv else "", sys.executable)


def argv(words: Sequence[str]) -> list[str]:
    """`words` with a leading `fleetmem` replaced by `command()`."""
    words = [str(w) for w in words]
    return [*command(), *words[1:]] if words[:1] == [NAME] else words


#: The `fleetmem` subcommands that are not registry tools (the CLI builds them without loading the
#: registry, and `in_text` knows them as commands): the server and tokens, the ambient-recall
#: commands (profile, hook, heartbeat), the portability ones (export, backup, tenant) and admin.
BUILTIN_COMMANDS = frozenset(
    {"serve", "init", "token", "protocol", "import", "doctor", "embedder", "reindex", "conformance", "bench"}
    | {"profile", "hook", "heartbeat", "console"}
    | {"export", "backup", "tenant", "admin", "stage"}
)


@functools.cache
def _in_text() -> re.Pattern[str]:
    """`fleetmem` as the first word of a command inside prose: not part of a path, a URL or a
    longer word, and followed by one of its subcommands or an option (so "fleetmem MCP server",
    "no fleetmem memory" and "fleetmem's" stay as they are)."""
    from fleetmem.protocol import ACCOUNT_TOOLS, ADMIN_TOOLS, INSPECT_TOOLS, PAGE_TOOLS, RECEIPT_TOOLS, VERB_NAMES

    tools = (*VERB_NAMES, *PAGE_TOOLS, *ADMIN_TOOLS, *INSPECT_TOOLS, *ACCOUNT_TOOLS, *RECEIPT_TOOLS)
    words = BUILTIN_COMMANDS | {t.replace("_", "-") for t in tools}
    alternatives = "|".join(sorted(map(re.escape, words), key=len, reverse=True))
    return re.compile(rf"(?<![\w./:@-]){NAME}(?= (?:--|(?:{alternatives})(?![\w-])))")


def in_text(text: str) -> str:
    """`text` with every `fleetmem <subcommand>` written as `command()` would run it."""
    prefix = shlex.join(command())
    return text if prefix == NAME else _in_text().sub(lambda _m: prefix, text)
