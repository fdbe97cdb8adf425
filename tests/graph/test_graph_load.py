"""load_graph refuses a graph that is not what its file name, its lang dir or the model says:
another kind (LG.pt saved as HLG.pt), icefall graphs without metadata of the wrong shape,
another vocabulary, unreadable files."""

from __future__ import annotations

import gzip

import k2
import pytest
import torch

from k2dec.graph import compile_graph, load_graph


@pytest.fixture
def graphs(tiny_lang):
    lang, arpa = tiny_lang
    HLG, hlg_path = compile_graph(lang.path, "HLG", arpa=arpa)
    LG, lg_path = compile_graph(lang.path, "LG", arpa=arpa)
    return lang, HLG, LG, hlg_path, lg_path


def _bare(fsa: k2.Fsa, path):
    """Save like icefall does: no k2dec metadata."""
    d = fsa.as_dict()
    d.pop("k2dec_meta", None)
    torch.save(d, path)
    return path


def test_graphs_load_as_saved(graphs):
    lang, HLG, LG, hlg_path, lg_path = graphs
    vocab = lang.max_token_id + 1
    g = load_graph(hlg_path, lang.token_table, lang.word_table, vocab_size=vocab)
    assert g.num_arcs == HLG.num_arcs and g.k2dec_meta["kind"] == "HLG"
    assert load_graph(lg_path, lang.token_table, lang.word_table, vocab_size=vocab).num_arcs \
        == LG.num_arcs
    # icefall's files without metadata that look right load too (with a warning)
    assert load_graph(_bare(HLG, hlg_path), lang.token_table,
                      lang.word_table).num_arcs == HLG.num_arcs


def test_lg_saved_as_hlg_is_refused(graphs, tmp_path):
    lang, HLG, LG, hlg_path, lg_path = graphs
    wrong = tmp_path / "HLG.pt"
    wrong.write_bytes(lg_path.read_bytes())
    with pytest.raises(ValueError, match=r"HLG.pt holds a LG graph, expected HLG"):
        load_graph(wrong, lang.token_table, lang.word_table)
    # without metadata: the structure gives it away both ways
    with pytest.raises(ValueError, match=r"HLG.pt: a HLG graph has CTC blank .* \(an LG\?\)"):
        load_graph(_bare(LG, wrong), lang.token_table, lang.word_table)
    with pytest.raises(ValueError, match=r"LG.pt: an LG graph .* \(an HLG\?\)"):
        load_graph(_bare(HLG, tmp_path / "LG.pt"), lang.token_table, lang.word_table)
    with pytest.raises(ValueError, match=r"G_4_gram.pt: a G_4_gram rescoring graph is an "
                                         r"acceptor"):
        load_graph(_bare(HLG, tmp_path / "G_4_gram.pt"), lang.token_table, lang.word_table)
    # an explicit kind wins over the file name
    other = tmp_path / "graph.pt"
    other.write_bytes(lg_path.read_bytes())
    assert load_graph(other, kind="LG").num_arcs == LG.num_arcs
    with pytest.raises(ValueError, match=r"holds a LG graph, expected HLG"):
        load_graph(other, kind="HLG")


def test_graph_for_another_vocabulary_is_refused(graphs, tmp_path):
    lang, HLG, LG, hlg_path, lg_path = graphs
    vocab = lang.max_token_id + 1  # the tiny phone lang: 5 tokens
    with pytest.raises(ValueError, match=r"has 5 tokens \(ids 0..4\) but the model has 256 "
                                         r"outputs"):
        load_graph(hlg_path, lang.token_table, lang.word_table, vocab_size=256)
    with pytest.raises(ValueError, match=r"label 4 is not an output of the model \(vocab size "
                                         r"3\)"):
        load_graph(_bare(HLG, tmp_path / "HLG.pt"), vocab_size=3)
    # an icefall graph (no metadata) whose labels are beyond this lang dir's tokens
    big = HLG.clone()
    labels = big.labels.clone()
    labels[labels == 4] = 9
    big.labels = labels
    with pytest.raises(ValueError, match=r"label 9 is not a token of tokens.txt"):
        load_graph(_bare(big, tmp_path / "HLG.pt"), lang.token_table, lang.word_table,
                   vocab_size=vocab)
    words = HLG.clone()
    aux = words.aux_labels.clone() if isinstance(words.aux_labels, torch.Tensor) else None
    if aux is not None:
        aux[aux > 0] = 999
        words.aux_labels = aux
    else:
        ragged = words.aux_labels
        words.aux_labels = k2.RaggedTensor(ragged.shape, torch.where(
            ragged.values > 0, torch.full_like(ragged.values, 999), ragged.values))
    with pytest.raises(ValueError, match=r"word id 999 is not in words.txt"):
        load_graph(_bare(words, tmp_path / "HLG.pt"), lang.token_table, lang.word_table)


@pytest.mark.parametrize("content, message", [
    (b"", r"graph file .*HLG.pt is empty"),
    (b"HLG text, not a graph\n", r"graph file .*HLG.pt cannot be read \(not a torch-saved"),
    (gzip.compress(b"HLG text, not a graph\n"), r"cannot be read \(gzip-compressed\?\)"),
])
def test_unreadable_graph_files_name_the_file(tmp_path, content, message):
    path = tmp_path / "HLG.pt"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=message):
        load_graph(path)


def test_graph_dicts_that_are_no_fsa(tmp_path, graphs):
    _, HLG, _, _, _ = graphs
    path = tmp_path / "HLG.pt"
    torch.save([1, 2, 3], path)
    with pytest.raises(ValueError, match=r"HLG.pt: expected a dict with 'arcs'"):
        load_graph(path)
    d = HLG.as_dict()
    d["arcs"] = d["arcs"].to(torch.int64)
    torch.save(d, path)
    with pytest.raises(ValueError, match=r"HLG.pt: 'arcs' must be an int32 tensor"):
        load_graph(path)
    d = HLG.as_dict()
    d["arcs"] = d["arcs"][:-3].clone()  # the final arcs cut off: not a valid FSA
    torch.save(d, path)
    with pytest.raises(ValueError, match=r"HLG.pt: not a valid k2 FSA"):
        load_graph(path)
