"""The synthesize quote check (docs/protocol.md, synthesize; D30): every quoted span of a model's
answer is looked up in the evidence the model was given.

- A span found verbatim (whitespace and case aside) stays as written: `grounded`.
- A span whose closest passage of the evidence (sharing at least half its words) matches it at
  `NEAR_RATIO` or more (difflib) is replaced with the evidence's own wording, inside the same
  quotation marks: `repaired`.
- Any other span loses its quotation marks and gains ` [unverified]`: `unverified`, listed in
  `unverified_quotes` as `{text, reason: "not_in_evidence"}`.

Quoted spans are text between straight or curly double quotes with at least `MIN_QUOTE_CHARS`
characters and one space (so a quoted single word or a code name is no claim of wording).
Pure: no port, no clock.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

#: the shortest quoted span that is checked (shorter ones are names or words, not wording)
MIN_QUOTE_CHARS = 12
#: difflib ratio from which a span counts as the evidence's wording slightly changed
NEAR_RATIO = 0.85
#: spans checked per answer; later ones are left as written (an answer is short)
MAX_QUOTES = 20
UNVERIFIED_MARK = "[unverified]"
REASON_NOT_IN_EVIDENCE = "not_in_evidence"
WARNING = "QUOTE_NOT_IN_EVIDENCE"

_QUOTED = re.compile(r'"([^"\n]+)"|\u201c([^\u201d\n]+)\u201d')
_SPACE = re.compile(r"\s+")
_WORD = re.compile(r"\S+")


@dataclass
class QuoteCheck:
    """The repaired answer and the counts; `quotes` is 0 when the answer quoted nothing."""

    answer: str
    grounded: int = 0
    repaired: int = 0
    unverified: list[str] = field(default_factory=list)

    @property
    def quotes(self) -> int:
        return self.grounded + self.repaired + len(self.unverified)

    def fields(self, answer_raw: str) -> dict[str, object]:
        """The response fields the check adds (only when the answer had quotes)."""
        return {
            "answer_raw": answer_raw,
            "quote_check": {"grounded": self.grounded, "repaired": self.repaired, "unverified": len(self.unverified)},
            "unverified_quotes": [{"text": t, "reason": REASON_NOT_IN_EVIDENCE} for t in self.unverified],
        }


def _norm(text: str) -> str:
    return _SPACE.sub(" ", text).strip().casefold()


def _closest(span: str, evidence: Sequence[str]) -> str | None:
    """The passage of `evidence` (same number of words, give or take one) closest to `span`, when
    it is at least NEAR_RATIO alike; None otherwise. Only passages sharing at least half the span's
    words are compared character by character (a cheap count first: a span is checked against every
    window of every snippet)."""
    target = _norm(span)
    wanted = set(target.split(" "))
    n = len(target.split(" "))
    best, best_ratio = None, NEAR_RATIO
    matcher = difflib.SequenceMatcher(autojunk=False)
    matcher.set_seq2(target)
    for text in evidence:
        words = list(_WORD.finditer(text))
        shared = [0]
        for w in words:
            shared.append(shared[-1] + (w.group(0).casefold() in wanted))
        for size in (n, n - 1, n + 1):
            for i in range(len(words) - size + 1 if size >= 1 else 0):
                if 2 * (shared[i + size] - shared[i]) < n:
                    continue
                passage = text[words[i].start() : words[i + size - 1].end()]
                matcher.set_seq1(_norm(passage))
                if matcher.real_quick_ratio() < best_ratio or matcher.quick_ratio() < best_ratio:
                    continue
                ratio = matcher.ratio()
                if ratio >= best_ratio:
                    best, best_ratio = passage, ratio
    return best


def check(answer: str, evidence: Sequence[str]) -> QuoteCheck:
    """Check every quoted span of `answer` against `evidence` (the texts the model was given)."""
    haystack = [_norm(t) for t in evidence]
    out = QuoteCheck(answer)
    pieces: list[str] = []
    last = 0
    for seen, m in enumerate(_QUOTED.finditer(answer)):
        span = m.group(1) if m.group(1) is not None else m.group(2)
        if seen >= MAX_QUOTES or len(span.strip()) < MIN_QUOTE_CHARS or " " not in span.strip():
            continue
        pieces.append(answer[last : m.start()])
        last = m.end()
        open_mark, close_mark = answer[m.start()], answer[m.end() - 1]
        if any(_norm(span) in h for h in haystack):
            out.grounded += 1
            pieces.append(m.group(0))
            continue
        near = _closest(span, evidence)
        if near is not None:
            out.repaired += 1
            pieces.append(f"{open_mark}{near}{close_mark}")
        else:
            out.unverified.append(span)
            pieces.append(f"{span} {UNVERIFIED_MARK}")
    pieces.append(answer[last:])
    out.answer = "".join(pieces)
    return out
