"""The registry's Resources: what a method lacks, scorer sources, scaled graphs (the settings
parser: tests/methods/test_settings.py)."""

from __future__ import annotations

import k2
import pytest
import torch

from k2dec.methods import Resources, get_method


def test_resources_say_what_a_method_lacks():
    res = Resources(graphs={"HLG": k2.ctc_topo(3)})
    assert res.missing(get_method("1best").requires) == ()
    assert res.missing(get_method("nbest-rescoring").requires) == ("G",)
    assert res.missing(get_method("rnn-lm").requires) == ("lm",)
    assert res.missing(get_method("attention-decoder").requires) == ("attention_decoder",)
    assert res.missing(get_method("fast_beam_search_LG").requires) == ("LG",)
    assert res.missing(get_method("greedy_search").requires) == ()
    full = Resources(graphs={"HLG": k2.ctc_topo(3), "G": k2.ctc_topo(3)}, lms={"rnn_lm": 1},
                     attention_decoder=object())
    for name in ("nbest-rescoring", "rnn-lm", "attention-decoder"):
        assert full.missing(get_method(name).requires) == ()


def test_resources_hold_scorer_sources_by_name():
    """``sources`` is the one mapping; the former fields are constructor shorthands and
    read-only views of it."""
    lm, lodr, phrases, words = object(), object(), (((1, 2), None),), (((7,), 2.0),)
    old = Resources(lms={"rnn_lm": lm}, lodr=lodr, hotwords=phrases, hotword_words=words)
    assert old.sources == {"rnn_lm": lm, "lodr": lodr, "hotwords": phrases,
                           "hotword_words": words}
    new = Resources(sources=dict(old.sources))
    assert new == old
    assert dict(new.lms) == {"rnn_lm": lm} and new.lodr is lodr
    assert new.hotwords is phrases and new.hotword_words is words
    assert new.neural_lm("m") == ("rnn_lm", lm)
    empty = Resources()
    assert (dict(empty.lms), empty.lodr, empty.hotwords, empty.hotword_words) == (
        {}, None, (), ())
    with pytest.raises(AttributeError, match=r"Resources.lodr is read-only: set "
                                             r"Resources.sources\['lodr'\]"):
        empty.lodr = lodr
    with pytest.raises(TypeError):
        empty.lms["rnn_lm"] = lm  # a view: set Resources.sources["rnn_lm"]
    empty.sources["transformer_lm"] = lm
    assert dict(empty.lms) == {"transformer_lm": lm} and empty.missing(("lm",)) == ()
    with pytest.raises(ValueError, match="'lodr' is given twice"):
        Resources(sources={"lodr": lodr}, lodr=lodr)


def test_every_method_prefers_the_rnn_lm():
    rnn, transformer = object(), object()
    res = Resources(sources={"transformer_lm": transformer, "rnn_lm": rnn})
    assert res.neural_lm("m") == ("rnn_lm", rnn)
    assert Resources(lms={"transformer_lm": transformer}).neural_lm("m") == (
        "transformer_lm", transformer)
    with pytest.raises(ValueError, match=r"m needs a neural LM in Resources.sources"):
        Resources(sources={"my_lm": rnn}).neural_lm("m")
    assert Resources(sources={"my_lm": rnn}).missing(("lm",)) == ("lm",)


@pytest.mark.parametrize("with_lm_scores", [False, True])
def test_scaled_graph_scales_scores_and_lm_scores_once(with_lm_scores):
    graph = k2.arc_sort(k2.ctc_topo(3))
    graph.scores = torch.rand(graph.num_arcs)
    if with_lm_scores:
        graph.lm_scores = torch.rand(graph.num_arcs)
    before = graph.scores.clone()
    res = Resources(graphs={"G": graph})
    g = res.scaled_graph("G", 0.5, "m")
    assert torch.allclose(g.scores, before * 0.5)
    assert hasattr(g, "lm_scores") == with_lm_scores
    if with_lm_scores:
        assert torch.allclose(g.lm_scores, graph.lm_scores * 0.5)
    assert res.scaled_graph("G", 0.5, "m") is g and len(res.cache) == 1
    assert torch.equal(graph.scores, before)
    # lm_scores=True: the scaled scores are the LM part where the graph has none
    g2 = res.scaled_graph("G", 0.5, "m", lm_scores=True)
    want = graph.lm_scores * 0.5 if with_lm_scores else before * 0.5
    assert torch.allclose(g2.lm_scores, want)
    # nothing to change: the graph itself
    assert (res.scaled_graph("G", 1.0, "m") is graph)
    assert (res.scaled_graph("G", 1.0, "m", lm_scores=True) is graph) == with_lm_scores
    with pytest.raises(ValueError, match="method 'm' needs the LG graph"):
        res.scaled_graph("LG", 0.5, "m")
