"""The keyword index's words: how text is folded into FTS5 tokens, each behind the fixed prefix of
its (tenant, kind, visibility) partition. The schema's triggers call `fts_terms` (registered on
every connection as `fm_fts_terms`), and the search builds its MATCH from the same folding.
"""

from __future__ import annotations

import re
import unicodedata
from hashlib import blake2b

_FOLDED_WORD = re.compile(r"[^\W_]+")


def fold_words(text: str) -> list[str]:
    """Words as the keyword index sees them: case-folded, accents removed, split on anything that
    is not a letter or digit."""
    folded = text.casefold()
    if not folded.isascii():
        folded = "".join(ch for ch in unicodedata.normalize("NFKD", folded) if not unicodedata.combining(ch))
    return _FOLDED_WORD.findall(folded)


def partition_key(tenant: str, kind: str, visibility: str) -> str:
    """Fixed-length alphanumeric prefix of the keyword tokens of one (tenant, kind, visibility)."""
    raw = f"{tenant}\x00{kind}\x00{visibility}".encode()
    return "p" + blake2b(raw, digest_size=10).hexdigest()


def fts_terms(tenant: str, kind: str, visibility: str, text: str | None) -> str:
    prefix = partition_key(tenant, kind, visibility)
    return " ".join(prefix + w for w in fold_words(text or ""))
