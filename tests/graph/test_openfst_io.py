from __future__ import annotations

import k2
import pytest
import torch

from k2dec.graph import (
    build_ctc_topo,
    build_G,
    build_L,
    compile_HLG,
    compose_openfst,
    graph_metadata,
    k2_to_kaldi_decoder_fst,
    k2_to_openfst,
    load_graph,
    openfst_to_k2,
    read_openfst,
    refresh_labels_version,
    save_graph,
    write_openfst,
)
from k2dec.lang import make_symbol_table


def _encode_pairs(fsa: k2.Fsa) -> k2.Fsa:
    """An acceptor whose label encodes (label, aux_label) so that acceptor
    equivalence checks the transducer's joint paths."""
    if isinstance(fsa.aux_labels, k2.RaggedTensor):
        fsa = k2.expand_ragged_attributes(fsa, ragged_attribute_names=["aux_labels"])
    lab, aux = fsa.labels.long(), fsa.aux_labels.long()
    code = torch.where(lab == -1, torch.full_like(lab, -1), lab * 1000 + aux)
    out = k2.Fsa(fsa.arcs)
    out.labels = code.to(torch.int32)
    return k2.arc_sort(k2.connect(k2.remove_epsilon(out)))


def _hlg(tiny_lang):
    lang, arpa = tiny_lang
    G = build_G(arpa, lang.word_table)
    L = build_L(lang.lexicon_disambig, lang.token_table, lang.word_table,
                disambig_self_loops=True)
    H = build_ctc_topo(lang.max_token_id)
    return compile_HLG(H, L, G, lang.first_token_disambig_id, lang.first_word_disambig_id)


@pytest.mark.parametrize("suffix", [".fst", ".fst.txt"])
def test_round_trip_k2_openfst_k2_preserves_paths(tiny_lang, tmp_path, suffix):
    lang, arpa = tiny_lang
    graphs = {
        "G": build_G(arpa, lang.word_table),
        "L": build_L(lang.lexicon, lang.token_table, lang.word_table),
        "HLG": _hlg(tiny_lang),
    }
    for name, fsa in graphs.items():
        path = tmp_path / f"{name}{suffix}"
        write_openfst(k2_to_openfst(fsa), path)
        back = openfst_to_k2(read_openfst(path))
        a, b = _encode_pairs(fsa), _encode_pairs(back)
        assert k2.is_rand_equivalent(a, b, log_semiring=False, npath=200, delta=1e-3), name
        # and a changed graph is detected, so the check can fail: every path leaves
        # the start state once
        scores = b.scores.clone()
        scores[b.arcs.values()[:, 0] == 0] += 1.0
        b.scores = scores
        assert not k2.is_rand_equivalent(a, b, log_semiring=False, npath=200, delta=1e-3)


def test_compose_openfst_sorts_inputs(tiny_lang):
    lang, arpa = tiny_lang
    L = k2_to_openfst(build_L(lang.lexicon, lang.token_table, lang.word_table))
    G = build_G(arpa, lang.word_table)
    # G from k2 with #0 relabelled away, as an acceptor over words
    G_fst = k2_to_openfst(G)
    LG = compose_openfst(L, G_fst)
    assert LG.num_states > 0
    k2_LG = k2.compose(k2.arc_sort(build_L(lang.lexicon, lang.token_table, lang.word_table)),
                       k2.arc_sort(G))
    k2_LG = k2.connect(k2_LG)
    assert k2.is_rand_equivalent(_encode_pairs(k2_LG), _encode_pairs(openfst_to_k2(LG)),
                                 log_semiring=False, npath=100)


def test_read_openfst_bad_files(tmp_path):
    (tmp_path / "x.fst").write_bytes(b"not an fst at all")
    with pytest.raises(ValueError, match="not an OpenFst binary"):
        read_openfst(tmp_path / "x.fst")
    with pytest.raises(ValueError, match="does not exist"):
        read_openfst(tmp_path / "missing.fst")
    (tmp_path / "x.fst.txt").write_text("0 1 a b c d e f\n")
    with pytest.raises(ValueError, match="not a valid OpenFst text"):
        read_openfst(tmp_path / "x.fst.txt")


def test_save_load_with_metadata(tiny_lang, tmp_path, device):
    lang, _ = tiny_lang
    H = build_ctc_topo(lang.max_token_id)
    meta = graph_metadata("H", lang.token_table, lang.word_table)
    save_graph(H, tmp_path / "H.pt", meta)
    back = load_graph(tmp_path / "H.pt", lang.token_table, lang.word_table, device=device,
                      kind="H")
    assert back.device == device
    assert torch.equal(back.arcs.values().cpu(), H.arcs.values())
    assert back.k2dec_meta["kind"] == "H"
    # icefall's loader still reads the file (torch >= 2.6 needs weights_only=False: k2's
    # ragged aux labels are not plain tensors)
    plain = k2.Fsa.from_dict(torch.load(tmp_path / "H.pt", weights_only=False))
    assert torch.equal(plain.arcs.values(), H.arcs.values())


def test_load_against_other_tables_is_an_error(tiny_lang, tmp_path):
    lang, _ = tiny_lang
    H = build_ctc_topo(lang.max_token_id)
    save_graph(H, tmp_path / "H.pt", graph_metadata("H", lang.token_table, lang.word_table))
    other = make_symbol_table([("<eps>", 0), ("x", 1), ("y", 2)])
    with pytest.raises(ValueError, match="different tokens.txt"):
        load_graph(tmp_path / "H.pt", token_table=other)
    with pytest.raises(ValueError, match="holds a H graph, expected HLG"):
        load_graph(tmp_path / "H.pt", kind="HLG")
    with pytest.raises(ValueError, match="does not exist"):
        load_graph(tmp_path / "nope.pt")
    torch.save({"foo": 1}, tmp_path / "bad.pt")
    with pytest.raises(ValueError, match="expected a dict with 'arcs'"):
        load_graph(tmp_path / "bad.pt")


def test_ctc_topo(device):
    H = build_ctc_topo(3, device=device)
    assert H.device == device and int(H.labels.max()) == 3
    Hm = build_ctc_topo(3, modified=True, device=device)
    assert Hm.num_arcs < H.num_arcs
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="max_token"):
            build_ctc_topo(bad)


def test_stale_labels_version_after_remove_epsilon_is_refreshed():
    fsa = k2.Fsa.from_str(
        "0 1 0 0 0.5\n0 1 2 2 0.2\n1 2 3 3 0.1\n1 3 -1 -1 0\n2 3 -1 -1 0\n3", acceptor=False
    )
    fsa.labels[fsa.labels == 2] = 1  # an in-place edit, as icefall's recipes do
    fsa.labels_version = fsa.labels._version  # ... acknowledged
    out = k2.remove_epsilon(fsa)
    # k2 1.23.4 copies the input's labels_version onto a fresh labels tensor (k2 1.24.4 with
    # torch 2.11 leaves them equal):
    if out.labels_version != out.labels._version:
        with pytest.raises(RuntimeError, match="inappropriately"):
            _ = k2.arc_sort(out).properties
    out = refresh_labels_version(k2.remove_epsilon(fsa))
    assert out.labels_version == out.labels._version
    assert k2.arc_sort(out).properties is not None


def test_compile_hlg_with_stale_label_versions_in_inputs(tiny_lang):
    """Inputs edited in place (and acknowledged) must still compile."""
    lang, arpa = tiny_lang
    G = build_G(arpa, lang.word_table)
    G.labels[G.labels == -5] = 0  # no-op edit that bumps the version
    G.labels_version = G.labels._version
    L = build_L(lang.lexicon_disambig, lang.token_table, lang.word_table,
                disambig_self_loops=True)
    L.labels[L.labels == -5] = 0
    L.labels_version = L.labels._version
    HLG = compile_HLG(build_ctc_topo(lang.max_token_id), L, G,
                      lang.first_token_disambig_id, lang.first_word_disambig_id)
    assert HLG.properties is not None and HLG.num_arcs > 0


def _fst_lines(fst) -> list[list[str]]:
    return [line.split() for line in fst.to_str(show_weight_one=True).splitlines()]


def test_kaldi_decoder_fst_conventions():
    """Labels shift by one (blank 0 -> 1), the arcs added for extra words are epsilon, the
    best of a state's final arcs gives its final weight, and the input is left alone."""
    fsa = k2.Fsa.from_str("0 1 0 5 0.5\n0 2 -1 -1 0.3\n0 2 -1 -1 0.1\n1 2 -1 -1 0.0\n2",
                          acceptor=False)
    assert _fst_lines(k2_to_kaldi_decoder_fst(fsa)) == [
        ["0", "1", "1", "5", "-0.5"], ["0", "-0.3"], ["1", "-0"]]
    assert _fst_lines(k2_to_openfst(fsa))[0] == ["0", "1", "0", "5", "-0.5"]
    assert fsa.labels.tolist() == [0, -1, -1, -1]
    ragged = k2.Fsa.from_str("0 1 2 0 0.5\n1 2 -1 -1 0.0\n2", acceptor=False)
    ragged.aux_labels = k2.RaggedTensor([[5, 6], [-1]])
    assert _fst_lines(k2_to_kaldi_decoder_fst(ragged)) == [
        ["0", "1", "3", "5", "-0.5"], ["1", "2", "0", "6", "-0"], ["2", "-0"]]
    acceptor = k2.Fsa.from_str("0 1 0 0.5\n1 2 -1 0.0\n2", acceptor=True)
    assert _fst_lines(k2_to_kaldi_decoder_fst(acceptor)) == [["0", "1", "1", "0", "-0.5"],
                                                             ["1", "-0"]]
    with pytest.raises(ValueError, match="single FSA"):
        k2_to_kaldi_decoder_fst(k2.create_fsa_vec([fsa]))
