"""sherpa-onnx style ONNX exports through onnxruntime: the same weights as eager modules and
TorchScript give the same encoder outputs (float tolerance) and the same hypotheses."""

from __future__ import annotations

import shutil

import pytest
import torch

from k2dec.methods import Family, Resources, TransducerInputs, get_method
from k2dec.model import OnnxCtcModel, OnnxTransducerModel, load_model
from k2dec.transducer import fast_beam_search, greedy_search, modified_beam_search
from tests.model import icefall_like as il
from tests.transducer.helpers import assert_same_hyps

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

SEARCHES = {
    "greedy": lambda m, e, n: greedy_search(m, e, n),
    "modified": lambda m, e, n: modified_beam_search(m, e, n),
    "fast": lambda m, e, n: fast_beam_search(m, e, n, None).hyps,
}


def _features(lens, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(len(lens), max(lens), il.FEATURES, generator=g)
    return x, torch.tensor(lens, dtype=torch.int64)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    d = tmp_path_factory.mktemp("onnx")
    eager = il.build_transducer()
    paths = il.export_onnx(eager, d / "exp")
    il.write_tokens(d / "exp" / "tokens.txt", 12)
    jit = il.save_jit(eager, d / "jit_script.pt")
    return eager, paths, jit


@pytest.mark.parametrize("lens", [[60], [60, 45, 9], [33, 33]])
def test_onnx_transducer_agrees_with_torchscript_and_eager(exported, lens):
    eager, paths, jit = exported
    onnx_model = load_model(paths["encoder"].parent)  # the folder
    assert isinstance(onnx_model, OnnxTransducerModel)
    assert onnx_model.capabilities == {Family.TRANSDUCER}
    assert onnx_model.tokens is not None
    dec = onnx_model.transducer.decoder
    assert (dec.context_size, dec.vocab_size, dec.blank_id) == (2, 12, 0)
    jit_model = load_model(jit)
    x, x_lens = _features(lens)
    out = onnx_model.encode(x, x_lens)
    enc, enc_lens = eager.encoder(x, x_lens)
    # the ONNX encoder includes the joiner's encoder_proj
    torch.testing.assert_close(out.encoder_out, eager.joiner.encoder_proj(enc), atol=1e-5,
                               rtol=0)
    assert out.encoder_out_lens.tolist() == enc_lens.tolist()
    jit_out = jit_model.encode(x, x_lens)
    for name, search in SEARCHES.items():
        want = search(eager, enc, enc_lens)
        assert any(h.tokens for h in want), name
        assert_same_hyps(search(onnx_model.transducer, out.encoder_out,
                                out.encoder_out_lens), want, abs_tol=1e-4)
        assert_same_hyps(search(jit_model.transducer, jit_out.encoder_out,
                                jit_out.encoder_out_lens), want, abs_tol=1e-4)


def test_onnx_methods_with_nbest(exported):
    eager, paths, _ = exported
    model = load_model(paths["encoder"])  # the encoder file finds its decoder and joiner
    x, x_lens = _features([50, 41])
    out = model.encode(x, x_lens)
    enc, enc_lens = eager.encoder(x, x_lens)
    for name in ("fast_beam_search_nbest", "modified_beam_search"):
        method = get_method(name)
        got = method(TransducerInputs(model.transducer, out.encoder_out, out.encoder_out_lens),
                     Resources())
        want = method(TransducerInputs(eager, enc, enc_lens), Resources())
        assert got[0].tokens == want[0].tokens


def test_onnx_ctc(exported, device):
    eager, paths, jit = exported
    model = load_model(paths["ctc"], device)
    assert isinstance(model, OnnxCtcModel)
    assert model.capabilities == {Family.CTC}
    assert model.vocab_size == 12 and model.subsampling_factor == 4
    x, x_lens = _features([50, 30, 12])
    out = model.encode(x.to(device), x_lens.to(device))
    assert out.ctc_log_probs.device == device  # onnxruntime runs on CPU, outputs follow
    out = model.to("cpu").encode(x, x_lens)
    enc, enc_lens = eager.encoder(x, x_lens)
    torch.testing.assert_close(out.ctc_log_probs, eager.ctc_output(enc), atol=1e-5, rtol=0)
    assert out.encoder_out_lens.tolist() == enc_lens.tolist()
    jit_out = load_model(jit).encode(x, x_lens)
    torch.testing.assert_close(out.ctc_log_probs, jit_out.ctc_log_probs, atol=1e-5, rtol=0)


def test_folder_choices(exported, tmp_path):
    _, paths, _ = exported
    folder = tmp_path / "m"
    folder.mkdir()
    for key in ("encoder", "decoder", "joiner"):
        shutil.copy(paths[key], folder / paths[key].name)
        shutil.copy(paths[key], folder / paths[key].name.replace(".onnx", ".int8.onnx"))
    assert isinstance(load_model(folder), OnnxTransducerModel)  # float32 preferred
    shutil.copy(paths["encoder"], folder / "encoder-epoch-30-avg-1.onnx")
    with pytest.raises(ValueError, match="several encoder files"):
        load_model(folder)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match="no .onnx files"):
        load_model(empty)
    lonely = tmp_path / "lonely"
    lonely.mkdir()
    shutil.copy(paths["encoder"], lonely / "encoder.onnx")
    with pytest.raises(ValueError, match="decoder.onnx"):
        load_model(lonely / "encoder.onnx")


def test_nemo_style_ctc_is_refused(exported, tmp_path):
    _, paths, _ = exported
    path = tmp_path / "model.onnx"
    shutil.copy(paths["ctc"], path)
    il.add_meta_data(path, {"normalize_type": "per_feature"})
    with pytest.raises(ValueError, match="normalize_type"):
        load_model(path)


def test_int32_lengths_and_feature_dim(tmp_path):
    eager = il.build_transducer(seed=5)
    paths = il.export_onnx(eager, tmp_path, x_lens_dtype=torch.int32)
    model = load_model(paths["encoder"])
    assert model.feature_config.num_mel_bins == 80
    x, x_lens = _features([40, 20])
    out = model.encode(x, x_lens)
    enc, _ = eager.encoder(x, x_lens)
    torch.testing.assert_close(out.encoder_out, eager.joiner.encoder_proj(enc), atol=1e-5,
                               rtol=0)
