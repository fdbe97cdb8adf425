"""Forced alignment of words to CTC log-probs: the frames of each token and word of a known
transcript, and how well the audio supports each word.

Each utterance's words are given as their token sequences (BPE pieces: every word spells,
through ``<unk>`` at worst, so words outside a lexicon align too). The best CTC path (standard
topology, blank 0) through the tokens is found by :func:`k2dec.lattice.ctc_forced_alignment`
(``k2.ctc_graph`` + ``k2.intersect_dense`` + ``k2.shortest_path``, batched); a word covers the
frames from its first token's first frame to its last token's last frame.

A word's **confidence** is read off that path as CTC segmentation does: on every frame of the
word, the log-prob of the path's label (the word's token, or blank between its tokens) minus
the best log-prob of any label on that frame; the word's confidence is ``exp`` of their mean,
in ``(0, 1]``. A word the audio says scores near 1 (the path follows the network's own
choice); a word the audio lacks is squeezed into frames the network gives to something else
and scores near 0. Words are never dropped or invented: every word of the transcript gets
frames (at least one per token) when the utterance has enough frames, and nothing else does.
A word's **score** is the sum of the same gaps over its frames (a goodness-of-pronunciation
ratio: the word's path against the unconstrained best labels of its frames), ``<= 0``.

With :class:`Untranscribed` penalties, the path may also leave the transcript between words
(and before the first, after the last) through a **garbage** label that scores each frame's
best log-prob (what an unconstrained CTC pass takes there), paying ``entry_penalty`` per run
and ``frame_penalty`` per frame; a run of garbage frames is speech the transcript lacks.
Where the audio matches the transcript, its path already takes (nearly) every frame's best
label, garbage gains less than its penalties, and the alignment is the plain one. The
garbage label is an extra column of the dense input, so the graph stays small (one state per
word boundary). Ties between paths of equal score (possible only with zero
penalties) are broken by k2.

With :attr:`Untranscribed.skip_penalty`, the path may also **skip** transcript words (up to
:data:`MAX_SKIPPED_RUN` in a row), paying the penalty per word: arcs from a word boundary's
states to where the path would go on the next frame after the skipped words (k2's dense
intersection has no epsilon arcs, so a skip is taken on the frame after it). A word the
audio lacks then costs the penalty instead of squeezing into frames its neighbours say, so
the neighbours keep their frames. A skipped word has no frames (:class:`WordAlignment`
marks it zero-length at its gap). Skipping words and taking garbage for their frames costs
``entry_penalty`` plus the skips, so a skip penalty under a right word's log-prob gap skips
right words: choose it on dev material. Two choices of skipped words that spell the same
tokens (``A A`` with one ``A`` skipped) tie; k2 breaks the tie.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import _k2
import k2
import torch

from k2dec.lattice.align import ALIGN_OUTPUT_BEAM, CtcAlignment, ctc_forced_alignment
from k2dec.lattice.dense import make_dense_fsa_vec
from k2dec.primitives.best_paths import ctc_token_spans
from k2dec.primitives.ragged import ragged_from_row_ids, ragged_select

__all__ = ["MAX_SKIPPED_RUN", "PATH_SCORE_CELLS", "PATH_SCORE_FRAMES", "Untranscribed",
           "WordAlignment", "align_words", "frame_labels", "path_scores"]

MAX_SKIPPED_RUN = 3
"""The most transcript words in a row the word-skip path skips (each run of ``r`` skipped
words is one arc per state pair, ``r * skip_penalty``: the graph grows by this factor)."""


@dataclass(frozen=True)
class Untranscribed:
    """Penalties of the garbage path for speech a transcript lacks (log-prob units, >= 0).

    Attributes:
      entry_penalty: paid once per garbage run (the evidence an untranscribed stretch
        must bring: the free CTC pass must beat the transcript's path by this much).
      frame_penalty: paid per garbage frame.
      skip_penalty: paid per transcript word the path skips (a word the audio lacks:
        reported as skipped, with no frames); at most :data:`MAX_SKIPPED_RUN` words in a
        row are skipped; ``None``: every word is aligned.
    """

    entry_penalty: float = 8.0
    frame_penalty: float = 0.0
    skip_penalty: float | None = None

    def __post_init__(self) -> None:
        for name in ("entry_penalty", "frame_penalty", "skip_penalty"):
            value = getattr(self, name)
            if value is None and name == "skip_penalty":
                continue
            if not isinstance(value, int | float) or not 0 <= value < float("inf"):
                raise ValueError(f"Untranscribed.{name} must be a finite number >= 0, got "
                                 f"{value!r}")


@dataclass(frozen=True)
class WordAlignment:
    """Frames of the tokens and words of ``N`` transcripts (frames of ``log_probs``).

    Attributes:
      token_begin, token_end: int32 ``k2.RaggedTensor`` ``[utt][token]``: token ``k`` covers
        frames ``begin <= f < end`` on the best path (rows empty when not ``aligned``).
      word_begin, word_end: int32 ``k2.RaggedTensor`` ``[utt][word]``: the frames from the
        word's first token's first frame to its last token's end (rows empty when not
        ``aligned``).
      word_confidence: float32 ``k2.RaggedTensor`` ``[utt][word]`` in ``(0, 1]`` (see the
        module docstring).
      word_score: float32 ``k2.RaggedTensor`` ``[utt][word]``, ``<= 0``: the sum of the
        same per-frame log-prob gaps over the word's frames (a goodness-of-pronunciation
        ratio: the word's path against the unconstrained best labels of its frames).
      aligned: bool ``(N,)``: False when the utterance has fewer frames than a CTC path of its
        tokens needs.
      score: float64 ``(N,)``: log-prob of the best path, penalties included (``-inf``
        when not aligned).
      garbage_begin, garbage_end: int32 ``k2.RaggedTensor`` ``[utt][run]``: the frames
        ``begin <= f < end`` of each garbage run (speech the transcript lacks; empty rows
        without ``untranscribed``).
      word_skipped: int32 ``k2.RaggedTensor`` ``[utt][word]`` (rows empty when not
        ``aligned``): 1 for a word the path skipped (``Untranscribed.skip_penalty``: the
        audio lacks it). A skipped word has no frames: its tokens and itself get the
        zero-length mark ``begin == end`` at the gap it was skipped in (the end of the
        token before it, 0 at the start), confidence 0 and score ``-inf``.
    """

    token_begin: k2.RaggedTensor
    token_end: k2.RaggedTensor
    word_begin: k2.RaggedTensor
    word_end: k2.RaggedTensor
    word_confidence: k2.RaggedTensor
    word_score: k2.RaggedTensor
    aligned: torch.Tensor
    score: torch.Tensor
    garbage_begin: k2.RaggedTensor
    garbage_end: k2.RaggedTensor
    word_skipped: k2.RaggedTensor


def _ragged3(rows: list[list[list[int]]], device: torch.device) -> k2.RaggedTensor:
    """An int32 ``[utt][word][token]`` ragged tensor of nested lists (empty rows kept)."""
    words = torch.tensor([0] + [len(u) for u in rows], dtype=torch.int32).cumsum(0)
    tokens = torch.tensor([0] + [len(w) for u in rows for w in u], dtype=torch.int32).cumsum(0)
    values = torch.tensor([x for u in rows for w in u for x in w], dtype=torch.int32)
    shape = k2.ragged.create_ragged_shape2(row_splits=words.to(torch.int32))
    shape2 = k2.ragged.create_ragged_shape2(row_splits=tokens.to(torch.int32))
    return k2.RaggedTensor(shape.compose(shape2), values).to(device)


def _word_tokens(words: k2.RaggedTensor | Sequence[Sequence[Sequence[int]]], n: int,
                 device: torch.device) -> k2.RaggedTensor:
    if isinstance(words, k2.RaggedTensor):
        if words.num_axes != 3 or words.dim0 != n:
            raise ValueError(f"words must be a 3-axis ragged tensor [utt][word][token] with "
                             f"{n} rows, got {words.num_axes} axes and {words.dim0} rows")
        ragged = words.to(device)
    else:
        rows = [[[int(x) for x in w] for w in utt] for utt in words]
        if len(rows) != n:
            raise ValueError(f"words has {len(rows)} transcripts but log_probs has N={n}")
        ragged = _ragged3(rows, device)
    sizes = ragged.shape.row_splits(2)
    empty = (sizes[1:] == sizes[:-1]).nonzero()
    if empty.numel():
        k = int(empty[0])
        utt = int(torch.searchsorted(ragged.shape.row_splits(1), k, right=True)) - 1
        raise ValueError(f"words[{utt}] has a word with no tokens (word "
                         f"{k - int(ragged.shape.row_splits(1)[utt])}); every word needs one")
    return ragged


def frame_labels(begin: k2.RaggedTensor, end: k2.RaggedTensor, tokens: torch.Tensor,
                 num_frames: int) -> torch.Tensor:
    """The label of every frame of a CTC path given by its token runs.

    Args:
      begin, end: int32 ``[utt][token]`` runs (frames ``begin <= f < end``), ``N`` rows.
      tokens: int32 ``(num_tokens,)``: the token of each run (``begin.values``' order).
      num_frames: ``T``.

    Returns:
      int64 ``(N, T)``: the run's token on its frames, 0 (blank) elsewhere.
    """
    n = begin.dim0
    labels = torch.zeros(n * num_frames, dtype=torch.int64, device=tokens.device)
    runs = (end.values - begin.values).to(torch.int64)
    if runs.numel() == 0:
        return labels.view(n, num_frames)
    row = begin.shape.row_ids(1).to(torch.int64)
    first = row * num_frames + begin.values.to(torch.int64)
    starts = torch.repeat_interleave(first, runs)
    offsets = torch.arange(int(runs.sum()), device=tokens.device) - torch.repeat_interleave(
        torch.cumsum(runs, 0) - runs, runs)
    labels[starts + offsets] = torch.repeat_interleave(tokens.to(torch.int64), runs)
    return labels.view(n, num_frames)


def _confidences(log_probs: torch.Tensor, labels: torch.Tensor, word_begin: torch.Tensor,
                 word_end: torch.Tensor, word_row: torch.Tensor
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """Each word's confidence (``exp`` of the mean log-prob gap over its frames) and score
    (the gaps' sum)."""
    lp = log_probs.float()
    gap = lp.gather(2, labels.unsqueeze(2)).squeeze(2) - lp.max(dim=2).values  # (N, T), <= 0
    cum = torch.nn.functional.pad(torch.cumsum(gap.double(), dim=1), (1, 0))
    b, e = word_begin.to(torch.int64), word_end.to(torch.int64)
    total = cum[word_row, e] - cum[word_row, b]
    mean = total / (e - b).clamp(min=1).double()
    return (torch.exp(mean).clamp(min=1e-30, max=1.0).float(),
            total.clamp(max=0.0).float())


def _check_tokens(ragged: k2.RaggedTensor, v: int) -> None:
    bad = (ragged.values < 1) | (ragged.values >= v)
    if bool(bad.any()):
        k = int(bad.nonzero()[0])
        utt = int(ragged.shape.row_ids(2)[k])
        utt = int(ragged.shape.row_ids(1)[utt])
        raise ValueError(f"words[{utt}] must hold token ids in [1, {v}) (0 is the blank), got "
                         f"{int(ragged.values[k])}")


def _flex_parts(ragged: k2.RaggedTensor, garbage: int, penalty: Untranscribed
                ) -> tuple[list[tuple], torch.Tensor]:
    """The arcs of every transcript's graph (see :func:`_flex_graphs`) as parts of
    ``(utt, src, dst, label, score)`` columns, and each graph's number of states."""
    tok = ragged.values.to(torch.int64)
    word_splits = ragged.shape.row_splits(1).to(torch.int64)
    tok_splits = ragged.shape.row_splits(2).to(torch.int64)
    starts = tok_splits[word_splits]  # (N + 1,): each utterance's first token
    n = ragged.dim0
    utts = torch.arange(n)
    num, words = starts[1:] - starts[:-1], word_splits[1:] - word_splits[:-1]
    tok_utt = torch.repeat_interleave(utts, num)
    k = torch.arange(tok.numel()) - starts[tok_utt]
    blank_utt = torch.repeat_interleave(utts, num + 1)
    kb = torch.arange(blank_utt.numel()) - (torch.cumsum(num + 1, 0) - num - 1)[blank_utt]
    b_utt = torch.repeat_interleave(utts, words + 1)
    j = torch.arange(b_utt.numel()) - (torch.cumsum(words + 1, 0) - words - 1)[b_utt]
    bound = tok_splits[word_splits[b_utt] + j] - starts[b_utt]  # tokens before boundary j
    g = 2 * num[b_utt] + 1 + j
    nxt = torch.nonzero((tok_utt[1:] == tok_utt[:-1]) & (tok[1:] != tok[:-1])).flatten()
    enter = -(penalty.entry_penalty + penalty.frame_penalty)
    after, into = bound > 0, bound < num[b_utt]
    final = 2 * num + words + 2
    nonempty = num > 0
    parts = [
        (blank_utt, 2 * kb, 2 * kb, 0, 0.0),  # blank loops
        (tok_utt, 2 * k, 2 * k + 1, tok, 0.0),  # blank -> token
        (tok_utt, 2 * k + 1, 2 * k + 1, tok, 0.0),  # token loops
        (tok_utt, 2 * k + 1, 2 * k + 2, 0, 0.0),  # token -> blank
        (tok_utt[nxt], 2 * k[nxt] + 1, 2 * k[nxt] + 3, tok[nxt + 1], 0.0),  # -> next token
        (b_utt, 2 * bound, g, garbage, enter),  # boundary blank -> garbage
        (b_utt[after], 2 * bound[after] - 1, g[after], garbage, enter),  # token -> garbage
        (b_utt, g, g, garbage, -penalty.frame_penalty),
        (b_utt, g, 2 * bound, 0, 0.0),  # garbage -> blank
        (b_utt[into], g[into], 2 * bound[into] + 1,
         tok[(starts[b_utt] + bound)[into]], 0.0),  # garbage -> the next word
        (utts, 2 * num, final, -1, 0.0),
        (utts, 2 * num + 1 + words, final, -1, 0.0),  # the last garbage state
        (utts[nonempty], 2 * num[nonempty] - 1, final[nonempty], -1, 0.0),
    ]
    if penalty.skip_penalty is not None:
        for r in range(1, MAX_SKIPPED_RUN + 1):
            parts += _skip_parts(r, penalty, tok, starts, num, words, b_utt, j, bound, g,
                                 garbage)
    return parts, final + 1


def _skip_parts(r: int, penalty: Untranscribed, tok: torch.Tensor, starts: torch.Tensor,
                num: torch.Tensor, words: torch.Tensor, b_utt: torch.Tensor, j: torch.Tensor,
                bound: torch.Tensor, g: torch.Tensor, garbage: int) -> list[tuple]:
    """The arcs that skip the ``r`` words after a word boundary: from the boundary's states
    (its blank, the token before it, its garbage state) on one frame to where the path
    would go on that frame after the skipped words (the blank, the garbage state or the
    first token of the next word; the final state after the last word), each paying
    ``r * skip_penalty`` besides the arc's own score."""
    src = torch.nonzero(j + r <= words[b_utt]).flatten()
    dst = src + r
    u, bs, bd, gs, gd = b_utt[src], bound[src], bound[dst], g[src], g[dst]
    skip = -r * float(penalty.skip_penalty)
    enter = skip - penalty.entry_penalty - penalty.frame_penalty
    has_tok, nxt, last = bs > 0, bd < num[u], bd == num[u]
    first = tok[(starts[u] + bd).clamp(max=max(tok.numel() - 1, 0))]
    prev = tok[(starts[u] + bs - 1).clamp(min=0)]
    from_tok = has_tok & nxt & (prev != first)
    final = 2 * num[u] + words[u] + 2
    tb = 2 * bs - 1
    return [
        (u, 2 * bs, 2 * bd, 0, skip),  # boundary blank -> the blank after the skip
        (u[has_tok], tb[has_tok], 2 * bd[has_tok], 0, skip),
        (u, gs, 2 * bd, 0, skip),
        (u, 2 * bs, gd, garbage, enter),  # -> garbage after the skip
        (u[has_tok], tb[has_tok], gd[has_tok], garbage, enter),
        (u, gs, gd, garbage, skip - penalty.frame_penalty),  # the same garbage run
        (u[nxt], 2 * bs[nxt], 2 * bd[nxt] + 1, first[nxt], skip),  # -> the next word
        (u[from_tok], tb[from_tok], 2 * bd[from_tok] + 1, first[from_tok], skip),
        (u[nxt], gs[nxt], 2 * bd[nxt] + 1, first[nxt], skip),
        (u[last], 2 * bs[last], final[last], -1, skip),  # skipping the last words
        (u[last & has_tok], tb[last & has_tok], final[last & has_tok], -1, skip),
        (u[last], gs[last], final[last], -1, skip),
    ]


def _flex_graphs(ragged: k2.RaggedTensor, garbage: int, penalty: Untranscribed) -> k2.Fsa:
    """Each transcript's CTC graph with garbage states, one FsaVec (built for the whole
    batch at once). Transcript ``i`` with ``K`` tokens: the CTC states ``0 .. 2K`` (blank
    before token ``k`` is ``2k``, token ``k`` is ``2k + 1``) and a garbage state at each word
    boundary (``2K + 1 + j`` at boundary ``j``, the start and the end included), entered
    from the boundary's blank state or the token before it, looping on the ``garbage``
    label, left to the boundary's blank state, the next word's first token or (the last
    one) the final state ``2K + W + 2``."""
    ragged = ragged.to("cpu")
    parts, num_states = _flex_parts(ragged, garbage, penalty)

    def column(i: int, dtype: torch.dtype) -> torch.Tensor:
        return torch.cat([torch.as_tensor(p[i], dtype=dtype).expand(p[0].shape)
                          for p in parts])

    utt, src, dst, label = (column(i, torch.int64) for i in range(4))
    score = column(4, torch.float32)
    word_splits = ragged.shape.row_splits(1).to(torch.int64)
    num_tokens = (num_states - (word_splits[1:] - word_splits[:-1]) - 3) // 2
    is_token = (dst % 2 == 1) & (dst < 2 * num_tokens[utt] + 1)
    tok_pos = torch.where(is_token, (dst - 1) // 2, torch.full_like(dst, -1))
    state_splits = torch.nn.functional.pad(torch.cumsum(num_states, 0), (1, 0))
    key = state_splits[utt] + src
    order = torch.sort(key, stable=True).indices
    arcs_per_state = torch.bincount(key, minlength=int(state_splits[-1]))
    arc_splits = torch.nn.functional.pad(torch.cumsum(arcs_per_state, 0), (1, 0))
    shape = k2.ragged.create_ragged_shape2(row_splits=state_splits.to(torch.int32)).compose(
        k2.ragged.create_ragged_shape2(row_splits=arc_splits.to(torch.int32)))
    arcs = torch.stack([src[order].to(torch.int32), dst[order].to(torch.int32),
                        label[order].to(torch.int32), score[order].view(torch.int32)], dim=1)
    fsa = k2.Fsa(_k2.RaggedArc(shape, arcs.contiguous()))
    fsa.tok_pos = tok_pos[order].to(torch.int32)
    return fsa


def _flex_alignment(log_probs: torch.Tensor, log_probs_lens: torch.Tensor,
                    ragged: k2.RaggedTensor, penalty: Untranscribed
                    ) -> tuple[CtcAlignment, k2.RaggedTensor, k2.RaggedTensor, torch.Tensor]:
    """The best path through each transcript's CTC graph with garbage between words
    (:func:`_flex_graphs`); the garbage label's log-prob on a frame is the frame's best
    log-prob (what an unconstrained CTC pass would take there). Returns the tokens' runs
    (as :func:`ctc_forced_alignment`, every token of an aligned utterance: a skipped one
    zero-length at its gap), the garbage runs ``[utt][run]`` (begin, end) and a bool mask
    of the skipped tokens (``ragged``'s tokens)."""
    v = log_probs.shape[2]
    free = log_probs.max(dim=2, keepdim=True).values
    dense = make_dense_fsa_vec(torch.cat([log_probs, free], dim=2), log_probs_lens)
    graphs = k2.index_fsa(_flex_graphs(ragged, v, penalty),
                          dense.order.to(torch.int32)).to(log_probs.device)
    lattice = k2.intersect_dense(graphs, dense.dense_fsa_vec, output_beam=ALIGN_OUTPUT_BEAM)
    best = k2.shortest_path(lattice, use_double_scores=True)
    best = k2.index_fsa(best, dense.inverse_order.to(device=log_probs.device,
                                                     dtype=torch.int32))
    score = best.get_tot_scores(use_double_scores=True, log_semiring=False).to("cpu")
    labels = best.labels.clone()
    arc_shape = best.arcs.shape().remove_axis(1)
    per_frame = ragged_select(k2.RaggedTensor(arc_shape, labels), labels >= 0)
    positions = ragged_select(k2.RaggedTensor(arc_shape, best.tok_pos.clone()), labels >= 0)
    is_garbage = per_frame.values == v
    tokens_only = k2.RaggedTensor(per_frame.shape, per_frame.values.masked_fill(is_garbage, 0))
    _, begin, end = ctc_token_spans(tokens_only)
    _, g_begin, g_end = ctc_token_spans(k2.RaggedTensor(per_frame.shape,
                                                        is_garbage.to(torch.int32)))
    aligned = torch.isfinite(score)
    begin, end, skipped = _with_skipped(ragged.remove_axis(1), positions, begin, end,
                                        aligned.to(log_probs.device))
    ctc = CtcAlignment(begin=begin, end=end, aligned=aligned, score=score)
    return ctc, g_begin, g_end, skipped


def _with_skipped(flat: k2.RaggedTensor, positions: k2.RaggedTensor, begin: k2.RaggedTensor,
                  end: k2.RaggedTensor, aligned: torch.Tensor
                  ) -> tuple[k2.RaggedTensor, k2.RaggedTensor, torch.Tensor]:
    """The runs of every token of ``flat`` (``[utt][token]``) of the aligned utterances
    from the path's runs (``[utt][run]``, one per token it kept) and the transcript token
    each run's first frame is on (``positions``: ``[utt][frame]``); a token the path skipped
    gets ``begin == end`` = the end of the kept token before it (0 if none). Returns
    ``(begin, end, skipped)``, ``skipped`` a bool mask over ``flat``'s tokens."""
    device = flat.values.device
    n, num = flat.dim0, flat.numel()
    tok_utt = flat.shape.row_ids(1).to(torch.int64)
    tok_splits = flat.shape.row_splits(1).to(torch.int64)
    run_utt = begin.shape.row_ids(1).to(torch.int64)
    frame_splits = positions.shape.row_splits(1).to(torch.int64)
    k = positions.values.to(torch.int64)[frame_splits[run_utt] + begin.values.to(torch.int64)]
    at = tok_splits[run_utt] + k
    kept = torch.zeros(num, dtype=torch.bool, device=device)
    kept[at] = True
    tb = torch.zeros(num, dtype=torch.int32, device=device)
    te = torch.zeros(num, dtype=torch.int32, device=device)
    tb[at], te[at] = begin.values, end.values
    idx = torch.arange(num, device=device)
    last = torch.cummax(torch.where(kept, idx, torch.full_like(idx, -1)), 0).values \
        if num else idx
    gap = torch.where(last >= tok_splits[tok_utt], te[last.clamp(min=0)],
                      torch.zeros_like(te))
    tb, te = torch.where(kept, tb, gap), torch.where(kept, te, gap)
    keep = aligned[tok_utt]
    rows = tok_utt[keep].to(torch.int32)
    return (ragged_from_row_ids(rows, tb[keep], n), ragged_from_row_ids(rows, te[keep], n),
            ~kept & keep)


def align_words(log_probs: torch.Tensor, log_probs_lens: torch.Tensor,
                words: k2.RaggedTensor | Sequence[Sequence[Sequence[int]]],
                untranscribed: Untranscribed | None = None) -> WordAlignment:
    """Align each utterance's words (their token sequences) to its CTC log-probs.

    Args:
      log_probs: float32 ``(N, T, V)`` CTC log-probs (log-softmax, blank = 0).
      log_probs_lens: integer ``(N,)`` valid frames of each utterance, in ``[1, T]``.
      words: the transcripts: int32 ``k2.RaggedTensor`` ``[utt][word][token]`` or nested
        lists; token ids in ``[1, V)``, every word at least one token, ``N`` transcripts
        (an empty one aligns everything to blank, or to garbage).
      untranscribed: allow garbage runs between words (speech the transcript lacks) at
        these penalties (see the module docstring); ``None``: the plain forced alignment.

    Returns:
      :class:`WordAlignment` in ``log_probs``' frames, on its device.

    Raises:
      ValueError, TypeError: malformed log-probs or lengths (named), a word without tokens,
        a token id outside ``[1, V)``.
    """
    if not isinstance(log_probs, torch.Tensor) or log_probs.dim() != 3:
        raise TypeError(f"log_probs must be a float tensor (N, T, V), got "
                        f"{getattr(log_probs, 'shape', type(log_probs).__name__)}")
    n, t = log_probs.shape[0], log_probs.shape[1]
    ragged = _word_tokens(words, n, log_probs.device)
    flat = ragged.remove_axis(1)
    if untranscribed is None:
        ctc = ctc_forced_alignment(log_probs, log_probs_lens, flat)
        empty = ragged_from_row_ids(torch.zeros(0, dtype=torch.int32),
                                    torch.zeros(0, dtype=torch.int32), n)
        g_begin = g_end = empty.to(log_probs.device)
        skipped = torch.zeros(flat.numel(), dtype=torch.bool, device=log_probs.device)
    else:
        if not isinstance(untranscribed, Untranscribed):
            raise TypeError(f"untranscribed must be an Untranscribed, got "
                            f"{type(untranscribed).__name__}")
        _check_tokens(ragged, log_probs.shape[2])
        ctc, g_begin, g_end, skipped = _flex_alignment(log_probs, log_probs_lens, ragged,
                                                       untranscribed)
    return _word_frames(log_probs, ragged, ctc, (g_begin, g_end), skipped, t)


def _word_frames(log_probs: torch.Tensor, ragged: k2.RaggedTensor, ctc: CtcAlignment,
                 garbage: tuple[k2.RaggedTensor, k2.RaggedTensor], skipped: torch.Tensor,
                 t: int) -> WordAlignment:
    """Word frames and confidences from the tokens' runs of the best paths (``skipped``:
    bool over ``ragged``'s tokens)."""
    n = ragged.dim0
    flat = ragged.remove_axis(1)
    aligned = ctc.aligned.to(log_probs.device)
    word_shape = ragged.shape.remove_axis(2)  # [utt][word]
    word_row = word_shape.row_ids(1).to(torch.int64)
    keep = aligned[word_row]
    splits = ragged.shape.row_splits(2).to(torch.int64)
    # Unaligned utterances have empty token rows: index the tokens of aligned ones only.
    token_pos = torch.cumsum(keep.repeat_interleave(splits[1:] - splits[:-1]).to(torch.int64),
                             0) - 1
    first = token_pos[splits[:-1][keep]] if keep.any() else splits[:0]
    last = token_pos[splits[1:][keep] - 1] if keep.any() else splits[:0]
    wb = ctc.begin.values.to(torch.int64)[first].to(torch.int32)
    we = ctc.end.values.to(torch.int64)[last].to(torch.int32)
    rows = word_row[keep].to(torch.int32)
    token_keep = aligned[flat.shape.row_ids(1).to(torch.int64)]
    labels = frame_labels(ctc.begin, ctc.end, flat.values[token_keep], t)
    conf, score = _confidences(log_probs, labels, wb, we, rows.long())
    word_skipped = skipped[splits[:-1][keep]] if keep.any() else skipped[:0]
    conf = conf.masked_fill(word_skipped, 0.0)
    score = score.masked_fill(word_skipped, -float("inf"))
    return WordAlignment(token_begin=ctc.begin, token_end=ctc.end,
                         word_begin=ragged_from_row_ids(rows, wb, n),
                         word_end=ragged_from_row_ids(rows, we, n),
                         word_confidence=ragged_from_row_ids(rows, conf, n),
                         word_score=ragged_from_row_ids(rows, score, n),
                         aligned=aligned.cpu(), score=ctc.score,
                         garbage_begin=garbage[0], garbage_end=garbage[1],
                         word_skipped=ragged_from_row_ids(rows, word_skipped.to(torch.int32),
                                                          n))


PATH_SCORE_CELLS = 500_000
"""Frames x CTC graph states per batch of :func:`path_scores` (bounds the memory of
``k2.intersect_dense``: about 100 MB)."""

PATH_SCORE_FRAMES = 25_000
"""Padded frames (jobs x the longest job's frames) per batch of :func:`path_scores`: bounds
the batch's float32 log-probs and their dense copy (26 MB each at 256 outputs); jobs with few
words count few graph states, so the cell bound alone let hundreds of a 30 s segment's jobs
into one batch."""


def path_scores(log_probs: Sequence[torch.Tensor],
                jobs: Sequence[tuple[int, Sequence[Sequence[int]]]],
                max_cells: int = PATH_SCORE_CELLS, max_frames: int = PATH_SCORE_FRAMES
                ) -> list[float]:
    """The best CTC path's log-prob of each job ``(utterance, words)``: utterance
    ``log_probs[utterance]``'s frames aligned to exactly those words (their token ids),
    ``-inf`` when they do not fit; batched by :func:`align_words`, at most ``max_cells``
    frames x CTC graph states (what its lattice memory grows with) and ``max_frames`` padded
    frames (its log-probs) per batch, but at least one job.

    Args:
      log_probs: per utterance, float ``[T, V]`` CTC log-probs (any float dtype: taken as
        float32 a batch at a time).
      jobs: the utterance index and its words (token ids in ``[1, V)``, none empty).
    """
    out: list[float] = []
    k = 0
    while k < len(jobs):
        cells, longest, end = 0, 0, k
        while end < len(jobs):
            seg, words = jobs[end]
            frames = log_probs[seg].shape[0]
            longest = max(longest, frames)
            cells += frames * (2 * sum(len(w) for w in words) + 1)
            if end > k and (cells > max_cells or (end - k + 1) * longest > max_frames):
                break
            end += 1
        part = jobs[k:end]
        lps = [log_probs[seg].float() for seg, _ in part]
        lp = torch.nn.utils.rnn.pad_sequence(lps, batch_first=True)
        lens = torch.tensor([x.shape[0] for x in lps], dtype=torch.int64)
        out += align_words(lp, lens, [[list(w) for w in words] for _, words in part]
                           ).score.tolist()
        k = end
    return out
