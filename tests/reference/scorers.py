"""Slow per-hypothesis references of the scorers in ``k2dec.scorers``.

Each reference scores one hypothesis at a time from its whole prefix (a tuple of token ids),
with Python floats and no precomputed tables:

- :class:`RefNeuralLm`: a teacher-forced forward pass over ``sos + prefix`` per call;
- :class:`RefNgram`: the ARPA backoff recursion on word tuples (:class:`ArpaScorer`);
- :class:`RefContextGraph`: a dict trie whose fail links are followed at run time, as
  icefall's ``ContextGraph.forward_one_step`` does (node scores are path sums);
- :class:`RefCtc`: CTC prefix probabilities recomputed from scratch for every prefix.

Interface: ``start(utt) -> state``, ``step(state, token) -> (score, state)``,
``final(state) -> score``.
"""

from __future__ import annotations

import math

import torch

from tests.reference.aed_reference import ctc_full_logprob, ctc_prefix_logprob
from tests.reference.ngram import LN10, ArpaScorer

NEG_INF = float("-inf")


class RefNeuralLm:
    def __init__(self, lm, score_eos: bool = True) -> None:
        self.lm, self.score_eos = lm, score_eos

    def _log_probs(self, prefix: tuple[int, ...]) -> list[float]:
        tokens = torch.tensor([[self.lm.sos_id, *prefix]], dtype=torch.int64,
                              device=self.lm.device)
        with torch.no_grad():
            return self.lm(tokens)[0, -1].double().tolist()

    def start(self, utt: int) -> tuple[int, ...]:
        return ()

    def step(self, state, token):
        return self._log_probs(state)[token], state + (token,)

    def final(self, state) -> float:
        return self._log_probs(state)[self.lm.eos_id] if self.score_eos else 0.0


class RefNgram:
    """Token ids are ARPA words (decimal strings). Tokens the model never saw are scored like
    ``<unk>`` if the model has it, else with its smallest unigram log-prob."""

    def __init__(self, arpa_path) -> None:
        self.arpa = ArpaScorer(arpa_path)
        unigrams = {k[0]: v for k, v in self.arpa.prob.items() if len(k) == 1}
        self.known = set(unigrams)
        real = [v for w, v in unigrams.items() if w not in ("<s>", "</s>", "<unk>")]
        self.floor = unigrams.get("<unk>", min(real))

    def _lp(self, history: tuple[str, ...], word: str) -> float:
        if word not in self.known:
            back = 0.0
            while history:  # back off to the empty history, then the floor
                back += self.arpa.bow.get(history[-(self.arpa.order - 1):], 0.0) if (
                    self.arpa.order > 1) else 0.0
                history = history[1:]
            return (back + self.floor) * LN10
        return self.arpa._log10_p(history, word) * LN10

    def start(self, utt: int):
        return ("<s>",)

    def step(self, state, token):
        word = str(token)
        return self._lp(state, word), (state + (word,))[-max(1, self.arpa.order - 1):]

    def final(self, state) -> float:
        return self._lp(state, "</s>")


class RefContextGraph:
    """Aho-Corasick over token ids with icefall's bonus-and-refund scoring (strict or not).

    ``partial``: the share of the bonus a partial match holds (icefall: 1); ``word_start``
    (a set of token ids, or None): whole words only, a phrase completes when the next token
    is in the set or the hypothesis ends."""

    def __init__(self, phrases, context_score: float, strict: bool, partial: float = 1.0,
                 word_start=None) -> None:
        self.strict = strict
        self.partial = partial
        self.word_start = None if word_start is None else set(word_start)
        self.children = [{}]
        self.bonus = [0.0]
        self.end = [False]
        for tokens, score in phrases:
            node = 0
            s = context_score if score is None else score
            for i, t in enumerate(tokens):
                if t not in self.children[node]:
                    self.children.append({})
                    self.bonus.append(s)
                    self.end.append(False)
                    self.children[node][t] = len(self.children) - 1
                child = self.children[node][t]
                self.bonus[child] = max(self.bonus[child], s)
                if i == len(tokens) - 1:
                    self.end[child] = True
                node = child
        # path sums and the token path of every node
        self.path = {0: ()}
        self.node_score = {0: 0.0}
        stack = [0]
        while stack:
            node = stack.pop()
            for t, c in self.children[node].items():
                self.path[c] = self.path[node] + (t,)
                self.node_score[c] = self.node_score[node] + self.bonus[c]
                stack.append(c)
        self.node_of = {p: n for n, p in self.path.items()}

    def _fail(self, node: int) -> int:
        """The node of the longest proper suffix of ``node``'s path that is in the trie."""
        p = self.path[node]
        for k in range(1, len(p) + 1):
            if p[k:] in self.node_of:
                return self.node_of[p[k:]]
        return 0

    def _goto(self, node: int, token: int) -> int:
        while True:
            if token in self.children[node]:
                return self.children[node][token]
            if node == 0:
                return 0
            node = self._fail(node)

    def _matches(self, node: int) -> list[int]:
        """Nodes where a phrase ends that are ``node`` or on its fail chain, longest first."""
        out = []
        while node != 0:
            if self.end[node]:
                out.append(node)
            node = self._fail(node)
        return out

    def start(self, utt: int) -> int:
        return 0

    def _held(self, node: int) -> float:
        return self.partial * self.node_score[node]

    def step(self, state, token):
        if self.word_start is not None:
            return self._step_whole_words(state, token)
        node = self._goto(state, token)
        matches = self._matches(node)
        if self.strict:
            return self._held(node) - self._held(state) + sum(
                self.node_score[m] for m in matches), node
        if matches:  # the completed phrase is kept, the match starts again
            return self.node_score[matches[0]] - self._held(state), 0
        return self._held(node) - self._held(state), node

    def _step_whole_words(self, state, token):
        """The phrases ending at ``state`` count only if ``token`` starts a word."""
        matches = self._matches(state)
        starts = token in self.word_start
        if self.strict:
            node = self._goto(state, token)
            done = sum(self.node_score[m] for m in matches) if starts else 0.0
            return self._held(node) - self._held(state) + done, node
        if matches and starts:  # keep the completed phrase, match again from the root
            node = self._goto(0, token)
            return self.node_score[matches[0]] + self._held(node) - self._held(state), node
        node = self._goto(state, token)
        return self._held(node) - self._held(state), node

    def final(self, state) -> float:
        done = 0.0
        matches = self._matches(state)
        if self.word_start is not None and matches:
            done = (sum(self.node_score[m] for m in matches) if self.strict
                    else self.node_score[matches[0]])
        return done - self._held(state)


class RefCtc:
    """CTC prefix score increments of utterance ``utt`` (``x[utt][t][v]`` log-probs)."""

    def __init__(self, x, lens, blank: int, eos: int) -> None:
        self.x, self.lens, self.blank, self.eos = x, lens, blank, eos

    def _psi(self, utt, prefix):
        return ctc_prefix_logprob(self.x[utt][: self.lens[utt]], list(prefix), self.blank)

    def _full(self, utt, prefix):
        return ctc_full_logprob(self.x[utt][: self.lens[utt]], list(prefix), self.blank)

    def start(self, utt: int):
        return (utt, ())

    def step(self, state, token):
        utt, prefix = state
        if token == self.blank:
            return NEG_INF, state
        if token == self.eos:
            return _delta(self._full(utt, prefix), self._psi(utt, prefix)), state
        return _delta(self._psi(utt, prefix + (token,)), self._psi(utt, prefix)), (
            utt, prefix + (token,))

    def final(self, state) -> float:
        utt, prefix = state
        return _delta(self._full(utt, prefix), self._psi(utt, prefix))


def _delta(a: float, b: float) -> float:
    return NEG_INF if a == NEG_INF or b == NEG_INF else a - b


def weighted_step(refs, states, token):
    """``(sum_i w_i * score_i, new states)`` of weighted references ``[(ref, w)]``."""
    total, new = 0.0, []
    for (ref, w), st in zip(refs, states):
        s, st = ref.step(st, token)
        total += w * s
        new.append(st)
    return total, tuple(new)


def weighted_final(refs, states) -> float:
    return sum(w * ref.final(st) for (ref, w), st in zip(refs, states))


def is_close(a: float, b: float, tol: float) -> bool:
    return a == b or (math.isfinite(a) and math.isfinite(b) and abs(a - b) <= tol)


def reference_bonus(ref: RefContextGraph, words) -> float:
    """The bonus of a whole word sequence: every step's bonus or refund, then the refund of
    an unfinished match."""
    state, total = ref.start(0), 0.0
    for w in words:
        s, state = ref.step(state, w)
        total += s
    return total + ref.final(state)
