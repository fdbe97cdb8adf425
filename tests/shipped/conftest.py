"""What the shipped-model tests share."""

from __future__ import annotations

import random

import torch
from lhotse import CutSet

from k2dec.demo import ASSETS
from k2dec.job import load_assets


def encoded_test_clean(shipped_demo, seed: int, count: int):
    """``(assets, outputs)``: the shipped model's assets with its RNN LM and the model's
    outputs (``EncoderOutput``, batch of one) on ``count`` test-clean utterances drawn with
    ``seed`` (from the ``shipped_demo`` fixture's cuts, sorted by id)."""
    _, lang, graphs, cut_paths = shipped_demo
    assets = load_assets(ASSETS / "model.pt", lang, graph_dir=graphs,
                         lm_paths={"rnn_lm": ASSETS / "lm" / "rnn_lm.pt"})
    cuts = sorted(CutSet.from_file(cut_paths["test-clean"]), key=lambda c: c.id)
    outs = []
    with torch.no_grad():
        for cut in random.Random(seed).sample(cuts, count):
            feats = torch.from_numpy(cut.load_features())
            outs.append(assets.model.encode(feats[None], torch.tensor([feats.shape[0]])))
    return assets, outs
