"""Run `fleetmem` against a temporary data directory.

`fm(...)` runs `fleetmem.cli.main` in this process with stdin/stdout/stderr and the environment
swapped, exactly as the console script would (fast); `fm(..., subprocess=True)` runs the installed
console script in a real subprocess, which the tests use for the paths where the process boundary
matters (exit status, the one-document stdout, stdin). The CLI tests use the deterministic hash
embedder (FLEETMEM_EMBEDDER=hash); the real model is exercised by the embedder and conformance suites.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest


def fleetmem_command() -> list[str]:
    script = Path(sys.executable).parent / "fleetmem"
    if script.exists():
        return [str(script)]
    found = shutil.which("fleetmem")
    return [found] if found else [sys.executable, "-m", "fleetmem.cli"]


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        """stdout must be exactly one JSON document."""
        return json.loads(self.stdout)


class Fleetmem:
    def __init__(self, data_dir: Path, env: dict[str, str]) -> None:
        self.data_dir = data_dir
        self.env = env

    def __call__(
        self,
        *args: str,
        stdin: str | None = None,
        env: dict[str, str] | None = None,
        data_dir: bool = True,
        subprocess: bool = False,
    ) -> Run:
        argv = list(args)
        if data_dir:
            argv += ["--data-dir", str(self.data_dir)]
        full_env = {**self.env, **(env or {})}
        if subprocess:
            return self._subprocess(argv, stdin, full_env)
        return self._in_process(argv, stdin, full_env)

    @staticmethod
    def _subprocess(argv: list[str], stdin: str | None, env: dict[str, str]) -> Run:
        import subprocess as sp

        proc = sp.run(
            [*fleetmem_command(), *argv],
            input=stdin if stdin is not None else "",
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )
        return Run(proc.returncode, proc.stdout, proc.stderr)

    @staticmethod
    def _in_process(argv: list[str], stdin: str | None, env: dict[str, str]) -> Run:
        from fleetmem.cli import main

        saved_env, saved_stdin = dict(os.environ), sys.stdin
        out, err = io.StringIO(), io.StringIO()
        os.environ.clear()
        os.environ.update(env)
        sys.stdin = io.StringIO(stdin or "")
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = main(argv)
        finally:
            os.environ.clear()
            os.environ.update(saved_env)
            sys.stdin = saved_stdin
        return Run(code, out.getvalue(), err.getvalue())


@pytest.fixture
def fm(tmp_path: Path) -> Fleetmem:
    """A runner over a new, empty memory (`fleetmem init`): the commands that only read refuse a
    data directory without one."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETMEM_")}
    env["FLEETMEM_EMBEDDER"] = "hash"
    env["FLEETMEM_MODEL_DIR"] = str(tmp_path / "no-model")
    runner = Fleetmem(tmp_path / "data", env)
    assert runner("init").code == 0
    return runner
