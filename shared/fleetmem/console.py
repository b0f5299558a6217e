"""The `fleetmem` command's output contract, shared by the CLI and the lanes beneath it.

With `--json` exactly one JSON document on stdout and everything else on stderr (`Output`); a
failure a command reports itself is a `CommandFailed`. Exit codes: 0 ok, 1 failed, 2 usage or
invalid input, 3 confirmation required, 12 no results (only with FLEETMEM_FAIL_ON_EMPTY=1).
"""

from __future__ import annotations

import json
import sys
from typing import Any

from fleetmem import invocation

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_CONFIRM = 3
EXIT_NO_RESULTS = 12


class CommandFailed(Exception):
    """A failure the command reports itself (the `command_failed` fallback document under --json)."""

    def __init__(self, code: str, message: str, suggestion: str, exit_code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.suggestion = suggestion
        self.exit_code = exit_code

    @classmethod
    def usage(cls, message: str, suggestion: str, code: str = "invalid_params") -> CommandFailed:
        """A command line that cannot run as given: exits with `EXIT_USAGE`."""
        return cls(code, message, suggestion, exit_code=EXIT_USAGE)


class Output:
    """Keeps the one-document rule: stdout carries data, stderr carries everything else."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json
        self.document_written = False

    def document(self, doc: Any) -> None:
        if self.document_written:
            raise RuntimeError("a --json command writes exactly one document")
        sys.stdout.write(json.dumps(doc, ensure_ascii=False, indent=2, default=str) + "\n")
        sys.stdout.flush()
        self.document_written = True

    def text(self, line: str = "") -> None:
        sys.stdout.write(line + "\n")

    @staticmethod
    def err(line: str = "") -> None:
        # Every command named on stderr (fixes, hints, suggestions) as this machine runs it.
        sys.stderr.write(invocation.in_text(line) + "\n")
        sys.stderr.flush()
