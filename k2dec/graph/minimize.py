"""Minimization of decoding graphs: merge the states that have the same future.

:func:`minimize_graph` merges states that no path can tell apart: two states are merged when
for every arc leaving one there is an arc leaving the other with the same label, score, words
(``aux_labels``), tokens and every other per-arc attribute, into states that are merged too
(a bisimulation over the arcs' whole content). Nothing is pushed: no score and no word moves
to another arc, so every path of the input is a path of the output with the same labels,
words, tokens and scores at every frame, and the output has no other path. A search on the
smaller graph sees the same partial scores: where the input kept a hypothesis in each of
several equivalent states the output keeps one (the best), so a max-active cap counts
distinct futures only. Without pruning the best path and its score are the same; with
pruning the searches may differ where the input's copies crowded other states out.

Measured on the shipped BPE-256 / 3-gram HLG: 616947 -> 504416 states, 2.62M -> 2.23M arcs
(24 s of CPU); 1best on the shipped test sets gave the same words on every utterance at
beams 8-12 and the same speed within the machine's noise (0.87-1.12x), for k2 and for
kaldi-decoder alike: the search's cost follows its active states, which the merged copies
rarely are at the same time. Hence an option, off by default.

This is what Kaldi's ``fstminimizeencoded`` does to HCLG (encode each arc's labels and weight
as one label, minimize the acceptor, decode), here through OpenFst's ``Minimize`` in kaldifst,
with every k2 attribute in the code and without Kaldi's weight quantization (only scores
with the same float32 bits are one symbol). The input need not be deterministic: k2 graphs
(epsilon-free LG, HLG) are not, and OpenFst then merges states that are bisimilar, which
keeps the language but need not reach the smallest equivalent graph.

Where it shrinks the graph: in ``det(L o G)`` the states after a word is known but before its
last token are copied once per LM state the word was entered from; the copies that lead to
the same next LM state (for a trigram: the same last word before this one) are merged.
"""

from __future__ import annotations

import logging

import k2
import torch

from .check import check_single_cpu_fsa

__all__ = ["minimize_graph"]

logger = logging.getLogger(__name__)

_PAD = -(2**31)  # fills the ragged attributes' rows (with their lengths in the code: unambiguous)


def _attribute_columns(fsa: k2.Fsa) -> tuple[list[torch.Tensor], list[tuple]]:
    """Every per-arc value of ``fsa`` but ``src``/``dst`` as int64 columns ``(num_arcs,)``:
    label, score bits, then each attribute (float bits, ints, ragged rows padded with their
    length); and how to rebuild each attribute from its columns (name, kind, dtype, width)."""
    arcs = fsa.arcs.values()
    columns = [arcs[:, 2].to(torch.int64), arcs[:, 3].to(torch.int64)]
    layout = []
    for name, value in sorted(fsa.named_tensor_attr(include_scores=False)):
        if isinstance(value, k2.RaggedTensor):
            if value.num_axes != 2:
                raise ValueError(f"fsa attribute {name!r}: only [arc][x] ragged attributes "
                                 f"can be minimized, got {value.num_axes} axes")
            splits = value.shape.row_splits(1).to(torch.int64)
            lengths = splits[1:] - splits[:-1]
            padded = value.pad(mode="constant", padding_value=_PAD).to(torch.int64)
            padded = padded.reshape(lengths.numel(), -1)
            columns += [lengths] + list(padded.unbind(1))
            layout.append((name, "ragged", value.dtype, padded.shape[1]))
            continue
        if value.dim() != 1:
            raise ValueError(f"fsa attribute {name!r}: expected one value per arc, got shape "
                             f"{tuple(value.shape)}")
        value = value.detach()
        if value.dtype.is_floating_point:
            bits = {torch.float32: torch.int32, torch.float64: torch.int64}.get(value.dtype)
            if bits is None:
                raise ValueError(f"fsa attribute {name!r}: dtype {value.dtype} not supported")
            columns.append(value.contiguous().view(bits).to(torch.int64))
        else:
            columns.append(value.to(torch.int64))
        layout.append((name, "tensor", value.dtype, 1))
    return columns, layout


def _rebuild_attributes(fsa: k2.Fsa, rows: torch.Tensor, layout: list[tuple]) -> None:
    """Set ``fsa``'s attributes from the code rows of its arcs (inverse of
    :func:`_attribute_columns`, past its label and score columns)."""
    col = 2
    for name, kind, dtype, width in layout:
        if kind == "ragged":
            lengths = rows[:, col]
            padded = rows[:, col + 1:col + 1 + width]
            keep = torch.arange(width).unsqueeze(0) < lengths.unsqueeze(1)
            splits = torch.zeros(lengths.numel() + 1, dtype=torch.int32)
            splits[1:] = torch.cumsum(lengths, 0)
            shape = k2.ragged.create_ragged_shape2(row_splits=splits,
                                                   cached_tot_size=int(splits[-1]))
            setattr(fsa, name, k2.RaggedTensor(shape, padded[keep].to(dtype).contiguous()))
            col += 1 + width
        elif dtype.is_floating_point:
            bits = torch.int32 if dtype == torch.float32 else torch.int64
            setattr(fsa, name, rows[:, col].to(bits).view(dtype).clone())
            col += 1
        else:
            setattr(fsa, name, rows[:, col].to(dtype).clone())
            col += 1


def _minimized_acceptor(src: torch.Tensor, dst: torch.Tensor, code: torch.Tensor,
                        final: int
                        ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int, int]:
    """OpenFst ``Minimize`` of the acceptor with arcs ``src -code+1-> dst`` (start state 0,
    ``final`` the one final state); returns its arcs (``src``, ``dst``, ``code`` int64) and
    its start and final states."""
    import kaldifst

    lines = torch.stack([src, dst, code + 1], dim=1).tolist()
    text = "\n".join(f"{s} {d} {c}" for s, d, c in lines) + f"\n{final}\n"
    fst = kaldifst.compile(s=text, acceptor=True)
    kaldifst.minimize(fst, allow_nondet=True)
    arcs, finals = [], []
    for line in fst.to_str(is_acceptor=True).splitlines():
        fields = line.split()
        if len(fields) >= 3:
            arcs.append((int(fields[0]), int(fields[1]), int(fields[2])))
        elif fields:
            finals.append(int(fields[0]))
    if len(finals) != 1:
        raise RuntimeError(f"minimization gave {len(finals)} final states, expected 1")
    out = torch.tensor(arcs, dtype=torch.int64).reshape(-1, 3)
    return out[:, 0], out[:, 1], out[:, 2] - 1, fst.start, finals[0]


def _renumber(src: torch.Tensor, dst: torch.Tensor, start: int, final: int, num_states: int
              ) -> tuple[torch.Tensor, torch.Tensor]:
    """States renumbered in breadth-first order from ``start`` (k2's start state 0), with
    ``final`` last (k2's final state)."""
    order = torch.full((num_states,), -1, dtype=torch.int64)
    order[start] = 0
    next_id, frontier = 1, torch.tensor([start])
    arc_order = torch.sort(src, stable=True).indices
    counts = torch.bincount(src, minlength=num_states)
    firsts = torch.cumsum(counts, 0) - counts
    while frontier.numel() > 0:
        n = counts[frontier]
        base = torch.repeat_interleave(firsts[frontier], n)
        offset = torch.arange(base.numel()) - torch.repeat_interleave(torch.cumsum(n, 0) - n, n)
        reached = dst[arc_order[base + offset]]
        reached = reached[(order[reached] < 0) & (reached != final)]
        new = reached[_first_occurrence(reached)] if reached.numel() else reached
        order[new] = torch.arange(next_id, next_id + new.numel())
        next_id += new.numel()
        frontier = new
    order[final] = next_id
    return order[src], order[dst]


def _first_occurrence(x: torch.Tensor) -> torch.Tensor:
    """Indices of the first occurrence of each distinct value of ``x``, in increasing order."""
    _, inverse, counts = torch.unique(x, return_inverse=True, return_counts=True)
    by_value = torch.sort(inverse, stable=True).indices
    return torch.sort(by_value[torch.cumsum(counts, 0) - counts]).values


def minimize_graph(fsa: k2.Fsa) -> k2.Fsa:
    """Merge the states of a decoding graph that have the same future (see the module
    docstring): same paths, labels, words, tokens and scores; fewer states and arcs.

    Args:
      fsa: a single ``k2.Fsa`` on CPU (LG, HLG, HL, HCLG, ...); its attributes are
        per-arc tensors (float or int, ``(num_arcs,)``) or ``[arc][x]`` ragged tensors
        (e.g. ragged ``aux_labels``), all kept.

    Returns:
      a new connected, arc-sorted ``k2.Fsa`` on CPU with the same attributes and non-tensor
      attributes, states in breadth-first order from the start state.
    """
    check_single_cpu_fsa("fsa", fsa, "to be minimized")
    fsa = k2.connect(fsa)  # every state then lies on a path from the start to the final state
    if fsa.num_arcs == 0:
        return fsa
    arcs = fsa.arcs.values()
    columns, layout = _attribute_columns(fsa)
    rows, code = torch.unique(torch.stack(columns, dim=1), dim=0, return_inverse=True)
    num_states = fsa.shape[0]
    src, dst, code, start, final = _minimized_acceptor(
        arcs[:, 0].to(torch.int64), arcs[:, 1].to(torch.int64), code, num_states - 1)
    num_new = int(torch.cat([src, dst, torch.tensor([final])]).max()) + 1
    src, dst = _renumber(src, dst, start, final, num_new)
    order = torch.sort(src * (rows.shape[0] + 1) + code, stable=True).indices
    src, dst, code = src[order], dst[order], code[order]
    out_rows = rows[code]
    new_arcs = torch.stack([src, dst, out_rows[:, 0], out_rows[:, 1]], dim=1).to(torch.int32)
    out = k2.Fsa(new_arcs)
    _rebuild_attributes(out, out_rows, layout)
    for name, value in fsa.named_non_tensor_attr():
        if name not in ("labels_version", "properties"):
            setattr(out, name, value)
    out = k2.arc_sort(out)
    logger.info("minimized: %d -> %d states, %d -> %d arcs", num_states, out.shape[0],
                fsa.num_arcs, out.num_arcs)
    return out
