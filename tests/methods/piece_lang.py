"""A BPE-like lang of five pieces and six words (word starts marked), for the transducer n-best
rescoring tests."""

from __future__ import annotations

#: BPE-like pieces: ids 1..5 (0 is the blank)
PIECES = ["<unk>", "\u2581A", "B", "\u2581C", "D"]


LEXICON = [("<UNK>", ["<unk>"]), ("A", ["\u2581A"]), ("AB", ["\u2581A", "B"]),
           ("C", ["\u2581C"]), ("CD", ["\u2581C", "D"]), ("CBD", ["\u2581C", "B", "D"])]


VOCAB = len(PIECES) + 1
