"""icefall TorchScript exports: loading, the adapter, and agreement with the eager modules."""

from __future__ import annotations

import k2
import pytest
import torch

from k2dec.methods import Family, Resources, TransducerInputs, get_method, supported_methods
from k2dec.model import (
    IcefallTorchScriptModel,
    JointConfig,
    JointModel,
    export_model,
    load_model,
)
from k2dec.transducer import fast_beam_search, greedy_search, modified_beam_search
from tests.model import icefall_like as il
from tests.transducer.helpers import assert_same_hyps


def _features(lens, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(len(lens), max(lens), il.FEATURES, generator=g)
    return x, torch.tensor(lens, dtype=torch.int64)


SEARCHES = {
    "greedy": lambda m, e, n: greedy_search(m, e, n),
    "modified": lambda m, e, n: modified_beam_search(m, e, n),
    "fast": lambda m, e, n: fast_beam_search(m, e, n, None).hyps,
}


@pytest.fixture(scope="module")
def transducer_jit(tmp_path_factory):
    d = tmp_path_factory.mktemp("jit")
    eager = il.build_transducer()
    il.write_tokens(d / "tokens.txt", 12)
    return eager, il.save_jit(eager, d / "jit_script.pt")


@pytest.mark.parametrize("lens", [[60], [60, 45, 9], [30, 30]])
def test_jit_transducer_agrees_with_eager(transducer_jit, lens, device):
    eager, path = transducer_jit
    model = load_model(path, device)
    assert model.device == device
    assert isinstance(model, IcefallTorchScriptModel)
    assert model.capabilities == {Family.TRANSDUCER, Family.CTC}
    assert model.tokens is not None and model.tokens["<sos/eos>"] == 1  # tokens.txt beside
    x, x_lens = _features(lens)
    out = model.encode(x.to(device), x_lens.to(device))
    assert out.encoder_out.device == device
    out.encoder_out, out.encoder_out_lens = out.encoder_out.cpu(), out.encoder_out_lens.cpu()
    out.ctc_log_probs = out.ctc_log_probs.cpu()
    enc, enc_lens = eager.encoder(x, x_lens)
    torch.testing.assert_close(out.encoder_out, enc, atol=1e-5, rtol=0)
    assert out.encoder_out_lens.tolist() == [((t - 7) // 2 + 1) // 2 for t in lens]
    torch.testing.assert_close(out.ctc_log_probs, eager.ctc_output(enc), atol=1e-5, rtol=0)
    for name, search in SEARCHES.items():
        want = search(eager, enc, enc_lens)
        # the adapter's transducer, and the scripted module itself (the Python API)
        got = search(model.to("cpu").transducer, out.encoder_out, out.encoder_out_lens)
        assert_same_hyps(got, want, abs_tol=1e-4)
        assert any(h.tokens for h in want), name  # the comparison is not vacuous
        scripted = torch.jit.load(str(path))
        assert_same_hyps(search(scripted, enc, enc_lens), want, abs_tol=1e-4)


def test_scripted_module_plugs_into_the_registry(transducer_jit):
    eager, path = transducer_jit
    scripted = torch.jit.load(str(path))
    x, x_lens = _features([50, 40])
    enc, enc_lens = scripted.encoder(x, x_lens)
    for name in ("greedy_search", "modified_beam_search", "fast_beam_search",
                 "fast_beam_search_nbest"):
        method = get_method(name)
        got = method(TransducerInputs(scripted, enc, enc_lens), Resources())
        want = method(TransducerInputs(eager, enc, enc_lens), Resources())
        assert got[0].tokens == want[0].tokens


def test_ctc_only_and_transducer_only(tmp_path):
    ctc = il.save_jit(il.build_transducer(transducer=False), tmp_path / "ctc.pt")
    model = load_model(ctc)
    assert model.capabilities == {Family.CTC}
    assert model.transducer is None
    names = {m.name for m in supported_methods(model)}
    assert "ctc-greedy-search" in names and "greedy_search" not in names
    x, x_lens = _features([40, 20])
    out = model.encode(x, x_lens)
    assert out.ctc_log_probs.shape == (2, out.encoder_out.size(1), 12)
    torch.testing.assert_close(out.ctc_log_probs.logsumexp(-1),
                               torch.zeros(out.ctc_log_probs.shape[:2]), atol=1e-5, rtol=0)
    rnnt = load_model(il.save_jit(il.build_transducer(ctc=False), tmp_path / "rnnt.pt"))
    assert rnnt.capabilities == {Family.TRANSDUCER}
    assert {m.family for m in supported_methods(rnnt)} == {Family.TRANSDUCER}


def test_unknown_torchscript_is_refused(tmp_path):
    path = tmp_path / "other.pt"
    torch.jit.script(torch.nn.Linear(3, 4)).save(str(path))
    with pytest.raises(ValueError, match="not an icefall export"):
        load_model(path)


def test_bad_features_raise_before_the_network(transducer_jit):
    model = load_model(transducer_jit[1])
    with pytest.raises(ValueError, match="80"):
        model.encode(torch.zeros(1, 20, 40), torch.tensor([20]))
    with pytest.raises(ValueError, match="feature_lens"):
        model.encode(torch.zeros(1, 20, 80), torch.tensor([21]))
    with pytest.raises(TypeError, match="feature_lens"):
        model.encode(torch.zeros(1, 20, 80), torch.tensor([2.0]))


def test_k2dec_model_file(tmp_path):
    joint = JointModel(JointConfig(vocab_size=10)).eval()
    path = export_model(joint, tmp_path / "model.pt", half=False)
    model = load_model(path)
    assert isinstance(model, JointModel)
    assert model.capabilities == {Family.CTC, Family.TRANSDUCER, Family.AED}
    assert {m.name for m in supported_methods(model)} >= {"attention-beam-search", "1best",
                                                          "greedy_search"}
    x, x_lens = _features([40, 25])
    out = model.encode(x, x_lens)
    enc, enc_lens = joint.encoder(x, x_lens)
    torch.testing.assert_close(out.encoder_out, enc)
    assert out.memory is out.encoder_out


def test_missing_path():
    with pytest.raises(ValueError, match="does not exist"):
        load_model("no/such/model.pt")


# --- conformer_ctc ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def conformer_jit(tmp_path_factory):
    d = tmp_path_factory.mktemp("cctc")
    torch.manual_seed(3)
    eager = il.ConformerCtc().eval()
    il.write_tokens(d / "tokens.txt", 12)
    return eager, il.save_jit(eager, d / "cpu_jit.pt")


def test_conformer_ctc_encode_as_icefall(conformer_jit, device):
    eager, path = conformer_jit
    model = load_model(path, device)
    assert model.capabilities == {Family.CTC, Family.AED}
    names = {m.name for m in supported_methods(model)}
    assert {"attention-decoder", "attention-beam-search", "1best"} <= names
    lens = [61, 40, 23]
    x, x_lens = _features(lens)
    out = model.encode(x.to(device), x_lens.to(device))
    assert out.memory.device == device
    t = out.ctc_log_probs.size(1)
    assert t == ((61 - 1) // 2 - 1) // 2
    # icefall's decode.py: num_frames // 4, truncated to the output (DenseFsaVec
    # allow_truncate); the memory mask: ((T - 1) // 2 - 1) // 2
    assert out.encoder_out_lens.tolist() == [min(n // 4, t) for n in lens]
    assert out.memory_lens.tolist() == [((n - 1) // 2 - 1) // 2 for n in lens]
    assert out.memory.shape[:2] == (3, t)


def test_conformer_ctc_attention_decoder_matches_decoder_nll(conformer_jit):
    _, path = conformer_jit
    model = load_model(path)
    dec = model.attention_decoder
    assert dec.sos_id == dec.eos_id == 1
    x, x_lens = _features([50, 33])
    out = model.encode(x, x_lens)
    seqs = [[3, 4, 5], [], [7], [2, 9, 9, 4]]
    seq_to_utt = torch.tensor([0, 0, 1, 1])
    ragged = k2.RaggedTensor(seqs, dtype=torch.int32)
    got = dec.score_sequences(out.memory, out.memory_lens, ragged, seq_to_utt)
    # icefall's own scoring: -decoder_nll of the scripted module, per utterance
    mem_tnc = out.memory.permute(1, 0, 2)
    mask = torch.arange(out.memory.size(1)).unsqueeze(0) >= out.memory_lens.unsqueeze(1)
    for s, (tokens, u) in enumerate(zip(seqs, seq_to_utt.tolist())):
        nll = model.module.decoder_nll(mem_tnc[:, u: u + 1], mask[u: u + 1], [tokens], 1, 1)
        torch.testing.assert_close(torch.tensor(got[s].tolist()), -nll[0, : len(tokens) + 1],
                                   atol=1e-5, rtol=0)
    # step on whole prefixes gives the same log-probs as teacher forcing
    prefix = torch.tensor([[1, 2, 9, 9]])
    lp, att, _ = dec.step(prefix, out.memory[1:2], mask[1:2], None)
    assert att is None
    assert float(lp[0, 4]) == pytest.approx(got[3].tolist()[3], abs=1e-5)


def test_conformer_ctc_methods_run(conformer_jit):
    from k2dec.methods import AedInputs

    model = load_model(conformer_jit[1])
    x, x_lens = _features([50, 33])
    out = model.encode(x, x_lens)
    res = get_method("attention-beam-search")(
        AedInputs(out.memory, out.memory_lens, ctc_log_probs=out.ctc_log_probs),
        Resources(attention_decoder=model.attention_decoder))
    assert len(res[0].tokens) == 2


def test_tokens_found_in_icefall_repository_layout(tmp_path):
    """icefall's pretrained-model repositories keep exp/jit_script.pt and
    data/lang_bpe_500/tokens.txt."""
    from k2dec.model import find_tokens

    (tmp_path / "exp").mkdir()
    (tmp_path / "data" / "lang_bpe_500").mkdir(parents=True)
    path = il.save_jit(il.build_transducer(), tmp_path / "exp" / "jit_script.pt")
    assert find_tokens(path) is None
    il.write_tokens(tmp_path / "data" / "lang_bpe_500" / "tokens.txt", 12)
    assert find_tokens(path) == tmp_path / "data" / "lang_bpe_500" / "tokens.txt"
    assert load_model(path).tokens["<unk>"] == 2
    with pytest.raises(ValueError, match="tokens file"):
        load_model(path, tokens=tmp_path / "nope.txt")
