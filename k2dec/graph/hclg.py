"""Kaldi-style HCLG: monophone HMM topologies built with k2, and Kaldi ``HCLG.fst`` loading.

Labels of the returned graphs index the columns of the posterior matrix (pdf ids
``0..num_pdfs-1``), so they decode with ``k2.intersect_dense_pruned`` like HLG does
(there is no blank: label 0 is pdf 0). Every arc consumes one frame: input epsilons
are removed while the labels are still shifted by one (``pdf + 1``, Kaldi's
transition-id convention where 0 is epsilon), then shifted back. The removal keeps every
word sequence (:func:`k2dec.graph.remove_epsilon_keep_words`): a Kaldi ``HCLG.fst`` has
words on input-epsilon arcs (where its disambiguation symbols were), on which plain
``k2.remove_epsilon`` would drop homophones.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import k2
import torch

from .compile import compile_LG, refresh_labels_version, remove_epsilon_keep_words
from .openfst import openfst_to_k2, read_openfst

__all__ = [
    "HmmTopology",
    "build_hmm_topo",
    "compile_HCLG",
    "read_transition_pdf_table",
    "load_kaldi_hclg",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class HmmTopology:
    """Left-to-right HMM per phone: ``num_states`` emitting states, each with a self-loop
    and one pdf per state (pdf of state ``s`` of phone ``p`` is ``(p - 1) * num_states + s``
    for phones ``1..num_phones``).

    Attributes:
      num_phones: phones are token ids ``1..num_phones`` (0 is ``<eps>``).
      num_states: emitting states per phone (Kaldi's classic topology has 3).
      self_loop_prob: probability of each self-loop (the forward arc gets the rest);
        ``None`` for zero scores everywhere (posteriors carry all the weight).
    """

    num_phones: int
    num_states: int = 3
    self_loop_prob: float | None = None

    def __post_init__(self) -> None:
        if self.num_phones < 1:
            raise ValueError(f"num_phones must be >= 1, got {self.num_phones}")
        if self.num_states < 1:
            raise ValueError(f"num_states must be >= 1, got {self.num_states}")
        if self.self_loop_prob is not None and not 0.0 < self.self_loop_prob < 1.0:
            raise ValueError(f"self_loop_prob must be in (0, 1) or None, got "
                             f"{self.self_loop_prob}")

    @property
    def num_pdfs(self) -> int:
        return self.num_phones * self.num_states

    def pdf(self, phone: int, state: int) -> int:
        return (phone - 1) * self.num_states + state


def build_hmm_topo(topo: HmmTopology) -> k2.Fsa:
    """Ha: maps sequences of ``pdf + 1`` labels (one per frame) to phones.

    One loop state; phone ``p`` is a chain of ``num_states`` states entered from the
    loop state by its first pdf (emitting ``p`` on that arc), each with a self-loop,
    and left by an epsilon arc back to the loop state.

    Returns:
      ``k2.Fsa`` (CPU): ``labels`` = pdf + 1 (0 = epsilon), ``aux_labels`` = phone ids.
    """
    import math

    loop_score = fwd_score = 0.0
    if topo.self_loop_prob is not None:
        loop_score = math.log(topo.self_loop_prob)
        fwd_score = math.log(1.0 - topo.self_loop_prob)
    arcs: list[tuple[int, int, int, int, float]] = []
    next_state = 1
    for phone in range(1, topo.num_phones + 1):
        first = next_state
        states = list(range(first, first + topo.num_states))
        next_state += topo.num_states
        arcs.append((0, states[0], topo.pdf(phone, 0) + 1, phone, 0.0))
        for s, state in enumerate(states):
            label = topo.pdf(phone, s) + 1
            arcs.append((state, state, label, 0, loop_score))
            if s + 1 < len(states):
                arcs.append((state, states[s + 1], topo.pdf(phone, s + 1) + 1, 0, fwd_score))
        arcs.append((states[-1], 0, 0, 0, fwd_score))
    final = next_state
    arcs.append((0, final, -1, -1, 0.0))
    arcs.sort(key=lambda a: a[0])
    text = "\n".join(f"{a[0]} {a[1]} {a[2]} {a[3]} {a[4]}" for a in arcs) + f"\n{final}"
    return k2.Fsa.from_str(text, acceptor=False)


def _remove_input_epsilons_shifted(fsa: k2.Fsa) -> k2.Fsa:
    """``fsa`` has labels ``pdf + 1`` (0 = epsilon): remove epsilons without losing words
    (Kaldi's HCLG has words on input-epsilon arcs), shift labels to pdf ids, keep only
    ``aux_labels`` (ragged word ids without zeros)."""
    out = remove_epsilon_keep_words(fsa)
    labels = out.labels.clone()
    labels[labels > 0] -= 1
    out.labels = labels
    return k2.arc_sort(out)


def compile_HCLG(
    topo: HmmTopology,
    L_disambig: k2.Fsa,
    G: k2.Fsa,
    first_token_disambig_id: int,
    first_word_disambig_id: int,
) -> k2.Fsa:
    """Monophone HCLG (C is the identity): Ha o LG, input epsilons removed.

    Args:
      topo: the HMM topology; its phones are the lang dir's token ids ``1..num_phones``
        (``num_phones`` must be ``first_token_disambig_id - 1``).
      L_disambig, G, first_*_disambig_id: as for :func:`k2dec.graph.compile_LG`.

    Returns:
      ``k2.Fsa`` (CPU): ``labels`` are pdf ids (``0..topo.num_pdfs - 1``), ``aux_labels``
      ragged word ids; arc-sorted; every arc consumes one frame.
    """
    if topo.num_phones != first_token_disambig_id - 1:
        raise ValueError(
            f"topology has {topo.num_phones} phones but the lang dir has "
            f"{first_token_disambig_id - 1} (tokens 1..#0-1)"
        )
    LG = compile_LG(L_disambig, G, first_token_disambig_id, first_word_disambig_id)
    Ha = k2.arc_sort(build_hmm_topo(topo))
    LG = k2.arc_sort(LG)
    HCLG = refresh_labels_version(k2.connect(k2.compose(Ha, LG, inner_labels="phones")))
    if HCLG.num_arcs == 0:
        raise ValueError("Ha o LG is empty: do the topology's phones match the lexicon?")
    HCLG = _remove_input_epsilons_shifted(HCLG)
    logger.info("HCLG: %d states, %d arcs, %d pdfs", HCLG.shape[0], HCLG.num_arcs,
                topo.num_pdfs)
    return HCLG


def read_transition_pdf_table(path: str | Path) -> torch.Tensor:
    """Read ``tid pdf`` lines (Kaldi's ``show-transitions``/``ali-to-pdf`` mapping).

    Returns:
      int64 tensor ``table`` of size ``max_tid + 1`` with ``table[tid] = pdf`` and
      ``table[0] = -1`` (epsilon); transition ids must be ``1..max_tid`` with no gaps.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"transition-id table {path} does not exist")
    mapping: dict[int, int] = {}
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            fields = line.split()
            if not fields:
                continue
            where = f"{path}:{lineno}"
            if len(fields) != 2 or not all(x.isdigit() for x in fields):
                raise ValueError(f"{where}: expected 'tid pdf' (non-negative ints), got "
                                 f"{line.rstrip()!r}")
            tid, pdf = int(fields[0]), int(fields[1])
            if tid == 0:
                raise ValueError(f"{where}: transition id 0 is epsilon and cannot map to a pdf")
            if tid in mapping:
                raise ValueError(f"{where}: duplicate transition id {tid}")
            mapping[tid] = pdf
    if not mapping:
        raise ValueError(f"transition-id table {path} is empty")
    max_tid = max(mapping)
    missing = sorted(set(range(1, max_tid + 1)) - set(mapping))
    if missing:
        raise ValueError(f"{path}: transition ids {missing[:10]} are missing (ids must be 1..N)")
    table = torch.full((max_tid + 1,), -1, dtype=torch.int64)
    for tid, pdf in mapping.items():
        table[tid] = pdf
    return table


def load_kaldi_hclg(
    fst_path: str | Path, tid2pdf: str | Path | torch.Tensor
) -> k2.Fsa:
    """Load a Kaldi ``HCLG.fst`` (OpenFst binary, input labels transition ids, output labels
    word ids) and map its input labels to pdf ids so they index the posterior matrix.

    Args:
      fst_path: the OpenFst binary (or ``.txt`` text) file.
      tid2pdf: a ``tid pdf`` text file or a table from :func:`read_transition_pdf_table`.

    Returns:
      ``k2.Fsa`` (CPU) like :func:`compile_HCLG`'s: labels pdf ids, ragged word aux_labels,
      no input epsilons.

    Raises:
      ValueError: unreadable files, or a transition id in the graph missing from the table.
    """
    table = tid2pdf if isinstance(tid2pdf, torch.Tensor) else read_transition_pdf_table(tid2pdf)
    fsa = openfst_to_k2(read_openfst(fst_path), acceptor=False)
    labels = fsa.labels.to(torch.int64)
    too_big = labels >= table.numel()
    if too_big.any():
        bad = int(labels[too_big][0])
        raise ValueError(f"{fst_path}: transition id {bad} is not in the tid->pdf table "
                         f"(max {table.numel() - 1})")
    mapped = labels.clone()
    pos = labels > 0
    mapped[pos] = table[labels[pos]] + 1  # pdf + 1, keeping 0 = epsilon and -1 = final
    fsa.labels = mapped.to(torch.int32)
    return _remove_input_epsilons_shifted(fsa)
