"""A deterministic token-hashing embedder — FOR TESTS ONLY.

It has no notion of meaning: texts are similar only when they share words. It exists so the
domain's vector paths (dedup, supersession, the vector arm) run in unit tests without a model.
Never configure it for real use; its vectors are not comparable with any real model's
(`model_id` "hash-384" keeps them apart).
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Sequence

_WORD = re.compile(r"\w+")


class HashEmbedder:
    def __init__(self, dim: int = 384) -> None:
        if dim < 8:
            raise ValueError("dim must be at least 8")
        self.dim = dim
        self.model_id = f"hash-{dim}"

    def _bucket(self, token: str) -> tuple[int, float]:
        digest = hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest()
        value = int.from_bytes(digest, "little")
        return value % self.dim, (1.0 if (value >> 63) & 1 else -1.0)

    def embed_one(self, text: str) -> list[float]:
        vec = [0.0] * self.dim
        tokens = _WORD.findall(text.casefold()) or [""]
        for token in tokens:
            i, sign = self._bucket(token)
            vec[i] += sign
        norm = math.sqrt(sum(v * v for v in vec))
        if norm == 0.0:  # opposite-signed collisions cancelled out: fall back to a fixed direction
            i, sign = self._bucket(text)
            vec[i] = sign
            norm = 1.0
        return [v / norm for v in vec]

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [self.embed_one(t) for t in texts]
