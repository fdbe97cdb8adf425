"""``k2dec.icefall``'s lattice functions (icefall/decode.py) against k2dec's registered CTC
methods (with :func:`k2dec.methods.icefall_compatible`) on random posteriors through the
tiny HLG, at batch sizes 1 and 3."""

from __future__ import annotations

import k2
import pytest
import torch

import k2dec.icefall as ice
from k2dec.lattice import LatticeConfig
from k2dec.lattice import get_lattice as k2dec_get_lattice
from k2dec.methods import CtcInputs, Resources, get_method, icefall_compatible
from k2dec.nbest import DedupKey, Nbest, NbestConfig
from tests.icefall import icefall_shaped
from tests.methods.conftest import method_config

BEAMS = dict(search_beam=20.0, output_beam=8.0, min_active_states=30, max_active_states=10000)
NUM_PATHS = 20


def _inputs(setup, seed: int, n: int) -> CtcInputs:
    lang, _ = setup
    g = torch.Generator().manual_seed(seed)
    lengths = torch.tensor([7, 5, 6][:n])
    log_probs = (torch.randn(n, 7, lang.max_token_id + 1, generator=g) * 2).log_softmax(-1)
    memory = torch.randn(n, 7, 8, generator=g)
    return CtcInputs(log_probs, lengths, ref_words=[[1, 3], [5], [2, 4]][:n], memory=memory,
                     memory_lens=lengths)


def _segments(lengths: torch.Tensor) -> torch.Tensor:
    return torch.stack([torch.arange(len(lengths)), torch.zeros_like(lengths), lengths],
                       dim=1).to(torch.int32)


def _lattice(inp: CtcInputs, graph: k2.Fsa) -> k2.Fsa:
    return ice.get_lattice(inp.log_probs, graph, _segments(inp.log_probs_lens), **BEAMS)


def _cfg(method: str, **kw):
    """``method``'s own config at icefall's lattice beams, HLG as it is (and n-best sampling of
    ``NUM_PATHS`` paths where the method samples)."""
    nbest = NbestConfig(num_paths=NUM_PATHS, nbest_scale=kw.pop("nbest_scale", 0.5))
    return method_config(method, lattice=LatticeConfig(output_beam=8.0), scale=1.0,
                         nbest=nbest, **kw)


def _method(name, inp, res, cfg):
    return get_method(name)(inp, res, icefall_compatible(name, cfg))


def test_get_lattice_takes_supervision_segments(setup):
    lang, res = setup
    inp = _inputs(setup, 0, 3)
    # segment 1 starts at frame 2 of sequence 0; segment 2 ends one frame after sequence 2
    segs = torch.tensor([[2, 0, 6], [0, 2, 5], [2, 1, 7]], dtype=torch.int32)
    got = ice.get_lattice(inp.log_probs, res.graphs["HLG"], segs, subsampling_factor=2,
                          **BEAMS)
    frames = torch.nn.utils.rnn.pad_sequence(
        [inp.log_probs[2, :6], inp.log_probs[0, 2:7], inp.log_probs[2, 1:7]], batch_first=True)
    want = k2dec_get_lattice(frames, torch.tensor([6, 5, 6]), res.graphs["HLG"],
                             LatticeConfig(**BEAMS)).lattice
    kw = dict(use_double_scores=True, log_semiring=True)
    assert torch.equal(got.get_tot_scores(**kw), want.get_tot_scores(**kw))
    assert got.num_arcs == want.num_arcs
    with pytest.raises(ValueError, match="ends 1 frames after"):
        ice.get_lattice(inp.log_probs, res.graphs["HLG"], segs, **BEAMS)
    with pytest.raises(ValueError, match="supervision_segments"):
        ice.get_lattice(inp.log_probs, res.graphs["HLG"], segs[:, :2], **BEAMS)


@pytest.mark.parametrize("n", [1, 3])
@pytest.mark.parametrize("seed", [0, 1])
def test_one_best_and_nbest_decoding_are_the_methods(setup, n, seed):
    lang, res = setup
    inp = _inputs(setup, seed, n)
    lattice = _lattice(inp, res.graphs["HLG"])
    [one] = _method("1best", inp, res, _cfg("1best"))
    assert ice.get_texts(ice.one_best_decoding(lattice)) == one.words
    [nbest] = _method("nbest", inp, res, _cfg("nbest", nbest_scale=0.8))
    assert ice.get_texts(ice.nbest_decoding(lattice, NUM_PATHS, nbest_scale=0.8)) == nbest.words
    before = lattice.scores.clone()
    scaled = ice.one_best_decoding(lattice, lm_scale_list=[0.5, 1.0])
    assert list(scaled) == ["lm_scale_0.5", "lm_scale_1.0"]
    assert ice.get_texts(scaled["lm_scale_1.0"]) == one.words
    assert torch.equal(lattice.scores, before)  # the caller's lattice is not rescaled


@pytest.mark.parametrize("n", [1, 3])
def test_nbest_oracle_is_as_close_as_the_method(setup, n):
    lang, res = setup
    inp = _inputs(setup, 2, n)
    lattice = _lattice(inp, res.graphs["HLG"])
    texts = [" ".join(lang.word_table.get(w) for w in ref) for ref in inp.ref_words]
    got = ice.get_texts(ice.nbest_oracle(lattice, NUM_PATHS, texts, lang.word_table))
    [want] = _method("nbest-oracle", inp, res, _cfg("nbest-oracle"))
    from tests.reference.lattice_rescore import levenshtein

    for g, w, r in zip(got, want.words, inp.ref_words):
        assert levenshtein(g, r) == levenshtein(w, r)


@pytest.mark.parametrize("n", [1, 3])
@pytest.mark.parametrize("seed", [0, 3])
def test_rescore_with_n_best_list_is_nbest_rescoring(setup, n, seed):
    lang, res = setup
    inp = _inputs(setup, seed, n)
    lattice = _lattice(inp, res.graphs["HLG"])
    got = ice.rescore_with_n_best_list(lattice, res.graphs["G"], NUM_PATHS, [0.3, 1.3],
                                       nbest_scale=0.5)
    assert list(got) == ["lm_scale_0.3", "lm_scale_1.3"]
    for s in (0.3, 1.3):
        [want] = _method("nbest-rescoring", inp, res, _cfg("nbest-rescoring", ngram_lm_scale=s))
        assert ice.get_texts(got[f"lm_scale_{s}"]) == want.words


@pytest.mark.parametrize("n", [1, 3])
def test_rescore_with_whole_lattice_is_the_method(setup, n):
    lang, res = setup
    inp = _inputs(setup, 4, n)
    lattice = _lattice(inp, res.graphs["HLG"])
    got = ice.rescore_with_whole_lattice(lattice, res.graphs["G"], [0.6, 1.2])
    for s in (0.6, 1.2):
        cfg = _cfg("whole-lattice-rescoring", ngram_lm_scale=s)
        [want] = _method("whole-lattice-rescoring", inp, res, cfg)
        assert ice.get_texts(got[f"lm_scale_{s}"]) == want.words
    rescored = ice.rescore_with_whole_lattice(lattice, res.graphs["G"])
    assert isinstance(rescored, k2.Fsa) and rescored.shape[0] == n
    assert hasattr(lattice, "lm_scores")  # the caller's lattice keeps its LM scores


def _no_g(res: Resources) -> Resources:
    """The attention-decoder method takes its n-gram part from the lattice (as icefall) when
    Resources has no G."""
    return Resources(graphs={"HLG": res.graphs["HLG"]}, attention_decoder=res.attention_decoder)


@pytest.mark.parametrize("n", [1, 3])
def test_attention_decoder_rescorings_are_the_method(setup, n):
    lang, res = setup
    inp = _inputs(setup, 5, n)
    lattice = _lattice(inp, res.graphs["HLG"])
    decoder = res.attention_decoder
    mask = torch.arange(7).unsqueeze(0) >= inp.log_probs_lens.unsqueeze(1)
    memory = inp.memory.permute(1, 0, 2)  # icefall's (T, N, C)
    [want] = _method("attention-decoder", inp, _no_g(res),
                     _cfg("attention-decoder", ngram_lm_scale=0.7, attention_scale=1.2))
    key = "ngram_lm_scale_0.7_attention_scale_1.2"
    for model in (decoder, icefall_shaped.ConformerModel(decoder)):
        got = ice.rescore_with_attention_decoder(lattice, NUM_PATHS, model, memory, mask,
                                                 decoder.sos_id, decoder.eos_id, 0.5, 0.7, 1.2)
        assert list(got) == [key] and ice.get_texts(got[key]) == want.words
    got = ice.rescore_with_attention_decoder_with_ngram(
        lattice, NUM_PATHS, icefall_shaped.ZipformerAttentionDecoder(decoder), inp.memory,
        inp.log_probs_lens, 0.5, 0.7, 1.2)
    assert ice.get_texts(got[key]) == want.words
    grid = ice.rescore_with_attention_decoder_with_ngram(lattice, NUM_PATHS, decoder,
                                                         inp.memory, inp.log_probs_lens)
    assert len(grid) == len(ice.DEFAULT_LM_SCALE) ** 2  # icefall's grid when no scale given


def _no_ngram_reference(lattice, decoder, memory, lens, scale):
    """icefall's ranking of rescore_with_attention_decoder_no_ngram, one sampled alignment
    at a time: its float32 score along the path plus ``scale`` times the attention decoder's
    log-prob of its tokens; per utterance the tokens of the best (the last of equal ones)
    and the best total."""
    paths = k2.random_paths(lattice, num_paths=NUM_PATHS, use_double_scores=True).tolist()
    out = []
    for u, utt_paths in enumerate(paths):
        best = None
        for arcs in utt_paths:
            idx = torch.tensor(arcs, dtype=torch.int64)
            am = lattice.scores[idx].sum()
            tokens = [t for t in lattice.aux_labels[idx].tolist() if t > 0]
            seq = k2.RaggedTensor([tokens])
            att = decoder.score_sequences(memory[u:u + 1], lens[u:u + 1], seq,
                                          torch.zeros(1, dtype=torch.int64)).sum()
            total = float(am + scale * att.float())
            if best is None or total >= best[0] - 1e-5:
                best = (max(total, best[0]) if best else total, tokens)
        out.append(best)
    return out


@pytest.mark.parametrize("n", [1, 3])
@pytest.mark.parametrize("seed", [6, 8])
def test_attention_decoder_no_ngram_ranks_sampled_alignments_as_icefall(setup, n, seed):
    lang, res = setup
    inp = _inputs(setup, seed, n)
    lattice = _lattice(inp, res.graphs["H"])
    decoder = res.attention_decoder
    got = ice.rescore_with_attention_decoder_no_ngram(
        lattice, NUM_PATHS, icefall_shaped.ZipformerAttentionDecoder(decoder),
        inp.memory, inp.log_probs_lens, attention_scale=0.8)
    assert list(got) == ["attention_scale_0.8"]
    texts = ice.get_texts(got["attention_scale_0.8"])
    want = _no_ngram_reference(lattice, decoder, inp.memory, inp.log_probs_lens, 0.8)
    assert texts == [tokens for _, tokens in want]
    best = got["attention_scale_0.8"]
    assert best.shape[0] == n and best.aux_labels.dtype == torch.int32
    grid = ice.rescore_with_attention_decoder_no_ngram(lattice, NUM_PATHS, decoder,
                                                       inp.memory, inp.log_probs_lens)
    assert len(grid) == 28 and "attention_scale_9.0" in grid  # icefall's grid
    with pytest.raises(ValueError, match="through H"):
        ice.rescore_with_attention_decoder_no_ngram(_lattice(inp, res.graphs["HLG"]),
                                                    NUM_PATHS, decoder, inp.memory,
                                                    inp.log_probs_lens)


def test_rescore_with_rnn_lm_adds_the_lm_to_the_attention_rescoring(setup):
    lang, res = setup
    inp = _inputs(setup, 7, 3)
    lattice = _lattice(inp, res.graphs["HLG"])
    decoder, lm = res.attention_decoder, res.lms["rnn_lm"]
    mask = torch.arange(7).unsqueeze(0) >= inp.log_probs_lens.unsqueeze(1)
    args = (lattice, NUM_PATHS, icefall_shaped.RnnLmModel(lm), decoder,
            inp.memory.permute(1, 0, 2), mask, decoder.sos_id, decoder.eos_id, 0)
    got = ice.rescore_with_rnn_lm(*args, 0.5, 0.7, 1.2, 0.9)
    key = "ngram_lm_scale_0.7_attention_scale_1.2_rnn_lm_scale_0.9"
    assert list(got) == [key]
    # the same n-best, scored here from its parts
    cfg = icefall_compatible("nbest", _cfg("nbest")).nbest
    nbest = Nbest.from_lattice(lattice, NUM_PATHS, 0.5, DedupKey.WORDS, sampler=cfg.sampler)
    nbest = nbest.intersect()
    tokens = nbest.token_seqs()
    att = decoder.score_sequences(inp.memory, inp.log_probs_lens, tokens,
                                  nbest.path_to_utt().long()).sum().double()
    rnn = lm.score_sequences(tokens).totals.double()
    total = (nbest.am_scores().values + 0.7 * nbest.lm_scores().values + 1.2 * att
             + 0.9 * rnn)
    best = k2.RaggedTensor(nbest.shape, total).argmax()
    assert ice.get_texts(got[key]) == [nbest.key_seqs.tolist()[b] for b in best.tolist()]
    assert len(ice.rescore_with_rnn_lm(*args, 0.5, 0.7, 1.2, 0)) == 24  # 0: icefall's grid


#: the words ``a b`` (a blank in place of a third word) and ``a b d``: for the reference
#: ``a b c`` one deletion or one substitution
TIE_LATTICE = """0 1 1 1 0.0
1 2 2 2 0.0
2 3 4 4 -0.1
2 3 0 0 0.0
3 4 -1 -1 0.0
4"""
TIE_WORDS = "<eps> 0\na 1\nb 2\nc 3\nd 4\n<UNK> 5"


@pytest.mark.parametrize("seed", [0, 1])
def test_nbest_oracle_breaks_ties_by_icefalls_float32_scores(seed):
    """icefall's float32 alignment scores put a deletion (-0.99999994) above a substitution
    (-1.0); exact distances tie them (k2dec's nbest-oracle takes the last, ``a b d``). With an
    utterance without paths, one with a reference word outside the table, and batch 1."""
    from tests.reference.icefall_nbest import oracle_icefall

    words = k2.SymbolTable.from_str(TIE_WORDS)
    tie = k2.Fsa.from_str(TIE_LATTICE, acceptor=False)
    no_path = k2.Fsa.from_str("0 1 1 1 0.0\n2", acceptor=False)
    for fsas, texts in (([tie], ["a b c"]),
                        ([tie, no_path, tie, tie], ["a b c", "a", "a b zz", ""])):
        lattice = k2.create_fsa_vec(fsas)
        refs = [[words[w] if w in words else words["<UNK>"] for w in t.split()] for t in texts]
        torch.manual_seed(seed)
        got = ice.get_texts(ice.nbest_oracle(lattice, NUM_PATHS, texts, words))
        torch.manual_seed(seed)
        assert got == oracle_icefall(lattice, NUM_PATHS, refs)
        assert got[0] == [1, 2]


def test_nbest_oracle_scores_long_hypotheses_as_icefall():
    """Past 1000 symbols k2's alignment may count more errors than the edit distance: here
    the words ``hyp`` (distance 1020 to the reference, k2's alignment counts 1021) and no words
    (1021 deletions, float32 total above -1021): icefall picks the empty path."""
    from tests.reference.icefall_nbest import oracle_icefall

    n = 510
    ref, hyp = [1] * n + [8] + [2] * n, [8] + [2] * n + [3] * n
    lines = ["0 1 0 0 0.0"] + [f"{i} {i + 1} {w} {w} 0.0" for i, w in enumerate(hyp, 1)]
    final = len(hyp) + 1
    lines += [f"{final} {final + 1} -1 -1 0.0", f"0 {final} 0 0 0.0", f"{final + 1}"]
    lattice = k2.create_fsa_vec([k2.Fsa.from_str("\n".join(sorted(
        lines, key=lambda line: int(line.split()[0]))), acceptor=False)])
    words = k2.SymbolTable.from_str("\n".join(f"w{i} {i}" for i in range(10)))
    text = " ".join(f"w{w}" for w in ref)
    torch.manual_seed(0)
    got = ice.get_texts(ice.nbest_oracle(lattice, NUM_PATHS, [text], words))
    torch.manual_seed(0)
    assert got == oracle_icefall(lattice, NUM_PATHS, [ref]) == [[]]
