"""OpenFst interop through kaldifst: k2 <-> OpenFst (binary ``.fst`` or text).

k2 scores are log-probabilities; OpenFst tropical weights are costs (``-score``).
Ragged ``aux_labels`` (several words on one arc) are expanded into chains of
epsilon-input arcs first, since an OpenFst arc has exactly one output label.

Caution: ``kaldifst.compose`` silently drops arcs unless the first FST is
olabel-sorted or the second ilabel-sorted; :func:`compose_openfst` sorts both.
"""

from __future__ import annotations

from pathlib import Path

import k2
import torch

__all__ = [
    "k2_to_kaldi_decoder_fst",
    "k2_to_openfst",
    "openfst_to_k2",
    "read_openfst",
    "write_openfst",
    "compose_openfst",
]


def k2_to_openfst(fsa: k2.Fsa):
    """Convert a single k2 FSA (acceptor or transducer) to ``kaldifst.StdVectorFst``.

    Labels are kept as they are (0 is epsilon on both sides); the arcs k2 adds when it expands
    ragged ``aux_labels`` have label 0. See :func:`k2_to_kaldi_decoder_fst` for graphs whose
    labels are network outputs."""
    import kaldifst

    text, acceptor = _openfst_text(fsa, shift_labels=False)
    return kaldifst.compile(s=text, acceptor=acceptor)


def k2_to_kaldi_decoder_fst(fsa: k2.Fsa):
    """A single k2 decoding graph (H, HL, HLG, HCLG: labels are network outputs, ``aux_labels``
    words or tokens) as the ``kaldifst.StdVectorFst`` that PyPI kaldi-decoder searches.

    kaldi-decoder reads input label ``i > 0`` as column ``i - 1`` of the log-likelihoods and
    ``0`` as epsilon, so every label ``>= 0`` is shifted by one (k2's blank 0 becomes 1) and the
    arcs k2 adds for extra words of ragged ``aux_labels`` get epsilon (0): they emit a word
    without consuming a frame. Output labels are the ``aux_labels``, costs ``-score``, and k2's
    final (``-1``) arcs become final weights (an FSA without ``aux_labels`` outputs epsilon)."""
    import kaldifst

    text, _ = _openfst_text(fsa, shift_labels=True)
    return kaldifst.compile(s=text, acceptor=False)


def _openfst_text(fsa: k2.Fsa, shift_labels: bool) -> tuple[str, bool]:
    """OpenFst text of a single FSA (ragged ``aux_labels`` expanded into chains of arcs; with
    ``shift_labels``, labels ``>= 0`` plus one and the chains' added arcs epsilon), and whether
    it is an acceptor. A state with several final arcs keeps the best one's weight (OpenFst has
    one final weight per state)."""
    if len(fsa.shape) != 2:
        raise ValueError(f"expected a single FSA, got an FsaVec of shape {fsa.shape}")
    fsa = fsa.to("cpu")
    acceptor = not hasattr(fsa, "aux_labels")
    added = None
    if not acceptor and isinstance(fsa.aux_labels, k2.RaggedTensor):
        fsa, arc_map = k2.expand_ragged_attributes(
            fsa, ret_arc_map=True, ragged_attribute_names=["aux_labels"])
        added = arc_map == -1
    if fsa.num_arcs == 0:
        raise ValueError("cannot convert an empty FSA (no states) to OpenFst")
    # Only labels, aux_labels and scores go to OpenFst: other attributes (HLG's
    # "tokens", lattices' "lm_scores", ...) would become extra text columns.
    aux_labels = None if acceptor else fsa.aux_labels
    if shift_labels and acceptor:  # a transducer that outputs nothing
        aux_labels = torch.where(fsa.labels == -1, -1, 0).to(torch.int32)
        acceptor = False
    plain = k2.Fsa(fsa.arcs.clone() if shift_labels else fsa.arcs, aux_labels=aux_labels)
    if shift_labels:
        labels = plain.labels.clone()
        labels = torch.where(labels >= 0, labels + 1, labels)
        if added is not None:
            labels[added] = 0
        plain.labels = labels
    text = k2.to_str(plain, openfst=True)
    final_src = plain.arcs.values()[:, 0][plain.labels == -1]
    if final_src.numel() != torch.unique(final_src).numel():
        text = _best_final_weights(text)
    return text, acceptor


def _best_final_weights(text: str) -> str:
    """OpenFst text with one final-weight line per state: the smallest cost."""
    arcs, finals = [], {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) > 2:
            arcs.append(line)
        elif fields:
            cost = float(fields[1]) if len(fields) == 2 else 0.0
            if fields[0] not in finals or cost < finals[fields[0]][0]:
                finals[fields[0]] = (cost, line)
    return "\n".join(arcs + [line for _, line in finals.values()]) + "\n"


def openfst_to_k2(fst, acceptor: bool = False) -> k2.Fsa:
    """Convert a ``kaldifst`` FST to a single k2 FSA (``aux_labels`` = olabels unless
    ``acceptor``)."""
    text = fst.to_str(is_acceptor=acceptor, show_weight_one=True)
    return k2.Fsa.from_openfst(text, acceptor=acceptor)


def read_openfst(path: str | Path):
    """Read an OpenFst binary (``.fst``) or text (``.txt``/``.fst.txt``) file."""
    import kaldifst

    path = Path(path)
    if not path.is_file():
        raise ValueError(f"FST file {path} does not exist")
    if path.suffix == ".txt":
        text = path.read_text(encoding="utf-8")
        _check_openfst_text(text, path)
        return kaldifst.compile(s=text, acceptor=False)
    with open(path, "rb") as f:
        magic = f.read(4)
    if magic != b"\xd6\xfd\xb2\x7e":
        raise ValueError(f"{path}: not an OpenFst binary file (bad magic number)")
    try:
        fst = kaldifst.StdVectorFst.read(str(path))
    except Exception as e:
        raise ValueError(f"{path}: could not read OpenFst binary: {e}") from None
    if fst is None:
        raise ValueError(f"{path}: could not read OpenFst binary (not a vector FST?)")
    return fst


def _check_openfst_text(text: str, path: Path) -> None:
    """Validate transducer text format (kaldifst's compiler aborts the process on errors)."""
    n_lines = 0
    for lineno, line in enumerate(text.splitlines(), start=1):
        fields = line.split()
        if not fields:
            continue
        n_lines += 1
        where = f"{path}:{lineno}"
        if len(fields) not in (1, 2, 4, 5):
            raise ValueError(
                f"{where}: not a valid OpenFst text FST line (expected 'state [weight]' or "
                f"'src dst ilabel olabel [weight]'): {line!r}"
            )
        ints = fields[:1] if len(fields) <= 2 else fields[:4]
        floats = fields[1:2] if len(fields) == 2 else fields[4:5]
        for x in ints:
            if not x.isdigit():
                raise ValueError(f"{where}: not a valid OpenFst text FST: {x!r} is not a "
                                 "non-negative integer")
        for x in floats:
            try:
                float(x)
            except ValueError:
                raise ValueError(f"{where}: not a valid OpenFst text FST: weight {x!r}") from None
    if n_lines == 0:
        raise ValueError(f"{path}: not a valid OpenFst text FST: the file is empty")


def write_openfst(fst, path: str | Path) -> None:
    """Write binary (any suffix) or text (``.txt`` suffix)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".txt":
        path.write_text(fst.to_str(show_weight_one=True), encoding="utf-8")
    else:
        fst.write(str(path))


def compose_openfst(a, b):
    """``kaldifst.compose`` with the sorting it needs (copies; inputs untouched)."""
    import kaldifst

    a = a.copy()
    b = b.copy()
    kaldifst.arcsort(a, sort_type="olabel")
    kaldifst.arcsort(b, sort_type="ilabel")
    return kaldifst.compose(a, b)
