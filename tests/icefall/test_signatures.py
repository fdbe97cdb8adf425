"""``k2dec.icefall`` offers every decoding function of icefall's
``egs/librispeech/ASR/zipformer/beam_search.py`` and ``icefall/decode.py`` with icefall's
parameter names, order and defaults (the table below, written from icefall's sources at
commit 36e0420c); extra parameters may only follow them, with defaults."""

from __future__ import annotations

import inspect

import pytest

import k2dec.icefall

REQUIRED = inspect.Parameter.empty

#: name -> icefall's parameters: a name (no default) or (name, default)
ICEFALL_SIGNATURES = {
    # egs/librispeech/ASR/pruned_transducer_stateless2/beam_search.py (zipformer links to it)
    "greedy_search": ["model", "encoder_out", "max_sym_per_frame", ("blank_penalty", 0.0),
                      ("return_timestamps", False)],
    "greedy_search_batch": ["model", "encoder_out", "encoder_out_lens", ("blank_penalty", 0),
                            ("return_timestamps", False)],
    "modified_beam_search": ["model", "encoder_out", "encoder_out_lens",
                             ("context_graph", None), ("beam", 4), ("temperature", 1.0),
                             ("blank_penalty", 0.0), ("return_timestamps", False)],
    "beam_search": ["model", "encoder_out", ("beam", 4), ("temperature", 1.0),
                    ("blank_penalty", 0.0), ("return_timestamps", False)],
    "fast_beam_search": ["model", "decoding_graph", "encoder_out", "encoder_out_lens", "beam",
                         "max_states", "max_contexts", ("temperature", 1.0),
                         ("subtract_ilme", False), ("ilme_scale", 0.1),
                         ("allow_partial", False), ("blank_penalty", 0.0)],
    "fast_beam_search_one_best": ["model", "decoding_graph", "encoder_out", "encoder_out_lens",
                                  "beam", "max_states", "max_contexts", ("temperature", 1.0),
                                  ("ilme_scale", 0.0), ("blank_penalty", 0.0),
                                  ("return_timestamps", False), ("allow_partial", False)],
    "fast_beam_search_nbest": ["model", "decoding_graph", "encoder_out", "encoder_out_lens",
                               "beam", "max_states", "max_contexts", "num_paths",
                               ("nbest_scale", 0.5), ("use_double_scores", True),
                               ("temperature", 1.0), ("blank_penalty", 0.0),
                               ("return_timestamps", False), ("allow_partial", False)],
    "fast_beam_search_nbest_LG": ["model", "decoding_graph", "encoder_out", "encoder_out_lens",
                                  "beam", "max_states", "max_contexts", "num_paths",
                                  ("nbest_scale", 0.5), ("use_double_scores", True),
                                  ("temperature", 1.0), ("blank_penalty", 0.0),
                                  ("ilme_scale", 0.0), ("return_timestamps", False),
                                  ("allow_partial", False)],
    "fast_beam_search_nbest_oracle": ["model", "decoding_graph", "encoder_out",
                                      "encoder_out_lens", "beam", "max_states", "max_contexts",
                                      "num_paths", "ref_texts", ("use_double_scores", True),
                                      ("nbest_scale", 0.5), ("temperature", 1.0),
                                      ("blank_penalty", 0.0), ("return_timestamps", False),
                                      ("allow_partial", False)],
    "fast_beam_search_with_nbest_rescoring": [
        "model", "decoding_graph", "encoder_out", "encoder_out_lens", "beam", "max_states",
        "max_contexts", "ngram_lm_scale_list", "num_paths", "G", "sp", "word_table",
        ("oov_word", "<UNK>"), ("use_double_scores", True), ("nbest_scale", 0.5),
        ("temperature", 1.0), ("return_timestamps", False)],
    "fast_beam_search_with_nbest_rnn_rescoring": [
        "model", "decoding_graph", "encoder_out", "encoder_out_lens", "beam", "max_states",
        "max_contexts", "ngram_lm_scale_list", "num_paths", "G", "sp", "word_table",
        "rnn_lm_model", "rnn_lm_scale_list", ("oov_word", "<UNK>"), ("use_double_scores", True),
        ("nbest_scale", 0.5), ("temperature", 1.0), ("return_timestamps", False)],
    "modified_beam_search_lm_shallow_fusion": ["model", "encoder_out", "encoder_out_lens", "LM",
                                               ("beam", 4), ("return_timestamps", False)],
    "modified_beam_search_LODR": ["model", "encoder_out", "encoder_out_lens", "LODR_lm",
                                  "LODR_lm_scale", "LM", ("beam", 4), ("context_graph", None)],
    "modified_beam_search_lm_rescore": ["model", "encoder_out", "encoder_out_lens", "LM",
                                        "lm_scale_list", ("beam", 4), ("temperature", 1.0),
                                        ("return_timestamps", False)],
    "modified_beam_search_lm_rescore_LODR": ["model", "encoder_out", "encoder_out_lens", "LM",
                                             "LODR_lm", "sp", "lm_scale_list", ("beam", 4),
                                             ("temperature", 1.0),
                                             ("return_timestamps", False)],
    # icefall/decode.py
    "get_lattice": ["nnet_output", "decoding_graph", "supervision_segments", "search_beam",
                    "output_beam", "min_active_states", "max_active_states",
                    ("subsampling_factor", 1)],
    "one_best_decoding": ["lattice", ("use_double_scores", True), ("lm_scale_list", None)],
    "nbest_decoding": ["lattice", "num_paths", ("use_double_scores", True),
                       ("nbest_scale", 1.0)],
    "nbest_oracle": ["lattice", "num_paths", "ref_texts", "word_table",
                     ("use_double_scores", True), ("nbest_scale", 0.5), ("oov", "<UNK>")],
    "rescore_with_n_best_list": ["lattice", "G", "num_paths", "lm_scale_list",
                                 ("nbest_scale", 1.0), ("use_double_scores", True)],
    "rescore_with_whole_lattice": ["lattice", "G_with_epsilon_loops", ("lm_scale_list", None),
                                   ("use_double_scores", True)],
    "rescore_with_attention_decoder": ["lattice", "num_paths", "model", "memory",
                                       "memory_key_padding_mask", "sos_id", "eos_id",
                                       ("nbest_scale", 1.0), ("ngram_lm_scale", None),
                                       ("attention_scale", None), ("use_double_scores", True)],
    "rescore_with_attention_decoder_with_ngram": [
        "lattice", "num_paths", "attention_decoder", "encoder_out", "encoder_out_lens",
        ("nbest_scale", 1.0), ("ngram_lm_scale", None), ("attention_scale", None),
        ("use_double_scores", True)],
    "rescore_with_attention_decoder_no_ngram": [
        "lattice", "num_paths", "attention_decoder", "encoder_out", "encoder_out_lens",
        ("nbest_scale", 1.0), ("attention_scale", None), ("use_double_scores", True)],
    "rescore_with_rnn_lm": ["lattice", "num_paths", "rnn_lm_model", "model", "memory",
                            "memory_key_padding_mask", "sos_id", "eos_id", "blank_id",
                            ("nbest_scale", 1.0), ("ngram_lm_scale", None),
                            ("attention_scale", None), ("rnn_lm_scale", None),
                            ("use_double_scores", True)],
    "ctc_greedy_search": ["ctc_output", "encoder_out_lens", ("blank_id", 0)],
    "ctc_prefix_beam_search": ["ctc_output", "encoder_out_lens", ("beam", 4), ("blank_id", 0),
                               ("process_pool", None), ("return_nbest", False)],
    "ctc_prefix_beam_search_attention_decoder_rescoring": [
        "ctc_output", "attention_decoder", "encoder_out", "encoder_out_lens", ("beam", 8),
        ("blank_id", 0), ("attention_scale", None), ("process_pool", None)],
    "ctc_prefix_beam_search_shallow_fussion": [
        "ctc_output", "encoder_out_lens", ("beam", 4), ("blank_id", 0), ("LODR_lm", None),
        ("LODR_lm_scale", 0), ("NNLM", None), ("context_graph", None)],
}


def test_the_table_lists_every_function_once():
    offered = k2dec.icefall.BEAM_SEARCH_FUNCTIONS + k2dec.icefall.DECODE_FUNCTIONS
    assert sorted(offered) == sorted(ICEFALL_SIGNATURES)
    assert len(set(offered)) == len(offered) == 29
    assert set(offered) <= set(k2dec.icefall.__all__)


@pytest.mark.parametrize("name", sorted(ICEFALL_SIGNATURES))
def test_signature_is_icefalls(name):
    params = list(inspect.signature(getattr(k2dec.icefall, name)).parameters.values())
    want = [(p, REQUIRED) if isinstance(p, str) else p for p in ICEFALL_SIGNATURES[name]]
    assert [(p.name, p.default) for p in params[: len(want)]] == want
    for p in params:
        assert p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD, (name, p.name)
    for p in params[len(want):]:  # k2dec's extras come last, with defaults
        assert p.default is not REQUIRED, (name, p.name)
    defaults = [d for _, d in want]
    assert all(type(a.default) is type(d) for a, d in zip(params, defaults)
               if d is not REQUIRED), name  # 0 stays an int, 0.0 a float


def test_a_wrong_table_fails():
    """The comparison sees a changed default, a missing parameter and another order."""
    sig = [(p.name, p.default) for p in
           inspect.signature(k2dec.icefall.beam_search).parameters.values()]
    assert sig != [("model", REQUIRED), ("encoder_out", REQUIRED), ("beam", 5),
                   ("temperature", 1.0), ("blank_penalty", 0.0), ("return_timestamps", False)]
    assert sig[:2] != [("encoder_out", REQUIRED), ("model", REQUIRED)]
    assert len(sig) == 7  # icefall's 6 and max_expansions_per_frame
