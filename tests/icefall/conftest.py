"""Seeded transducers with icefall's module shapes (decoder: embedding + grouped Conv1d over
``context_size``; joiner: ``encoder_proj`` / ``decoder_proj`` / ``output_linear``), LMs, LODR
n-grams, hotwords and the CTC resources shared by the ``k2dec.icefall`` tests."""

from __future__ import annotations

import pytest

from k2dec.scorers import TokenNgramScorer
from k2dec.testing.transducer import random_batch, random_model
from tests.methods.conftest import setup  # noqa: F401 (the CTC resources)
from tests.nbest.conftest import tiny_hlg  # noqa: F401
from tests.scorers.helpers import seeded_lms

VOCAB = 6
#: padded batches: more than one utterance (one of length 1), and a single utterance
BATCHES = [[7, 5, 1, 6], [6]]


def model_and_batch(lens: list[int], seed: int, vocab: int = VOCAB):
    """A seeded transducer (``context_size`` 2) and a padded encoder output for ``lens``."""
    model = random_model(vocab_size=vocab, seed=seed)
    enc, enc_lens = random_batch(lens, seed=seed)
    return model, enc, enc_lens


@pytest.fixture(scope="module")
def lms(tmp_path_factory):
    """A k2dec RNN LM (float32, sharpened), LODR's token bigram (a TokenNgramScorer) and an
    attention decoder over the transducer's ``VOCAB`` tokens."""
    lm, arpa, decoder = seeded_lms(VOCAB, tmp_path_factory.mktemp("lodr"))
    return lm, TokenNgramScorer.from_arpa(arpa, VOCAB), decoder


__all__ = ["BATCHES", "VOCAB", "model_and_batch", "setup", "tiny_hlg"]
