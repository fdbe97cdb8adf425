"""The shipped model's HLG n-best and MBR methods, searched and decoded one utterance per
group (``max_group_arcs=1``) or from the whole batch's shared lattices, give every utterance
the same records: real lattices of randomly chosen shipped test utterances, a batch of one and
a batch of several with an utterance whose lattice is empty."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from k2dec.demo import ASSETS, SHIPPED_SETTINGS
from k2dec.job import plan_methods, read_settings
from k2dec.lattice import LatticeCache
from k2dec.methods import CtcInputs, get_method
from tests.shipped.conftest import encoded_test_clean

pytestmark = pytest.mark.skipif(not (ASSETS / "model.pt").is_file(),
                                reason="no shipped model in this checkout")

#: the grouped methods and the part that holds their group bound
GROUPED = {"nbest": "nbest", "nbest-rescoring": "nbest", "nbest-oracle": "nbest",
           "attention-decoder": "nbest", "rnn-lm": "nbest", "multi-pass": "nbest",
           "mbr": "whole_lattice"}
#: scores from a neural network agree to float32 rounding (see tests/methods/test_lattice_groups)
NEURAL = ("attention-decoder", "rnn-lm", "multi-pass")


@pytest.fixture(scope="module")
def shipped(shipped_demo):
    """``(resources, inputs)``: the shipped model's resources (graphs, RNN LM, attention
    decoder) and the CTC inputs of three random test-clean utterances plus, second, one of 20
    frames where only a token that begins no word is possible (its HLG lattice is empty)."""
    assets, outs = encoded_test_clean(shipped_demo, 34, 3)
    res = assets.resources
    inner = int(torch.nonzero(~res.word_start[1:])[0]) + 1  # a piece inside a word
    dead = torch.full_like(outs[0].ctc_log_probs[0, :20], float("-inf"))
    dead[:, inner] = 0.0
    log_probs = [o.ctc_log_probs[0] for o in outs]
    memory = [o.memory[0] for o in outs]
    log_probs.insert(1, dead)
    memory.insert(1, torch.zeros_like(memory[0][:20]))
    pad = torch.nn.utils.rnn.pad_sequence
    lens = torch.tensor([x.shape[0] for x in log_probs])
    mem_lens = torch.tensor([x.shape[0] for x in memory])
    refs = [[1, 2, 3]] * len(lens)
    return res, CtcInputs(pad(log_probs, batch_first=True), lens, refs,
                          pad(memory, batch_first=True), mem_lens)


def _rows(inp: CtcInputs, rows: list[int], cache: bool) -> CtcInputs:
    def pick(x):
        return x[rows]
    return CtcInputs(pick(inp.log_probs), pick(inp.log_probs_lens),
                     [inp.ref_words[r] for r in rows], pick(inp.memory), pick(inp.memory_lens),
                     lattices=LatticeCache(256) if cache else None)


@pytest.mark.parametrize("name", list(GROUPED))
@pytest.mark.parametrize("rows", [[2], [0, 1, 2, 3]], ids=["one", "four-empty"])
def test_one_utterance_per_group_gives_the_records_of_the_whole_batch(shipped, name, rows):
    res, inp = shipped
    run = plan_methods([name], settings=read_settings(SHIPPED_SETTINGS))[0]
    part = GROUPED[name]
    cfg = run.config
    one = replace(cfg, **{part: replace(getattr(cfg, part), max_group_arcs=1)})
    with torch.no_grad():
        shared = get_method(name)(_rows(inp, rows, cache=True), res, cfg)
        grouped = get_method(name)(_rows(inp, rows, cache=False), res, one)
    assert [r.key for r in grouped] == [r.key for r in shared]
    assert any(h.words for r in shared for h in r.hyps)
    if 1 in rows:
        assert all(r.hyps[rows.index(1)].error for r in shared)
    for a, b in zip(grouped, shared, strict=True):
        if name not in NEURAL:
            assert a.hyps == b.hyps
            continue
        loose = dict(score=None, word_confidences=None, token_confidences=None)
        assert [replace(h, **loose) for h in a.hyps] == [replace(h, **loose) for h in b.hyps]
        for x, y in zip(a.hyps, b.hyps):
            assert (x.score is None) == (y.score is None)  # an error record has no score
            if x.score is not None:
                assert x.score == pytest.approx(y.score, rel=1e-6, abs=1e-6)
            if x.word_confidences is not None:
                assert list(x.word_confidences) == pytest.approx(list(y.word_confidences),
                                                                 rel=1e-6, abs=1e-6)
