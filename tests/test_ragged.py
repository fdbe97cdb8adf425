"""k2dec.ragged.add_at: each row's values are added one after another in the order given, on
every device, so a row's sum does not depend on what else the batch holds."""

from __future__ import annotations

import pytest
import torch

from k2dec.ragged import add_at


def _sequential(num_rows: int, index: list[int], values: list, dtype) -> torch.Tensor:
    """The obviously-correct sum: a Python loop adding each value to its row in order, in the
    given dtype (every partial sum rounded to it, as a sequential kernel rounds)."""
    out = [torch.zeros((), dtype=dtype) for _ in range(num_rows)]
    for i, v in zip(index, values):
        out[i] = out[i] + torch.tensor(v, dtype=dtype)
    return torch.stack(out) if out else torch.zeros(0, dtype=dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("seed", range(8))
def test_add_at_sums_each_row_in_order(device, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    num_rows = int(torch.randint(1, 6, (1,), generator=g))
    k = int(torch.randint(0, 200, (1,), generator=g))
    index = torch.randint(0, num_rows, (k,), generator=g)
    # magnitudes from 1e-8 to 1e8: the sum's last bits depend on the order of additions
    values = torch.randn(k, generator=g, dtype=torch.float64) * \
        10.0 ** torch.randint(-8, 9, (k,), generator=g)
    want = _sequential(num_rows, index.tolist(), values.tolist(), dtype)
    got = add_at(torch.zeros(num_rows, dtype=dtype, device=device), index.to(device),
                 values.to(device, dtype))
    assert torch.equal(got.cpu(), want)


def test_add_at_row_sums_do_not_depend_on_the_other_rows(device):
    """The rows of one utterance, alone and interleaved with another utterance's rows."""
    g = torch.Generator().manual_seed(0)
    mine = torch.randn(5000, generator=g, dtype=torch.float64) * 1e6
    theirs = torch.randn(5000, generator=g, dtype=torch.float64)
    alone = add_at(torch.zeros(1, dtype=torch.float64, device=device),
                   torch.zeros(5000, dtype=torch.int64, device=device), mine.to(device))
    both = torch.stack([mine, theirs], 1).flatten()
    rows = torch.tensor([0, 1], dtype=torch.int64).repeat(5000)
    batch = add_at(torch.zeros(2, dtype=torch.float64, device=device), rows.to(device),
                   both.to(device))
    assert torch.equal(batch[:1], alone)


def test_add_at_keeps_trailing_dimensions(device):
    target = torch.ones(3, 2, device=device)
    out = add_at(target, torch.tensor([2, 0, 2], device=device),
                 torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], device=device))
    assert out is target
    assert out.tolist() == [[4.0, 5.0], [1.0, 1.0], [7.0, 9.0]]
