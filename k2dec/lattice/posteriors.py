"""Arc and word posteriors of k2dec lattices, with an acoustic scale.

Works on every lattice k2dec makes: CTC/HMM lattices from :func:`~k2dec.lattice.get_lattice`
(HLG, HCLG, H; after whole-lattice rescoring too) and transducer lattices from
``k2dec.transducer.fast_beam_search`` (trivial graph or LG). Posteriors are computed with k2's
forward/backward scores in the log semiring (``Fsa.get_arc_post``), for the whole FsaVec at
once, on a private copy of the lattice: the caller's lattice is never modified.

Scores. A lattice whose arcs carry ``lm_scores`` (HLG lattices decoded with
``HLG.lm_scores = HLG.scores.clone()``, rescored lattices) is split into an acoustic part
``scores - lm_scores`` and an LM part ``lm_scores``, and posteriors use
``acoustic_scale * am + lm_scale * lm`` (Kaldi's ``--acoustic-scale`` / ``--lm-scale``).
Without ``lm_scores`` (transducer lattices, HLG lattices without the attribute) the whole arc
score is multiplied by ``acoustic_scale`` and ``lm_scale`` is not used. Acoustic scales below 1
flatten the posteriors (Kaldi's ``lattice-to-ctm-conf`` is usually run with 1/LM-weight).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import k2
import torch

from k2dec.lattice.search import LatticeResult, lattice_fsa_vec
from k2dec.primitives.best_paths import FRAME_ATTR
from k2dec.primitives.ragged import add_at, ragged_from_row_ids

__all__ = [
    "PosteriorConfig",
    "arc_posteriors",
    "lattice_arc_frames",
    "lattice_arc_words",
    "scaled_arc_scores",
    "state_depths",
    "word_posteriors",
]


@dataclass(frozen=True)
class PosteriorConfig:
    """How lattice scores are scaled before posteriors are computed (see the module docstring).

    Attributes:
      acoustic_scale: multiplies the acoustic part of each arc score (the whole score when the
        lattice has no ``lm_scores``).
      lm_scale: multiplies ``lm_scores`` where the lattice has them.
    """

    acoustic_scale: float = 1.0
    lm_scale: float = 1.0

    def __post_init__(self) -> None:
        for name in ("acoustic_scale", "lm_scale"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise TypeError(f"{name} must be a number, got {value!r}")
            if not (0 < value < math.inf):
                raise ValueError(f"{name} must be positive and finite, got {value}")


def _check_config(config: PosteriorConfig) -> None:
    if not isinstance(config, PosteriorConfig):
        raise TypeError(f"config must be a PosteriorConfig, got {type(config).__name__}")


def scaled_arc_scores(
    lattice: LatticeResult | k2.Fsa,
    config: PosteriorConfig = PosteriorConfig(),  # noqa: B008 (frozen, immutable)
) -> torch.Tensor:
    """The arc scores posteriors are computed from (see the module docstring).

    Returns:
      float64 tensor ``(num_arcs,)`` on the lattice's device.
    """
    lat = lattice_fsa_vec(lattice)
    _check_config(config)
    scores = lat.scores.detach().to(torch.float64)
    if hasattr(lat, "lm_scores"):
        lm = lat.lm_scores.detach().to(torch.float64)
        return config.acoustic_scale * (scores - lm) + config.lm_scale * lm
    return config.acoustic_scale * scores


def plain_topology(lat: k2.Fsa, scores: torch.Tensor) -> k2.Fsa:
    """A new FsaVec with the arcs of ``lat`` (copied), float32 ``scores`` and no other
    attribute (free to change without touching ``lat``)."""
    work = k2.Fsa(lat.arcs).clone()  # k2.Fsa(arcs) shares the arcs: clone before writing
    work.scores = scores.to(torch.float32)
    return work


def arc_posteriors(
    lattice: LatticeResult | k2.Fsa,
    config: PosteriorConfig = PosteriorConfig(),  # noqa: B008 (frozen, immutable)
) -> torch.Tensor:
    """Posterior probability of every arc: the probability that a path, drawn with probability
    proportional to ``exp(sum of its scaled arc scores)``, passes through the arc.

    Args:
      lattice: FsaVec ``[utt][state][arc]`` (or a :class:`~k2dec.lattice.LatticeResult`).
      config: score scaling.

    Returns:
      float64 tensor ``(num_arcs,)`` on the lattice's device. In a lattice whose every arc
      consumes one frame (dense-intersection and transducer lattices) the posteriors of the arcs
      on one frame of one utterance sum to 1. Utterances with no complete path (empty
      lattices) get 0 on every arc.
    """
    lat = lattice_fsa_vec(lattice)
    work = plain_topology(lat, scaled_arc_scores(lat, config))
    post = work.get_arc_post(use_double_scores=True, log_semiring=True).exp()
    return torch.nan_to_num(post, nan=0.0, posinf=0.0)


def state_depths(lattice: k2.Fsa) -> torch.Tensor:
    """Length in arcs of the longest path from the start state to each state of an acyclic
    FsaVec (0 for start states; a topological level: every arc goes to a deeper state).

    Returns:
      int64 tensor ``(num_states,)`` (states of all FSAs, in order) on the lattice's device;
      ``-1`` for states no path reaches.
    """
    lat = lattice_fsa_vec(lattice)
    ones = torch.ones(lat.num_arcs, dtype=torch.float32, device=lat.device)
    work = plain_topology(lat, ones)
    depth = work.get_forward_scores(use_double_scores=True, log_semiring=False)
    depth = torch.where(torch.isfinite(depth), depth, torch.full_like(depth, -1.0))
    return depth.round().to(torch.int64)


def lattice_arc_frames(lattice: LatticeResult | k2.Fsa) -> torch.Tensor:
    """The frame each arc of a lattice consumes.

    With the ``frame`` attribute of :func:`~k2dec.lattice.get_lattice` lattices that value;
    arcs marked ``-1`` (added when ragged word labels were spelled out, consuming no frame)
    take the frame of the arcs entering their source state. Without it (transducer lattices,
    where arc ``i`` of every path consumes frame ``i``) the depth of the arc's source state.
    Final arcs sit on the frame after the last one.

    Returns:
      int64 tensor ``(num_arcs,)`` on the lattice's device.
    """
    lat = lattice_fsa_vec(lattice)
    if lat.num_arcs == 0:
        return torch.zeros(0, dtype=torch.int64, device=lat.device)
    src, dst = global_states(lat)
    if not hasattr(lat, FRAME_ATTR):
        return state_depths(lat).clamp(min=0)[src]
    frames = getattr(lat, FRAME_ATTR).to(torch.int64).clone()
    # an arc leaving a start state has no arc before it: frame 0
    frames = torch.where((frames < 0) & _is_start(lat, src), torch.zeros_like(frames), frames)
    num_states = lat.arcs.shape().tot_size(1)
    while True:  # a chain of spelled-out arcs is resolved one arc per round
        missing = frames < 0
        if not bool(missing.any()):
            break
        known = ~missing
        into = _max_into(dst[known], frames[known], num_states)
        fill = missing & (into[src] >= 0)
        if not bool(fill.any()):  # arcs no path reaches
            frames = torch.where(missing, torch.zeros_like(frames), frames)
            break
        frames = torch.where(fill, into[src], frames)
    return frames


def _max_into(dst: torch.Tensor, values: torch.Tensor, num_states: int) -> torch.Tensor:
    """int64 ``(num_states,)``: the largest of the non-negative ``values`` of the arcs entering
    each state, -1 for states no arc enters."""
    out = torch.full((num_states,), -1, dtype=torch.int64, device=dst.device)
    if dst.numel() == 0:
        return out
    big = int(values.max()) + 1
    key = torch.sort(dst * big + values).values
    state, value = key // big, key % big
    last = torch.ones_like(state, dtype=torch.bool)
    last[:-1] = state[1:] != state[:-1]
    out[state[last]] = value[last]
    return out


def _is_start(lat: k2.Fsa, src: torch.Tensor) -> torch.Tensor:
    state_splits = lat.arcs.shape().row_splits(1).to(torch.int64)
    is_start = torch.zeros(lat.arcs.shape().tot_size(1), dtype=torch.bool, device=lat.device)
    nonempty = state_splits[1:] > state_splits[:-1]
    is_start[state_splits[:-1][nonempty]] = True
    return is_start[src]


def global_states(lat: k2.Fsa) -> tuple[torch.Tensor, torch.Tensor]:
    """int64 ``(num_arcs,)`` source and destination state of each arc, numbered over the whole
    FsaVec."""
    shape = lat.arcs.shape()
    state_splits = shape.row_splits(1).to(torch.int64)
    utt_of_state = shape.row_ids(1).to(torch.int64)
    state_of_arc = shape.row_ids(2).to(torch.int64)
    offset = state_splits[utt_of_state[state_of_arc]]
    values = lat.arcs.values()
    return values[:, 0].to(torch.int64) + offset, values[:, 1].to(torch.int64) + offset


def lattice_arc_words(
    lattice: LatticeResult | k2.Fsa, attribute: str = "aux_labels"
) -> tuple[k2.Fsa, torch.Tensor]:
    """The lattice with at most one output symbol (word) per arc, and that symbol.

    Args:
      lattice: FsaVec whose ``attribute`` holds output symbols: word ids for HLG/HCLG/LG
        lattices, token ids for lattices of H or of the trivial transducer graph. An int32
        tensor (0 = none, -1 on final arcs) or a ragged ``[arc][symbol]`` tensor.
      attribute: the attribute's name.

    Returns:
      ``(lattice, words)``: when some arc has several symbols, a new lattice where those arcs
      are spelled out as chains of arcs (``k2.expand_ragged_attributes``; the added arcs get
      token label 0 and ``frame`` ``-1``) and otherwise ``lattice`` itself; ``words`` is an
      int64 tensor ``(num_arcs,)`` of that lattice with the symbol of each arc, 0 for none
      (final arcs too).
    """
    lat = lattice_fsa_vec(lattice)
    if not hasattr(lat, attribute):
        raise ValueError(f"the lattice has no {attribute!r} attribute holding output symbols "
                         f"(word ids); decode with a word-output graph or name another one")
    aux = getattr(lat, attribute)
    if isinstance(aux, k2.RaggedTensor):
        row_ids = aux.shape.row_ids(1).to(torch.int64)
        counts = torch.bincount(row_ids[aux.values > 0], minlength=lat.num_arcs)
        if lat.num_arcs and int(counts.max()) > 1:
            lat, arc_map = k2.expand_ragged_attributes(
                lat, ret_arc_map=True, ragged_attribute_names=[attribute])
            if hasattr(lat, FRAME_ATTR):
                frames = getattr(lat, FRAME_ATTR)
                setattr(lat, FRAME_ATTR,
                        torch.where(arc_map >= 0, frames, torch.full_like(frames, -1)))
            words = getattr(lat, attribute).to(torch.int64)
        else:
            words = torch.zeros(lat.num_arcs, dtype=torch.int64, device=lat.device)
            keep = aux.values > 0
            words[row_ids[keep]] = aux.values[keep].to(torch.int64)
    else:
        words = aux.to(torch.int64)
    return lat, words.clamp(min=0)


def word_posteriors(
    lattice: LatticeResult | k2.Fsa,
    config: PosteriorConfig = PosteriorConfig(),  # noqa: B008 (frozen, immutable)
    attribute: str = "aux_labels",
) -> tuple[k2.RaggedTensor, k2.RaggedTensor]:
    """Expected number of occurrences of each word in each utterance (the sum of the posteriors
    of the arcs carrying it): the probability that the word is in the utterance, for words that
    occur at most once per path.

    Returns:
      ``(words, expected_counts)``: ``k2.RaggedTensor`` ``[utt][word]`` of int32 word ids
      (sorted) and float64 counts, on the lattice's device.
    """
    lat, words = lattice_arc_words(lattice, attribute)
    post = arc_posteriors(lat, config)
    utt = lat.arcs.shape().remove_axis(1).row_ids(1).to(torch.int64)
    keep = (words > 0) & (post > 0)
    num_words = int(words.max()) + 1 if words.numel() else 1
    key = utt[keep] * num_words + words[keep]
    uniq, inverse = torch.unique(key, return_inverse=True)
    sums = torch.zeros(uniq.numel(), dtype=torch.float64, device=lat.device)
    add_at(sums, inverse, post[keep])
    n = lat.shape[0]
    ids = ragged_from_row_ids(uniq // num_words, (uniq % num_words).to(torch.int32), n)
    return ids, ragged_from_row_ids(uniq // num_words, sums, n)
