"""Tiny lang dirs for tests and benchmarks: a hand-written lexicon and bigram ARPA (with prefix
words and homophones), the HLG compiled from them, and random small lexicons with random "proper"
backoff ARPA LMs (homophones, prefix words, several pronunciations, words the LM lacks)."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from pathlib import Path

from k2dec.graph import build_ctc_topo, build_G, build_L, compile_HLG, compile_LG
from k2dec.lang import write_lang_dir

__all__ = [
    "TINY_ARPA",
    "TINY_LEXICON",
    "RandomLang",
    "random_arpa",
    "random_lang",
    "random_lexicon",
    "tiny_hlg",
    "tiny_lg",
    "write_tiny_lang",
]

# "a" is a prefix of "a b" and "b" of "b a"; "D" and "E" are homophones.
TINY_LEXICON = [
    ("A", ["a"]),
    ("AB", ["a", "b"]),
    ("B", ["b"]),
    ("BA", ["b", "a"]),
    ("C", ["c"]),
    ("D", ["c", "d"]),
    ("E", ["c", "d"]),
]

# Hand-written bigram. Every explicit bigram is more likely than its backoff
# alternative, so the best path of G (tropical) is the ARPA probability.
TINY_ARPA = """\\data\\
ngram 1=9
ngram 2=6

\\1-grams:
-1.0 </s>
-99 <s> -0.5
-0.7 A -0.3
-0.8 AB -0.2
-0.9 B -0.3
-1.0 BA -0.3
-1.1 C -0.4
-1.2 D -0.2
-1.3 E -0.25

\\2-grams:
-0.2 <s> A
-0.1 A B
-0.3 B </s>
-0.4 C D
-0.5 D E
-0.6 <s> C

\\end\\
"""


def write_tiny_lang(out_dir: str | Path):
    """Write the lang dir of :data:`TINY_LEXICON` to ``out_dir/lang`` and :data:`TINY_ARPA` to
    ``out_dir/lm.arpa``; returns ``(LangDir, arpa path)``."""
    out_dir = Path(out_dir)
    lang = write_lang_dir(out_dir / "lang", TINY_LEXICON)
    arpa = out_dir / "lm.arpa"
    arpa.write_text(TINY_ARPA)
    return lang, arpa


def tiny_hlg(out_dir: str | Path) -> tuple:
    """``(LangDir, HLG, H)`` of the tiny lang (written under ``out_dir``): H is the CTC topology,
    HLG carries ``lm_scores`` (a copy of its scores)."""
    lang, arpa = write_tiny_lang(out_dir)
    G = build_G(arpa, lang.word_table)
    L = build_L(lang.lexicon_disambig, lang.token_table, lang.word_table,
                disambig_self_loops=True)
    H = build_ctc_topo(lang.max_token_id)
    HLG = compile_HLG(H, L, G, lang.first_token_disambig_id, lang.first_word_disambig_id)
    HLG.lm_scores = HLG.scores.clone()
    return lang, HLG, H


def tiny_lg(out_dir: str | Path) -> tuple:
    """``(LangDir, LG)`` of the tiny lang (written under ``out_dir``), with log-semiring weight
    pushing (as for transducer ``fast_beam_search`` with LG); token ids a b c d are 1..4."""
    lang, arpa = write_tiny_lang(out_dir)
    L = build_L(lang.lexicon_disambig, lang.token_table, lang.word_table,
                disambig_self_loops=True)
    LG = compile_LG(L, build_G(arpa, lang.word_table), lang.first_token_disambig_id,
                    lang.first_word_disambig_id, log_weight_pushing=True)
    return lang, LG


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
    """A random lexicon over :data:`TOKENS` and a random bigram or trigram ARPA for it."""
    rng = random.Random(seed)
    lexicon = random_lexicon(rng, num_words=rng.choice([5, 6]))
    words = sorted({w for w, _ in lexicon})
    # sometimes a word the LM lacks (never W0/W1: they carry the homophone check)
    unscored = (words[-1],) if rng.random() < 0.5 else ()
    order = rng.choice([2, 3])
    return RandomLang(tuple(lexicon), random_arpa(rng, words, order, unscored), order, unscored)
