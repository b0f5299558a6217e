"""Byte-compile a built Lambda asset with the Python the functions run on, so a cold start reads
bytecode instead of compiling every module (a deployed asset is read-only: Lambda cannot write the
`.pyc` files itself, so without them each new sandbox compiles the whole import graph again).

    python scripts/lib/compile_asset.py ASSET_DIR PYTHON_VERSION   (e.g. build/lambda 3.13)

The `.pyc` files are written with `unchecked-hash` invalidation: the interpreter uses them without
comparing the source's timestamp (a zip keeps mtimes at two-second resolution, which would make
timestamp-checked files look stale); the asset is rebuilt whole whenever a source changes.
Bytecode is only valid for the same minor version, so the interpreter must be that version: this
one when it matches, else `~/.pyenv/versions/<version>*`, else `python<version>` on PATH. With none
of those the asset is left uncompiled and the reason printed (exit status 0: it still works).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path


def interpreter(version: str) -> Path | None:
    """A Python of `version` (major.minor) on this machine, or None."""
    if f"{sys.version_info.major}.{sys.version_info.minor}" == version:
        return Path(sys.executable)
    pyenv = Path.home() / ".pyenv" / "versions"
    for candidate in sorted(pyenv.glob(f"{version}*"), reverse=True):
        python = candidate / "bin" / "python"
        rest = candidate.name[len(version) :]
        if python.exists() and (rest == "" or rest.startswith(".")):
            return python
    found = shutil.which(f"python{version}")
    return Path(found) if found else None


def compile_asset(asset: Path, version: str) -> str:
    """Compile every `.py` under `asset`; returns a one-line report."""
    python = interpreter(version)
    if python is None:
        return f"bytecode: skipped, no python {version} on this machine (cold starts will compile)"
    subprocess.run(  # noqa: S603 - a local interpreter on our own build output
        [str(python), "-m", "compileall", "-q", "-j", "0", "--invalidation-mode", "unchecked-hash", str(asset)],
        check=True,
    )
    count = sum(1 for _ in asset.rglob("*.pyc"))
    return f"bytecode: {count} modules compiled with {python} (python {version}, unchecked-hash)"


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    print(compile_asset(Path(argv[0]), argv[1]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
