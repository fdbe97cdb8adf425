"""A decode step written the way icefall's recipes call its decoding functions (zipformer's
``decode.py`` for the transducer searches, ``conformer_ctc/decode.py`` for HLG decoding with
n-best rescoring), switched to k2dec by its imports alone. The icefall imports it replaces::

    from beam_search import (
        fast_beam_search_one_best,
        greedy_search_batch,
        modified_beam_search,
    )
    from icefall.decode import get_lattice, one_best_decoding, rescore_with_n_best_list
    from icefall.utils import get_texts

``model`` is an exported icefall transducer with a CTC head (``model.encoder(features,
feature_lengths)``, ``model.decoder``, ``model.joiner``, ``model.ctc_output``).

    python icefall_style_decode.py --decoding-method modified_beam_search --beam-size 4
    python icefall_style_decode.py --decoding-method fast_beam_search --beam 20 \\
        --max-contexts 8 --max-states 64
    python icefall_style_decode.py --decoding-method nbest-rescoring --num-paths 100 \\
        --nbest-scale 0.5
"""

from __future__ import annotations

import argparse

import k2
import torch

from k2dec.icefall import (
    fast_beam_search_one_best,
    get_lattice,
    get_texts,
    greedy_search_batch,
    modified_beam_search,
    one_best_decoding,
    rescore_with_n_best_list,
)

METHODS = ("greedy_search", "modified_beam_search", "fast_beam_search", "1best",
           "nbest-rescoring")


def get_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--decoding-method", choices=METHODS, default="greedy_search")
    parser.add_argument("--beam-size", type=int, default=4)
    parser.add_argument("--beam", type=float, default=20.0)
    parser.add_argument("--max-contexts", type=int, default=8)
    parser.add_argument("--max-states", type=int, default=64)
    parser.add_argument("--num-paths", type=int, default=100)
    parser.add_argument("--nbest-scale", type=float, default=0.5)
    parser.add_argument("--search-beam", type=float, default=20.0)
    parser.add_argument("--output-beam", type=float, default=8.0)
    parser.add_argument("--min-active-states", type=int, default=30)
    parser.add_argument("--max-active-states", type=int, default=10000)
    return parser


def decode_one_batch(params: argparse.Namespace, model: torch.nn.Module, batch: dict,
                     word_table: k2.SymbolTable | None = None,
                     decoding_graph: k2.Fsa | None = None, HLG: k2.Fsa | None = None,
                     G: k2.Fsa | None = None) -> dict[str, list[list[str]]]:
    """Hypotheses of one batch (``batch["inputs"]``: features ``(N, T, C)``;
    ``batch["supervisions"]``: ``sequence_idx``, ``start_frame``, ``num_frames``) by setting
    name: token ids as strings for the transducer searches, words for the HLG methods."""
    feature = batch["inputs"]
    supervisions = batch["supervisions"]
    encoder_out, encoder_out_lens = model.encoder(feature, supervisions["num_frames"])
    method = params.decoding_method
    if method == "greedy_search":
        hyps = greedy_search_batch(model=model, encoder_out=encoder_out,
                                   encoder_out_lens=encoder_out_lens)
        return {"greedy_search": [[str(t) for t in h] for h in hyps]}
    if method == "modified_beam_search":
        hyps = modified_beam_search(model=model, encoder_out=encoder_out,
                                    encoder_out_lens=encoder_out_lens, beam=params.beam_size)
        return {f"beam_size_{params.beam_size}": [[str(t) for t in h] for h in hyps]}
    if method == "fast_beam_search":
        hyps = fast_beam_search_one_best(model=model, decoding_graph=decoding_graph,
                                         encoder_out=encoder_out,
                                         encoder_out_lens=encoder_out_lens, beam=params.beam,
                                         max_contexts=params.max_contexts,
                                         max_states=params.max_states)
        key = f"beam_{params.beam}_max_contexts_{params.max_contexts}_max_states_" \
              f"{params.max_states}"
        return {key: [[str(t) for t in h] for h in hyps]}
    return _decode_hlg(params, model, encoder_out, encoder_out_lens, word_table, HLG, G)


def _decode_hlg(params, model, encoder_out, encoder_out_lens, word_table, HLG, G):
    nnet_output = model.ctc_output(encoder_out)
    supervision_segments = torch.stack(
        [torch.arange(encoder_out.size(0)), torch.zeros_like(encoder_out_lens),
         encoder_out_lens], dim=1).to(torch.int32)
    lattice = get_lattice(nnet_output=nnet_output, decoding_graph=HLG,
                          supervision_segments=supervision_segments,
                          search_beam=params.search_beam, output_beam=params.output_beam,
                          min_active_states=params.min_active_states,
                          max_active_states=params.max_active_states)
    if params.decoding_method == "1best":
        best_path_dict = {"no_rescore": one_best_decoding(lattice=lattice,
                                                          use_double_scores=True)}
    else:
        best_path_dict = rescore_with_n_best_list(lattice=lattice, G=G,
                                                  num_paths=params.num_paths,
                                                  lm_scale_list=[0.5, 1.0, 2.0],
                                                  nbest_scale=params.nbest_scale)
    ans = {}
    for key, best_path in best_path_dict.items():
        ans[key] = [[word_table[i] for i in ids] for ids in get_texts(best_path)]
    return ans
