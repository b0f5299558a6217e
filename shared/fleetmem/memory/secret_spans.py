"""What `redaction` and its detectors (`secret_detectors`, which `redaction` loads on first use)
share, so the detectors never import `redaction` back: a found span (`Finding`) and the fast test a
text must pass before any detector reads it (`MAYBE_SECRET`)."""

from __future__ import annotations

import re
from typing import NamedTuple


class Finding(NamedTuple):
    start: int
    end: int
    pattern: str


#: A text none of whose parts this matches holds nothing any detector can find (the fast path:
#: such a text never loads the detectors).
MAYBE_SECRET = re.compile(r"[A-Za-z0-9+/=_-]{16,}|PRIVATE KEY|PuTTY|://|pass|pwd|secret|key|token|contrase", re.I)
