"""Decoding-graph compilation: LG, HLG and HL as k2 FSAs.

All compilation runs on CPU (``k2.determinize`` and epsilon-aware ``k2.compose``
are CPU-only); move the result with ``.to(device)``.

Why LG is compiled the way it is
--------------------------------
``L_disambig o G`` is determinized on its input side while the disambiguation
symbols (``#1, #2, ...`` ending homophones and words that are prefixes of others,
``#0`` on G's backoff arcs) are still there: with them every input sequence has
one word sequence, so the tropical ``k2.determinize`` loses nothing. The symbols
must then go, and k2's decoders need an epsilon-free graph: both
``k2.intersect_dense_pruned`` (HLG, HCLG) and ``k2.RnntDecodingStreams``
(``fast_beam_search`` with LG) read label 0 as the blank, an arc that consumes a
frame, not as an epsilon. So the disambiguation symbols become epsilons and the
epsilons are removed. (Kaldi keeps those epsilons in HCLG; its decoders follow
them without consuming a frame.)

``k2.remove_epsilon`` keeps, for each pair of states joined by epsilon paths,
only the best such path: exact in the tropical semiring for an acceptor, but not
for a transducer whose epsilon paths output different words. In determinized LG a
word is often output on a disambiguation arc: ``READ`` and ``REED`` (both ``R IY
D``) leave the state after ``D`` by ``#1:READ`` and ``#2:REED``, and both G states
back off through ``#0`` to the same unigram state. The two epsilon paths meet
again, so icefall's recipe (and k2dec before) kept only the better word there:
with a small LM ``REED`` appeared on no arc at all, and on random small lexicons
with homophones LG and HLG lost about 40% of the word sequences that a token
string can mean.

:func:`remove_epsilon_keep_words` therefore first keeps words off epsilon arcs:
each epsilon arc that outputs words is folded into the arcs entering its source
state (arc ``p -x:u-> s`` and epsilon arc ``s -eps:w-> t`` give a new arc
``p -x:uw-> t`` with the summed score; ``p -x:u-> s`` stays for ``s``'s other
arcs), repeated while such arcs remain. Then no epsilon arc outputs words, keeping
the best epsilon path between two states loses nothing, and ``k2.remove_epsilon``
does it. For every input sequence the graph keeps every word sequence of
``L o G`` with its best (tropical) score, and no path is duplicated.

Cost: one arc per (epsilon arc with words, arc entering its source) pair. Those
sources are the states after a word's last token inside L's prefix tree, entered
by one arc on the shipped lang dir; in exchange such a state no longer receives a
copy of the arcs of the word's G state and its backoff closure. On the shipped BPE
lang dir and 3-gram (no homophones, 3583 prefix words) LG and HLG have 0.26% /
0.16% fewer arcs and decode to identical hypotheses; with a CMUdict phone lexicon
of the same 14684 words (469 pronunciations shared by several words) they grow by
0.06% (RESULTS.md). The fold is a small part of LG's compilation time.
"""

from __future__ import annotations

import logging

import k2
import torch

from .check import check_single_cpu_fsa
from .minimize import minimize_graph

__all__ = [
    "compile_LG",
    "compile_HLG",
    "compile_HL",
    "refresh_labels_version",
    "remove_epsilon_keep_words",
]

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
    check_single_cpu_fsa(name, fsa, "for graph compilation")


def _word_aux(fsa: k2.Fsa) -> k2.RaggedTensor:
    """``fsa.aux_labels`` as ``[arc][word]`` with only positive ids (no 0, no final -1)."""
    aux = fsa.aux_labels
    if isinstance(aux, torch.Tensor):
        shape = k2.ragged.regular_ragged_shape(aux.numel(), 1).to(aux.device)
        aux = k2.RaggedTensor(shape, aux.to(torch.int32).contiguous())
    return aux.remove_values_leq(0)


def _arcs_at(key: torch.Tensor, states: torch.Tensor, num_states: int):
    """Every arc ``j`` with ``key[j] == states[i]`` (``key`` is the arcs' ``src`` or ``dst``).

    Returns int64 ``(i, j)``, one entry per such pair, grouped by ``i``.
    """
    order = torch.sort(key, stable=True).indices
    count = torch.bincount(key, minlength=num_states)
    first = torch.cumsum(count, 0) - count
    n = count[states]
    i = torch.arange(states.numel(), device=key.device).repeat_interleave(n)
    offset = torch.arange(i.numel(), device=key.device) - (torch.cumsum(n, 0) - n)[i]
    return i, order[first[states][i] + offset]


def _fold_word_epsilons(
    src: torch.Tensor,
    dst: torch.Tensor,
    labels: torch.Tensor,
    scores: torch.Tensor,
    aux: k2.RaggedTensor,
    num_states: int,
    max_rounds: int,
):
    """Fold every epsilon arc that outputs words into a neighbouring arc.

    Arc tensors are 1-D over arcs (``src``/``dst``/``labels`` int64, ``scores`` float32),
    ``aux`` is ``[arc][word]``; returns the same five without such epsilon arcs. An
    epsilon arc ``m`` with words is replaced by one arc per arc ``e`` entering its source
    (``e`` then ``m``); the arcs ``e`` stay. Those leaving the start state (nothing
    enters them) are folded last, once no other remains, into every arc ``b`` leaving
    their destination (``m`` then ``b``). Every path of the input is then one path of the
    output, so nothing is duplicated.
    """
    for _ in range(max_rounds):
        lengths = aux.shape.row_splits(1)[1:] - aux.shape.row_splits(1)[:-1]
        with_words = (labels == 0) & (lengths > 0)
        if not bool(with_words.any()):
            return src, dst, labels, scores, aux
        m = with_words.nonzero().squeeze(1)
        inner = m[src[m] != 0]
        if inner.numel() > 0:  # fold into the arcs entering the source state
            i, e = _arcs_at(dst, src[inner], num_states)
            first, second, folded = e, inner[i], inner
            new_src, new_dst, new_labels = src[e], dst[inner[i]], labels[e]
        else:  # only the start state's are left: fold into the arcs leaving the dest
            i, b = _arcs_at(src, dst[m], num_states)
            first, second, folded = m[i], b, m
            new_src, new_dst, new_labels = src[m[i]], dst[b], labels[b]
        keep = torch.ones_like(with_words)
        keep[folded] = False
        keep = keep.nonzero().squeeze(1)
        new_aux = k2.ragged.cat([aux.index(first.to(torch.int32), axis=0)[0],
                                 aux.index(second.to(torch.int32), axis=0)[0]], axis=1)
        src = torch.cat([src[keep], new_src])
        dst = torch.cat([dst[keep], new_dst])
        labels = torch.cat([labels[keep], new_labels])
        scores = torch.cat([scores[keep], scores[first] + scores[second]])
        aux = k2.ragged.cat([aux.index(keep.to(torch.int32), axis=0)[0], new_aux], axis=0)
        logger.debug("folded %d epsilon arcs with words into %d arcs", folded.numel(),
                     first.numel())
    raise ValueError(
        f"epsilon arcs with words remain after {max_rounds} rounds of folding: the graph "
        "has an epsilon cycle that outputs words (or epsilon chains longer than max_rounds)"
    )


def remove_epsilon_keep_words(fsa: k2.Fsa, max_rounds: int = 64) -> k2.Fsa:
    """Remove input epsilons (label 0) without losing any word sequence.

    Unlike ``k2.remove_epsilon`` alone, two epsilon paths that output different words
    are never merged (see the module docstring): epsilon arcs with words are first
    folded into the arcs entering their source state, then ``k2.remove_epsilon``
    removes the remaining word-less epsilons. For every input sequence the result
    has the same word sequences, each with the same best (tropical) score.

    Args:
      fsa: a single ``k2.Fsa`` on CPU; ``labels`` are inputs (0 = epsilon),
        ``aux_labels`` word ids (a tensor or ``[arc][word]`` ragged; ids <= 0 are
        not words). Other attributes are dropped.
      max_rounds: folding rounds before giving up: a round moves the words one arc
        back (or, from the start state, forward) past an epsilon arc; graphs from
        ``L o G`` need one.

    Returns:
      epsilon-free, connected ``k2.Fsa`` on CPU with ragged ``aux_labels``
      ``[arc][word]`` holding positive word ids only; not arc-sorted.

    Raises:
      ValueError: an epsilon cycle that outputs words (folding never ends).
    """
    _check_single_cpu("fsa", fsa)
    if not hasattr(fsa, "aux_labels"):
        raise ValueError("fsa has no aux_labels (words)")
    arcs = fsa.arcs.values()
    src, dst, labels = (arcs[:, i].to(torch.int64) for i in range(3))
    src, dst, labels, scores, aux = _fold_word_epsilons(
        src, dst, labels, fsa.scores.detach().clone(), _word_aux(fsa), fsa.shape[0],
        max_rounds,
    )
    order = torch.sort(src, stable=True).indices
    folded = torch.stack(
        [src[order].to(torch.int32), dst[order].to(torch.int32),
         labels[order].to(torch.int32), scores[order].contiguous().view(torch.int32)],
        dim=1,
    )
    out = k2.Fsa(folded, aux_labels=aux.index(order.to(torch.int32), axis=0)[0])
    out = refresh_labels_version(k2.remove_epsilon(out))
    out = refresh_labels_version(k2.connect(out))
    out.aux_labels = _word_aux(out)
    return out


def compile_LG(
    L_disambig: k2.Fsa,
    G: k2.Fsa,
    first_token_disambig_id: int,
    first_word_disambig_id: int,
    log_weight_pushing: bool = False,
    minimize: bool = False,
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
      minimize: merge the states with the same future (:func:`minimize_graph`): the
        same paths, words and scores in fewer states and arcs.

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

    LG = k2.arc_sort(remove_epsilon_keep_words(LG))
    if minimize:
        LG = minimize_graph(LG)
    logger.info("LG: %d states, %d arcs", LG.shape[0], LG.num_arcs)
    return LG


def compile_HLG(
    H: k2.Fsa,
    L_disambig: k2.Fsa,
    G: k2.Fsa,
    first_token_disambig_id: int,
    first_word_disambig_id: int,
    minimize: bool = False,
) -> k2.Fsa:
    """HLG = H o LG with ``inner_labels="tokens"``, connected and arc-sorted.

    Args:
      minimize: merge the states of HLG with the same future (:func:`minimize_graph`):
        the same paths, words, tokens and scores in fewer states and arcs.

    Returns:
      ``k2.Fsa`` on CPU: labels are network outputs (0 = blank), ``aux_labels``
      ragged word ids, ``tokens`` the token on each arc (0 where H emits nothing).
    """
    _check_single_cpu("H", H)
    LG = compile_LG(L_disambig, G, first_token_disambig_id, first_word_disambig_id)
    HLG = k2.connect(k2.compose(H, LG, inner_labels="tokens"))
    HLG = refresh_labels_version(HLG)
    HLG = k2.arc_sort(HLG)
    if minimize:
        HLG = minimize_graph(HLG)
    logger.info("HLG: %d states, %d arcs", HLG.shape[0], HLG.num_arcs)
    return HLG


def compile_HL(H: k2.Fsa, L: k2.Fsa) -> k2.Fsa:
    """HL = H o L (no G): lexicon-constrained CTC decoding without a language model."""
    _check_single_cpu("H", H)
    _check_single_cpu("L", L)
    HL = k2.connect(k2.compose(H, k2.arc_sort(L), inner_labels="tokens"))
    return k2.arc_sort(refresh_labels_version(HL))
