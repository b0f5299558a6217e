"""Slugs and aliases: the two normal forms entity resolution compares.

Public functions:
- `slugify_segment(text) -> str`: lowercase, ASCII-folded, every run of non-alphanumerics -> "-",
  leading/trailing "-" stripped ("Zoë Müller!" -> "zoe-muller").
- `slugify(text) -> str`: `slugify_segment` per "/"-separated path segment, empty segments dropped
  ("People/Alice Example" -> "people/alice-example"). May return "" (nothing sluggable).
- `is_canonical_slug(slug) -> bool`: non-empty and already equal to its slugified form.
- `normalize_alias(text) -> str`: casefolded, whitespace collapsed to single spaces, trimmed.
- `last_segment(slug) -> str`: the part after the final "/".
"""

from __future__ import annotations

import re
import unicodedata

_NON_ALNUM = re.compile(r"[^a-z0-9]+")
_WHITESPACE = re.compile(r"\s+")


def slugify_segment(text: str) -> str:
    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    return _NON_ALNUM.sub("-", folded.lower()).strip("-")


def slugify(text: str) -> str:
    parts = (slugify_segment(p) for p in text.split("/"))
    return "/".join(p for p in parts if p)


def is_canonical_slug(slug: str) -> bool:
    return bool(slug) and slugify(slug) == slug


def normalize_alias(text: str) -> str:
    return _WHITESPACE.sub(" ", text.casefold()).strip()


def last_segment(slug: str) -> str:
    return slug.rsplit("/", 1)[-1]
