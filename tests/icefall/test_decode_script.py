"""The icefall-style decode step (``tests/icefall/icefall_style_decode.py``: icefall's calls,
k2dec's imports) on an exported-icefall-shaped model gives k2dec's registered methods'
hypotheses."""

from __future__ import annotations

import ast
from pathlib import Path

import k2
import pytest
import torch

from k2dec.lattice import LatticeConfig
from k2dec.methods import CtcInputs, Resources, TransducerInputs, get_method, icefall_compatible
from k2dec.methods.ctc import HlgConfig, NbestRescoringConfig
from k2dec.methods.parts import GraphConfig, RescorePart
from k2dec.nbest import NbestConfig
from k2dec.transducer import FastBeamSearchConfig
from tests.icefall import icefall_style_decode as script
from tests.model.icefall_like import build_transducer

SCRIPT = Path(script.__file__)


def test_the_script_imports_only_k2dec_icefall_for_decoding():
    tree = ast.parse(SCRIPT.read_text())
    modules = {n.module if isinstance(n, ast.ImportFrom) else a.name
               for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)
               for a in n.names}
    assert modules == {"__future__", "argparse", "k2", "torch", "k2dec.icefall"}


@pytest.fixture(scope="module")
def batch(setup):
    lang, res = setup
    vocab = lang.max_token_id + 1
    model = build_transducer(vocab_size=vocab, seed=3)
    g = torch.Generator().manual_seed(0)
    feats = torch.randn(3, 60, 80, generator=g)
    lens = torch.tensor([60, 45, 33])
    supervisions = {"sequence_idx": torch.arange(3), "start_frame": torch.zeros(3),
                    "num_frames": lens}
    with torch.no_grad():
        enc, enc_lens = model.encoder(feats, lens)
    return model, {"inputs": feats, "supervisions": supervisions}, enc, enc_lens


def _params(method: str, **kw):
    return script.get_parser().parse_args(["--decoding-method", method] +
                                          [f"--{k.replace('_', '-')}={v}" for k, v in kw.items()])


def _run(name, inputs, cfg, res=None):
    return get_method(name)(inputs, res or Resources(), icefall_compatible(name, cfg))


def test_transducer_searches(setup, batch):
    lang, res = setup
    model, b, enc, enc_lens = batch
    inputs = TransducerInputs(model, enc, enc_lens)
    graph = k2.trivial_graph(lang.max_token_id)
    with torch.no_grad():
        greedy = script.decode_one_batch(_params("greedy_search"), model, b)
        mbs = script.decode_one_batch(_params("modified_beam_search", beam_size=3), model, b)
        fbs = script.decode_one_batch(_params("fast_beam_search", beam=8.0, max_states=32),
                                      model, b, decoding_graph=graph)
    as_str = [[str(t) for t in h] for h in _run("greedy_search", inputs, None)[0].tokens]
    assert greedy == {"greedy_search": as_str}
    cfg = get_method("modified_beam_search").default_config()
    want = _run("modified_beam_search", inputs, type(cfg)(search=type(cfg.search)(beam_size=3)))
    assert mbs == {"beam_size_3": [[str(t) for t in h] for h in want[0].tokens]}
    cfg = get_method("fast_beam_search").default_config()
    want = _run("fast_beam_search", inputs,
                type(cfg)(search=FastBeamSearchConfig(beam=8.0, max_states=32)))
    assert list(fbs.values()) == [[[str(t) for t in h] for h in want[0].tokens]]
    assert any(greedy["greedy_search"])  # the model emits tokens: the comparison says something


def test_hlg_decoding_with_nbest_rescoring(setup, batch):
    lang, res = setup
    model, b, enc, enc_lens = batch
    with torch.no_grad():
        one = script.decode_one_batch(_params("1best"), model, b, lang.word_table,
                                      HLG=res.graphs["HLG"])
        resc = script.decode_one_batch(_params("nbest-rescoring", num_paths=30), model, b,
                                       lang.word_table, HLG=res.graphs["HLG"],
                                       G=res.graphs["G"])
        inputs = CtcInputs(model.ctc_output(enc), enc_lens)
    cfg = HlgConfig(lattice=LatticeConfig(output_beam=8.0), graph=GraphConfig(1.0))
    words = _run("1best", inputs, cfg, res)[0].words
    assert one == {"no_rescore": [[lang.word_table[w] for w in h] for h in words]}
    assert list(resc) == ["lm_scale_0.5", "lm_scale_1.0", "lm_scale_2.0"]
    for s in (0.5, 1.0, 2.0):
        cfg_s = NbestRescoringConfig(lattice=cfg.lattice, graph=GraphConfig(1.0),
                                     nbest=NbestConfig(num_paths=30),
                                     rescore=RescorePart(ngram_lm_scale=s,
                                                         ngram_lm_scales=(s,)))
        words = _run("nbest-rescoring", inputs, cfg_s, res)[0].words
        assert resc[f"lm_scale_{s}"] == [[lang.word_table[w] for w in h] for h in words]
