"""What the graph-compilation tests enumerate for a random lang (:mod:`k2dec.testing.lang`):
word sequences, their pronunciations, CTC frame sequences; a random case (lang dir, ARPA,
reference scorer, L and G) and the word sequences a graph outputs for frame sequences."""

from __future__ import annotations

import itertools
import random

import k2

from k2dec.graph import (
    build_G,
    build_L,
    refresh_labels_version,
)
from k2dec.lang import write_lang_dir
from k2dec.testing.lang import RandomLang, random_lang
from tests.reference.lattice_paths import best_per_word_sequence
from tests.reference.ngram import ArpaScorer, lexicon_lm_word_sequences

from .exhaustive import linear_fsa


def word_sequences(words: list[str], max_len: int):
    """Every word sequence of length 0..max_len."""
    for n in range(max_len + 1):
        yield from itertools.product(words, repeat=n)


def pronunciations(seq: tuple[str, ...], lexicon) -> set[tuple[str, ...]]:
    """Every token sequence spelling ``seq`` (any pronunciation of each word)."""
    prons: dict[str, list[tuple[str, ...]]] = {}
    for w, p in lexicon:
        prons.setdefault(w, []).append(tuple(p))
    return {tuple(t for p in combo for t in p)
            for combo in itertools.product(*(prons[w] for w in seq))}


def ctc_realisations(ids: list[int], rng: random.Random, num_random: int = 2,
                     exhaustive_up_to: int = 2) -> list[list[int]]:
    """CTC frame sequences (0 = blank) that collapse to ``ids``. Up to
    ``exhaustive_up_to`` tokens: every one with each token 1-2 frames and 0-1 blank frames
    before, between and after the tokens (a repeated token always gets a blank between).
    Longer: the shortest one, one with every token doubled and blanks everywhere, and
    ``num_random`` random ones (1-3 frames per token, 0-2 blanks)."""
    def realise(reps, blanks) -> list[int]:
        frames = [0] * blanks[0]
        for k, t in enumerate(ids):
            if k and ids[k - 1] == t and blanks[k] == 0:
                frames.append(0)  # a repeat needs a blank in between
            frames += [t] * reps[k] + [0] * blanks[k + 1]
        return frames

    n = len(ids)
    if not ids:
        return [[0], [0, 0]]  # k2 cannot intersect with an empty linear FSA
    if n <= exhaustive_up_to:
        out = [realise(r, b) for r in itertools.product((1, 2), repeat=n)
               for b in itertools.product((0, 1), repeat=n + 1)]
    else:
        out = [realise([1] * n, [0] * (n + 1)), realise([2] * n, [1] * (n + 1))]
        for _ in range(num_random):
            out.append(realise([rng.randint(1, 3) for _ in range(n)],
                               [rng.randint(0, 2) for _ in range(n + 1)]))
    return [list(f) for f in dict.fromkeys(tuple(f) for f in out)]


class RandomCase:
    """A random lang dir, its ARPA, the reference and the compiled graphs."""

    def __init__(self, seed: int, tmp_path):
        self.seed = seed
        self.spec: RandomLang = random_lang(seed)
        self.lang = write_lang_dir(tmp_path / "lang", [(w, list(p)) for w, p in
                                                       self.spec.lexicon])
        self.arpa = tmp_path / "lm.arpa"
        self.arpa.write_text(self.spec.arpa)
        self.lm = ArpaScorer(self.arpa)
        self.G = build_G(self.arpa, self.lang.word_table)
        self.L = build_L(self.lang.lexicon_disambig, self.lang.token_table,
                         self.lang.word_table, disambig_self_loops=True)
        self.ids = (self.lang.first_token_disambig_id, self.lang.first_word_disambig_id)

    def token_sequences(self) -> set[tuple[str, ...]]:
        """Every spelling of every word sequence of up to 3 words."""
        out: set[tuple[str, ...]] = set()
        for seq in word_sequences(self.spec.words, 3):
            out |= pronunciations(seq, self.spec.lexicon)
        return out

    def expected(self, tokens: tuple[str, ...]) -> dict[tuple[str, ...], float]:
        return lexicon_lm_word_sequences(tokens, self.spec.lexicon, self.lm)

    def token_ids(self, tokens: tuple[str, ...]) -> list[int]:
        return [self.lang.token_table.get(t) for t in tokens]


def decoded_words(frames: list[list[int]], graph: k2.Fsa, wt: k2.SymbolTable):
    """For each frame (or token) sequence: {word sequence: best score} over all paths."""
    out = []
    for f in frames:
        inter = k2.connect(k2.intersect(linear_fsa(f), graph, treat_epsilons_specially=False))
        best = best_per_word_sequence(inter) if inter.num_arcs else {}
        out.append({tuple(wt.get(w) for w in ws): s for ws, s in best.items()})
    return out


def LG_with_epsilons(case) -> k2.Fsa:
    """det(L o G) with the disambiguation symbols turned into epsilons (not removed)."""
    LG = k2.connect(k2.determinize(k2.connect(k2.compose(k2.arc_sort(case.L),
                                                         k2.arc_sort(case.G)))))
    labels = LG.labels.clone()
    labels[labels >= case.ids[0]] = 0
    refresh_labels_version(LG)
    LG.labels = labels
    values = LG.aux_labels.values.clone()
    values[values >= case.ids[1]] = 0
    LG.aux_labels = k2.RaggedTensor(LG.aux_labels.shape, values)
    return LG


def icefall_LG(case) -> k2.Fsa:
    """LG the way icefall's compile_hlg (and k2dec before issue 14) builds it: disambiguation
    symbols to epsilon, then k2.remove_epsilon."""
    LG = refresh_labels_version(k2.remove_epsilon(LG_with_epsilons(case)))
    LG = refresh_labels_version(k2.connect(LG))
    LG.aux_labels = LG.aux_labels.remove_values_leq(0)
    return k2.arc_sort(LG)
