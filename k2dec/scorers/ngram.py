"""Token n-gram LMs as :class:`~k2dec.scorers.Scorer` s (LODR's low-order LM), from ARPA files.

The model is expanded into two dense tables over its history states ``S`` (every n-gram of
order ``< N`` that the ARPA file lists, plus the empty history): ``score[s, v]``, the natural
log-probability of token ``v`` after history ``s`` (backing off by the ARPA rules), and
``next[s, v]``, the history after it (the longest suffix of ``s + v`` that is a state). So one
search step is two gathers, the same on CPU and GPU. A bigram over ``V`` tokens has ``V + 2``
states; :class:`TokenNgramScorer` refuses tables larger than ``max_table_size`` entries.
"""

from __future__ import annotations

import logging
import math
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch

from k2dec.graph.ngram import check_arpa, train_arpa
from k2dec.lang import load_bpe_model
from k2dec.lang.case import bpe_case, match_case
from k2dec.primitives.files import copy_as, text_lines
from k2dec.scorers.base import TableScorer

__all__ = ["ArpaModel", "TokenNgramScorer", "read_arpa", "train_token_arpa"]

logger = logging.getLogger(__name__)

LN10 = math.log(10.0)
BOS, EOS, UNK = "<s>", "</s>", "<unk>"


@dataclass(frozen=True)
class ArpaModel:
    """An ARPA backoff model as read by :func:`read_arpa`.

    Attributes:
      order: ``N``.
      prob: natural log-probability of every listed n-gram (word tuples).
      backoff: natural log backoff weight of the n-grams that have one.
    """

    order: int
    prob: dict[tuple[str, ...], float]
    backoff: dict[tuple[str, ...], float]


def read_arpa(path: str | Path) -> ArpaModel:
    """Read an ARPA file, plain or gzipped (log10 values become natural logs).

    Raises:
      ValueError: naming the file and line for anything :func:`k2dec.graph.check_arpa`
        refuses (not UTF-8 text, a malformed line, counts that disagree, no ``<s>`` or
        ``</s>``, a missing ``\\end\\``, ...).
    """
    prob: dict[tuple[str, ...], float] = {}
    backoff: dict[tuple[str, ...], float] = {}

    def visit(words: tuple[str, ...], logprob: float, bow: float | None) -> None:
        prob[words] = logprob * LN10
        if bow is not None:
            backoff[words] = bow * LN10

    order = check_arpa(path, visit=visit).order
    return ArpaModel(order, prob, backoff)


def train_token_arpa(text: str | Path, bpe_model: str | Path, arpa: str | Path,
                     order: int = 2, overwrite: bool = False) -> Path:
    """Train a token-level n-gram (LODR's low-order LM) on an LM text with kaldingram.

    Every line of ``text`` is encoded with the sentencepiece model and written as token ids,
    so the ARPA file's words are decimal token ids (what :meth:`TokenNgramScorer.from_arpa`
    reads by default). An ``arpa`` ending in ``.gz`` is written gzip-compressed. An existing
    ``arpa`` is kept unless ``overwrite``. ``k2dec train-token-lm`` runs this.

    Args:
      text: UTF-8 (optionally gzipped), one sentence per line (blank lines skipped); put in
        the BPE model's letter case first (:func:`k2dec.lang.case.match_case`, as decode
        does with references), so lower-case text trains the same n-gram as upper-case text.
        A warning says when more than a tenth of the tokens are still ``<unk>``.
      bpe_model: the sentencepiece model of the acoustic model's tokens.
      arpa: the ARPA file to write.
      order: the n-gram order (icefall's LODR: 2).
      overwrite: train again when ``arpa`` exists.

    Raises:
      ValueError: naming the file: a text that is not UTF-8 or has no sentence, one of whose
        tokens at least half are ``<unk>`` (:data:`MAX_UNKNOWN_SHARE`: the n-gram would be
        useless), a BPE model that cannot be read, an order outside 1..5.
    """
    arpa = Path(arpa)
    if arpa.is_file() and not overwrite:
        return arpa
    if not 1 <= order <= 5:
        raise ValueError(f"n-gram order must be in 1..5 (kaldingram's range), got {order}")
    sp = load_bpe_model(bpe_model)
    with tempfile.TemporaryDirectory() as tmp:
        ids = _encode_text(text, sp, Path(tmp) / "token_text.txt")
        plain = Path(tmp) / "lm.arpa"
        train_arpa(ids, plain, order=order)
        arpa.parent.mkdir(parents=True, exist_ok=True)
        return copy_as(plain, arpa)


#: The share of ``<unk>`` tokens at which :func:`train_token_arpa` refuses a text.
MAX_UNKNOWN_SHARE = 0.5


def _encode_text(text: str | Path, sp, out: Path) -> Path:
    """Write the non-blank lines of ``text``, in ``sp``'s letter case, as token ids of ``sp``
    to ``out``."""

    case = bpe_case(sp)
    sentences = tokens = unknown = 0
    with open(out, "w", encoding="utf-8") as dst:
        for _, line in text_lines(text, "LM text"):
            if line.strip():
                ids = sp.encode(match_case(line.strip(), case))
                sentences, tokens = sentences + 1, tokens + len(ids)
                unknown += sum(1 for i in ids if i == sp.unk_id())
                dst.write(" ".join(map(str, ids)) + "\n")
    if sentences == 0:
        raise ValueError(f"LM text {text} has no sentences")
    if unknown >= MAX_UNKNOWN_SHARE * tokens:
        raise ValueError(f"LM text {text}: {unknown} of its {tokens} tokens are <unk> (the "
                         "BPE model cannot spell it: is it in the BPE model's alphabet?); a "
                         "token n-gram of it would be useless")
    if unknown > 0.1 * tokens:
        logger.warning("%s: %d of its %d tokens are <unk>: is the text in the case and "
                       "alphabet the BPE model was trained on?", text, unknown, tokens)
    logger.info("%s: %d sentences, %d tokens", text, sentences, tokens)
    return out


class TokenNgramScorer(TableScorer):
    """A backoff n-gram over token ids (see the module docstring for the tables).

    Use :meth:`from_arpa`. The state of a row is its history state id (int64 ``[M]``); a row
    starts at the ``<s>`` history; :meth:`final_score` is ``log p(</s> | history)``.

    Attributes:
      score: float64 ``[S, V]``; next_state: int64 ``[S, V]``; final: float64 ``[S]``;
      start: the ``<s>`` state.
    """

    def __init__(self, score: torch.Tensor, next_state: torch.Tensor, final: torch.Tensor,
                 start: int) -> None:
        if score.dim() != 2 or next_state.shape != score.shape or final.shape != score.shape[:1]:
            raise ValueError(f"score [S, V], next_state [S, V] and final [S] disagree: "
                             f"{tuple(score.shape)}, {tuple(next_state.shape)}, "
                             f"{tuple(final.shape)}")
        self.score_table = score
        self.next_state = next_state
        self.final = final
        self.start = start
        self.vocab_size = score.size(1)

    @classmethod
    def from_arpa(
        cls,
        arpa: str | Path | ArpaModel,
        vocab_size: int,
        token_table: dict[str, int] | None = None,
        device: torch.device | str = "cpu",
        max_table_size: int = 1 << 25,
    ) -> TokenNgramScorer:
        """Expand an ARPA model over token ids into the dense tables.

        Args:
          arpa: the ARPA file (or a model from :func:`read_arpa`).
          vocab_size: ``V`` of the search.
          token_table: maps ARPA words to token ids when they are not all decimal token ids
            (an ARPA over BPE pieces, as icefall's ``lang_bpe_500/2gram.arpa``); None: the
            words must be decimal token ids (:func:`train_token_arpa`). ``<s>``, ``</s>``,
            ``<unk>`` are the ARPA's own.
          device: where the tables live (the search's device).
          max_table_size: refuse models with more than this many ``S * V`` entries.

        Raises:
          ValueError: naming the file: anything :func:`read_arpa` refuses, a word that is not
            a token id below ``vocab_size`` (an n-gram for another vocabulary), tables larger
            than ``max_table_size``.

        Tokens the model never saw (blank, ``sos/eos``, rare pieces) are scored like
        ``<unk>`` if the model has it, else with its smallest unigram log-prob, so that a
        negative weight (LODR) never turns an unseen token into ``+inf``.
        """
        model = arpa if isinstance(arpa, ArpaModel) else read_arpa(arpa)
        try:
            tables = _expand(model, vocab_size, token_table, max_table_size,
                             torch.device(device))
        except ValueError as e:
            raise ValueError(f"{arpa}: {e}" if not isinstance(arpa, ArpaModel) else str(e)
                             ) from None
        return cls(*tables)

    def init_state(self, utt: torch.Tensor) -> torch.Tensor:
        return torch.full((utt.numel(),), self.start, dtype=torch.int64,
                          device=self.score_table.device)


def _expand(model: ArpaModel, vocab_size: int, token_table: dict[str, int] | None,
            max_table_size: int,
            device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
    """Dense ``score``, ``next_state``, ``final`` and the start state of ``model``."""
    n = model.order
    # column of every ARPA word: token ids in [0, V), </s> in column V
    column: dict[str, int] = {EOS: vocab_size}
    words = [w for (w,) in (k for k in model.prob if len(k) == 1) if w not in (BOS, EOS, UNK)]
    if all(_as_id(w) is not None for w in words):
        token_table = None  # decimal token ids
    for w in words:
        tid = token_table.get(w) if token_table is not None else _as_id(w)
        if tid is None or not 0 <= tid < vocab_size:
            raise ValueError(
                f"ARPA word {w!r} is not a token id in [0, {vocab_size})"
                + ("" if token_table is None else " of token_table") + ": the token n-gram "
                f"was made for another vocabulary than the model's {vocab_size} tokens (make "
                "one with the model's bpe.model: k2dec train-token-lm)")
        column[w] = tid
    # numbered by length, then word order: the same tables in every process (a set's order
    # follows Python's per-process string hashing, and the tables' digest keys resumes)
    histories = sorted({k for k in model.prob if len(k) < n and k[-1] != EOS} | {()},
                       key=lambda h: (len(h), h))
    state_of = {h: i for i, h in enumerate(histories)}
    if len(histories) * vocab_size > max_table_size:
        raise ValueError(f"the {n}-gram has {len(histories)} history states: "
                         f"{len(histories)} x {vocab_size} tokens exceeds max_table_size="
                         f"{max_table_size}")
    extensions: dict[tuple[str, ...], list[tuple[str, float]]] = {}
    for key, lp in model.prob.items():
        extensions.setdefault(key[:-1], []).append((key[-1], lp))

    unigram = torch.full((vocab_size + 1,), float("nan"), dtype=torch.float64)
    for w, lp in extensions[()]:
        if w in column:
            unigram[column[w]] = lp
    seen = unigram[:vocab_size][~torch.isnan(unigram[:vocab_size])]
    floor = model.prob.get((UNK,), float(seen.min()) if seen.numel() else -99.0 * LN10)
    unigram = torch.nan_to_num(unigram, nan=floor)
    score = torch.empty(len(histories), vocab_size + 1, dtype=torch.float64)
    nxt = torch.empty(len(histories), vocab_size, dtype=torch.int64)
    for i, h in enumerate(histories):
        if h:
            j = _suffix_state(h[1:], state_of)
            score[i] = model.backoff.get(h, 0.0) + score[j]
            nxt[i] = nxt[j]
        else:
            score[i] = unigram
            nxt[i] = 0
        for w, lp in extensions.get(h, ()):
            if w in column:
                score[i, column[w]] = lp
                if len(h) + 1 < n and w != EOS:
                    nxt[i, column[w]] = state_of[h + (w,)]
    return (score[:, :vocab_size].contiguous().to(device), nxt.to(device),
            score[:, vocab_size].contiguous().to(device), _suffix_state((BOS,), state_of))


def _suffix_state(h: tuple[str, ...], state_of: dict[tuple[str, ...], int]) -> int:
    """The state of the longest suffix of ``h`` that is a state (the empty history at
    worst)."""
    while h not in state_of:
        h = h[1:]
    return state_of[h]


def _as_id(word: str) -> int | None:
    return int(word) if word.isdigit() else None
