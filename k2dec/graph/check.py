"""Checks of compiled graphs: size, and which lexicon words no arc can output."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import k2
import torch

__all__ = ["GraphCheck", "check_graph_words", "check_single_cpu_fsa", "graph_words"]


def check_single_cpu_fsa(name: str, fsa: k2.Fsa, purpose: str) -> None:
    """``TypeError`` unless ``fsa`` is a ``k2.Fsa``; ``ValueError`` unless it is a single FSA
    on CPU (``purpose``, e.g. ``"for graph compilation"``, says why in the message)."""
    if not isinstance(fsa, k2.Fsa):
        raise TypeError(f"{name} must be a k2.Fsa, got {type(fsa).__name__}")
    if len(fsa.shape) != 2:
        raise ValueError(f"{name} must be a single FSA, not an FsaVec (shape {fsa.shape})")
    if fsa.device.type != "cpu":
        raise ValueError(f"{name} must be on CPU {purpose}, got {fsa.device}")


def graph_words(graph: k2.Fsa, word_table: k2.SymbolTable) -> set[str]:
    """The words of ``word_table`` that some arc of ``graph`` outputs (its ``aux_labels``,
    a tensor or ``[arc][word]`` ragged; ids <= 0 and ids missing from the table are
    ignored)."""
    if not hasattr(graph, "aux_labels"):
        raise ValueError("graph has no aux_labels (words)")
    aux = graph.aux_labels
    values = aux.values if isinstance(aux, k2.RaggedTensor) else aux
    ids = torch.unique(values.to("cpu")).tolist()
    return {word_table.get(i) for i in ids if i > 0 and i in word_table}


@dataclass(frozen=True)
class GraphCheck:
    """What :func:`check_graph_words` found.

    Attributes:
      num_states, num_arcs: the graph's size.
      num_words: lexicon words checked.
      missing_words: lexicon words on no arc, sorted (they can never be decoded, e.g.
        words the LM lacks when it has no ``<unk>``).
    """

    num_states: int
    num_arcs: int
    num_words: int
    missing_words: tuple[str, ...]

    def describe(self, max_words: int = 20) -> str:
        """One line: size, and the missing words (at most ``max_words`` named)."""
        size = f"{self.num_states} states, {self.num_arcs} arcs"
        if not self.missing_words:
            return f"{size}; all {self.num_words} lexicon words are on some arc"
        named = ", ".join(self.missing_words[:max_words])
        more = len(self.missing_words) - max_words
        return (f"{size}; WARNING: {len(self.missing_words)} of {self.num_words} lexicon "
                f"words are on no arc and can never be decoded: {named}"
                + (f" (and {more} more)" if more > 0 else ""))


def check_graph_words(
    graph: k2.Fsa, word_table: k2.SymbolTable, lexicon_words: Iterable[str]
) -> GraphCheck:
    """Size of ``graph`` and the words of ``lexicon_words`` that no arc outputs."""
    if len(graph.shape) != 2:
        raise ValueError(f"graph must be a single FSA, not an FsaVec (shape {graph.shape})")
    words = set(lexicon_words)
    missing = tuple(sorted(words - graph_words(graph, word_table)))
    return GraphCheck(int(graph.shape[0]), int(graph.num_arcs), len(words), missing)
