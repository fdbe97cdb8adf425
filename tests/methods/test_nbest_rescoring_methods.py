"""fast_beam_search_with_nbest_rescoring and _rnn_rescoring against a per-path reference:
every sampled token sequence's best alignment found by enumerating the lattice's paths, its
words spelled by hand from the piece strings, its n-gram score by the ARPA backoff recursion,
its LM score token by token; and TokenWords against the same hand spelling."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import k2
import pytest
import torch

from k2dec.methods import Resources, TransducerInputs, get_method
from k2dec.methods.parts import RescorePart
from k2dec.methods.transducer import (
    FastBeamSearchNbestRescoringConfig,
    FastBeamSearchNbestRnnRescoringConfig,
)
from k2dec.nbest import DedupKey, Nbest, NbestConfig
from k2dec.testing.transducer import random_batch, random_model
from k2dec.transducer import fast_beam_search
from tests.methods.piece_lang import LEXICON, PIECES, VOCAB
from tests.reference.lattice_paths import enumerate_paths
from tests.reference.lm_reference import score_sequence_by_prefixes


def ref_words(tokens: tuple[int, ...]) -> list[str]:
    """Words of a token sequence by hand: a word starts at a piece beginning with the
    word-start mark (or <unk>, or the sequence's first piece); spellings not in the lexicon
    are <UNK>."""
    spell = {tuple(p): w for w, p in reversed(LEXICON)}
    words: list[list[str]] = []
    for i, t in enumerate(tokens):
        piece = PIECES[t - 1]
        if i == 0 or piece.startswith("\u2581") or piece == "<unk>":
            words.append([])
        words[-1].append(piece)
    return [spell.get(tuple(w), "<UNK>") for w in words]


@pytest.mark.parametrize("seed", range(6))
def test_token_words_spell_like_the_hand_reference(fbs_setup, seed):
    lang, _, res = fbs_setup
    rng = random.Random(seed)
    seqs = [[rng.randrange(1, VOCAB) for _ in range(rng.randint(0, 7))] for _ in range(20)]
    got = res.token_words(k2.RaggedTensor(seqs, dtype=torch.int32)).tolist()
    want = [[lang.word_table.get(w) for w in ref_words(tuple(s))] for s in seqs]
    assert got == want
    assert any(len(w) > 1 for w in want) and any(lang.word_table.get("<UNK>") in w
                                                 for w in want)


def test_token_words_errors(fbs_setup):
    _, _, res = fbs_setup
    with pytest.raises(ValueError, match="token ids must be in"):
        res.token_words(k2.RaggedTensor([[1, 99]], dtype=torch.int32))
    with pytest.raises(TypeError, match="RaggedTensor"):
        res.token_words([[1, 2]])


def _reference(fbs_setup, inputs, cfg, rnn: bool) -> list[dict[str, tuple[tuple[int, ...], float]]]:
    """Per utterance, per setting: the winning token sequence and its total score, among the
    sequences the n-best samples (the same sampler on the same lattice)."""
    lang, arpa, res = fbs_setup
    _, lm = res.neural_lm("test")
    lattice = fast_beam_search(inputs.model, inputs.encoder_out, inputs.encoder_out_lens,
                               None, cfg.search).lattice
    nbest = Nbest.from_config(lattice, cfg.nbest, DedupKey.TOKENS)
    sampled = [[tuple(p) for p in utt] for utt in nbest.key_lists()]
    out = []
    for u, seqs in enumerate(sampled):
        am: dict[tuple[int, ...], float] = {}
        for p in enumerate_paths(nbest.lattice[u]):
            am[p.tokens] = max(am.get(p.tokens, -math.inf), p.score)
        rows = []
        for s in seqs:
            ngram = arpa.best_path_logprob(ref_words(s))
            nn = sum(score_sequence_by_prefixes(lm, list(s))) if rnn else 0.0
            rows.append((s, am[s], ngram, nn))
        best = {}
        for n in cfg.rescore.ngram_lm_scales:
            for r in (cfg.rescore.lm_scales if rnn else (None,)):
                key = f"ngram_lm_scale_{n}" + (f"_rnn_lm_scale_{r}" if rnn else "")
                totals = [a + (n * g if n else 0.0) + (r * x if r else 0.0)
                          for _, a, g, x in rows]
                if not totals:
                    best[key] = ((), -math.inf)
                    continue
                i = max(range(len(totals)), key=lambda j: (totals[j], -j))
                best[key] = (rows[i][0], totals[i])
        out.append(best)
    return out


@pytest.mark.parametrize("rnn", [False, True])
@pytest.mark.parametrize("lens,seed", [([3], 0), ([3, 1, 2], 1), ([2, 0, 3], 2), ([1], 3),
                                       ([4, 3], 4), ([3, 3, 1, 2], 5)])
def test_rescoring_picks_the_reference_best_of_the_sampled_sequences(fbs_setup, device, rnn, lens,
                                                                    seed):
    _, _, res = fbs_setup
    res = Resources(graphs={"G": res.graphs["G"].to(device)},
                    lms={"rnn_lm": res.lms["rnn_lm"].to(device)}, token_words=res.token_words)
    model = random_model(vocab_size=VOCAB, seed=seed, device=device)
    enc, enc_lens = random_batch(lens, seed=seed, device=device)
    inputs = TransducerInputs(model, enc, enc_lens)
    scales = (-0.5, 0.0, 0.3, 1.0, 3.0)
    # the configured scales first, the sweep's other points after them
    if rnn:
        cfg = FastBeamSearchNbestRnnRescoringConfig(
            nbest=NbestConfig(num_paths=20), rescore=RescorePart(
                ngram_lm_scale=scales[0], ngram_lm_scales=scales, lm_scale=0.0,
                lm_scales=(0.0, 0.5, 2.0), sweep=True))
        name = "fast_beam_search_with_nbest_rnn_rescoring"
    else:
        cfg = FastBeamSearchNbestRescoringConfig(nbest=NbestConfig(num_paths=20), rescore=(
            RescorePart(ngram_lm_scale=scales[0], ngram_lm_scales=scales, sweep=True)))
        name = "fast_beam_search_with_nbest_rescoring"
    method = get_method(name)
    out = {r.key: r for r in method(inputs, res, cfg)}
    assert list(out) == [s.key for s in method.settings(cfg)]
    # without the sweep: the configured setting alone, the same hypotheses
    alone = method(inputs, res, replace(cfg, rescore=replace(cfg.rescore, sweep=False)))
    assert [r.key for r in alone] == [next(iter(out))]
    assert alone[0].hyps == next(iter(out.values())).hyps
    want = _reference(fbs_setup, inputs, cfg, rnn)
    res.lms["rnn_lm"].to("cpu")
    assert list(out) == list(want[0])
    winners = set()
    for u in range(len(lens)):
        for key, (tokens, score) in want[u].items():
            hyp = out[key].hyps[u]
            assert tuple(hyp.tokens) == tokens, (u, key)
            if math.isfinite(score):
                assert hyp.score == pytest.approx(score, abs=1e-4), (u, key)
            winners.add((u, tokens))
    # the scales change the winner somewhere: the test can tell the components apart
    assert len(winners) > len(lens) or max(lens) <= 1


def test_missing_resources_are_clear_errors(fbs_setup):
    _, _, res = fbs_setup
    model = random_model(vocab_size=VOCAB)
    enc, enc_lens = random_batch([3])
    inputs = TransducerInputs(model, enc, enc_lens)
    with pytest.raises(ValueError, match="needs the G graph"):
        get_method("fast_beam_search_with_nbest_rescoring")(inputs, Resources())
    with pytest.raises(ValueError, match="token_words"):
        get_method("fast_beam_search_with_nbest_rescoring")(
            inputs, Resources(graphs=res.graphs))
    with pytest.raises(ValueError, match="neural LM"):
        get_method("fast_beam_search_with_nbest_rnn_rescoring")(
            inputs, Resources(graphs=res.graphs, token_words=res.token_words))
    with pytest.raises(ValueError, match="ngram_lm_scales"):
        FastBeamSearchNbestRescoringConfig(rescore=RescorePart(ngram_lm_scale=0.1,
                                                               ngram_lm_scales=()))
    with pytest.raises(ValueError, match="lm_scales"):
        FastBeamSearchNbestRnnRescoringConfig(rescore=RescorePart(
            lm_scale=0.1, lm_scales=(float("nan"),)))
