"""`fleetmem protocol`: the tool schemas and response shapes, as tools/list serves them."""

from __future__ import annotations

import argparse
from typing import Any

from fleetmem.cli.framework import Parser, load_registry
from fleetmem.console import EXIT_OK, CommandFailed, Output
from fleetmem.protocol import CONTRACT_VERSION, PROTOCOL_VERSION


def add_commands(sub: Any, common: Parser) -> None:
    p = sub.add_parser("protocol", parents=[common], help="tool schemas and response shapes")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_protocol)


def protocol_document() -> dict[str, Any]:
    """Tool schemas and response shapes, built from the same specs tools/list serves."""
    from fleetmem.protocol import ERROR_CODES, VERB_NAMES

    registry, problem = load_registry()
    if problem:
        raise CommandFailed(
            "unavailable",
            f"The tool registry failed to load: {problem}",
            "Reinstall the package (pip install -e .) and run: fleetmem doctor",
        )
    listed: dict[str, dict[str, Any]] = {}
    try:  # the exact objects tools/list serves, when the transport can build them
        from fleetmem.transport.listing import tool_definition

        for spec in registry.values():
            listed[spec.name] = tool_definition(spec).model_dump(by_alias=True, exclude_none=True)
    except Exception:
        listed = {}
    tools = []
    for spec in registry.values():
        entry = dict(
            listed.get(spec.name)
            or {
                "name": spec.name,
                "description": spec.description,
                "inputSchema": spec.input_schema(),
                "annotations": dict(spec.annotations),
            }
        )
        entry["scope"] = spec.scope
        entry["surface"] = spec.surface
        entry["writes"] = spec.writes
        entry["idempotency_key"] = bool(spec.idempotency)
        entry["responseSchema"] = spec.result.model_json_schema()
        tools.append(entry)
    return {
        "protocol_version": PROTOCOL_VERSION,
        "contract_version": CONTRACT_VERSION,
        "verbs": list(VERB_NAMES),
        "error_codes": list(ERROR_CODES),
        "tools": tools,
    }


def cmd_protocol(args: argparse.Namespace, out: Output) -> int:
    doc = protocol_document()
    if out.as_json:
        out.document(doc)
    else:
        for t in doc["tools"]:
            props = t.get("inputSchema", {}).get("properties", {})
            out.text(f"{t['name']:<14} [{t['scope']}, {t['surface']}] {', '.join(props)}")
    return EXIT_OK
