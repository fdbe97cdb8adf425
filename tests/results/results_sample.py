"""Three hand-aligned results ``(cut id, reference words, hypothesis words)`` that the WER and
result-file tests count: 1 substitution, 1 insertion and 2 deletions over 7 reference words."""

from __future__ import annotations

RESULTS = [
    ("a", ["A", "B", "C", "D"], ["A", "X", "C", "D", "E"]),  # B->X, +E
    ("b", ["A", "B", "C"], ["A"]),                           # -B, -C
    ("c", [], []),
]
