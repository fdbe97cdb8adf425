"""The whole LibriSpeech recipe on a tiny synthesized corpus: corpus -> prepare (all
stages) -> one training step -> export -> decode with a CTC, a transducer and an AED method.
Needs espeak-ng (Debian); skipped with the reason otherwise."""

from __future__ import annotations

import shutil

import pytest
from click.testing import CliRunner

from k2dec.model import load_joint_model
from k2dec.train.synth import CorpusConfig, Voice, available_voices, make_corpus
from tests.recipes.scripts import recipe

pytestmark = pytest.mark.skipif(shutil.which("espeak-ng") is None,
                                reason="espeak-ng is not installed (apt-get install espeak-ng)")

TEXT = """The old man walked to the market in the morning.
He bought bread and a small jar of honey.
The children played near the river all day long.
She said that the weather would change soon.
We should never trust a cat with a secret.
Every good story needs a beginning and an end.
The train was late again this evening.
A small boat sailed on the quiet river.
The market was full of bread and honey.
"""




def _run(cmd, args):
    r = CliRunner().invoke(cmd, [str(a) for a in args])
    assert r.exit_code == 0, (r.output, r.exception)
    return r


def test_recipe_end_to_end(tmp_path):
    voices = available_voices([Voice(201, "espeak-ng", "en-us", 1.0),
                               Voice(212, "espeak-ng", "en-gb", 0.9)])
    if len(voices) < 2:
        pytest.skip(f"espeak-ng voices en-us / en-gb not available (found {voices})")
    text_dir = tmp_path / "text"
    text_dir.mkdir()
    (text_dir / "stories").write_text(TEXT)
    corpus = tmp_path / "corpus"
    make_corpus(corpus, CorpusConfig(seed=0, num_train=5, num_dev=1, num_test=2,
                                     num_test_other=1, held_out=("espeak-ng:en-gb@0.9",)),
                text_dirs=[text_dir], progress=False, voices=voices)
    data = tmp_path / "data"
    _run(recipe("prepare"), ["--corpus-dir", corpus, "--data-dir", data, "--vocab-size", 40])
    lang = data / "lang_bpe_40"
    for f in ("HLG.pt", "LG.pt", "G_4_gram.pt", "bpe.model", "tokens.txt"):
        assert (lang / f).is_file(), f
    exp = tmp_path / "exp"
    _run(recipe("train"), ["--data-dir", data, "--lang-dir", lang, "--exp-dir", exp,
                            "--num-epochs", 1, "--max-steps", 1, "--max-duration", 30,
                            "--warmup-steps", 1, "--threads", 1, "--no-spec-augment"])
    assert (exp / "checkpoint-1.pt").is_file()
    # one step ends epoch 0 early, so export the step checkpoint as "epoch 1"
    shutil.copy(exp / "checkpoint-1.pt", exp / "epoch-1.pt")
    _run(recipe("export"), ["--exp-dir", exp, "--epoch", 1, "--avg", 1,
                             "--out", exp / "model.pt"])
    # the model file records its training utterances' durations (the windows segmenter's length)
    assert load_joint_model(exp / "model.pt").utterance_seconds["count"] >= 1
    out = tmp_path / "decode"
    r = _run(recipe("decode"), ["--data-dir", data, "--lang-dir", lang, "--model",
                                 exp / "model.pt", "--out-dir", out, "--method", "1best",
                                 "--method", "greedy_search", "--method",
                                 "attention-beam-search", "--set", "beam_size=2",
                                 "--threads", 1])
    assert "| test-clean | 1best |" in r.output
    for method in ("1best", "greedy_search", "attention-beam-search"):
        for test_set in ("test-clean", "test-other"):
            assert (out / method / f"wer-summary-{test_set}.txt").is_file()
    assert (out / "RESULTS.md").is_file()
    # the neural LM stage, and decoding with it
    lm_exp = tmp_path / "rnn_lm"
    r = _run(recipe("train_lm"), ["--data-dir", data, "--lang-dir", lang, "--exp-dir", lm_exp,
                                   "--num-steps", 2, "--batch-size", 2, "--embedding-dim", 8,
                                   "--hidden-dim", 8, "--num-layers", 1, "--num-valid", 1,
                                   "--save-every-n", 1, "--avg", 2])
    assert "checkpoint-1.pt, checkpoint-2.pt" in r.output
    r = _run(recipe("decode"), ["--data-dir", data, "--lang-dir", lang, "--model",
                                 exp / "model.pt", "--out-dir", out, "--method", "rnn-lm",
                                 "--method", "multi-pass", "--rnn-lm", lm_exp / "rnn_lm.pt",
                                 "--test-set", "test-clean", "--set", "num_paths=5",
                                 "--threads", 1])
    assert "| test-clean | rnn-lm |" in r.output and "| test-clean | multi-pass |" in r.output
