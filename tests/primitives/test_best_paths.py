"""The shared helpers in k2dec/primitives/best_paths.py and k2dec/primitives/ragged.py that the
lattice code relies on."""

from __future__ import annotations

import k2
import torch

from k2dec.primitives.best_paths import arc_frames, ctc_collapse, path_aux_ids
from k2dec.primitives.ragged import ragged_from_row_ids, ragged_select


def test_ragged_from_row_ids_keeps_empty_rows():
    r = ragged_from_row_ids(torch.tensor([1, 1, 3]), torch.tensor([5, 6, 7], dtype=torch.int32), 5)
    assert r.tolist() == [[], [5, 6], [], [7], []]
    empty = ragged_from_row_ids(torch.tensor([], dtype=torch.int64),
                                torch.tensor([], dtype=torch.int32), 2)
    assert empty.tolist() == [[], []]


def test_ragged_select():
    r = k2.RaggedTensor([[1, 2, 3], [], [4, 5]])
    keep = torch.tensor([True, False, True, False, False])
    assert ragged_select(r, keep).tolist() == [[1, 3], [], []]


def test_ctc_collapse():
    labels = k2.RaggedTensor([[0, 1, 1, 0, 1, 2, 2, -1], [], [3], [0, 0], [2, 2, 2]])
    tokens, frames = ctc_collapse(labels)
    assert tokens.tolist() == [[1, 1, 2], [], [3], [], [2]]
    assert frames.tolist() == [[1, 4, 5], [], [0], [], [0]]
    # runs do not continue across rows
    tokens, _ = ctc_collapse(k2.RaggedTensor([[2], [2]]))
    assert tokens.tolist() == [[2], [2]]
    tokens, _ = ctc_collapse(k2.RaggedTensor([[4, 0, 4]]), blank_id=4)
    assert tokens.tolist() == [[0]]


def test_path_aux_ids_tensor_and_ragged():
    paths = k2.create_fsa_vec([
        k2.Fsa.from_str("0 1 1 7 0\n1 2 1 0 0\n2 3 -1 -1 0\n3", acceptor=False),
        k2.Fsa.from_str("0 1 -1 -1 0\n1", acceptor=False),
        k2.Fsa.from_str("0 1 2 0 0\n1 2 3 9 0\n2 3 -1 -1 0\n3", acceptor=False),
    ])
    assert arc_frames(paths).tolist() == [0, 1, 2, 0, 0, 1, 2]
    ids, frames = path_aux_ids(paths)
    assert ids.tolist() == [[7], [], [9]] and frames.tolist() == [[0], [], [1]]
    paths.aux_labels = k2.RaggedTensor([[7, 8], [], [-1], [-1], [], [9, 0, 10], [-1]])
    ids, frames = path_aux_ids(paths)
    assert ids.tolist() == [[7, 8], [], [9, 10]] and frames.tolist() == [[0, 0], [], [1, 1]]
