"""Random small lexicons (with homophones, prefix words, several pronunciations, words the
LM lacks) and random "proper" backoff ARPA LMs, for the graph-compilation tests."""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import dataclass

TOKENS = ("a", "b", "c", "d")


@dataclass(frozen=True)
class RandomLang:
    """``lexicon``: (word, tokens) pairs; ``arpa``: ARPA text; ``unscored``: lexicon words
    with no unigram (G can never output them)."""

    lexicon: tuple[tuple[str, tuple[str, ...]], ...]
    arpa: str
    order: int
    unscored: tuple[str, ...]

    @property
    def words(self) -> list[str]:
        return sorted({w for w, _ in self.lexicon})


def _random_pron(rng: random.Random) -> tuple[str, ...]:
    return tuple(rng.choice(TOKENS) for _ in range(rng.randint(1, 3)))


def random_lexicon(rng: random.Random, num_words: int = 6) -> list[tuple[str, tuple[str, ...]]]:
    """``num_words`` words: at least one homophone pair, one word whose pronunciation is a
    prefix of another's and one word with two pronunciations."""
    words = [f"W{i}" for i in range(num_words)]
    lex = [(words[0], _random_pron(rng))]
    lex.append((words[1], lex[0][1]))  # homophone of W0
    lex.append((words[2], lex[0][1] + (rng.choice(TOKENS),)))  # W0 is a prefix of W2
    for w in words[3:]:
        lex.append((w, _random_pron(rng)))
    lex.append((words[-1], _random_pron(rng)))  # a second pronunciation
    if rng.random() < 0.5:  # a homophone of W2 as well
        lex.append((words[3], lex[2][1]))
    # no duplicate (word, pron) entries
    return list(dict.fromkeys(lex))


def _log10(rng: random.Random, lo: float, hi: float) -> float:
    return round(rng.uniform(lo, hi), 4)


def random_arpa(rng: random.Random, words: list[str], order: int,
                unscored: tuple[str, ...] = ()) -> str:
    """A proper backoff ARPA LM over ``words`` minus ``unscored``: every n-gram's first and
    last n-1 words are (n-1)-grams. Probabilities and backoff weights are random, so that
    sometimes a backoff path beats the n-gram's own arc, but every state's outgoing
    probability mass stays below 0.95, so the log-semiring total of G is finite (as
    weight pushing needs)."""
    vocab = [w for w in words if w not in unscored]
    grams: list[dict[tuple[str, ...], float]] = [{("</s>",): _log10(rng, -1.6, -0.9),
                                                  ("<s>",): -99.0}]
    for w in vocab:
        grams[0][(w,)] = _log10(rng, -1.6, -0.9)
    for _ in range(2, order + 1):
        lower = grams[-1]
        grams.append({h + (w,): _log10(rng, -1.6, -0.9)
                      for h in lower if h[-1] != "</s>"
                      for w in vocab + ["</s>"]
                      if (h + (w,))[1:] in lower and rng.random() < 0.35})
    bows: dict[tuple[str, ...], float] = {}
    for n, g in enumerate(grams[:-1]):
        for h in g:
            if h[-1] == "</s>":
                continue
            mass = sum(10 ** p for k, p in grams[n + 1].items() if k[:-1] == h)
            bows[h] = round(math.log10(rng.uniform(0.05, max(0.06, 0.95 - mass))), 4)
    lines = ["\\data\\"] + [f"ngram {n + 1}={len(g)}" for n, g in enumerate(grams)] + [""]
    for n, g in enumerate(grams):
        lines.append(f"\\{n + 1}-grams:")
        for key, p in g.items():
            lines.append(f"{p}\t{' '.join(key)}" + (f"\t{bows[key]}" if key in bows else ""))
        lines.append("")
    lines.append("\\end\\")
    return "\n".join(lines) + "\n"


def random_lang(seed: int) -> RandomLang:
    rng = random.Random(seed)
    lexicon = random_lexicon(rng, num_words=rng.choice([5, 6]))
    words = sorted({w for w, _ in lexicon})
    # sometimes a word the LM lacks (never W0/W1: they carry the homophone check)
    unscored = (words[-1],) if rng.random() < 0.5 else ()
    order = rng.choice([2, 3])
    return RandomLang(tuple(lexicon), random_arpa(rng, words, order, unscored), order, unscored)


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
