"""What the drop-in functions share: icefall's choices on k2dec's config parts, argument
checks, and n-best sampling and choice as icefall does them."""

from __future__ import annotations

from typing import Any

import k2
import torch

from ..methods import icefall_compatible_part
from ..nbest import DedupKey, Nbest, NbestConfig, best_paths_by_score
from ..transducer import FastBeamSearchConfig, fast_beam_search_lattice

__all__ = ["check_model", "check_single", "compat", "fbs_lattice", "pick", "sample"]


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
