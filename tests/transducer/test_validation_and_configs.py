"""Bad inputs get clear errors before any k2 call; every wrapper runs with exactly the config it
was given."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from k2dec.testing.transducer import random_batch, random_model
from k2dec.transducer import (
    FastBeamSearchConfig,
    GreedySearch,
    GreedySearchConfig,
    ModifiedBeamSearch,
    ModifiedBeamSearchConfig,
    StatelessDecoder,
    fast_beam_search,
    greedy_search,
    modified_beam_search,
)


def _run_fast(model, enc, lens, config=None):
    return fast_beam_search(model, enc, lens, config=config).hyps


WRAPPERS = [
    pytest.param(greedy_search, GreedySearchConfig, id="greedy"),
    pytest.param(modified_beam_search, ModifiedBeamSearchConfig, id="modified"),
    pytest.param(_run_fast, FastBeamSearchConfig, id="fast"),
]


@pytest.mark.parametrize("search, config_cls", WRAPPERS)
def test_bad_encoder_inputs(device, search, config_cls):
    model = random_model(device=device)
    enc, lens = random_batch([4, 2], device=device)
    with pytest.raises(ValueError, match=r"encoder_out must have shape \[N, T, C\]"):
        search(model, enc[0], lens)
    with pytest.raises(TypeError, match="encoder_out must be a float tensor"):
        search(model, enc.long(), lens)
    with pytest.raises(TypeError, match="encoder_out must be a torch.Tensor"):
        search(model, enc.tolist(), lens)
    with pytest.raises(TypeError, match="encoder_out_lens must be an integer tensor"):
        search(model, enc, lens.float())
    with pytest.raises(ValueError, match=r"encoder_out_lens must have shape \[N\] = \[2\]"):
        search(model, enc, lens[:1])
    with pytest.raises(ValueError, match=r"encoder_out_lens must be in \[0, T=4\]"):
        search(model, enc, torch.tensor([5, 2]))
    with pytest.raises(ValueError, match=r"encoder_out_lens must be in \[0, T=4\]"):
        search(model, enc, torch.tensor([-1, 2]))
    bad = enc.clone()
    bad[1, 0, 0] = float("nan")
    with pytest.raises(ValueError, match="NaN or inf"):
        search(model, bad, lens)
    with pytest.raises(TypeError, match="config must be a"):
        search(model, enc, lens, object())


@pytest.mark.parametrize("search, config_cls", WRAPPERS)
def test_bad_models(device, search, config_cls):
    enc, lens = random_batch([3], device=device)
    with pytest.raises(TypeError, match=r"model must have a \.decoder"):
        search(torch.nn.Linear(2, 2), enc, lens)
    model = random_model(device=device)
    model.decoder.context_size = 0
    with pytest.raises(ValueError, match=r"^model\.decoder\.context_size must be >= 1, got 0"):
        search(model, enc, lens)
    model = random_model(device=device)
    model.decoder.vocab_size = 1
    with pytest.raises(ValueError, match=r"^model\.decoder\.vocab_size must be >= 2 \(blank"):
        search(model, enc, lens)
    model = random_model(vocab_size=4, device=device)
    model.decoder.blank_id = 4
    with pytest.raises(ValueError, match=r"^model\.decoder\.blank_id must be in \[0, 4\), got 4"):
        search(model, enc, lens)
    model = random_model(vocab_size=4, device=device)
    model.decoder.vocab_size = 5  # joiner still emits 4 symbols
    with pytest.raises(ValueError, match="joiner output has 4 symbols"):
        search(model, enc, lens)


def test_streams_must_match_the_batch(device):
    model = random_model(device=device)
    enc, lens = random_batch([3, 2], device=device)
    search = GreedySearch(model)
    s = search.new_stream(device)
    with pytest.raises(ValueError, match="got 1 streams for a batch of 2"):
        search.decode_chunk([s], enc, lens)
    with pytest.raises(ValueError, match="distinct objects"):
        search.decode_chunk([s, s], enc, lens)
    with pytest.raises(TypeError, match=r"streams\[1\] must be a GreedySearchStream"):
        search.decode_chunk([s, ModifiedBeamSearch(model).new_stream(device)], enc, lens)


def test_config_validation():
    with pytest.raises(ValueError, match="max_sym_per_frame"):
        GreedySearchConfig(max_sym_per_frame=0)
    with pytest.raises(ValueError, match=r"FastBeamSearchConfig.beam must be a number in "
                                         r"\(0, 100000\], got -1.0"):
        FastBeamSearchConfig(beam=-1.0)
    with pytest.raises(ValueError, match="max_states"):
        FastBeamSearchConfig(max_states=0)
    with pytest.raises(ValueError, match="ilme_scale"):
        FastBeamSearchConfig(ilme_scale=float("inf"))


def test_icefall_defaults():
    assert GreedySearchConfig() == GreedySearchConfig(max_sym_per_frame=1, blank_penalty=0.0)
    assert ModifiedBeamSearchConfig().beam_size == 4
    c = FastBeamSearchConfig()
    assert (c.beam, c.max_contexts, c.max_states) == (20.0, 8, 64)
    assert c.ilme_scale == 0.0


@pytest.mark.parametrize(
    "wrapper, searcher, base, changes",
    [
        (
            greedy_search,
            GreedySearch,
            GreedySearchConfig(),
            {"max_sym_per_frame": 3, "blank_penalty": 1.5},
        ),
        (
            modified_beam_search,
            ModifiedBeamSearch,
            ModifiedBeamSearchConfig(),
            {"beam_size": 1, "temperature": 0.5, "blank_penalty": 1.5, "length_norm": False,
             "score_dtype": "float32"},
        ),
    ],
    ids=["greedy", "modified"],
)
def test_wrappers_pass_config_unchanged(device, wrapper, searcher, base, changes):
    assert set(changes) == {f.name for f in dataclasses.fields(type(base))}
    model = random_model(vocab_size=6, seed=9, device=device)
    enc, lens = random_batch([12, 9, 11], seed=9, device=device)
    default = wrapper(model, enc, lens, base)
    for name, value in changes.items():
        config = dataclasses.replace(base, **{name: value})
        search = searcher(model, config)
        assert search.config is config
        streams = [search.new_stream(device) for _ in range(3)]
        search.decode_chunk(streams, enc, lens)
        got = wrapper(model, enc, lens, config)
        want = search.results(streams)
        assert [(h.tokens, h.timestamps) for h in got] == [(h.tokens, h.timestamps) for h in want]
        assert [h.score for h in got] == pytest.approx([h.score for h in want], abs=1e-5)
        # the field matters for this input, so a dropped field would be caught
        assert [(h.tokens, h.score) for h in got] != [(h.tokens, h.score) for h in default], name


def test_bad_decoder_sizes():
    with pytest.raises(ValueError, match=r"^vocab_size must be >= 2 \(blank \+ one token\), got 1"):
        StatelessDecoder(vocab_size=1, decoder_dim=8, blank_id=0)
    with pytest.raises(ValueError, match=r"^blank_id must be in \[0, 5\), got -1"):
        StatelessDecoder(vocab_size=5, decoder_dim=8, blank_id=-1)
    with pytest.raises(ValueError, match="^context_size must be >= 1, got 0"):
        StatelessDecoder(vocab_size=5, decoder_dim=8, context_size=0)
    with pytest.raises(ValueError, match="^decoder_dim must be >= 1, got 0"):
        StatelessDecoder(vocab_size=5, decoder_dim=0)


@pytest.mark.parametrize("search", ["greedy", "modified_beam_search", "fast_beam_search"])
@pytest.mark.parametrize("bad, error, match", [
    ("float64", TypeError, r"encoder_out has dtype torch.float64, but the model's joiner "
                           r"computes in torch.float32: pass encoder_out.to\(torch.float32\)"),
    ("width", ValueError, r"encoder_out must have shape \[N, T, C\] with C = 8 \(the input "
                          r"width of the model's joiner.encoder_proj\), got shape \(2, 4, 6\)"),
])
def test_streaming_chunks_of_another_dtype_or_width_are_refused(search, bad, error, match):
    """The streaming entry points check each chunk as the batch functions check the whole
    input, before the joiner's matmul fails naming neither."""
    from k2dec.transducer import FastBeamSearch, GreedySearch, ModifiedBeamSearch

    model = random_model(vocab_size=5, dim=8)
    enc, lens = random_batch([4, 3], dim=8)
    enc = enc.double() if bad == "float64" else torch.randn(2, 4, 6)
    searcher = {"greedy": lambda: GreedySearch(model),
                "modified_beam_search": lambda: ModifiedBeamSearch(model),
                "fast_beam_search": lambda: FastBeamSearch(model)}[search]()
    streams = [searcher.new_stream() for _ in range(2)]
    with pytest.raises(error, match=match):
        searcher.decode_chunk(streams, enc, lens)
    searcher.decode_chunk(streams, random_batch([4, 3], dim=8)[0], lens)  # the stream is intact
