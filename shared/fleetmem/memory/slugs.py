"""Slugs and aliases: the two normal forms entity resolution compares.

Public functions:
- `slugify_segment(text) -> str`: lowercase, ASCII-folded, every run of non-alphanumerics -> "-",
  leading/trailing "-" stripped ("Zoë Müller!" -> "zoe-muller").
- `slugify(text) -> str`: `slugify_segment` per "/"-separated path segment, empty segments dropped
  ("People/Alice Example" -> "people/alice-example"). May return "" (nothing sluggable).
- `is_canonical_slug(slug) -> bool`: non-empty and already equal to its slugified form.
- `normalize_alias(text) -> str`: casefolded, whitespace collapsed to single spaces, trimmed.
- `last_segment(slug) -> str`: the part after the final "/".
- `slug_size_problem(slug) -> str | None`: why `slug` breaks the size limits (D16: at most
  SLUG_MAX characters, each "/" segment at most SLUG_SEGMENT_MAX), or None when it fits.
- `shorten_slug(slug) -> str`: an example slug within the limits (segments cut at a "-" where
  possible) for suggestions; never used to store anything on the caller's behalf.
"""

from __future__ import annotations

import re
import unicodedata

from fleetmem.protocol import SLUG_MAX, SLUG_SEGMENT_MAX

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


def slug_size_problem(slug: str) -> str | None:
    if len(slug) > SLUG_MAX:
        return f"the slug is {len(slug)} characters long; slugs are at most {SLUG_MAX}"
    longest = max(slug.split("/"), key=len, default="")
    if len(longest) > SLUG_SEGMENT_MAX:
        return (
            f"the slug segment {longest[:40]!r}… is {len(longest)} characters long; "
            f"each segment is at most {SLUG_SEGMENT_MAX}"
        )
    return None


def _shorten_segment(segment: str, limit: int) -> str:
    if len(segment) <= limit:
        return segment
    cut = segment[:limit]
    return (cut.rsplit("-", 1)[0] if "-" in cut[limit // 2 :] else cut).strip("-")


def shorten_slug(slug: str) -> str:
    parts = [_shorten_segment(p, SLUG_SEGMENT_MAX) for p in slug.split("/") if p]
    out = "/".join(parts)
    while len(out) > SLUG_MAX and parts:
        parts[-1] = _shorten_segment(parts[-1], max(1, len(parts[-1]) - (len(out) - SLUG_MAX)))
        out = "/".join(p for p in parts if p)
    return out[:SLUG_MAX].strip("-/")
