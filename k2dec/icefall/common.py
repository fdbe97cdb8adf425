"""What the drop-in functions share: icefall's choices on k2dec's config parts, argument
checks, and n-best sampling and choice as icefall does them."""

from __future__ import annotations

from typing import Any

import k2
import torch

from ..methods import icefall_compatible_part
from ..nbest import DedupKey, Nbest, NbestConfig, best_paths_by_score, edit_distances
from ..transducer import FastBeamSearchConfig, fast_beam_search_lattice

__all__ = ["check_model", "check_single", "compat", "fbs_lattice", "oracle_pick", "pick",
           "sample"]

#: k2's Levenshtein alignment costs a substitution 1 and an insertion or deletion 1.001 (its
#: ``ins_del_score`` -0.501 plus half a substitution), so the alignment it picks has the
#: fewest errors while a hypothesis and its reference have fewer than this many symbols
#: together
EXACT_ALIGNMENT_SYMBOLS = 1000


def compat(config: Any) -> Any:
    """``config`` with k2dec's icefall-compatibility switches on
    (:func:`k2dec.methods.icefall_compatible_part`: fast_beam_search without a termination
    frame, float32 beam scores, ``k2.random_paths`` sampling, the last of equal maxima)."""
    return icefall_compatible_part(config)


def check_model(model: Any, name: str) -> None:
    """A transducer whose ``unk_id`` (if it has one) is its blank: icefall's searches skip
    ``unk`` like blank, k2dec's emit it, so such a model is refused rather than decoded
    differently."""
    decoder = getattr(model, "decoder", None)
    blank = getattr(decoder, "blank_id", None)
    unk = getattr(model, "unk_id", blank)
    if unk != blank:
        raise ValueError(f"{name}: model.unk_id={unk} differs from model.decoder.blank_id="
                         f"{blank}; icefall skips unk like blank, k2dec's searches do not "
                         "(remove the attribute to decode it as an ordinary token)")


def check_single(encoder_out: torch.Tensor, name: str) -> torch.Tensor:
    """icefall's one-utterance searches: ``encoder_out`` ``(1, T, C)``; returns its length
    ``[T]`` (int64, on its device)."""
    if not isinstance(encoder_out, torch.Tensor) or encoder_out.dim() != 3:
        raise ValueError(f"{name}: encoder_out must be a tensor (1, T, C), got "
                         f"{getattr(encoder_out, 'shape', type(encoder_out).__name__)}")
    if encoder_out.size(0) != 1:
        raise ValueError(f"{name} decodes one utterance (encoder_out (1, T, C)), got "
                         f"{encoder_out.size(0)}; use the batch searches for more")
    return torch.tensor([encoder_out.size(1)], dtype=torch.int64, device=encoder_out.device)


def sample(lattice: k2.Fsa, num_paths: int, nbest_scale: float, use_double_scores: bool,
           key: DedupKey) -> tuple[Nbest, NbestConfig]:
    """icefall's ``Nbest.from_lattice``: ``num_paths`` paths drawn by ``k2.random_paths`` from
    the lattice with scores times ``nbest_scale``, one kept per distinct ``key`` sequence
    (k2dec's memory bound: a lattice over ``NbestConfig.max_lattice_arcs`` arcs is pruned
    first)."""
    cfg = compat(NbestConfig(num_paths=int(num_paths), nbest_scale=float(nbest_scale)))
    nbest = Nbest.from_lattice(lattice, cfg.num_paths, cfg.nbest_scale, key,
                               use_double_scores=use_double_scores,
                               max_lattice_arcs=cfg.max_lattice_arcs, sampler=cfg.sampler)
    return nbest, cfg


def pick(nbest: Nbest, scores: torch.Tensor) -> torch.Tensor:
    """int64 ``[num_utts]``: each utterance's path with the largest score (float ``[paths]``),
    the last of equal ones (``k2.RaggedTensor.argmax``, as icefall), ``-1`` without paths."""
    best, _ = best_paths_by_score(nbest, scores, compat(NbestConfig()).tie_break)
    return best


def fbs_lattice(model: Any, decoding_graph: k2.Fsa, encoder_out: torch.Tensor,
                encoder_out_lens: torch.Tensor, beam: float, max_states: int,
                max_contexts: int, temperature: float, ilme_scale: float, allow_partial: bool,
                blank_penalty: float) -> k2.Fsa:
    """k2dec's fast_beam_search lattice with icefall's settings (no termination frame)."""
    cfg = compat(FastBeamSearchConfig(
        beam=float(beam), max_contexts=int(max_contexts), max_states=int(max_states),
        temperature=float(temperature), blank_penalty=float(blank_penalty),
        ilme_scale=float(ilme_scale), allow_partial=bool(allow_partial)))
    return fast_beam_search_lattice(model, encoder_out, encoder_out_lens, decoding_graph, cfg)


def levenshtein_scores(hyps: k2.RaggedTensor, refs: list[list[int]], hyp_to_ref: torch.Tensor
                       ) -> torch.Tensor:
    """float32 ``[num_hyps]``: icefall's oracle score of each hypothesis (int32 ragged
    ``[hyp][symbol]``) against its reference ``refs[hyp_to_ref[i]]``: the total score of
    ``k2.levenshtein_alignment`` of their ``k2.levenshtein_graph`` s, summed in float32 (minus
    the number of errors, with float32 rounding: insertions and deletions count a little
    less than 1 each, e.g. ``-5.9999995`` for 6)."""
    device = hyps.device
    ref_graphs = k2.levenshtein_graph(refs, device=device)
    alignment = k2.levenshtein_alignment(
        refs=ref_graphs, hyps=k2.levenshtein_graph(hyps),
        hyp_to_ref_map=hyp_to_ref.to(device=device, dtype=torch.int32), sorted_match_ref=True)
    return alignment.get_tot_scores(use_double_scores=False, log_semiring=False)


def oracle_pick(nbest: Nbest, refs: list[list[int]]) -> torch.Tensor:
    """int64 ``[num_utts]``: icefall's oracle choice among ``nbest``'s paths (their
    ``key_seqs``) for references ``refs`` (one per utterance), ``-1`` without paths.

    icefall takes the largest float32 score of :func:`levenshtein_scores`, the last of equal
    ones. Those scores are minus the edit distance plus rounding noise that decides among
    paths at the same distance, so here the exact distances
    (:func:`k2dec.nbest.edit_distances`) choose, and the k2 scores are computed only where
    they decide: for the paths at an utterance's smallest distance when there are several,
    and for every path of an utterance with a hypothesis and reference of
    :data:`EXACT_ALIGNMENT_SYMBOLS` symbols or more (where k2's alignment may count more
    errors than the smallest number)."""
    hyps, utt = nbest.key_seqs, nbest.path_to_utt().to(torch.int64)
    dist = edit_distances(hyps, refs, utt)
    scores = -dist.to(torch.float64)
    if nbest.num_paths == 0:
        return pick(nbest, scores)
    num_utts, device = nbest.num_utts, dist.device
    utt = utt.to(device)
    best = k2.RaggedTensor(nbest.shape, scores.to(nbest.device)).max(float("-inf"))
    at_min = scores == best.to(device)[utt]
    count = torch.zeros(num_utts, dtype=torch.int64, device=device).index_add_(
        0, utt, at_min.to(torch.int64))
    splits = hyps.shape.row_splits(1).to(device=device, dtype=torch.int64)
    ref_len = torch.tensor([len(r) for r in refs], dtype=torch.int64, device=device)
    long = (splits[1:] - splits[:-1] + ref_len[utt]) >= EXACT_ALIGNMENT_SYMBOLS
    long_utt = torch.zeros(num_utts, dtype=torch.bool, device=device).index_fill_(
        0, utt[long], True)
    scored = torch.nonzero((at_min & (count[utt] > 1)) | long_utt[utt]).squeeze(1)
    if scored.numel():
        sub, _ = hyps.index(scored.to(device=hyps.device, dtype=torch.int32), axis=0)
        scores[scored] = levenshtein_scores(sub, refs, utt[scored]).to(scores)
    return pick(nbest, scores)
