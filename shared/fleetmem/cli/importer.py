"""`fleetmem import`: a folder of markdown pages through put_page, or a memory pack (`fleetmem.cli.pack`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from fleetmem.cli.framework import Parser, whole_number_type
from fleetmem.cli.pack import add_import_options, cmd_import_pack
from fleetmem.console import EXIT_FAILED, EXIT_OK, CommandFailed, Output
from fleetmem.lanes import local_caller, open_deps, settings_from
from fleetmem.protocol import CONTRACT_VERSION

#: `fleetmem import --jobs`: enough concurrent files that the embedder batches their chunks
IMPORT_JOBS = 8
IMPORT_JOBS_MAX = 64


def add_commands(sub: Any, common: Parser) -> None:
    p = sub.add_parser("import", parents=[common], help="import a folder of markdown pages, or a memory pack")
    p.add_argument("path", nargs="?", default=None)
    add_import_options(p)
    p.add_argument("--tenant", default=None)
    p.add_argument(
        "--jobs",
        type=whole_number_type(1, IMPORT_JOBS_MAX),
        default=IMPORT_JOBS,
        help=f"files written at once (1-{IMPORT_JOBS_MAX}, default {IMPORT_JOBS}); their chunks share forward passes",
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_import)


class Progress:
    """A stdlib progress bar on stderr (redrawn in place on a terminal, periodic lines otherwise)."""

    def __init__(self, total: int, label: str) -> None:
        self.total = max(total, 1)
        self.label = label
        self.tty = sys.stderr.isatty()
        self.last_pct = -1

    def update(self, done: int, note: str = "") -> None:
        pct = int(done * 100 / self.total)
        if self.tty:
            bar = "#" * (pct // 4) + "." * (25 - pct // 4)
            sys.stderr.write(f"\r{self.label} [{bar}] {done}/{self.total} {note[:40]:<40}")
            sys.stderr.flush()
        elif pct // 10 != self.last_pct // 10 or done == self.total:
            Output.err(f"{self.label}: {done}/{self.total} ({pct}%)")
        self.last_pct = pct

    def close(self) -> None:
        if self.tty:
            sys.stderr.write("\n")


def _import_files(root: Path) -> list[Path]:
    return sorted(
        p
        for p in root.rglob("*.md")
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)
    )


def _import_one(root: Path, path: Path, caller: Any, deps: Any) -> str | dict[str, Any]:
    """Put one file through the put_page dispatch: put_page's status (created, updated or
    unchanged) when stored, else its error by name."""
    from fleetmem.transport.dispatch import dispatch

    rel = path.relative_to(root).as_posix()
    slug = rel[: -len(".md")]
    try:
        content = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return {
            "file": rel,
            "slug": slug,
            "code": "invalid_params",
            "message": f"not readable as UTF-8 text: {type(exc).__name__}",
        }
    result = dispatch("put_page", {"slug": slug, "content": content}, caller, deps, transport="cli")
    if not result.is_error:
        return str(result.body.get("status") or "created")
    return {
        "file": rel,
        "slug": slug,
        "code": result.body.get("code"),
        "message": result.body.get("message"),
        "suggestion": result.body.get("suggestion"),
    }


def cmd_import(args: argparse.Namespace, out: Output) -> int:
    from concurrent.futures import ThreadPoolExecutor

    if args.pack is not None:
        return cmd_import_pack(args, out)
    if args.path is None:
        raise CommandFailed.usage(
            "fleetmem import needs a folder of markdown pages or --pack FILE.",
            "Pass one: fleetmem import ./notes, or fleetmem import --pack brain.fmpack",
            code="usage",
        )
    root = Path(args.path).expanduser()
    if not root.is_dir():
        raise CommandFailed.usage(
            f"{root} is not a directory",
            "Pass a folder of markdown pages: fleetmem import ./notes",
        )
    files = _import_files(root)
    deps = open_deps(settings_from(args), creates=True)
    caller = local_caller(args.tenant)
    progress = Progress(len(files), "import")
    imported = unchanged = 0
    errors: list[dict[str, Any]] = []
    # Files go through put_page on `--jobs` threads (each file is its own page, so their order does
    # not matter); concurrent pages' chunks share the embedder's forward passes. Results are taken
    # in file order, so the progress and the error lines read as a sequential import's would.
    pool = ThreadPoolExecutor(max_workers=args.jobs, thread_name_prefix="import")
    try:
        results = pool.map(lambda path: _import_one(root, path, caller, deps), files)
        for i, (path, outcome) in enumerate(zip(files, results, strict=True), 1):
            rel = path.relative_to(root).as_posix()
            if outcome == "unchanged":
                unchanged += 1
            elif isinstance(outcome, str):
                imported += 1
            else:
                errors.append(outcome)
                if progress.tty:
                    sys.stderr.write("\n")
                Output.err(f"  {rel}: [{outcome['code']}] {outcome['message']}")
            progress.update(i, rel)
    finally:  # on Ctrl-C the pages being written finish; the files not started are not
        pool.shutdown(wait=True, cancel_futures=True)
    progress.close()
    summary = (
        f"Imported {imported} of {len(files)} page(s) from {root}; {unchanged} unchanged (already stored "
        f"as they are), {len(errors)} failed."
    )
    Output.err(summary)
    if out.as_json:
        out.document(
            {
                "path": str(root),
                "total": len(files),
                "imported": imported,
                "unchanged": unchanged,
                "failed": len(errors),
                "errors": errors,
                "contract_version": CONTRACT_VERSION,
            }
        )
    return EXIT_FAILED if errors else EXIT_OK
