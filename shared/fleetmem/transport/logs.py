"""Structured JSON logs on stderr, with the call's correlation_id on every line (D1).

The correlation id lives in a context variable (`fleetmem.contract.correlation`) set by `dispatch`
for the duration of one call, and a logging filter stamps it on every record emitted meanwhile (the
domain's and adapters' lines too), so an operator can pull one call's whole story with a single
grep. Log lines carry names, codes, counts and timings only: never argument values, tokens, tenants
in clear or vectors.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any

from fleetmem.contract.correlation import current_correlation_id
from fleetmem.timefmt import iso

#: Attribute names of a LogRecord that are not user-supplied `extra` fields.
_RESERVED = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


class CorrelationFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "correlation_id", None) is None:
            record.correlation_id = current_correlation_id()
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, msg, correlation_id and the record's extras."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": iso(datetime.fromtimestamp(record.created, tz=UTC)),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
            "correlation_id": getattr(record, "correlation_id", None) or current_correlation_id(),
        }
        for key, value in vars(record).items():
            if key not in _RESERVED and key not in out and not key.startswith("_"):
                out[key] = value
        if record.exc_info and record.exc_info[0] is not None:
            # The exception's type only: its message may quote SQL, values or credentials.
            out["exc_type"] = record.exc_info[0].__name__
        return json.dumps(out, ensure_ascii=False, default=str)


_HANDLER_NAME = "fleetmem-json-stderr"


def configure_logging(level: int | str = "INFO") -> None:
    """Attach the JSON stderr handler to the `fleetmem` logger (idempotent). Servers and Lambda
    entry points call this once at start; libraries never do."""
    root = logging.getLogger("fleetmem")
    root.setLevel(level)
    if any(h.get_name() == _HANDLER_NAME for h in root.handlers):
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(CorrelationFilter())
    root.addHandler(handler)
    root.propagate = False
