"""Fixtures shared with the n-best tests, the CTC methods' resources, the scorer methods'
resources, the transducer n-best rescoring setup and the tiny LG."""

import random
from dataclasses import replace
from typing import Any

import pytest
import torch

from k2dec.aed import TransformerDecoder
from k2dec.graph import build_ctc_topo, build_rescoring_G, train_arpa
from k2dec.lang import TokenWords, write_lang_dir
from k2dec.lm import RnnLM, RnnLmConfig
from k2dec.methods import Resources, config_field_path, get_method
from k2dec.scorers import TokenNgramScorer
from k2dec.testing.lang import TINY_ARPA, tiny_lg
from tests.methods import piece_lang, scorer_inputs
from tests.nbest.conftest import tiny_hlg  # noqa: F401
from tests.reference.ngram import ArpaScorer
from tests.scorers.helpers import seeded_lms


@pytest.fixture(scope="module")
def setup(tiny_hlg, tmp_path_factory):  # noqa: F811
    """The tiny HLG's lang dir and resources: HLG, H, a rescoring G, an attention decoder,
    an RNN LM."""
    lang, HLG, H = tiny_hlg
    d = tmp_path_factory.mktemp("ctc_methods")
    (d / "lm.arpa").write_text(TINY_ARPA)
    G = build_rescoring_G(d / "lm.arpa", lang.word_table)
    torch.manual_seed(0)
    decoder = TransformerDecoder(vocab_size=6, memory_dim=8, d_model=16, nhead=2,
                                 num_layers=1, dim_feedforward=16, dropout=0.0).eval()
    lm = RnnLM(RnnLmConfig(vocab_size=6, embedding_dim=8, hidden_dim=8, num_layers=1)).eval()
    res = Resources(graphs={"HLG": HLG, "H": H, "G": G}, lms={"rnn_lm": lm},
                    attention_decoder=decoder)
    return lang, res


def method_config(name: str, **settings: Any) -> Any:
    """The method's default config with each of ``settings`` that it has (a field of its own,
    a part, or the one field of that name in a part, as ``--set`` finds it); the others are
    left out
    (each method's config has only the fields it reads)."""
    cfg = get_method(name).default_config()
    for key, value in settings.items():
        try:  # a whole part (nbest=NbestConfig(...)) or a settings key
            path = [key] if hasattr(cfg, key) else config_field_path(cfg, key)
        except ValueError:  # a key of version 0.1 here: not one of this method's
            path = None
        if path is not None:
            cfg = _replaced(cfg, path, value)
    return cfg


def _replaced(cfg: Any, path: list[str], value: Any) -> Any:
    if len(path) == 1:
        return replace(cfg, **{path[0]: value})
    return replace(cfg, **{path[0]: _replaced(getattr(cfg, path[0]), path[1:], value)})


@pytest.fixture(scope="module")
def resources(tmp_path_factory):
    """The scorer methods' resources over :data:`scorer_inputs.VOCAB` tokens (an RNN LM, an
    attention decoder, H, hotwords, LODR's token bigram) and the bigram's ARPA path."""
    V = scorer_inputs.VOCAB
    lm, arpa, decoder = seeded_lms(V, tmp_path_factory.mktemp("lodr"))
    return Resources(graphs={"H": build_ctc_topo(V - 1)}, lms={"rnn_lm": lm},
                     attention_decoder=decoder, hotwords=(((1, 2), None), ((3,), 1.0)),
                     lodr=TokenNgramScorer.from_arpa(arpa, V)), arpa


@pytest.fixture(scope="module")
def fbs_setup(tmp_path_factory):
    """The piece lang (:mod:`tests.methods.piece_lang`), the reference scorer of a bigram
    trained on random word sequences, and resources: its rescoring G, an RNN LM (sharpened
    weights), the lang's TokenWords."""
    d = tmp_path_factory.mktemp("nbest_rescoring")
    lang = write_lang_dir(d / "lang", piece_lang.LEXICON, tokens=piece_lang.PIECES, blank="<blk>")
    rng = random.Random(0)
    words = [w for w, _ in piece_lang.LEXICON]
    (d / "text.txt").write_text("\n".join(" ".join(rng.choice(words) for _ in range(
        rng.randint(1, 5))) for _ in range(80)) + "\n")
    arpa = train_arpa(d / "text.txt", d / "lm.arpa", order=2)
    G = build_rescoring_G(arpa, lang.word_table)
    torch.manual_seed(0)
    lm = RnnLM(RnnLmConfig(vocab_size=piece_lang.VOCAB, embedding_dim=8, hidden_dim=8,
                           num_layers=1))
    with torch.no_grad():
        for p in lm.parameters():
            p.mul_(3.0)
    res = Resources(graphs={"G": G}, lms={"rnn_lm": lm.eval()},
                    token_words=TokenWords.from_lang_dir(lang))
    return lang, ArpaScorer(arpa), res


@pytest.fixture(scope="module")
def tiny_LG(tmp_path_factory):
    """The tiny transducer lang dir and its LG."""
    return tiny_lg(tmp_path_factory.mktemp("lg"))  # tokens a b c d = 1..4 (vocab 5)


@pytest.fixture()
def attention_call_sizes(monkeypatch):
    """``spy(decoder)``: patches ``decoder.score_sequences`` to record, per call, how many
    hypotheses it scores; returns that list (filled as the decoder is called)."""
    def spy_on(dec: Any) -> list[int]:
        sizes: list[int] = []
        real = dec.score_sequences

        def spy(memory, memory_lens, tokens, utt):
            sizes.append(int(utt.numel()))
            return real(memory, memory_lens, tokens, utt)

        monkeypatch.setattr(dec, "score_sequences", spy)
        return sizes
    return spy_on
