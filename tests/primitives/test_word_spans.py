"""Token and word frame spans (k2dec.primitives.best_paths.ctc_token_spans, word_spans) against
per-utterance Python loops, and the BPE word-start mask."""

from __future__ import annotations

import k2
import numpy as np
import pytest
import torch

from k2dec.lang import bpe_word_start_mask, make_symbol_table
from k2dec.primitives.best_paths import ctc_token_spans, word_minimum, word_spans
from tests.reference.word_spans import ref_ctc_spans, ref_word_spans


def test_ctc_token_spans_and_word_spans_random(device):
    rng = np.random.default_rng(0)
    starts = torch.tensor([False, True, True, False, False, True])
    for _ in range(20):
        rows = [list(rng.integers(0, 6, size=int(rng.integers(0, 12)))) for _ in range(
            int(rng.integers(1, 5)))]
        labels = k2.RaggedTensor([[int(x) for x in r] for r in rows], dtype=torch.int32,
                                 device=device)
        tokens, begin, end = ctc_token_spans(labels)
        for i, r in enumerate(rows):
            want = ref_ctc_spans([int(x) for x in r])
            got = list(zip(tokens.tolist()[i], begin.tolist()[i], end.tolist()[i]))
            assert got == want
        wb, we, num = word_spans(tokens, begin, end, starts.to(device))
        for i in range(len(rows)):
            want = ref_word_spans(tokens.tolist()[i], begin.tolist()[i], end.tolist()[i],
                                  starts.tolist())
            assert [list(x) for x in zip(wb.tolist()[i], we.tolist()[i])] == want
            assert int(num[i]) == len(want)
        conf = k2.RaggedTensor(tokens.shape, torch.rand(tokens.values.numel(), device=device))
        mins = word_minimum(tokens, conf, starts.to(device))
        for i in range(len(rows)):
            groups: list[list[float]] = []
            for tok, c in zip(tokens.tolist()[i], conf.tolist()[i]):
                if starts[tok] or not groups:
                    groups.append([])
                groups[-1].append(c)
            assert mins.tolist()[i] == [min(g) for g in groups]


def test_ctc_token_spans_with_frames():
    labels = k2.RaggedTensor([[0, 3, 3, 0, 3], [4, 4]], dtype=torch.int32)
    frames = k2.RaggedTensor([[2, 3, 4, 5, 6], [0, 1]], dtype=torch.int32)
    tokens, begin, end = ctc_token_spans(labels, frames)
    assert tokens.tolist() == [[3, 3], [4]]
    assert begin.tolist() == [[3, 6], [0]] and end.tolist() == [[5, 7], [2]]


def test_word_spans_bad_ids():
    tokens = k2.RaggedTensor([[7]], dtype=torch.int32)
    with pytest.raises(ValueError, match="token ids"):
        word_spans(tokens, tokens, tokens, torch.ones(3, dtype=torch.bool))


def test_bpe_word_start_mask():
    table = make_symbol_table([("<blk>", 0), ("<sos/eos>", 1), ("<unk>", 2), ("S", 3),
                               ("\u2581THE", 4), ("\u2581", 5)])
    assert bpe_word_start_mask(table).tolist() == [False, False, True, False, True, True]
    with pytest.raises(TypeError, match="SymbolTable"):
        bpe_word_start_mask({0: "<blk>"})
