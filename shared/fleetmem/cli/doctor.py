"""`fleetmem doctor`: what is configured, what is degraded, and the fixes."""

from __future__ import annotations

import argparse
import shlex
import tempfile
from pathlib import Path
from typing import Any

from fleetmem import invocation
from fleetmem.cli.framework import Parser, load_registry
from fleetmem.cli.maintenance import maintenance_stores
from fleetmem.console import EXIT_FAILED, EXIT_OK, CommandFailed, Output
from fleetmem.lanes import open_deps, settings_from, store_state
from fleetmem.protocol import CONTRACT_VERSION


def add_commands(sub: Any, common: Parser) -> None:
    p = sub.add_parser("doctor", parents=[common], help="what is configured, what is degraded, and the fixes")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_doctor)


def _check(cid: str, status: str, detail: str, fix: str | None = None, **extra: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {"id": cid, "status": status, "detail": detail}
    if fix:
        doc["fix"] = {"argv": shlex.split(fix), "command": fix}
    doc.update(extra)
    return doc


def _data_dir_check(data_dir: Path, state: str) -> dict[str, Any]:
    """Whether the data directory holds a memory and is writable; it is never created here (a
    mistyped --data-dir must not leave an empty memory behind)."""
    if state == "file":
        return _check("data_dir", "fail", f"{data_dir} is a file, not a directory", "fleetmem doctor --data-dir DIR")
    if state == "missing":
        why = "does not exist" if not data_dir.exists() else "holds no fleetmem.db"
        return _check(
            "data_dir",
            "warn",
            f"{data_dir} {why}: no memory there yet (a mistyped --data-dir?); `fleetmem serve` and the "
            "commands that store create it",
            f"fleetmem init --data-dir {shlex.quote(str(data_dir))}",
        )
    try:
        with tempfile.NamedTemporaryFile(dir=data_dir, prefix=".doctor-", delete=True):
            pass
    except OSError as exc:
        return _check(
            "data_dir",
            "fail",
            f"{data_dir} is not writable: {exc.strerror}",
            f"fleetmem doctor --data-dir {shlex.quote(str(Path.home() / 'fleetmem-data'))}",
        )
    return _check("data_dir", "ok", f"{data_dir} is writable")


def doctor_report(args: argparse.Namespace) -> dict[str, Any]:
    settings = settings_from(args)
    checks: list[dict[str, Any]] = []
    configured = {
        "backend": settings.backend,
        "data_dir": str(settings.data_dir),
        "embedder": settings.embedder,
        "model_dir": str(settings.model_dir),
        "llm": settings.llm,
        "surface": settings.surface,
    }
    state = store_state(settings)
    if settings.backend == "local":
        checks.append(_data_dir_check(Path(settings.data_dir), state))
    registry, problem = load_registry()
    if problem:
        checks.append(_check("registry", "fail", f"tool registry failed to load: {problem}", "pip install -e ."))
    else:
        checks.append(_check("registry", "ok", f"{len(registry)} tools registered"))
    deps = None
    if state == "ok":
        try:
            deps = open_deps(settings)
            checks.append(_check("store", "ok", f"{settings.backend} store opened"))
        except CommandFailed as exc:
            checks.append(_check("store", "fail", exc.message, "fleetmem doctor --json"))
    if state == "missing":  # no store to open (none is created here); the embedder is still checked
        from fleetmem.wiring import local_embedder

        emb, problem = local_embedder(settings)
        checks.append(_embedder_check(settings, emb, problem))
    if deps is not None:
        emb = deps.embedder
        checks.append(_embedder_check(settings, emb, deps.diagnostics.embedder_problem))
        if emb is not None:
            checks.append(_unembedded_check(deps, emb))
        if deps.llm is None:
            checks.append(
                _check(
                    "llm",
                    "info",
                    f"no LLM: {deps.diagnostics.llm_problem or 'not configured'}; synthesize answers `unavailable`",
                )
            )
        else:
            checks.append(_check("llm", "ok", f"{deps.llm.model_id}"))
        try:
            active = [r for r in deps.clients.list() if r.revoked_at is None]
            if active:
                checks.append(_check("tokens", "ok", f"{len(active)} active token(s)", count=len(active)))
            else:
                checks.append(
                    _check(
                        "tokens",
                        "warn",
                        "no active token: MCP clients cannot connect",
                        "fleetmem token create --client my-agent --scopes read,write",
                        count=0,
                    )
                )
        except Exception as exc:
            checks.append(_check("tokens", "fail", f"cannot list tokens: {type(exc).__name__}"))
    if getattr(args, "data_dir", None):  # fixes name the data directory they are about
        for c in checks:
            fix = c.get("fix")
            if fix and c["id"] != "data_dir" and fix["argv"][:1] == ["fleetmem"]:
                fix["argv"] = [*fix["argv"], "--data-dir", str(args.data_dir)]
                fix["command"] = shlex.join(fix["argv"])
    worst = "ok"
    for c in checks:
        if c["status"] == "fail":
            worst = "fail"
        elif c["status"] == "warn" and worst == "ok":
            worst = "warn"
    return {"status": worst, "configured": configured, "checks": checks, "contract_version": CONTRACT_VERSION}


def _embedder_check(settings: Any, emb: Any, problem: str | None) -> dict[str, Any]:
    if emb is None:
        return _check(
            "embedder",
            "warn",
            f"no embedder: {problem or 'not configured'}; recall is keyword-only "
            "(search_degraded) and dedup is exact-text only",
            "fleetmem embedder build",
        )
    status = "ok" if settings.embedder != "hash" else "warn"
    detail = f"{emb.model_id} (dim {emb.dim})" + (" — hash embedder is for tests only" if status == "warn" else "")
    return _check("embedder", status, detail, None if status == "ok" else "fleetmem serve")


def _unembedded_check(deps: Any, embedder: Any) -> dict[str, Any]:
    try:
        from fleetmem.maintenance import unembedded

        counts = unembedded(maintenance_stores(deps), embedder)
    except Exception as exc:
        return _check("unembedded", "info", f"not checked here ({type(exc).__name__})")
    counts = dict(counts)
    total = int(counts.get("total", counts.get("docs", 0) + counts.get("facts", 0)))
    detail = f"{counts.get('docs', 0)} search doc(s) and {counts.get('facts', 0)} fact(s)"
    if total:
        return _check(
            "unembedded",
            "warn",
            f"{detail} lack a vector of {embedder.model_id}",
            "fleetmem reindex",
            counts=counts,
        )
    return _check("unembedded", "ok", f"every search doc and fact has a vector of {embedder.model_id}", counts=counts)


def cmd_doctor(args: argparse.Namespace, out: Output) -> int:
    report = doctor_report(args)
    if out.as_json:
        out.document(report)
    else:
        for c in report["checks"]:
            line = f"[{c['status']:>4}] {c['id']}: {c['detail']}"
            if c.get("fix"):
                line += f"\n       fix: {invocation.in_text(c['fix']['command'])}"
            out.text(line)
        out.text(f"overall: {report['status']}")
    return EXIT_FAILED if report["status"] == "fail" else EXIT_OK
