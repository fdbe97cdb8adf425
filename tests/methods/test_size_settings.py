"""Every size setting of every method config has a validated range: a value outside it (as
``--set`` gives it: ``beam=1000000000``, ``num_paths=1000000000``, ``max_states=0``) is refused
by the config before anything is decoded, naming the config class, the field, the value and
the allowed range; the range's ends are accepted."""

from __future__ import annotations

import pytest

from k2dec.aed import BeamSearchConfig
from k2dec.job import DecodeConfig, plan_methods
from k2dec.lattice import LatticeConfig

# (method, --set key, owning class, low, high, int?, low end open?)
SIZES = [
    ("modified_beam_search", "search.beam_size", "ModifiedBeamSearchConfig", 1, 1000, True,
     False),
    ("beam_search", "search.beam_size", "TransducerBeamSearchConfig", 1, 100, True, False),
    ("beam_search", "max_expansions_per_frame", "TransducerBeamSearchConfig", 1, 1000, True,
     False),
    ("greedy_search", "max_sym_per_frame", "GreedySearchConfig", 1, 100, True, False),
    ("fast_beam_search", "search.beam", "FastBeamSearchConfig", 0, 1e5, False, True),
    ("fast_beam_search", "max_contexts", "FastBeamSearchConfig", 1, 256, True, False),
    ("fast_beam_search", "max_states", "FastBeamSearchConfig", 1, 4096, True, False),
    ("ctc-prefix-beam-search", "search.beam_size", "CtcPrefixBeamSearchConfig", 1, 256, True,
     False),
    ("1best", "search_beam", "LatticeConfig", 0, 1e5, False, True),
    ("1best", "output_beam", "LatticeConfig", 0, 1e5, False, True),
    ("1best", "token_top_k", "LatticeConfig", 1, 100_000, True, False),
    ("nbest", "num_paths", "NbestConfig", 1, 10_000, True, False),
    ("nbest", "nbest.max_lattice_arcs", "NbestConfig", 1, 1_000_000, True, False),
    ("nbest", "max_intersect_arcs", "NbestConfig", 1, 4_000_000, True, False),
    ("nbest", "subsampling_factor", "LatticeConfig", 1, 16, True, False),
    ("multi-pass", "first_k", "MultiPassConfig", 1, 10_000, True, False),
    ("multi-pass", "batch_k", "MultiPassConfig", 1, 10_000, True, False),
    ("multi-pass", "max_evaluations", "MultiPassConfig", 1, 10_000_000, True, False),
    ("multi-pass", "max_order", "MultiPassConfig", 1, 100, True, False),
    ("multi-pass", "top_k", "MultiPassConfig", 1, 10_000, True, False),
    ("multi-pass", "multi_pass.lm_batch_size", "MultiPassConfig", 1, 4096, True, False),
    ("rnn-lm", "lm_batch_size", "RescorePart", 1, 4096, True, False),
    ("attention-decoder", "attention_chunk_cells", "RescorePart", 1, 1 << 24, True, False),
    ("attention-decoder-rescoring-no-ngram", "attention_chunk_cells", "RescorePart", 1, 1 << 24,
     True, False),
    ("ctc-prefix-beam-search-attention-decoder-rescoring", "rescore.attention_chunk_cells",
     "RescorePart", 1, 1 << 24, True, False),
    ("1best", "word_hotwords.max_arcs", "WordHotwordConfig", 1, 1 << 26, True, False),
    ("whole-lattice-rescoring", "max_input_arcs", "RescoreConfig", 1, 10_000_000, True, False),
    ("whole-lattice-rescoring", "max_rescored_arcs", "RescoreConfig", 1, 10_000_000, True,
     False),
    ("whole-lattice-rescoring", "first_arcs", "RescoreConfig", 1, 10_000_000, True, False),
    ("whole-lattice-rescoring", "max_group_arcs", "RescoreConfig", 1, 100_000_000, True,
     False),
    ("nbest", "nbest.max_group_arcs", "NbestConfig", 1, 100_000_000, True, False),
    ("mbr", "whole_lattice.max_group_arcs", "RescoreConfig", 1, 100_000_000, True, False),
    ("mbr", "max_iterations", "MbrConfig", 1, 10_000, True, False),
    ("mbr", "max_cells", "MbrConfig", 1, 1 << 26, True, False),
    ("mbr", "mbr.max_lattice_arcs", "MbrConfig", 1, 1_000_000, True, False),
    ("fast_beam_search_mbr", "max_cells", "MbrConfig", 1, 1 << 26, True, False),
    ("fast_beam_search_nbest", "num_paths", "NbestConfig", 1, 10_000, True, False),
    ("attention-beam-search", "beam_size", "BeamSearchConfig", 1, 64, True, False),
    ("attention-beam-search", "min_len", "BeamSearchConfig", 0, 10_000, True, False),
    ("attention-beam-search", "max_len_ratio", "BeamSearchConfig", 0, 10, False, True),
    ("attention-beam-search", "ctc_pre_beam", "BeamSearchConfig", 1, 1000, True, False),
    ("attention-beam-search", "ctc_window", "BeamSearchConfig", 0, 100_000, True, False),
    ("attention-beam-search", "end_detect_window", "BeamSearchConfig", 1, 1000, True, False),
    ("attention-beam-search", "max_ended", "BeamSearchConfig", 1, 10_000, True, False),
    ("modified_beam_search_lm_rescore", "rescore.lm_batch_size", "RescorePart", 1, 4096, True,
     False),
    ("modified_beam_search_lm_rescore_LODR", "lm_batch_size", "RescorePart", 1, 4096, True,
     False),
    ("fast_beam_search_with_nbest_rnn_rescoring", "lm_batch_size", "RescorePart", 1, 4096,
     True, False),
    ("fast_beam_search_with_nbest_rnn_rescoring", "rescore.lm_batch_tokens", "RescorePart", 1,
     1 << 24, True, False),
    ("ctc-greedy-search", "search.subsampling_factor", "CtcGreedySearchConfig", 1, 16, True,
     False),
]


def _bad_values(low, high, is_int, low_open):
    """Values outside the range: just above it, far above it (int32 overflow territory for
    ints), and just below it."""
    if is_int:
        return [high + 1, 1_000_000_000, low - 1]
    return [high * 1.01, 1e9, low if low_open else low - 1, float("inf"), float("nan")]


def _cases():
    for method, key, owner, low, high, is_int, low_open in SIZES:
        field = key.split(".")[-1]
        for value in _bad_values(low, high, is_int, low_open):
            yield pytest.param(method, key, value, owner, field, low, high, is_int,
                               id=f"{method}-{key}={value}")


@pytest.mark.parametrize("method, key, value, owner, field, low, high, is_int", _cases())
def test_out_of_range_sizes_are_refused_naming_field_value_and_range(
        method, key, value, owner, field, low, high, is_int):
    with pytest.raises(ValueError) as err:
        plan_methods([method], [f"{key}={value}"])
    msg = str(err.value)
    span = f"[{low}, {high}]" if is_int else f"{low:g}, {high:g}]"
    assert f"{owner}.{field} must be " in msg and span in msg, msg
    assert f"got {value!r}" in msg or f"got {float(value)!r}" in msg, msg
    assert f"(in {method})" in msg, msg


@pytest.mark.parametrize("method, key, owner, low, high, is_int, low_open", SIZES,
                         ids=[f"{s[0]}-{s[1]}" for s in SIZES])
def test_the_ends_of_each_range_are_accepted(method, key, owner, low, high, is_int, low_open):
    ends = [high] if low_open else [low, high]
    for value in ends:
        (run,) = plan_methods([method], [f"{key}={value}"])
        assert run.config is not None


def test_lattice_retries_stay_within_the_bounds():
    wider = LatticeConfig(search_beam=50.0, max_active_states=100_000).scaled(8.0)
    assert wider.search_beam == 400.0 and wider.max_active_states == 800_000
    widest = LatticeConfig(search_beam=2e4, max_active_states=500_000).scaled(8.0)
    assert widest.search_beam == 1e5 and widest.max_active_states == 1_000_000
    with pytest.raises(ValueError, match=r"retry_scales must all be finite numbers > 1"):
        LatticeConfig(retry_scales=(2.0, float("inf")))
    with pytest.raises(ValueError, match=r"retry_scales must all be finite numbers > 1"):
        LatticeConfig(retry_scales=(0.5,))


@pytest.mark.parametrize("kwargs, message", [
    (dict(max_duration=0), r"DecodeConfig.max_duration must be a number in \(0, 100000\], got 0"),
    (dict(max_duration=-5.0), r"DecodeConfig.max_duration must be a number in \(0, 100000\]"),
    (dict(max_duration=float("inf")), "DecodeConfig.max_duration must be a number"),
    (dict(num_buckets=0), r"DecodeConfig.num_buckets must be an int in \[1, 1000\], got 0"),
    (dict(silence_db=5.0), r"DecodeConfig.silence_db must be a number in \[-200, 0\] or None"),
    (dict(silence_db=float("nan")), "DecodeConfig.silence_db must be a number"),
])
def test_decode_config_ranges(kwargs, message):
    with pytest.raises(ValueError, match=message):
        DecodeConfig(**kwargs)


def test_num_hyps_may_not_exceed_the_beam():
    BeamSearchConfig(beam_size=4, num_hyps=4)
    with pytest.raises(ValueError, match=r"BeamSearchConfig.num_hyps must be an int in \[1, 4\], "
                                         r"got 5"):
        BeamSearchConfig(beam_size=4, num_hyps=5)
