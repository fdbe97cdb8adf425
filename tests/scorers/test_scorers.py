"""Every scorer against its per-hypothesis reference (tests/reference/scorers.py) on random
walks of rows: scores of every token, final scores, advance with and without emission,
select and cat."""

from __future__ import annotations

import random

import pytest
import torch

from k2dec.scorers import (
    ContextGraph,
    CtcScorer,
    HotwordScorer,
    NeuralLmScorer,
    TokenNgramScorer,
    read_hotwords,
)
from k2dec.testing.lm import VOCAB, make_lm
from tests.reference.scorers import RefCtc, RefNeuralLm, RefNgram
from tests.scorers.helpers import (
    SCHEMES,
    PerUtteranceRef,
    check_against_reference,
    random_phrases,
    token_arpa,
)


@pytest.mark.parametrize("name", ["rnn", "transformer", "transformer-tied"])
@pytest.mark.parametrize("score_eos", [True, False])
def test_neural_lm_scorer(device, name, score_eos):
    lm = make_lm(name, device, seed=3)
    scorer = NeuralLmScorer(lm, score_eos=score_eos)
    check_against_reference(scorer, RefNeuralLm(lm, score_eos), [0, 1, 0], VOCAB, steps=7,
                            seed=len(name) + score_eos, tol=1e-6)


@pytest.mark.parametrize("order", [1, 2, 3])
def test_token_ngram_scorer(device, tmp_path, order):
    rng = random.Random(order)
    vocab = 9
    arpa = token_arpa(tmp_path, rng, vocab, order, skip=(0, 5))  # 0, 5 and 8 never seen
    scorer = TokenNgramScorer.from_arpa(arpa, vocab, device=device)
    check_against_reference(scorer, RefNgram(arpa), [0, 0, 0, 0], vocab, steps=9, seed=order)


def test_token_ngram_scorer_bounds_its_tables(tmp_path):
    arpa = token_arpa(tmp_path, random.Random(0), 9, 2)
    with pytest.raises(ValueError, match="max_table_size"):
        TokenNgramScorer.from_arpa(arpa, 9, max_table_size=20)
    with pytest.raises(ValueError, match="not a token id"):
        TokenNgramScorer.from_arpa(arpa, 4)



@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize("scheme", sorted(SCHEMES))
@pytest.mark.parametrize("seed", range(4))
def test_hotword_scorer(device, strict, scheme, seed):
    rng = random.Random(seed)
    vocab = 6
    partial, starts = SCHEMES[scheme]
    lists = [random_phrases(rng, vocab, rng.randint(1, 6), with_scores=bool(seed % 2))
             for _ in range(3)]
    graphs = [ContextGraph(p, context_score=1.5) for p in lists]
    mask = None if starts is None else torch.isin(torch.arange(vocab + 2),
                                                  torch.tensor(starts))
    scorer = HotwordScorer(graphs, vocab, strict=strict, device=device, word_start=mask,
                           partial=partial)
    ref = PerUtteranceRef(lists, 1.5, strict, partial, starts)  # each row's own list
    check_against_reference(scorer, ref, [0, 1, 2, 1], vocab, steps=12, seed=seed)


def test_broken_partial_match_earns_nothing_and_complete_match_its_bonus():
    graph = ContextGraph([([1, 2, 3], None), ([2, 4], 3.0)], context_score=1.0)
    for strict in (False, True):
        scorer = HotwordScorer(graph, 6, strict=strict)

        def total(tokens, scorer=scorer):
            return _total(scorer, tokens)

        assert total([1, 2, 5]) == pytest.approx(0.0)  # 1 2 then broken
        assert total([1, 2]) == pytest.approx(0.0)  # unfinished at the end
        assert total([1, 2, 3]) == pytest.approx(3.0)
        assert total([5, 2, 4, 5]) == pytest.approx(6.0)
        assert total([1, 2, 4]) == pytest.approx(6.0)  # 1 2 fails over to the phrase 2 4


def _total(scorer, tokens):
    """The bonus of a whole hypothesis (its steps and its final score)."""
    state = scorer.init_state(torch.tensor([0]))
    acc = 0.0
    for t in tokens:
        s, _ = scorer.score(state)
        acc += float(s[0, t])
        state = scorer.advance(state, None, torch.tensor([0]), torch.tensor([t]))
    return acc + float(scorer.final_score(state)[0])


@pytest.mark.parametrize("strict", [False, True])
def test_whole_words_complete_a_phrase_only_where_a_word_ends(strict):
    # tokens 1 and 3 start words; phrase "1 2" is a word, "1 2 4" a longer word
    graph = ContextGraph([([1, 2], None)], context_score=1.0)
    mask = torch.tensor([False, True, False, True, False, False])
    scorer = HotwordScorer(graph, 6, strict=strict, word_start=mask, partial=0.5)
    assert _total(scorer, [1, 2]) == pytest.approx(2.0)  # ends the hypothesis
    assert _total(scorer, [1, 2, 3]) == pytest.approx(2.0)  # the next word starts
    assert _total(scorer, [1, 2, 4]) == pytest.approx(0.0)  # the word goes on
    assert _total(scorer, [1, 2, 4, 3, 1, 2]) == pytest.approx(2.0)
    assert _total(scorer, [1]) == pytest.approx(0.0)
    # on the way, a partial match holds half of its bonus
    state = scorer.init_state(torch.tensor([0]))
    assert float(scorer.score(state)[0][0, 1]) == pytest.approx(0.5)
    plain = HotwordScorer(graph, 6, strict=strict)
    assert _total(plain, [1, 2, 4]) == pytest.approx(2.0)  # icefall: done on its last token
    with pytest.raises(ValueError, match="word_start must be a 1-D bool tensor"):
        HotwordScorer(graph, 6, word_start=torch.ones(4, dtype=torch.bool))
    with pytest.raises(ValueError, match="partial must be a number in"):
        HotwordScorer(graph, 6, partial=1.5)


@pytest.mark.parametrize("seed", range(3))
def test_ctc_scorer(device, seed):
    g = torch.Generator().manual_seed(seed)
    n, t, v, eos = 2, 5, 5, 4
    x = torch.randn(n, t, v, generator=g, dtype=torch.float64).mul(2).log_softmax(-1)
    lens = torch.tensor([t, 3])
    scorer = CtcScorer(x.to(device), lens.to(device), blank_id=0, eos_id=eos)
    ref = RefCtc(x.tolist(), lens.tolist(), blank=0, eos=eos)
    check_against_reference(scorer, ref, [0, 1, 1], v, steps=4, seed=seed, tol=1e-9, cand_k=3,
                            final_tokens=(0, eos))


def test_read_hotwords(tmp_path):
    path = tmp_path / "hot.txt"
    path.write_text("# a comment\nHELLO WORLD\n\nKUBERNETES :3.5\n")
    words = read_hotwords(path)
    assert [(w.text, w.score) for w in words] == [("HELLO WORLD", None), ("KUBERNETES", 3.5)]
    path.write_text("BAD :x\n")
    with pytest.raises(ValueError, match="bad score"):
        read_hotwords(path)
    with pytest.raises(ValueError, match="does not exist"):
        read_hotwords(tmp_path / "nope.txt")


def test_score_tokens_are_the_entries_of_score(device, tmp_path):
    """What the classic beam search asks for (chosen candidates only) is exactly what the
    full scores give there, for the table scorers (their own gather) and the others."""
    from tests.scorers.factories import scorer_pairs

    vocab = 6
    scorers, _ = scorer_pairs("rnh", vocab, 3, 4, device, tmp_path)
    gen = torch.Generator().manual_seed(4)
    for ws in scorers:
        state = ws.scorer.init_state(torch.tensor([0, 1, 2, 1], device=device))
        for _ in range(3):
            rows = torch.randint(0, 4, (7,), generator=gen).to(device)
            tokens = torch.randint(1, vocab, (7,), generator=gen).to(device)
            full, pending = ws.scorer.score(state)
            got, _ = ws.scorer.score_tokens(state, rows, tokens)
            assert torch.equal(got, full[rows, tokens]), type(ws.scorer).__name__
            keep = torch.arange(4, device=device)
            state = ws.scorer.advance(state, pending, keep, tokens[:4])


def test_token_ngram_tables_are_the_same_in_every_process(tmp_path):
    """The tables (whose digest keys a resumed job) do not follow Python's per-process
    string hashing: two processes with other hash seeds build the same bytes."""
    import hashlib
    import os
    import subprocess
    import sys

    arpa = token_arpa(tmp_path, random.Random(5), 12, 3)
    code = ("import hashlib, sys\nfrom k2dec.scorers import TokenNgramScorer\n"
            "s = TokenNgramScorer.from_arpa(sys.argv[1], 12)\n"
            "h = hashlib.sha256()\n"
            "for t in (s.score_table, s.next_state, s.final):\n"
            "    h.update(t.numpy().tobytes())\n"
            "print(h.hexdigest(), s.start)\n")
    out = set()
    for seed in ("1", "2", "3"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        r = subprocess.run([sys.executable, "-c", code, str(arpa)], env=env,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        out.add(r.stdout.strip())
    assert len(out) == 1, out
    assert hashlib.sha256(b"").hexdigest() not in out.pop()


def test_emitting_rows_are_the_positions_whose_hypothesis_takes_its_token(device):
    from k2dec.scorers.base import emitting_rows

    rows = torch.tensor([4, 0, 0, 2, 7], device=device)
    assert emitting_rows(rows, None).tolist() == [0, 1, 2, 3, 4]
    emit = torch.tensor([True, False, True, False, True], device=device)
    got = emitting_rows(rows, emit)
    assert got.tolist() == [0, 2, 4] and got.dtype == torch.int64 and got.device == device
    assert emitting_rows(rows[:0], emit[:0]).numel() == 0
