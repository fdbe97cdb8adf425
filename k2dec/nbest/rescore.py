"""Rescoring n-best lists: n-gram G, neural scorers, and score combinations with scale sweeps.

Scores are float64 ragged tensors ``[utt][path]`` aligned with an :class:`~k2dec.nbest.Nbest`.
A combination ``am + s1*ngram + s2*attention + s3*nnlm`` is evaluated for every point of a
grid of scales at once; results are keyed by icefall's names
(``ngram_lm_scale_0.5_attention_scale_1.0``, ...).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import k2
import torch

from .chunking import chunks
from .config import TIE_BREAKS
from .keys import DedupKey
from .nbest import Nbest, PathScorer
from .scores import ragged_sort_desc

__all__ = [
    "ATTENTION_CHUNK_CELLS",
    "NNLM_SCALES",
    "SCALE_GRID",
    "NbestRescoreResult",
    "neural_scores",
    "rescore_with_attention_decoder",
    "rescore_with_lm",
    "rescore_with_rnn_lm",
    "rescore_with_transformer_lm",
    "lm_path_scorer",
    "ngram_lm_scores",
    "word_sequence_scores",
    "best_paths_by_score",
    "combine_scores",
    "rescore_with_ngram",
    "scale_key",
]

logger = logging.getLogger(__name__)

#: icefall's scale grid for n-gram / attention rescoring sweeps.
SCALE_GRID: tuple[float, ...] = (0.01, 0.05, 0.08, 0.1, 0.3, 0.5, 0.6, 0.7, 0.9, 1.0, 1.1, 1.2,
                                 1.3, 1.5, 1.7, 1.9, 2.0)
#: Default neural-LM scales.
NNLM_SCALES: tuple[float, ...] = (0.1, 0.3, 0.5, 0.7, 0.9, 1.0)


@dataclass(frozen=True)
class NbestRescoreResult:
    """The outcome of one point of a scale sweep.

    Attributes:
      key: icefall-style name of the setting, e.g. ``"ngram_lm_scale_0.5"``.
      scales: the scales of this point, by component name.
      best: int64 ``[num_utts]``: index (into the n-best's paths) of each utterance's best
        path, -1 for an utterance without paths.
      scores: float64 ``[num_utts]``: the combined score of that path (``-inf`` if none).
      hyps: the best key sequence (word or token ids) of each utterance.
      path_scores: float64 ``[num_paths]``: the combined score of every path at this point
        (what the n-best confidences weigh the paths by); ``None`` when not kept.
    """

    key: str
    scales: Mapping[str, float]
    best: torch.Tensor
    scores: torch.Tensor
    hyps: list[list[int]]
    path_scores: torch.Tensor | None = None


def scale_key(scales: Mapping[str, float]) -> str:
    """``{"ngram_lm_scale": 0.5, "attention_scale": 1.0}`` -> icefall's
    ``"ngram_lm_scale_0.5_attention_scale_1.0"`` (insertion order)."""
    return "_".join(f"{name}_{value}" for name, value in scales.items())


def ngram_lm_scores(nbest: Nbest, G: k2.Fsa, chunk_size: int = 2000) -> k2.RaggedTensor:
    """Score each path's word sequence with an n-gram acceptor G (best path, tropical).

    Args:
      nbest: deduplicated by words.
      G: acceptor over word ids with epsilon backoff arcs (``build_rescoring_G``; epsilon
        self-loops, if any, are removed here), on ``nbest``'s device.

    Returns:
      float64 ragged ``[utt][path]``: ``ln P(words </s> | <s>)`` under G's backoff
      semantics (``-inf`` if G has no path, e.g. a word G does not know).
    """
    if nbest.key is not DedupKey.WORDS:
        raise ValueError("n-gram rescoring needs an n-best deduplicated by words")
    return k2.RaggedTensor(nbest.shape, word_sequence_scores(nbest.key_seqs, G, chunk_size))


def word_sequence_scores(words: k2.RaggedTensor, G: k2.Fsa, chunk_size: int = 2000
                         ) -> torch.Tensor:
    """Score word sequences with an n-gram acceptor G (best path, tropical).

    Args:
      words: int32 ragged ``[seq][word]`` (word ids > 0), on G's device.
      G: acceptor over word ids with epsilon backoff arcs (``build_rescoring_G``; epsilon
        self-loops, if any, are removed here). Sequences are intersected with it in chunks
        of ``chunk_size``.

    Returns:
      float64 ``[seq]``: ``ln P(words </s> | <s>)`` under G's backoff semantics (``-inf`` if
      G has no path, e.g. a word G does not know).
    """
    if not isinstance(G, k2.Fsa):
        raise TypeError(f"G must be a k2.Fsa, got {type(G).__name__}")
    if G.device != words.device:
        raise ValueError(f"G is on {G.device} but the word sequences are on {words.device}")
    G = k2.remove_epsilon_self_loops(G)
    if len(G.shape) == 2:
        G = k2.create_fsa_vec([G])
    G = k2.arc_sort(G)
    num = words.dim0
    paths = k2.add_epsilon_self_loops(k2.linear_fsa(words))
    out = torch.empty(num, dtype=torch.float64, device=words.device)
    for start in range(0, num, chunk_size):
        end = min(start + chunk_size, num)
        idx = torch.arange(start, end, dtype=torch.int32, device=words.device)
        chunk = k2.index_fsa(paths, idx)
        b_to_a = torch.zeros(end - start, dtype=torch.int32, device=words.device)
        inter = k2.connect(k2.intersect_device(G, chunk, b_to_a_map=b_to_a, sorted_match_a=True))
        inter = k2.top_sort(inter)
        out[start:end] = inter.get_tot_scores(use_double_scores=True, log_semiring=False)
    return out


def best_paths_by_score(nbest: Nbest, scores: torch.Tensor, tie_break: str = "first"
                        ) -> tuple[torch.Tensor, torch.Tensor]:
    """Per utterance, the index of the highest-scoring path.

    Args:
      scores: float64 ``[num_paths]`` aligned with ``nbest``.
      tie_break: among equal scores, ``"first"`` takes the lowest index, ``"last"`` the
        highest (icefall's ``k2.RaggedTensor.argmax``); see ``NbestConfig.tie_break``.

    Returns:
      ``(best, best_scores)``: int64 ``[num_utts]`` (-1 where an utterance has no path) and
      float64 ``[num_utts]`` (``-inf`` there).
    """
    if tie_break not in TIE_BREAKS:
        raise ValueError(f"tie_break must be one of {TIE_BREAKS}, got {tie_break!r}")
    ragged = k2.RaggedTensor(nbest.shape, scores.to(torch.float64))
    if tie_break == "last":
        best = ragged.argmax().to(torch.int64)  # -1 for utterances without paths
        best_scores = torch.full(best.shape, float("-inf"), dtype=torch.float64,
                                 device=scores.device)
        has = best >= 0
        best_scores[has] = scores.to(torch.float64)[best[has]]
        return best, best_scores
    order = ragged_sort_desc(ragged)
    splits = nbest.shape.row_splits(1).to(torch.int64).to(scores.device)
    counts = splits[1:] - splits[:-1]
    has = counts > 0
    best = torch.full((nbest.num_utts,), -1, dtype=torch.int64, device=scores.device)
    best_scores = torch.full((nbest.num_utts,), float("-inf"), dtype=torch.float64,
                             device=scores.device)
    if nbest.num_paths:
        first = splits[:-1][has]
        best[has] = order[first]
        best_scores[has] = scores.to(torch.float64)[best[has]]
    return best, best_scores


def combine_scores(
    components: Mapping[str, k2.RaggedTensor],
    scale_grid: Mapping[str, Sequence[float]],
    base: str = "am",
    nbest: Nbest | None = None,
) -> dict[str, NbestRescoreResult]:
    """Evaluate ``base + sum_c scale_c * component_c`` for every point of a scale grid.

    Args:
      components: ragged ``[utt][path]`` float scores by name, including ``base``.
      scale_grid: for each scaled component, its list of scales, keyed by the icefall scale
        name (``"ngram_lm_scale"`` scales component ``"ngram_lm"``, ``"attention_scale"``
        scales ``"attention"``, ``"nnlm_scale"`` scales ``"nnlm"``, ``"lm_scale"`` scales
        ``"lm"``).
      nbest: gives the shape and the key sequences for ``hyps``.

    Returns:
      ``{key: NbestRescoreResult}`` in grid order.
    """
    if nbest is None:
        raise ValueError("combine_scores needs the nbest the scores belong to")
    if base not in components:
        raise ValueError(f"components must include the base {base!r}")
    names = list(scale_grid)
    comp_for: dict[str, str] = {}
    for name in names:
        if not name.endswith("_scale"):
            raise ValueError(f"scale names end in '_scale', got {name!r}")
        comp = name[: -len("_scale")]
        if comp not in components:
            raise ValueError(f"no component {comp!r} for scale {name!r}")
        comp_for[name] = comp
    for comp, r in components.items():
        if r.values.numel() != nbest.num_paths:
            raise ValueError(f"component {comp!r} has {r.values.numel()} scores, "
                             f"the n-best {nbest.num_paths} paths")
    results: dict[str, NbestRescoreResult] = {}
    for point in itertools.product(*(scale_grid[n] for n in names)):
        scales = dict(zip(names, (float(x) for x in point)))
        total = components[base].values.to(torch.float64).clone()
        for name, s in scales.items():
            if s != 0.0:  # a zero scale adds nothing, even to a -inf score (0 * -inf is nan)
                total = total + s * components[comp_for[name]].values.to(torch.float64)
        best, best_scores = best_paths_by_score(nbest, total)
        hyps = nbest.keys_at(best)
        key = scale_key(scales) if scales else "no_rescore"
        results[key] = NbestRescoreResult(key, scales, best, best_scores, hyps, total)
    return results


def rescore_with_ngram(
    nbest: Nbest, G: k2.Fsa, lm_scales: Sequence[float], chunk_size: int = 2000
) -> dict[str, NbestRescoreResult]:
    """icefall's ``nbest-rescoring``: ``am + lm_scale * ngram`` with G (e.g. a 4-gram).

    ``nbest`` must come from :meth:`Nbest.intersect` on a lattice with ``lm_scores`` (so
    that ``am = tot - lm`` is defined). Keys: ``ngram_lm_scale_{s}``.
    """
    components = {"am": nbest.am_scores(), "ngram_lm": ngram_lm_scores(nbest, G, chunk_size)}
    return combine_scores(components, {"ngram_lm_scale": list(lm_scales)}, nbest=nbest)


#: Attention-decoder rescoring runs in chunks of at most this many (token, frame) cells, the
#: sum over a chunk's paths of ``(tokens + 1) x encoder frames``: the decoder's
#: cross-attention weights take ~40 bytes per cell (the shipped model's
#: :class:`~k2dec.aed.TransformerDecoder`, 4 heads, which shares an utterance's encoder output
#: and its projections between the utterance's paths; a decoder that copies them per path
#: takes more), so ~0.3 GB a chunk. A 60 s utterance (1500 frames, ~240 tokens) fits ~23
#: paths in a chunk.
ATTENTION_CHUNK_CELLS = 1 << 23


def neural_scores(nbest: Nbest, scorer: PathScorer, chunk_size: int = 500,
                  path_cost: torch.Tensor | None = None, max_cost: int | None = None
                  ) -> k2.RaggedTensor:
    """Sum of per-token neural scores of each path's token sequence (eos included).

    Args:
      scorer: ``(tokens [path][tok] int32, path_to_utt int64 [path]) -> [path][tok + 1]``;
        e.g. ``partial(decoder.score_sequences, memory, memory_lens)`` adapted, or an LM's
        batch scorer. Called on chunks of at most ``chunk_size`` paths.
      path_cost, max_cost: with both, a chunk's paths also add up to at most ``max_cost``
        (int64 ``[num_paths]`` costs, e.g. the memory each path's scoring takes; a chunk
        always has at least one path).

    Returns:
      float64 ragged ``[utt][path]``.
    """
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    tokens = nbest.token_seqs()
    path_to_utt = nbest.path_to_utt().to(torch.int64)
    out = torch.empty(nbest.num_paths, dtype=torch.float64, device=nbest.device)
    cost = path_cost if path_cost is not None else torch.zeros(nbest.num_paths)
    for start, end in chunks(cost, chunk_size, max_cost if path_cost is not None else None):
        idx = torch.arange(start, end, dtype=torch.int32, device=tokens.device)
        sub, _ = tokens.index(idx, axis=0)
        scores = scorer(sub, path_to_utt[start:end])
        if not isinstance(scores, k2.RaggedTensor) or scores.dim0 != end - start:
            raise ValueError("the scorer must return a RaggedTensor [path][tok + 1]")
        out[start:end] = scores.sum().to(torch.float64).to(out.device)
    return k2.RaggedTensor(nbest.shape, out)


def rescore_with_attention_decoder(
    nbest: Nbest,
    decoder,
    memory: torch.Tensor,
    memory_lens: torch.Tensor,
    ngram_lm_scales: Sequence[float] = SCALE_GRID,
    attention_scales: Sequence[float] = SCALE_GRID,
    G: k2.Fsa | None = None,
    max_chunk_cells: int = ATTENTION_CHUNK_CELLS,
) -> dict[str, NbestRescoreResult]:
    """icefall's ``attention-decoder`` rescoring: ``am + s1 * ngram + s2 * attention``.

    Args:
      nbest: intersected with its lattice (needs ``lm_scores`` for ``am = tot - lm``).
      decoder: has ``score_sequences(memory, memory_lens, tokens, seq_to_utt)`` (e.g.
        :class:`k2dec.aed.TransformerDecoder`).
      memory: float ``[N, T, C]`` encoder output; memory_lens: int ``[N]``.
      G: n-gram for the ``ngram`` component; default: the lattice's own ``lm_scores``.
      max_chunk_cells: paths are scored in chunks whose ``(tokens + 1) x T`` add up to at most
        this (see :data:`ATTENTION_CHUNK_CELLS`): memory does not grow with the number of
        paths or the utterance's length.

    Returns:
      ``{"ngram_lm_scale_{s1}_attention_scale_{s2}": NbestRescoreResult}``.
    """
    if memory.dim() != 3 or memory.size(0) != nbest.num_utts:
        raise ValueError(f"memory must be [N={nbest.num_utts}, T, C], got "
                         f"{tuple(memory.shape)}")
    if isinstance(max_chunk_cells, bool) or not isinstance(max_chunk_cells, int) \
            or max_chunk_cells < 1:
        raise ValueError(f"max_chunk_cells must be an int >= 1, got {max_chunk_cells!r}")

    def scorer(tokens: k2.RaggedTensor, seq_to_utt: torch.Tensor) -> k2.RaggedTensor:
        return decoder.score_sequences(memory, memory_lens, tokens, seq_to_utt)

    splits = nbest.token_seqs().shape.row_splits(1).to("cpu", torch.int64)
    cells = (splits[1:] - splits[:-1] + 1) * memory.size(1)
    ngram = nbest.lm_scores() if G is None else ngram_lm_scores(nbest, G)
    components = {
        "am": nbest.am_scores(),
        "ngram_lm": ngram,
        "attention": neural_scores(nbest, scorer, path_cost=cells, max_cost=max_chunk_cells),
    }
    grid = {"ngram_lm_scale": list(ngram_lm_scales), "attention_scale": list(attention_scales)}
    return combine_scores(components, grid, nbest=nbest)


def rescore_with_lm(
    nbest: Nbest,
    lm_scorer: PathScorer,
    lm_scales: Sequence[float] = NNLM_SCALES,
    scale_name: str = "nnlm_scale",
) -> dict[str, NbestRescoreResult]:
    """Rescoring with a neural LM (RNN or Transformer): ``am + s * nnlm`` keyed
    ``{scale_name}_{s}`` (icefall's rnn-lm recipe names it ``rnn_lm_scale``)."""
    if not scale_name.endswith("_scale"):
        raise ValueError(f"scale_name must end in '_scale', got {scale_name!r}")
    comp = scale_name[: -len("_scale")]
    components = {"am": nbest.am_scores(), comp: neural_scores(nbest, lm_scorer)}
    return combine_scores(components, {scale_name: list(lm_scales)}, nbest=nbest)


def lm_path_scorer(lm, batch_size: int | None = 256, max_tokens: int | None = None
                   ) -> PathScorer:
    """Adapt a neural LM with ``score_sequences(tokens, batch_size, max_tokens)``
    (``k2dec.lm``) to a :data:`PathScorer` (the utterance of a path does not matter to an
    LM): at most ``batch_size`` sequences and ``max_tokens`` padded positions (``None``: no
    bound) per LM pass."""

    def scorer(tokens: k2.RaggedTensor, seq_to_utt: torch.Tensor) -> k2.RaggedTensor:
        with torch.no_grad():
            if max_tokens is None:  # LMs without the bound (a user's own scorer class)
                return lm.score_sequences(tokens, batch_size=batch_size).token_log_probs
            return lm.score_sequences(tokens, batch_size=batch_size,
                                      max_tokens=max_tokens).token_log_probs

    return scorer


def rescore_with_rnn_lm(
    nbest: Nbest, rnn_lm, lm_scales: Sequence[float] = NNLM_SCALES,
    batch_size: int | None = 256,
) -> dict[str, NbestRescoreResult]:
    """icefall's ``rnn-lm`` rescoring with a :class:`k2dec.lm.RnnLM`: keys
    ``rnn_lm_scale_{s}``."""
    return rescore_with_lm(nbest, lm_path_scorer(rnn_lm, batch_size), lm_scales,
                           scale_name="rnn_lm_scale")


def rescore_with_transformer_lm(
    nbest: Nbest, transformer_lm, lm_scales: Sequence[float] = NNLM_SCALES,
    batch_size: int | None = 256,
) -> dict[str, NbestRescoreResult]:
    """Rescoring with a :class:`k2dec.lm.TransformerLM`: keys ``transformer_lm_scale_{s}``."""
    return rescore_with_lm(nbest, lm_path_scorer(transformer_lm, batch_size), lm_scales,
                           scale_name="transformer_lm_scale")
