"""Exact identity of residue sequences as array keys: two polynomial hashes mod 2^64 and the length.

``h(s) = Σ code(s_i) · B^i`` with two odd bases B (invertible mod 2^64), from prefix sums over a whole
text, so the key of any span, or of a span reversed, costs O(1) (`Hasher.span`). Rows with equal keys are
grouped by a stable sort on the first hash; a tie on it with a different second hash or length (two
different sequences) falls back to sorting on all three, so grouping is exact whatever the hashes do
(tests/unit/test_digest_columnar.py forces such ties).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from rtsearch.database.arrays import argsort_stable, in_threads

BASES = (0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F)
_U64 = np.uint64


@dataclass
class Keys:
    """Exact identity of sequences: two 64-bit hashes and the length."""

    h1: np.ndarray
    h2: np.ndarray
    n: np.ndarray

    def take(self, idx: np.ndarray) -> Keys:
        return Keys(self.h1[idx], self.h2[idx], self.n[idx])

    @staticmethod
    def concat(parts: Sequence[Keys]) -> Keys:
        return Keys(*(np.concatenate([getattr(p, f) for p in parts]) for f in ("h1", "h2", "n")))


def _powers(base: int, n: int, block: int = 4096) -> np.ndarray:
    """``base ** i mod 2^64`` for i < n: a block by cumprod, the rest as block × block^j (cumprod is slow)."""
    small = np.full(block, base, dtype=_U64)
    small[0] = 1
    np.cumprod(small, out=small)
    step = np.full(-(-n // block), pow(base, block, 1 << 64), dtype=_U64)
    step[0] = 1
    np.cumprod(step, out=step)
    return (step[:, None] * small[None, :]).ravel()[:n]


class Hasher:
    """Prefix sums of ``code · B^i`` over a text, forward and reversed, for O(1) span keys."""

    def __init__(self, codes: np.ndarray, base: int) -> None:
        t = codes.shape[0]
        self.t = t
        self.codes = codes  # a one-residue span's hash is its code (B^0)
        self.pow = _powers(base, t + 2)
        self.inv = _powers(pow(base, -1, 1 << 64), t + 2)
        self.fwd = self._prefix(codes)
        self.rev = self._prefix(codes[::-1])

    def _prefix(self, codes: np.ndarray) -> np.ndarray:
        g = np.zeros(self.t + 1, dtype=_U64)
        np.cumsum(codes.astype(_U64) * self.pow[: self.t], out=g[1:])
        return g

    def span(self, a: np.ndarray, b: np.ndarray, *, reverse: bool = False) -> np.ndarray:
        """Hash of text[a:b] (of the reversed text when ``reverse``)."""
        g = self.rev if reverse else self.fwd
        return (g[b] - g[a]) * self.inv[a]


def hashers(codes: np.ndarray) -> list[Hasher]:
    """One `Hasher` of ``codes`` per base of `BASES`, built in parallel threads."""
    return in_threads([partial(Hasher, codes, base) for base in BASES])


def key_codes(text: np.ndarray, il: bool) -> np.ndarray:
    """The bytes hashed for ``text``: I written as L when ``il``."""
    lut = np.arange(256, dtype=np.uint8)
    if il:
        lut[ord("I")] = ord("L")
    return lut[text]


def group_ids(keys: Keys, xp: Any = np) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows with equal keys share a group; stable, so each group's first row comes first.

    Returns (order, group of each sorted row, index in ``order`` where each group starts).
    """
    order = argsort_stable(keys.h1, xp)
    s1 = keys.h1[order]
    new = np.ones(order.shape[0], dtype=bool)
    new[1:] = s1[1:] != s1[:-1]
    gid = np.cumsum(new) - 1
    head = order[np.flatnonzero(new)][gid]
    if not (np.array_equal(keys.h2[order], keys.h2[head]) and np.array_equal(keys.n[order], keys.n[head])):
        order = np.lexsort((keys.n, keys.h2, keys.h1))  # a first-hash tie: sort on everything
        new[1:] = ((keys.h1[order][1:] != keys.h1[order][:-1]) | (keys.h2[order][1:] != keys.h2[order][:-1])
                   | (keys.n[order][1:] != keys.n[order][:-1]))  # fmt: skip
        gid = np.cumsum(new) - 1
    return order, gid, np.flatnonzero(new)


def span_keys(hashers: Sequence[Hasher], a: np.ndarray, b: np.ndarray) -> Keys:
    h = [x.span(a, b) for x in hashers]
    return Keys(h[0], h[1], b - a)


def decoy_keys(hashers: Sequence[Hasher], a: np.ndarray, n: np.ndarray, keep_first: bool) -> Keys:
    """Keys of the peptides text[a : a + n] reversed, the residue next to the cut kept in place."""
    t = hashers[0].t
    out = []
    for x in hashers:
        if keep_first:  # first residue, then the rest reversed
            first = x.codes[a].astype(_U64)
            out.append(first + x.span(t - (a + n), t - a - 1, reverse=True) * x.pow[1])
        else:  # all but the last reversed, then the last
            last = x.codes[a + n - 1].astype(_U64)
            out.append(x.span(t - (a + n) + 1, t - a, reverse=True) + last * x.pow[np.maximum(n - 1, 0)])
    return Keys(out[0], out[1], n.copy())
