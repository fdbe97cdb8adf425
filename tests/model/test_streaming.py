"""Streaming icefall TorchScript exports: k2dec's streaming searchers fed chunk by chunk, and
offline searches on the chunked encoder output, give icefall's streaming decode of the same
chunks (reference: one stream at a time, windows cut as icefall's DecodeStream cuts them)."""

from __future__ import annotations

import pytest
import torch

from k2dec.methods import Family
from k2dec.model import IcefallTorchScriptModel, load_model
from k2dec.model.streaming import LOG_EPS, TAIL_PAD_FRAMES
from k2dec.transducer import (
    GreedySearch,
    ModifiedBeamSearch,
    greedy_search,
    modified_beam_search,
)
from tests.model import icefall_like as il
from tests.transducer.helpers import assert_same_hyps


@pytest.fixture(scope="module")
def streaming_jit(tmp_path_factory):
    d = tmp_path_factory.mktemp("stream")
    eager = il.build_streaming()
    return eager, il.save_jit(eager, d / "jit_script_chunk_8_left_32.pt")


def icefall_stream_encoder_out(encoder, feats: torch.Tensor) -> torch.Tensor:
    """One utterance as icefall's streaming_decode.py feeds it: 30 frames of log(1e-10)
    appended; windows of 2 * chunk_size + pad_length frames advancing by 2 * chunk_size
    while frames remain, the last one padded (its length says how many frames are real)."""
    chunk = 2 * encoder.chunk_size
    window = chunk + encoder.pad_length
    feats = torch.cat([feats, torch.full((TAIL_PAD_FRAMES, feats.size(1)), LOG_EPS)])
    states = encoder.get_init_states(1, torch.device("cpu"))
    outs, processed = [], 0
    while processed < feats.size(0):
        x = feats[processed: processed + window]
        n = x.size(0)
        x = torch.cat([x, torch.full((window - n, x.size(1)), LOG_EPS)])
        enc, _, states = encoder(x.unsqueeze(0), torch.tensor([n]), states)
        outs.append(enc[0])
        processed += chunk
    return torch.cat(outs)


def per_frame_greedy(model, enc: torch.Tensor) -> list[int]:
    """icefall's streaming greedy search (one symbol per frame) over every output frame."""
    dec_model, joiner = model.decoder, model.joiner
    c = dec_model.context_size
    hyp = [-1] * (c - 1) + [dec_model.blank_id]
    dec = dec_model(torch.tensor([hyp[-c:]]), need_pad=False)
    for t in range(enc.size(0)):
        logits = joiner(enc[t: t + 1].unsqueeze(1).unsqueeze(1), dec.unsqueeze(1))
        y = int(logits.reshape(-1).argmax())
        if y != dec_model.blank_id:
            hyp.append(y)
            dec = dec_model(torch.tensor([hyp[-c:]]), need_pad=False)
    return hyp[c:]


@pytest.mark.parametrize("lens", [[70], [70, 23, 44], [1, 40]])
def test_streaming_export_matches_icefall_streaming_decode(streaming_jit, lens):
    eager, path = streaming_jit
    model = load_model(path)
    assert isinstance(model, IcefallTorchScriptModel) and model.streaming
    assert model.capabilities == {Family.TRANSDUCER}
    g = torch.Generator().manual_seed(len(lens))
    x = torch.randn(len(lens), max(lens), il.FEATURES, generator=g)
    x_lens = torch.tensor(lens)
    refs = []
    for i, n in enumerate(lens):
        enc_i = icefall_stream_encoder_out(eager.encoder, x[i, :n])
        refs.append((enc_i, per_frame_greedy(eager, enc_i)))
    assert any(r[1] for r in refs)
    # offline: encode() runs the chunks, then any offline search
    out = model.encode(x, x_lens)
    for i, (enc_i, _) in enumerate(refs):
        n = int(out.encoder_out_lens[i])
        assert n == enc_i.size(0)
        torch.testing.assert_close(out.encoder_out[i, :n], enc_i, atol=1e-5, rtol=0)
    hyps = greedy_search(model.transducer, out.encoder_out, out.encoder_out_lens)
    assert [h.tokens for h in hyps] == [r[1] for r in refs]
    # streaming: k2dec's searchers fed the export's chunks as they come
    searches = [GreedySearch(model.transducer), ModifiedBeamSearch(model.transducer)]
    streams = [[s.new_stream() for _ in lens] for s in searches]
    for enc, frames in model.streaming_encoder.chunks(x, x_lens):
        for s, st in zip(searches, streams):
            s.decode_chunk(st, enc, frames)
    assert_same_hyps(searches[0].results(streams[0]), hyps)
    offline_mbs = modified_beam_search(model.transducer, out.encoder_out, out.encoder_out_lens)
    assert_same_hyps(searches[1].results(streams[1]), offline_mbs, abs_tol=1e-4)


def test_chunk_window_checked(streaming_jit):
    model = load_model(streaming_jit[1])
    enc = model.streaming_encoder
    states = enc.init_states(1, "cpu")
    with pytest.raises(ValueError, match="a chunk must have shape"):
        enc.encode_chunk(torch.zeros(1, 5, 80), torch.tensor([5]), states)
