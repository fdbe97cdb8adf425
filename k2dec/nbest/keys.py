"""Dedup keys: what makes two sampled paths the same hypothesis, lattices relabelled by it,
and linear FSAs read off a lattice along arc indexes.

A *keyed* lattice carries the key (word ids or token ids) in ``labels`` and its original
labels in ``frame_labels``; sampling and intersection run on keyed lattices, and
:func:`restore_labels` turns the paths taken from one back into ordinary alignments.
"""

from __future__ import annotations

import enum

import k2
import torch

__all__ = ["DedupKey", "check_lattice", "keyed_lattice", "paths_to_fsa", "restore_labels"]


class DedupKey(str, enum.Enum):
    """What makes two sampled paths "the same" hypothesis."""

    WORDS = "words"
    """Word ids from ``aux_labels`` (HLG/HCLG/LG lattices; for H lattices, tokens)."""
    TOKENS = "tokens"
    """Token ids: the ``tokens`` attribute if present (H o LG), else non-blank ``labels``."""


def check_lattice(lattice: k2.Fsa, name: str = "lattice") -> None:
    """``TypeError`` unless ``lattice`` is a ``k2.Fsa``, ``ValueError`` unless it is an FsaVec
    ``[utt][state][arc]``."""
    if not isinstance(lattice, k2.Fsa):
        raise TypeError(f"{name} must be a k2.Fsa, got {type(lattice).__name__}")
    if len(lattice.shape) != 3:
        raise ValueError(f"{name} must be an FsaVec [utt][state][arc], got shape {lattice.shape}")


def keyed_lattice(lattice: k2.Fsa, key: DedupKey) -> k2.Fsa:
    """A copy of ``lattice`` whose ``labels`` are the dedup key (0 where an arc has none);
    the original labels are kept in ``frame_labels``. Ragged word aux_labels are expanded
    (k2.invert), which may add epsilon arcs."""
    if key is DedupKey.WORDS:
        if not hasattr(lattice, "aux_labels"):
            raise ValueError(
                "dedup by words needs a lattice with aux_labels (word ids); this one has none "
                "(use DedupKey.TOKENS)"
            )
        out = lattice.clone()
        out.frame_labels = lattice.labels.clone()
        return k2.invert(out)  # labels = words, aux_labels = frame labels
    out = lattice.clone()
    key_labels = lattice.tokens.clone() if hasattr(lattice, "tokens") else lattice.labels.clone()
    out.frame_labels = lattice.labels.clone()
    key_labels = torch.where(lattice.labels == -1, lattice.labels, key_labels)
    out.labels = key_labels.to(torch.int32)
    return out


def restore_labels(fsa: k2.Fsa, key: DedupKey) -> k2.Fsa:
    """Undo :func:`keyed_lattice` on paths taken from a keyed lattice (token keys: in
    place)."""
    if key is DedupKey.WORDS:
        return k2.invert(fsa)  # labels = frame labels, aux_labels = words
    fsa.labels = fsa.frame_labels.clone()
    return fsa


def paths_to_fsa(lattice: k2.Fsa, arcs: k2.RaggedTensor) -> k2.Fsa:
    """Linear FSAs following arc indexes ``arcs`` ``[path][arc]`` (int32 idx012 into
    ``lattice``, each path ending with the final arc) through ``lattice``, carrying every
    tensor attribute of the arcs taken: FsaVec ``[path][state][arc]``."""
    labels = k2.ragged.index(lattice.labels.contiguous(), arcs)  # [path][arc]
    labels = labels.remove_values_eq(-1)
    fsa = k2.linear_fsa(labels)  # on labels.device
    flat = arcs.values.to(torch.int64)
    fsa.scores = lattice.scores[flat].clone()
    for name, value in lattice.named_tensor_attr(include_scores=False):
        if name == "labels":
            continue
        if isinstance(value, torch.Tensor):
            setattr(fsa, name, value[flat].clone())
        else:  # ragged attribute (e.g. aux_labels of HLG lattices)
            sub, _ = value.index(arcs.values, axis=0, need_value_indexes=False)
            setattr(fsa, name, sub)
    return fsa
