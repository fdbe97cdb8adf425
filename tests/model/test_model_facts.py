"""What every model tells about itself: ``vocab_size`` (the network's outputs, not the lang
dir's token count with its disambiguation symbols), ``subsampling_factor`` and the way from
samples to feature frames to output frames, for each kind of model k2dec loads."""

from __future__ import annotations

import k2
import numpy as np
import pytest
import torch

from k2dec.data import FeatureConfig
from k2dec.demo import ASSETS
from k2dec.model import JointConfig, JointModel, export_model, load_model
from k2dec.model.interface import token_vocab_size
from k2dec.model.streaming import TAIL_PAD_FRAMES
from tests.model import icefall_like as il


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """``{kind: (model path, expected vocab_size)}`` of every kind, tokens.txt beside them
    only where a kind needs it (conformer_ctc's <sos/eos>)."""
    d = tmp_path_factory.mktemp("facts")
    out = {}
    for name, vocab, build in (("jit-transducer", 12, lambda: il.build_transducer()),
                               ("jit-ctc", 14, lambda: il.build_transducer(
                                   vocab_size=14, transducer=False)),
                               ("jit-streaming", 12, lambda: il.build_streaming())):
        (d / name).mkdir()
        out[name] = (il.save_jit(build(), d / name / "jit_script.pt"), vocab)
    (d / "cctc").mkdir()
    il.write_tokens(d / "cctc" / "tokens.txt", 12)
    out["conformer_ctc"] = (il.save_jit(il.ConformerCtc().eval(), d / "cctc" / "cpu_jit.pt"), 12)
    joint = JointModel(JointConfig(vocab_size=10)).eval()
    out["k2dec"] = (export_model(joint, d / "model.pt", half=False), 10)
    if _has_onnx():
        paths = il.export_onnx(il.build_transducer(vocab_size=13), d / "onnx")
        out["onnx-transducer"] = (paths["encoder"].parent, 13)
        out["onnx-ctc"] = (paths["ctc"], 13)
    return out


def _has_onnx() -> bool:
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    return True


KINDS = ["jit-transducer", "jit-ctc", "jit-streaming", "conformer_ctc", "k2dec",
         "onnx-transducer", "onnx-ctc"]


@pytest.mark.parametrize("kind", KINDS)
def test_vocab_size_and_frames_of_every_model_kind(models, kind):
    if kind not in models:
        pytest.skip("onnx / onnxruntime not installed")
    path, vocab = models[kind]
    model = load_model(path)
    assert model.vocab_size == vocab
    assert f"{vocab} outputs" in model.describe()
    assert model.subsampling_factor == 4
    assert model.output_frame_shift == pytest.approx(0.04)
    config = model.feature_config
    num_samples = [16000, 24123]
    feature_lens = torch.tensor([config.num_frames(n) for n in num_samples])
    assert feature_lens.tolist() == [100, 151]
    x = torch.randn(2, int(feature_lens.max()), config.num_mel_bins)
    out = model.encode(x, feature_lens)
    expected = feature_lens // model.subsampling_factor
    if model.streaming_encoder is not None:  # icefall's tail padding, every frame of a chunk
        chunk = model.streaming_encoder.chunk_length
        expected = -(-(feature_lens + TAIL_PAD_FRAMES) // chunk) * (chunk // 4)
    assert (out.encoder_out_lens - expected).abs().max() <= 2  # each model's own rounding
    if out.ctc_log_probs is not None:
        assert out.ctc_log_probs.size(-1) == vocab
    if model.transducer is not None:
        assert int(model.transducer.decoder.vocab_size) == vocab


def test_vocab_size_is_not_the_token_count_of_a_lang_dir():
    """The issue's case: the shipped lang dir lists 258 tokens (with #0, #1), the model has
    256 outputs."""
    if not (ASSETS / "model.pt").is_file():
        pytest.skip("no shipped model in this checkout")
    model = load_model(ASSETS / "model.pt", tokens=ASSETS / "lang" / "tokens.txt")
    assert len(model.tokens) == 258 and model.vocab_size == 256
    assert token_vocab_size(model.tokens) == 256


def test_token_vocab_size_leaves_out_disambiguation_symbols(tmp_path):
    path = il.write_tokens(tmp_path / "tokens.txt", 9)
    with open(path, "a") as f:
        f.write("#0 9\n#1 10\n")
    table = k2.SymbolTable.from_file(str(path))
    assert len(table) == 11 and token_vocab_size(table) == 9
    assert token_vocab_size(None) is None


@pytest.mark.parametrize("snip_edges", [False, True])
@pytest.mark.parametrize("rate", [8000, 16000])
def test_feature_frames_of_a_number_of_samples(snip_edges, rate):
    config = FeatureConfig(sampling_rate=rate, snip_edges=snip_edges, high_freq=-200.0)
    extractor = config.extractor()
    rng = np.random.default_rng(rate)
    for n in (rate // 40, rate // 40 + 1, rate // 10 - 1, rate // 10, rate + 37, 3 * rate):
        x = (rng.standard_normal(n) * 0.1).astype(np.float32)
        assert extractor.extract(x, rate).shape[0] == config.num_frames(n), n
    with pytest.raises(ValueError, match="num_samples must be an int >= 0"):
        config.num_frames(-1)
