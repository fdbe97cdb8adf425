"""Random hotword lists, token ARPA models and a driver that checks a batched scorer against
its per-hypothesis reference."""

from __future__ import annotations

import random
from pathlib import Path

import torch

from k2dec.aed import TransformerDecoder
from k2dec.graph.ngram import train_arpa
from k2dec.lm import RnnLM, RnnLmConfig
from tests.reference.scorers import is_close


def random_phrases(rng: random.Random, vocab: int, num: int, with_scores: bool):
    """Phrases over tokens ``[1, vocab)`` that share prefixes and contain each other."""
    phrases = []
    for _ in range(num):
        if phrases and rng.random() < 0.4:  # extend or cut an earlier phrase
            base = list(rng.choice(phrases)[0])
            tokens = base + [rng.randrange(1, vocab)] if rng.random() < 0.5 else base[1:]
        else:
            tokens = [rng.randrange(1, vocab) for _ in range(rng.randint(1, 4))]
        if tokens:
            phrases.append((tokens, round(rng.uniform(0.5, 3.0), 2) if with_scores and
                            rng.random() < 0.5 else None))
    return phrases


def token_arpa(tmp_path: Path, rng: random.Random, vocab: int, order: int,
               skip: tuple[int, ...] = (0,)) -> Path:
    """A kaldingram ARPA trained on random sentences over token ids (decimal words); tokens
    in ``skip`` never occur."""
    tokens = [t for t in range(vocab) if t not in skip]
    lines = [" ".join(str(rng.choice(tokens[: max(2, len(tokens) - 2)]))
                      for _ in range(rng.randint(1, 8))) for _ in range(60)]
    text = tmp_path / f"text_{order}.txt"
    text.write_text("\n".join(lines) + "\n")
    return train_arpa(text, tmp_path / f"tokens_{order}.arpa", order=order)


def check_against_reference(scorer, ref, utts: list[int], vocab: int, steps: int,
                            seed: int, tol: float = 1e-5, cand_k: int | None = None,
                            final_tokens: tuple[int, ...] = ()) -> None:
    """Random walks: ``len(utts)`` rows start empty; every step compares each row's scores
    of every token (or of ``cand_k`` random candidates for partial scorers) with the
    reference, then advances random rows (repeated, some not emitting) by random tokens, and
    now and then reorders with ``select`` or splits and re-joins with ``cat``. Rows are never
    advanced by ``final_tokens`` (a partial scorer's blank and eos end no prefix)."""
    rng = random.Random(seed)
    device = scorer_device(scorer)
    state = scorer.init_state(torch.tensor(utts, device=device))
    refs = [ref.start(u) for u in utts]
    for step in range(steps):
        m = len(refs)
        cand = None
        if cand_k is not None:
            cand = torch.tensor([rng.sample(range(vocab), cand_k) for _ in range(m)],
                                device=device)
        scores, pending = scorer.score(state, cand)
        finals = scorer.final_score(state).tolist()
        for i in range(m):
            tokens = range(vocab) if cand is None else cand[i].tolist()
            got = scores[i].tolist()
            for j, tok in enumerate(tokens):
                want, _ = ref.step(refs[i], tok)
                assert is_close(got[j], want, tol), (step, i, tok, got[j], want)
            assert is_close(finals[i], ref.final(refs[i]), tol), (step, i)
        rows = [rng.randrange(m) for _ in range(rng.randint(1, 5))]
        allowed = [[t for t in (range(vocab) if cand is None else cand[r].tolist())
                    if t not in final_tokens] for r in rows]
        keep = [i for i, a in enumerate(allowed) if a]
        if not keep:
            continue
        rows = [rows[i] for i in keep]
        toks = [rng.choice(allowed[i]) for i in keep]
        emit = [cand is not None or rng.random() < 0.7 for _ in rows]
        state = scorer.advance(state, pending, torch.tensor(rows, device=device),
                               torch.tensor(toks, device=device),
                               torch.tensor(emit, device=device))
        refs = [ref.step(refs[r], t)[1] if e else refs[r] for r, t, e in zip(rows, toks, emit)]
        if rng.random() < 0.3:
            perm = [rng.randrange(len(refs)) for _ in range(len(refs))]
            state = scorer.select(state, torch.tensor(perm, device=device))
            refs = [refs[p] for p in perm]
        if rng.random() < 0.3 and len(refs) > 1:
            cut = rng.randrange(1, len(refs))
            left = scorer.select(state, torch.arange(cut, device=device))
            right = scorer.select(state, torch.arange(cut, len(refs), device=device))
            state = scorer.cat([left, right])
        assert scorer.num_rows(state) == len(refs)


def scorer_device(scorer) -> torch.device:
    if isinstance(getattr(scorer, "device", None), torch.device):
        return scorer.device
    for name in ("score_table", "roots"):
        if hasattr(scorer, name):
            return getattr(scorer, name).device
    if hasattr(scorer, "lm"):
        return scorer.lm.device
    return scorer.ctc.x.device


class PerUtteranceRef:
    """The per-hypothesis reference of per-utterance hotword lists: row ``utt`` follows
    ``RefContextGraph(lists[utt], ...)`` (arguments as :class:`RefContextGraph`)."""

    def __init__(self, lists, context_score: float, strict: bool, partial: float = 1.0,
                 word_start=None) -> None:
        from tests.reference.scorers import RefContextGraph

        self.refs = [RefContextGraph(p, context_score, strict, partial, word_start)
                     for p in lists]

    def start(self, utt):
        return (utt, 0)

    def step(self, state, token):
        utt, node = state
        score, node = self.refs[utt].step(node, token)
        return score, (utt, node)

    def final(self, state):
        return self.refs[state[0]].final(state[1])


def word_phrases(rng: random.Random, word_ids: list[int], num: int):
    """Random phrases (shared prefixes, contained phrases, own scores) over ``word_ids``."""
    out = random_phrases(rng, len(word_ids) + 1, num, with_scores=True)
    return [([word_ids[i - 1] for i in ws], s) for ws, s in out]


#: (share of the bonus held by a partial match, word-start token ids or None)
SCHEMES = {"icefall": (1.0, None), "k2dec": (0.5, (1, 3)), "completion": (0.0, (1, 2, 4)),
           "whole_words": (1.0, (2, 3))}


def seeded_lms(vocab: int, lodr_dir: Path) -> tuple[RnnLM, Path, TransformerDecoder]:
    """What the fusion tests score with over ``vocab`` tokens, the same on every call: a
    sharpened RNN LM (torch seed 0, weights x3), LODR's token bigram written as an ARPA file
    into ``lodr_dir`` (:func:`token_arpa`, seed 0) and an attention decoder, both in eval
    mode."""
    torch.manual_seed(0)
    lm = RnnLM(RnnLmConfig(vocab_size=vocab, embedding_dim=8, hidden_dim=8, num_layers=1))
    with torch.no_grad():
        for p in lm.parameters():
            p.mul_(3.0)
    arpa = token_arpa(lodr_dir, random.Random(0), vocab, 2)
    decoder = TransformerDecoder(vocab_size=vocab, memory_dim=8, d_model=16, nhead=2,
                                 num_layers=1, dim_feedforward=16, dropout=0.0).eval()
    return lm.eval(), arpa, decoder
