"""Decoding-graph compilation: LG, HLG and HL as k2 FSAs.

All compilation runs on CPU (``k2.determinize`` and epsilon-aware ``k2.compose``
are CPU-only); move the result with ``.to(device)``.
"""

from __future__ import annotations

import logging

import k2
import torch

__all__ = ["compile_LG", "compile_HLG", "compile_HL", "refresh_labels_version"]

logger = logging.getLogger(__name__)


def refresh_labels_version(fsa: k2.Fsa) -> k2.Fsa:
    """Resynchronise ``fsa.labels_version`` with its labels tensor (in place).

    k2 1.23.4 records ``labels._version`` in a non-tensor attribute to catch
    in-place label edits; ops such as ``k2.remove_epsilon`` copy the *input's*
    recorded version onto the output, whose fresh labels tensor has another
    version, so a later ``fsa.properties`` (called by ``arc_sort``, ``compose``,
    ``to``, ...) raises "labels has been inappropriately modified". Call this after
    such ops.
    """
    fsa.__dict__["_non_tensor_attr"]["labels_version"] = fsa.labels._version
    return fsa


def _set_labels(fsa: k2.Fsa, labels: torch.Tensor) -> None:
    refresh_labels_version(fsa)
    fsa.labels = labels


def _check_single_cpu(name: str, fsa: k2.Fsa) -> None:
    if not isinstance(fsa, k2.Fsa):
        raise TypeError(f"{name} must be a k2.Fsa, got {type(fsa).__name__}")
    if len(fsa.shape) != 2:
        raise ValueError(f"{name} must be a single FSA, not an FsaVec (shape {fsa.shape})")
    if fsa.device.type != "cpu":
        raise ValueError(f"{name} must be on CPU for graph compilation, got {fsa.device}")


def compile_LG(
    L_disambig: k2.Fsa,
    G: k2.Fsa,
    first_token_disambig_id: int,
    first_word_disambig_id: int,
    log_weight_pushing: bool = False,
) -> k2.Fsa:
    """LG = remove_disambig(det(L_disambig o G)), epsilon-free, arc-sorted.

    Args:
      L_disambig: from :func:`k2dec.graph.build_L` with the disambig lexicon and
        ``disambig_self_loops=True``; labels tokens, aux_labels words.
      G: from :func:`k2dec.graph.build_G` (``#0`` on backoff arcs).
      first_token_disambig_id, first_word_disambig_id: ids of ``#0`` in tokens.txt
        and words.txt; every id >= them is a disambiguation symbol.
      log_weight_pushing: push weights in the log semiring while determinizing
        (what transducer ``fast_beam_search`` with LG wants).

    Returns:
      ``k2.Fsa`` on CPU: labels are tokens (no disambig), aux_labels a
      ``k2.RaggedTensor`` of word ids per arc (no epsilons, no disambig).
    """
    _check_single_cpu("L_disambig", L_disambig)
    _check_single_cpu("G", G)
    if not hasattr(L_disambig, "aux_labels"):
        raise ValueError("L_disambig has no aux_labels (words)")
    L = k2.arc_sort(L_disambig)
    G = k2.arc_sort(G)
    logger.info("LG: composing L (%d arcs) with G (%d arcs)", L.num_arcs, G.num_arcs)
    LG = k2.connect(k2.compose(L, G))
    if LG.num_arcs == 0:
        raise ValueError("L o G is empty: do L's words and G's words (words.txt) agree?")
    pushing = (
        k2.DeterminizeWeightPushingType.kLogWeightPushing
        if log_weight_pushing
        else k2.DeterminizeWeightPushingType.kNoWeightPushing
    )
    LG = k2.connect(k2.determinize(LG, weight_pushing_type=pushing))

    labels = LG.labels.clone()
    labels[labels >= first_token_disambig_id] = 0
    _set_labels(LG, labels)
    aux = LG.aux_labels
    if isinstance(aux, torch.Tensor):
        aux = aux.clone()
        aux[aux >= first_word_disambig_id] = 0
    else:
        values = aux.values.clone()
        values[values >= first_word_disambig_id] = 0
        aux = k2.RaggedTensor(aux.shape, values)
    LG.aux_labels = aux

    LG = refresh_labels_version(k2.remove_epsilon(LG))
    LG = refresh_labels_version(k2.connect(LG))
    if isinstance(LG.aux_labels, torch.Tensor):
        LG.aux_labels = k2.RaggedTensor(LG.aux_labels.unsqueeze(1).tolist())
    LG.aux_labels = LG.aux_labels.remove_values_eq(0)
    LG = k2.arc_sort(LG)
    logger.info("LG: %d states, %d arcs", LG.shape[0], LG.num_arcs)
    return LG


def compile_HLG(
    H: k2.Fsa,
    L_disambig: k2.Fsa,
    G: k2.Fsa,
    first_token_disambig_id: int,
    first_word_disambig_id: int,
) -> k2.Fsa:
    """HLG = H o LG with ``inner_labels="tokens"``, connected and arc-sorted.

    Returns:
      ``k2.Fsa`` on CPU: labels are network outputs (0 = blank), ``aux_labels``
      ragged word ids, ``tokens`` the token on each arc (0 where H emits nothing).
    """
    _check_single_cpu("H", H)
    LG = compile_LG(L_disambig, G, first_token_disambig_id, first_word_disambig_id)
    HLG = k2.connect(k2.compose(H, LG, inner_labels="tokens"))
    HLG = refresh_labels_version(HLG)
    HLG = k2.arc_sort(HLG)
    logger.info("HLG: %d states, %d arcs", HLG.shape[0], HLG.num_arcs)
    return HLG


def compile_HL(H: k2.Fsa, L: k2.Fsa) -> k2.Fsa:
    """HL = H o L (no G): lexicon-constrained CTC decoding without a language model."""
    _check_single_cpu("H", H)
    _check_single_cpu("L", L)
    HL = k2.connect(k2.compose(H, k2.arc_sort(L), inner_labels="tokens"))
    return k2.arc_sort(refresh_labels_version(HL))
