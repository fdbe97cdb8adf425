"""``k2dec.icefall``'s transducer searches with LMs against k2dec's registered methods (with
:func:`k2dec.methods.icefall_compatible`), with k2dec's LMs and with icefall-shaped ones
(``tests/icefall/icefall_shaped.py``) computing the same numbers."""

from __future__ import annotations

import math
import random

import k2
import pytest
import torch

import k2dec.icefall as ice
from k2dec.graph import build_rescoring_G
from k2dec.graph.ngram import train_arpa
from k2dec.lang import TokenWords
from k2dec.methods import Resources, TransducerInputs, get_method, icefall_compatible
from k2dec.methods.parts import FusionConfig, RescorePart
from k2dec.methods.transducer import (
    FastBeamSearchNbestRescoringConfig,
    FastBeamSearchNbestRnnRescoringConfig,
)
from k2dec.methods.transducer_beam_search import (
    LmRescoreConfig,
    LmRescoreLodrConfig,
    LmShallowFusionConfig,
    LodrConfig,
)
from k2dec.nbest import NbestConfig
from k2dec.scorers import ContextGraph
from k2dec.testing.lm import make_lm
from k2dec.transducer import FastBeamSearchConfig, ModifiedBeamSearchConfig
from tests.icefall import icefall_shaped
from tests.icefall.conftest import BATCHES, VOCAB, model_and_batch

SEEDS = [0, 1]
FBS = dict(beam=4.0, max_states=32, max_contexts=8)


def _method(name, model, enc, lens, cfg, res):
    return get_method(name)(TransducerInputs(model, enc, lens), res, icefall_compatible(name, cfg))


@pytest.mark.parametrize("lens", BATCHES)
@pytest.mark.parametrize("seed", SEEDS)
def test_shallow_fusion_is_the_method_with_k2dec_or_icefall_lms(lms, lens, seed):
    lm, _, _ = lms
    model, enc, enc_lens = model_and_batch(lens, seed)
    got = ice.modified_beam_search_lm_shallow_fusion(model, enc, enc_lens,
                                                      ice.LmScorer(lm, 0.5), beam=3)
    [want] = _method("modified_beam_search_lm_shallow_fusion", model, enc, enc_lens,
                     LmShallowFusionConfig(search=ModifiedBeamSearchConfig(beam_size=3),
                                           fusion=FusionConfig(lm_scale=0.5)),
                     Resources(lms={"rnn_lm": lm}))
    assert got == want.tokens
    shaped = icefall_shaped.LmScorer(lm, 0.5)  # score_token, one token a call
    assert ice.modified_beam_search_lm_shallow_fusion(model, enc, enc_lens, shaped,
                                                      beam=3) == got
    assert got != ice.modified_beam_search(model, enc, enc_lens, beam=3)


def test_shallow_fusion_with_an_icefall_shaped_transformer_lm():
    lm = make_lm("transformer", torch.device("cpu"), dtype=torch.float32)
    model, enc, enc_lens = model_and_batch(BATCHES[0], 2, vocab=lm.vocab_size)
    want = ice.modified_beam_search_lm_shallow_fusion(model, enc, enc_lens,
                                                       ice.LmScorer(lm, 0.7))
    shaped = icefall_shaped.TransformerLmScorer(lm, 0.7)  # whole prefixes, no state
    assert ice.modified_beam_search_lm_shallow_fusion(model, enc, enc_lens, shaped) == want


@pytest.mark.parametrize("lens", BATCHES)
@pytest.mark.parametrize("seed", SEEDS)
def test_lodr_is_the_method(lms, lens, seed):
    lm, lodr, _ = lms
    model, enc, enc_lens = model_and_batch(lens, seed)
    phrases = (((1, 2), None), ((3,), 1.5))
    got = ice.modified_beam_search_LODR(model, enc, enc_lens, lodr, -0.3, ice.LmScorer(lm, 0.4),
                                        context_graph=ContextGraph(phrases, 2.0))
    [want] = _method("modified_beam_search_LODR", model, enc, enc_lens,
                     LodrConfig(fusion=FusionConfig(lm_scale=0.4, lodr_scale=-0.3)),
                     Resources(lms={"rnn_lm": lm}, lodr=lodr, hotwords=phrases))
    assert got == want.tokens


@pytest.mark.parametrize("lens", BATCHES)
def test_lm_rescore_is_the_method(lms, lens):
    lm, _, _ = lms
    model, enc, enc_lens = model_and_batch(lens, 4)
    got = ice.modified_beam_search_lm_rescore(model, enc, enc_lens, ice.LmScorer(lm),
                                              [0.1, 0.5, 2.0])
    out = _method("modified_beam_search_lm_rescore", model, enc, enc_lens,
                  LmRescoreConfig(rescore=RescorePart(lm_scale=0.1, sweep=True,
                                                      lm_scales=(0.1, 0.5, 2.0))),
                  Resources(lms={"rnn_lm": lm}))
    assert list(got) == ["nnlm_scale_0.10", "nnlm_scale_0.50", "nnlm_scale_2.00"]
    assert got == {r.key: r.tokens for r in out}
    shaped = icefall_shaped.LmScorer(lm, 0.3)  # its .lm(x=, y=, lengths=) nll
    assert ice.modified_beam_search_lm_rescore(model, enc, enc_lens, shaped,
                                               [0.1, 0.5, 2.0]) == got


class _KenLm:
    """kenlm's ``score(sentence)`` (log10, with ``<s>`` and ``</s>``) of a token n-gram,
    the sentence being the pieces ``sp.id_to_piece`` gives (here the ids themselves)."""

    def __init__(self, scorer):
        self.scorer = scorer

    def score(self, sentence: str) -> float:
        from k2dec.methods.lists import HypothesisLists, scorer_scores

        ids = [int(p) for p in sentence.split()]
        lists = HypothesisLists.from_lists([[_Hyp(ids)]], torch.device("cpu"))
        return float(scorer_scores(self.scorer, lists)[0]) / math.log(10)


class _Hyp:
    def __init__(self, tokens):
        self.tokens, self.timestamps = tokens, []


class _Pieces:
    """The ``sp.id_to_piece`` / ``sp.decode`` of a BPE model whose piece ``t`` is word
    ``w{t}``."""

    @staticmethod
    def id_to_piece(ids):
        return [str(i) for i in ids]

    @staticmethod
    def decode(seqs):
        return [" ".join(f"w{t}" for t in seq) for seq in seqs]


def test_lm_rescore_lodr_is_the_method_with_k2dec_or_kenlm_ngrams(lms):
    lm, lodr, _ = lms
    model, enc, enc_lens = model_and_batch(BATCHES[0], 5)
    got = ice.modified_beam_search_lm_rescore_LODR(model, enc, enc_lens, ice.LmScorer(lm),
                                                   lodr, _Pieces(), [0.5, 1.0])
    scales = tuple(round(0.05 * i, 2) for i in range(1, 20))
    out = _method("modified_beam_search_lm_rescore_LODR", model, enc, enc_lens,
                  LmRescoreLodrConfig(rescore=RescorePart(  # LODR's weight added: < 0
                      lm_scale=0.5, lodr_scale=-scales[0], sweep=True, lm_scales=(0.5, 1.0),
                      lodr_scales=tuple(-s for s in scales))),
                  Resources(lms={"rnn_lm": lm}, lodr=lodr))
    assert len(got) == 38 and "nnlm_scale_0.50_lodr_scale_0.95" in got
    assert got == {r.key: r.tokens for r in out}
    assert ice.modified_beam_search_lm_rescore_LODR(model, enc, enc_lens, ice.LmScorer(lm),
                                                    _KenLm(lodr), _Pieces(), [0.5, 1.0]) == got


@pytest.fixture(scope="module")
def words(tmp_path_factory):
    """Word ``w{t}`` spelled by token ``t``: word table, rescoring G over a random bigram
    (with ``<UNK>``, so that the words of a real BPE model's pieces get finite scores), the
    token -> word map the registered methods use."""
    d = tmp_path_factory.mktemp("words")
    rng = random.Random(3)
    (d / "text.txt").write_text("\n".join(" ".join(f"w{rng.randrange(0, VOCAB)}" for _ in
                                                   range(rng.randint(1, 6)))
                                          for _ in range(80)).replace("w0", "<UNK>") + "\n")
    arpa = train_arpa(d / "text.txt", d / "g.arpa", order=2)
    table = "<eps> 0\n" + "".join(f"w{t} {t}\n" for t in range(1, VOCAB)) + "".join(
        f"{w} {VOCAB + i}\n" for i, w in enumerate(["<UNK>", "#0", "<s>", "</s>"]))
    word_table = k2.SymbolTable.from_str(table)
    G = build_rescoring_G(arpa, word_table)
    token_words = TokenWords({(t,): t for t in range(1, VOCAB)},
                             torch.ones(VOCAB, dtype=torch.bool), VOCAB)
    return word_table, G, token_words


def _rescoring_cfg(cls, **scales):
    return cls(search=FastBeamSearchConfig(**FBS), nbest=NbestConfig(num_paths=20),
               rescore=RescorePart(**scales))


@pytest.mark.parametrize("lens", BATCHES)
@pytest.mark.parametrize("seed", SEEDS)
def test_fast_beam_search_with_nbest_rescoring_is_the_method(words, lens, seed):
    word_table, G, token_words = words
    model, enc, enc_lens = model_and_batch(lens, seed)
    graph = k2.trivial_graph(VOCAB - 1)
    got = ice.fast_beam_search_with_nbest_rescoring(model, graph, enc, enc_lens,
                                                     ngram_lm_scale_list=[0.0, 0.5, 3.0],
                                                     num_paths=20, G=G, sp=_Pieces(),
                                                     word_table=word_table, **FBS)
    out = _method("fast_beam_search_with_nbest_rescoring", model, enc, enc_lens,
                  _rescoring_cfg(FastBeamSearchNbestRescoringConfig,
                                 ngram_lm_scale=0.0, sweep=True,
                                 ngram_lm_scales=(0.0, 0.5, 3.0)),
                  Resources(graphs={"G": G}, token_words=token_words))
    assert got == {r.key: r.tokens for r in out}


def test_fast_beam_search_with_nbest_rnn_rescoring_is_the_method(words, lms):
    word_table, G, token_words = words
    lm, _, _ = lms
    model, enc, enc_lens = model_and_batch(BATCHES[0], 6)
    graph = k2.trivial_graph(VOCAB - 1)
    # the LM's own sos/eos, as the method scores (icefall's default looks them up in sp)
    kw = dict(ngram_lm_scale_list=[0.5], num_paths=20, G=G, sp=_Pieces(),
              word_table=word_table, rnn_lm_scale_list=[0.3, 1.0], sos_id=lm.sos_id,
              eos_id=lm.eos_id, **FBS)
    got = ice.fast_beam_search_with_nbest_rnn_rescoring(model, graph, enc, enc_lens,
                                                         rnn_lm_model=lm, **kw)
    out = _method("fast_beam_search_with_nbest_rnn_rescoring", model, enc, enc_lens,
                  _rescoring_cfg(FastBeamSearchNbestRnnRescoringConfig, ngram_lm_scale=0.5,
                                 lm_scale=0.3, sweep=True, ngram_lm_scales=(0.5,),
                                 lm_scales=(0.3, 1.0)),
                  Resources(graphs={"G": G}, token_words=token_words, lms={"rnn_lm": lm}))
    assert list(got) == ["ngram_lm_scale_0.5_rnn_lm_scale_0.3",
                         "ngram_lm_scale_0.5_rnn_lm_scale_1.0"]
    assert got == {r.key: r.tokens for r in out}
    shaped = icefall_shaped.RnnLmModel(lm)  # forward(x, y, lengths) -> nll
    assert ice.fast_beam_search_with_nbest_rnn_rescoring(model, graph, enc, enc_lens,
                                                          rnn_lm_model=shaped, **kw) == got


class _RecordingRnnLm(icefall_shaped.RnnLmModel):
    """An icefall ``RnnLmModel`` that records the (sos, eos) pairs it is given."""

    def __init__(self, lm) -> None:
        super().__init__(lm)
        self.ids: set[tuple[int, int]] = set()

    def forward(self, x, y, lengths):
        eos = y.gather(1, (lengths - 1).unsqueeze(1)).squeeze(1)
        self.ids.update(zip(x[:, 0].tolist(), eos.tolist()))
        return super().forward(x, y, lengths)


def test_rnn_rescoring_takes_sos_and_eos_as_icefall(words, lms):
    """With the shipped BPE model: by default icefall's ``sp.piece_to_id("sos_id")`` /
    ``("eos_id")`` (``<unk>``, 2: the model has no such pieces), for icefall's and k2dec's
    LMs alike; the keywords override them; bad ids are refused."""
    spm = pytest.importorskip("sentencepiece")
    from k2dec.demo import ASSETS

    if not (ASSETS / "lang" / "bpe.model").is_file():
        pytest.skip("no shipped BPE model in this checkout")
    sp = spm.SentencePieceProcessor(model_file=str(ASSETS / "lang" / "bpe.model"))
    unk = sp.piece_to_id("<unk>")
    assert sp.piece_to_id("sos_id") == sp.piece_to_id("eos_id") == unk == 2
    word_table, G, _ = words
    lm, _, _ = lms
    model, enc, enc_lens = model_and_batch(BATCHES[0], 6)
    graph = k2.trivial_graph(VOCAB - 1)
    kw = dict(ngram_lm_scale_list=[0.0], num_paths=20, G=G, sp=sp, word_table=word_table,
              rnn_lm_scale_list=[0.3, 1.0], **FBS)
    rescore = ice.fast_beam_search_with_nbest_rnn_rescoring
    results = {}
    for ids, want in (({}, (unk, unk)), (dict(sos_id=1, eos_id=1), (1, 1)),
                      (dict(sos_id=3, eos_id=4), (3, 4))):
        recording = _RecordingRnnLm(lm)
        results[want] = rescore(model, graph, enc, enc_lens, rnn_lm_model=recording, **kw,
                                **ids)
        assert recording.ids == {want}
        assert rescore(model, graph, enc, enc_lens, rnn_lm_model=lm, **kw, **ids) == \
            results[want]  # a k2dec LM scores with the same ids
    assert (lm.sos_id, lm.eos_id) == (1, 1)  # the caller's LM is unchanged
    assert results[(unk, unk)] != results[(1, 1)]  # the ids matter here
    for bad in (dict(sos_id=-1), dict(eos_id=VOCAB), dict(sos_id=True)):
        with pytest.raises(ValueError, match="sos_id|eos_id"):
            rescore(model, graph, enc, enc_lens, rnn_lm_model=lm, **kw, **bad)
    with pytest.raises(TypeError, match="piece_to_id"):  # no lookup without a BPE model
        rescore(model, graph, enc, enc_lens, rnn_lm_model=lm, **dict(kw, sp=_Pieces()),
                sos_id=1)


def test_lm_arguments_are_checked(lms):
    lm, _, _ = lms
    model, enc, enc_lens = model_and_batch([3], 0)
    with pytest.raises(TypeError, match="LmScorer"):
        ice.modified_beam_search_lm_shallow_fusion(model, enc, enc_lens, lm)  # no lm_scale
    with pytest.raises(TypeError, match="NgramLm"):
        ice.modified_beam_search_LODR(model, enc, enc_lens, object(), -0.2, ice.LmScorer(lm))
