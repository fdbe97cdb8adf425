"""icefall's lattice decoding and rescoring (``icefall/decode.py``) under icefall's names,
parameters, defaults and return types (k2 FsaVecs of best paths, dicts keyed as icefall keys
them), run by k2dec's :mod:`k2dec.lattice` and :mod:`k2dec.nbest`.

A lattice is a k2 FsaVec ``[utt][state][arc]`` from :func:`get_lattice` (labels token ids,
``aux_labels`` word ids, and ``lm_scores`` / ``tokens`` where the graph has them). The best
paths returned are linear FSAs whose ``aux_labels`` are the words (read them with
:func:`k2dec.icefall.get_texts`). Unlike icefall's, no function here changes the caller's
lattice.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import k2
import torch

from ..lattice import LatticeConfig, best_paths
from ..lattice import get_lattice as k2dec_get_lattice
from ..lattice.rescore import RescoreConfig
from ..lattice.rescore import rescore_with_whole_lattice as k2dec_whole_lattice
from ..methods.lists import HypothesisLists, attention_scores
from ..nbest import DedupKey, Nbest, intersected, ngram_lm_scores
from ..nbest.sampling import k2_random_paths
from .attention import attention_decoder as as_decoder
from .common import oracle_pick, pick, sample
from .lm import sequence_lm
from .results import index_paths

__all__ = [
    "DEFAULT_LM_SCALE",
    "get_lattice",
    "nbest_decoding",
    "nbest_oracle",
    "one_best_decoding",
    "rescore_with_attention_decoder",
    "rescore_with_attention_decoder_no_ngram",
    "rescore_with_attention_decoder_with_ngram",
    "rescore_with_n_best_list",
    "rescore_with_rnn_lm",
    "rescore_with_whole_lattice",
]

#: icefall's scale grid (``DEFAULT_LM_SCALE``) where a scale argument is ``None``
DEFAULT_LM_SCALE = [0.01, 0.05, 0.08, 0.1, 0.3, 0.5, 0.6, 0.7, 0.9, 1.0, 1.1, 1.2, 1.3, 1.5,
                    1.7, 1.9, 2.0, 2.1, 2.2, 2.3, 2.5, 3.0, 4.0, 5.0]
#: icefall's attention-scale grid of the rescorings without an n-gram
NO_NGRAM_ATTENTION_SCALES = DEFAULT_LM_SCALE + [5.0, 6.0, 7.0, 8.0, 9.0]


def _segments(nnet_output: torch.Tensor, supervision_segments: torch.Tensor,
              allow_truncate: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The frames of each supervision segment ``(sequence, start, duration)`` as a padded
    ``(S, max_duration, V)`` batch and the durations ``(S,)`` (cut at the end of the
    sequence when they exceed it by at most ``allow_truncate``, as ``k2.DenseFsaVec``)."""
    seg = supervision_segments
    if not isinstance(seg, torch.Tensor) or seg.dim() != 2 or seg.size(1) != 3 or \
            seg.dtype.is_floating_point:
        raise ValueError("supervision_segments must be an int tensor (S, 3) of (sequence, "
                         f"start_frame, duration), got {getattr(seg, 'shape', seg)!r}")
    seg = seg.to("cpu", torch.int64)
    n, t = nnet_output.shape[:2]
    seq, start, dur = seg.unbind(1)
    if bool(((seq < 0) | (seq >= n) | (start < 0) | (start >= t)).any()):
        raise ValueError(f"supervision_segments has a sequence outside [0, {n}) or a start "
                         f"outside [0, {t})")
    over = start + dur - t
    if bool((over > allow_truncate).any()):
        i = int(torch.nonzero(over > allow_truncate)[0])
        raise ValueError(f"supervision segment {i} ends {int(over[i])} frames after the "
                         f"output's {t} frames (subsampling_factor - 1 = {allow_truncate} "
                         "allowed)")
    dur = torch.minimum(dur, t - start)
    width = max(int(dur.max()), 1) if dur.numel() else 1
    frames = (start.unsqueeze(1) + torch.arange(width)).clamp(max=t - 1)
    index = (seq.unsqueeze(1) * t + frames).to(nnet_output.device)
    flat = nnet_output.reshape(n * t, -1)
    return flat.index_select(0, index.reshape(-1)).reshape(len(seq), width, -1), dur


def get_lattice(
    nnet_output: torch.Tensor,
    decoding_graph: k2.Fsa,
    supervision_segments: torch.Tensor,
    search_beam: float,
    output_beam: float,
    min_active_states: int,
    max_active_states: int,
    subsampling_factor: int = 1,
) -> k2.Fsa:
    """The lattices of ``k2.intersect_dense_pruned`` of ``decoding_graph`` (H, HLG, ...) with
    the network output ``(N, T, V)`` log-probs, one per row of ``supervision_segments``
    (int ``(S, 3)``: sequence, start frame, duration, in output frames), in that order. A
    segment may end up to ``subsampling_factor - 1`` frames after the output. As k2dec's
    :func:`k2dec.lattice.get_lattice` (whose lattices this returns), an utterance whose
    lattice has no complete path is searched again with wider beams (icefall returns it
    without one); arcs carry the attribute ``frame``."""
    frames, durations = _segments(nnet_output, supervision_segments,
                                  max(int(subsampling_factor) - 1, 0))
    config = LatticeConfig(search_beam=float(search_beam), output_beam=float(output_beam),
                           min_active_states=int(min_active_states),
                           max_active_states=int(max_active_states))
    return k2dec_get_lattice(frames, durations, decoding_graph, config).lattice


def _rescaled(lattice: k2.Fsa, lm_scale: float) -> k2.Fsa:
    """A copy of ``lattice`` scored ``am / lm_scale + lm`` (``am = scores - lm_scores``)."""
    if not hasattr(lattice, "lm_scores"):
        raise ValueError("the lattice has no lm_scores (decode with a graph whose lm_scores "
                         "are set, e.g. HLG.lm_scores = HLG.scores.clone())")
    out = lattice.clone()
    out.scores = (lattice.scores - lattice.lm_scores) / lm_scale + lattice.lm_scores
    return out


def one_best_decoding(
    lattice: k2.Fsa,
    use_double_scores: bool = True,
    lm_scale_list: list[float] | None = None,
) -> k2.Fsa | dict[str, k2.Fsa]:
    """The best path of every lattice; with ``lm_scale_list``, a dict ``lm_scale_{s}`` ->
    the best paths under ``am / s + lm``."""
    if lm_scale_list is None:
        return best_paths(lattice, use_double_scores)
    return {f"lm_scale_{s}": best_paths(_rescaled(lattice, s), use_double_scores)
            for s in lm_scale_list}


def _word_nbest(lattice: k2.Fsa, num_paths: int, nbest_scale: float,
                use_double_scores: bool) -> Nbest:
    """icefall's ``Nbest.from_lattice(...).intersect(lattice)``: sampled word sequences,
    each as its best alignment in the lattice."""
    nbest, cfg = sample(lattice, num_paths, nbest_scale, use_double_scores, DedupKey.WORDS)
    return intersected(nbest, cfg)


def nbest_decoding(
    lattice: k2.Fsa,
    num_paths: int,
    use_double_scores: bool = True,
    nbest_scale: float = 1.0,
) -> k2.Fsa:
    """``num_paths`` sampled paths, one per word sequence; the best path of the word sequence
    whose best alignment scores highest."""
    nbest = _word_nbest(lattice, num_paths, nbest_scale, use_double_scores)
    return index_paths(nbest.fsa, pick(nbest, nbest.tot_scores().values))


def nbest_oracle(
    lattice: k2.Fsa,
    num_paths: int,
    ref_texts: list[str],
    word_table: k2.SymbolTable,
    use_double_scores: bool = True,
    nbest_scale: float = 0.5,
    oov: str = "<UNK>",
) -> k2.Fsa:
    """Of ``num_paths`` sampled paths (one per word sequence), the one closest (word edit
    distance) to ``ref_texts[i]`` (words separated by spaces; words outside ``word_table``
    read as ``oov``); among paths at the same distance icefall's choice, by the float32
    scores of ``k2.levenshtein_alignment`` (:func:`k2dec.icefall.common.oracle_pick`)."""
    nbest, _ = sample(lattice, num_paths, nbest_scale, use_double_scores, DedupKey.WORDS)
    if len(ref_texts) != nbest.num_utts:
        raise ValueError(f"ref_texts has {len(ref_texts)} texts for {nbest.num_utts} "
                         "utterances")
    refs = [[_word_id(w, word_table, oov) for w in text.split()] for text in ref_texts]
    return index_paths(nbest.fsa, oracle_pick(nbest, refs))


def _word_id(word: str, word_table: k2.SymbolTable, oov: str) -> int:
    if word in word_table:
        return word_table[word]
    if oov in word_table:
        return word_table[oov]
    raise ValueError(f"the reference word {word!r} is not in word_table, nor is the oov word "
                     f"{oov!r}")


def _check_G(G: k2.Fsa, lattice: k2.Fsa) -> None:
    if not isinstance(G, k2.Fsa) or G.device != lattice.device:
        raise ValueError("G must be a k2.Fsa on the lattice's device")
    if len(G.shape) == 3 and G.shape[0] != 1:
        raise ValueError(f"G must hold one FSA, got {G.shape[0]}")


def rescore_with_n_best_list(
    lattice: k2.Fsa,
    G: k2.Fsa,
    num_paths: int,
    lm_scale_list: list[float],
    nbest_scale: float = 1.0,
    use_double_scores: bool = True,
) -> dict[str, k2.Fsa]:
    """``num_paths`` sampled word sequences, each scored by its best alignment's acoustic
    part and by the n-gram ``G`` (an acceptor over word ids): ``am / s + ngram`` for each
    ``s`` of ``lm_scale_list``, keyed ``lm_scale_{s}``; the winners' best paths in the
    lattice (icefall's carry G's scores; the words are the same)."""
    _check_G(G, lattice)
    nbest = _word_nbest(lattice, num_paths, nbest_scale, use_double_scores)
    am, lm = nbest.am_scores().values, ngram_lm_scores(nbest, G).values
    return {f"lm_scale_{s}": index_paths(nbest.fsa, pick(nbest, am / s + lm))
            for s in lm_scale_list}


def rescore_with_whole_lattice(
    lattice: k2.Fsa,
    G_with_epsilon_loops: k2.Fsa,
    lm_scale_list: list[float] | None = None,
    use_double_scores: bool = True,
) -> k2.Fsa | dict[str, k2.Fsa]:
    """The lattice with its LM scores replaced by those of ``G_with_epsilon_loops`` (a word
    acceptor with epsilon self-loops and ``lm_scores``); with ``lm_scale_list``, a dict
    ``lm_scale_{s}`` -> best paths under ``am / s + lm``. Memory is bounded as in
    :func:`k2dec.lattice.rescore_with_whole_lattice` (a lattice too large to compose is
    pruned first; one that still does not fit gets an empty FSA, where icefall prunes the
    whole batch harder and finally returns ``None``)."""
    result = k2dec_whole_lattice(lattice, G_with_epsilon_loops,
                                 RescoreConfig(lm_scales=tuple(lm_scale_list or (1.0,))))
    rescored = result.lattice
    if rescored is None:  # every utterance failed: empty FSAs
        rescored = index_paths(lattice, torch.full((lattice.shape[0],), -1))
    if lm_scale_list is None:
        return rescored
    return {f"lm_scale_{s}": best_paths(_rescaled(rescored, s), use_double_scores)
            for s in lm_scale_list}


def _scales(value: float | None, default: Sequence[float]) -> list[float]:
    return list(default) if value is None else [value]


def _choose(nbest: Nbest, comps: dict[str, torch.Tensor],
            grids: dict[str, list[float]]) -> dict[str, k2.Fsa]:
    """For every point of the product of ``grids`` (icefall's key order): the best paths
    under ``comps["am"] + sum_c scale_c * comps[c]``, keyed ``{c}_scale_{value}_...``."""
    out = {}
    for point in itertools.product(*grids.values()):
        total = comps["am"].clone()
        for name, s in zip(grids, point):
            if s != 0:
                total = total + s * comps[name]
        key = "_".join(f"{name}_scale_{s}" for name, s in zip(grids, point))
        out[key] = index_paths(nbest.fsa, pick(nbest, total))
    return out


def _attention(path_to_utt: torch.Tensor, num_utts: int, tokens: k2.RaggedTensor,
               decoder: Any, memory: torch.Tensor, memory_lens: torch.Tensor) -> torch.Tensor:
    """float64 ``[paths]`` on ``path_to_utt``'s device: the attention decoder's log-prob of
    each path's tokens (``tokens`` ``[path][token]``, path ``i`` of utterance
    ``path_to_utt[i]``)."""
    lists = HypothesisLists(tokens.to(memory.device),
                            path_to_utt.to(memory.device, torch.int64), num_utts,
                            [[] for _ in range(tokens.dim0)])
    return attention_scores(decoder, memory, memory_lens, lists).to(path_to_utt.device)


def _ngram_and_attention(nbest: Nbest, decoder: Any, memory: torch.Tensor,
                         memory_lens: torch.Tensor, ngram_lm_scale: float | None,
                         attention_scale: float | None) -> dict[str, k2.Fsa]:
    """The best paths of ``nbest`` (intersected word paths) under ``am + n * lm + a *
    attention`` (the lattice's LM scores, ``decoder`` on ``memory`` ``(N, T, C)``) for each
    ``n`` / ``a`` (the given scale, or icefall's grid when ``None``)."""
    comps = {"am": nbest.am_scores().values, "ngram_lm": nbest.lm_scores().values,
             "attention": _attention(nbest.path_to_utt(), nbest.num_utts, nbest.token_seqs(),
                                     decoder, memory, memory_lens)}
    return _choose(nbest, comps, {"ngram_lm": _scales(ngram_lm_scale, DEFAULT_LM_SCALE),
                                  "attention": _scales(attention_scale, DEFAULT_LM_SCALE)})


def _memory(memory: torch.Tensor, mask: torch.Tensor | None) -> tuple[torch.Tensor,
                                                                       torch.Tensor]:
    """icefall's ``(T, N, C)`` memory and ``(N, T)`` padding mask -> ``(N, T, C)`` and the
    valid frames ``(N,)``."""
    mem = memory.permute(1, 0, 2)
    if mask is None:
        return mem, torch.full((mem.size(0),), mem.size(1), dtype=torch.int64,
                               device=mem.device)
    return mem, (~mask.to(torch.bool)).sum(dim=1)


def rescore_with_attention_decoder(
    lattice: k2.Fsa,
    num_paths: int,
    model: Any,
    memory: torch.Tensor,
    memory_key_padding_mask: torch.Tensor | None,
    sos_id: int,
    eos_id: int,
    nbest_scale: float = 1.0,
    ngram_lm_scale: float | None = None,
    attention_scale: float | None = None,
    use_double_scores: bool = True,
) -> dict[str, k2.Fsa]:
    """``num_paths`` sampled word sequences (best alignments) scored ``am + n * lm +
    a * attention`` with the lattice's LM scores and ``model``'s attention decoder
    (``decoder_nll``, on ``memory`` ``(T, N, C)``), for each ``n`` / ``a`` (the given scale,
    or icefall's grid when ``None``), keyed ``ngram_lm_scale_{n}_attention_scale_{a}``."""
    nbest = _word_nbest(lattice, num_paths, nbest_scale, use_double_scores)
    mem, lens = _memory(memory, memory_key_padding_mask)
    return _ngram_and_attention(nbest, as_decoder(model, sos_id, eos_id), mem, lens,
                                ngram_lm_scale, attention_scale)


def rescore_with_attention_decoder_with_ngram(
    lattice: k2.Fsa,
    num_paths: int,
    attention_decoder: Any,
    encoder_out: torch.Tensor,
    encoder_out_lens: torch.Tensor,
    nbest_scale: float = 1.0,
    ngram_lm_scale: float | None = None,
    attention_scale: float | None = None,
    use_double_scores: bool = True,
) -> dict[str, k2.Fsa]:
    """As :func:`rescore_with_attention_decoder` with a zipformer-style decoder
    (``attention_decoder.nll``, on ``encoder_out`` ``(N, T, C)``)."""
    nbest = _word_nbest(lattice, num_paths, nbest_scale, use_double_scores)
    return _ngram_and_attention(nbest, as_decoder(attention_decoder), encoder_out,
                                encoder_out_lens, ngram_lm_scale, attention_scale)


def rescore_with_attention_decoder_no_ngram(
    lattice: k2.Fsa,
    num_paths: int,
    attention_decoder: Any,
    encoder_out: torch.Tensor,
    encoder_out_lens: torch.Tensor,
    nbest_scale: float = 1.0,
    attention_scale: float | None = None,
    use_double_scores: bool = True,
) -> dict[str, k2.Fsa]:
    """For lattices through H (tensor ``aux_labels``: token ids), ranked as icefall ranks
    them: ``num_paths`` alignments drawn by ``k2.random_paths`` from the lattice as it is
    (icefall applies no ``nbest_scale`` here), duplicates kept, each scored by its own
    alignment score (float32, summed along the path) plus ``a`` times the attention
    decoder's log-prob of its tokens; per utterance the best alignment (the last of equal
    ones) as a linear FSA (``labels`` its tokens and blanks, ``aux_labels`` its token ids),
    keyed ``attention_scale_{a}`` (``attention_scale=None``: icefall's 28 scales).

    k2dec's own ``attention-decoder-rescoring-no-ngram`` method differs on purpose: it keeps
    one path per distinct token sequence, scored by its best alignment."""
    aux = getattr(lattice, "aux_labels", None) if isinstance(lattice, k2.Fsa) else None
    if not isinstance(aux, torch.Tensor) or len(lattice.shape) != 3:
        raise ValueError("rescore_with_attention_decoder_no_ngram needs an FsaVec lattice "
                         "through H (aux_labels a tensor of token ids), e.g. from "
                         "get_lattice(..., H, ...)")
    paths = k2_random_paths(lattice, int(num_paths), use_double_scores)  # [utt][path][arc]
    arcs = paths.remove_axis(0)  # [path][arc], arc indexes into the lattice
    labels = k2.ragged.index(lattice.labels.contiguous(), arcs).remove_values_eq(-1)
    best_paths = k2.linear_fsa(labels)
    best_paths.aux_labels = aux[arcs.values.to(torch.int64)]
    am = k2.ragged.index(lattice.scores.contiguous(), arcs).sum()  # float32 [path]
    tokens = k2.ragged.index(aux.contiguous(), arcs).remove_values_leq(0)
    utt = paths.shape.get_layer(0)
    att = _attention(utt.row_ids(1), lattice.shape[0], tokens, as_decoder(attention_decoder),
                     encoder_out, encoder_out_lens).to(torch.float32)
    out = {}
    for a in _scales(attention_scale, NO_NGRAM_ATTENTION_SCALES):
        best = k2.RaggedTensor(utt, am + a * att).argmax()
        out[f"attention_scale_{a}"] = index_paths(best_paths, best)
    return out


def rescore_with_rnn_lm(
    lattice: k2.Fsa,
    num_paths: int,
    rnn_lm_model: Any,
    model: Any,
    memory: torch.Tensor,
    memory_key_padding_mask: torch.Tensor | None,
    sos_id: int,
    eos_id: int,
    blank_id: int,
    nbest_scale: float = 1.0,
    ngram_lm_scale: float | None = None,
    attention_scale: float | None = None,
    rnn_lm_scale: float | None = None,
    use_double_scores: bool = True,
) -> dict[str, k2.Fsa]:
    """As :func:`rescore_with_attention_decoder`, plus ``r`` times the RNN LM's log-prob of
    each path's tokens: keys ``ngram_lm_scale_{n}_attention_scale_{a}_rnn_lm_scale_{r}``
    (a scale given as ``None`` or 0 sweeps icefall's grid, as icefall)."""
    nbest = _word_nbest(lattice, num_paths, nbest_scale, use_double_scores)
    mem, lens = _memory(memory, memory_key_padding_mask)
    tokens = nbest.token_seqs()
    lm = sequence_lm(rnn_lm_model, sos_id, eos_id, blank_id)
    with torch.no_grad():
        rnn = lm.score_sequences(tokens, batch_size=256).totals
    comps = {"am": nbest.am_scores().values, "ngram_lm": nbest.lm_scores().values,
             "attention": _attention(nbest.path_to_utt(), nbest.num_utts, tokens,
                                     as_decoder(model, sos_id, eos_id), mem,
                                     lens),
             "rnn_lm": rnn.to(nbest.device, torch.float64)}
    grids = {"ngram_lm": _scales(ngram_lm_scale or None, DEFAULT_LM_SCALE),
             "attention": _scales(attention_scale or None, DEFAULT_LM_SCALE),
             "rnn_lm": _scales(rnn_lm_scale or None, DEFAULT_LM_SCALE)}
    return _choose(nbest, comps, grids)

