"""k2dec.primitives.ragged.add_at: a row's sum depends only on that row's values and their order
(not on the rest of the batch, not on the run), and equals the sequential sum on the CPU."""

from __future__ import annotations

import pytest
import torch

from k2dec.primitives.ragged import add_at


def _sequential(num_rows: int, index: list[int], values: list, dtype) -> torch.Tensor:
    """The obviously-correct sum: a Python loop adding each value to its row in order, in the
    given dtype (every partial sum rounded to it)."""
    out = [torch.zeros((), dtype=dtype) for _ in range(num_rows)]
    for i, v in zip(index, values):
        out[i] = out[i] + torch.tensor(v, dtype=dtype)
    return torch.stack(out) if out else torch.zeros(0, dtype=dtype)


def _case(seed: int, k_max: int = 200):
    g = torch.Generator().manual_seed(seed)
    num_rows = int(torch.randint(1, 6, (1,), generator=g))
    k = int(torch.randint(0, k_max, (1,), generator=g))
    index = torch.randint(0, num_rows, (k,), generator=g)
    # magnitudes from 1e-8 to 1e8: a sum's last bits depend on the order of its additions
    values = torch.randn(k, generator=g, dtype=torch.float64) * \
        10.0 ** torch.randint(-8, 9, (k,), generator=g)
    return g, num_rows, index, values


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("seed", range(8))
def test_add_at_is_the_sequential_sum(device, dtype, seed):
    """Exactly on the CPU; to rounding on other devices (CUDA sums a run as a tree)."""
    _, num_rows, index, values = _case(seed)
    want = _sequential(num_rows, index.tolist(), values.tolist(), dtype)
    got = add_at(torch.zeros(num_rows, dtype=dtype, device=device), index.to(device),
                 values.to(device, dtype)).cpu()
    if device.type == "cpu":
        assert torch.equal(got, want)
    else:
        scale = float(values.abs().sum()) if values.numel() else 1.0
        eps = torch.finfo(dtype).eps
        assert torch.allclose(got, want, rtol=0.0, atol=4 * eps * scale * max(len(values), 1))


@pytest.mark.parametrize("seed", range(6))
def test_a_rows_sum_does_not_depend_on_the_other_rows(device, seed):
    """Row 0's values alone, then among other rows' values interleaved at random positions
    (its own order kept), twice: the same bits every time."""
    g, _, _, _ = _case(seed)
    n = int(torch.randint(1, 5000, (1,), generator=g))
    mine = torch.randn(n, generator=g, dtype=torch.float64) * \
        10.0 ** torch.randint(-6, 7, (n,), generator=g)
    alone = add_at(torch.zeros(1, dtype=torch.float64, device=device),
                   torch.zeros(n, dtype=torch.int64, device=device), mine.to(device))
    m = int(torch.randint(0, 5000, (1,), generator=g))
    rows = torch.cat([torch.zeros(n, dtype=torch.int64),
                      torch.randint(1, 4, (m,), generator=g)])
    vals = torch.cat([mine, torch.randn(m, generator=g, dtype=torch.float64)])
    # a random interleaving that keeps row 0's own order
    perm = torch.randperm(n + m, generator=g)
    slot_of_mine = perm[:n].sort().values
    order = torch.empty(n + m, dtype=torch.int64)
    order[slot_of_mine] = torch.arange(n)
    rest = torch.ones(n + m, dtype=torch.bool)
    rest[slot_of_mine] = False
    order[rest] = torch.arange(n, n + m)
    for _ in range(2):
        batch = add_at(torch.zeros(4, dtype=torch.float64, device=device),
                       rows[order].to(device), vals[order].to(device))
        assert torch.equal(batch[:1], alone)


def test_add_at_keeps_trailing_dimensions(device):
    target = torch.ones(3, 2, device=device)
    out = add_at(target, torch.tensor([2, 0, 2], device=device),
                 torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], device=device))
    assert out is target
    assert out.tolist() == [[4.0, 5.0], [1.0, 1.0], [7.0, 9.0]]


def test_add_at_with_nothing_to_add(device):
    target = torch.arange(3, dtype=torch.float64, device=device)
    add_at(target, torch.zeros(0, dtype=torch.int64, device=device),
           torch.zeros(0, dtype=torch.float64, device=device))
    assert target.tolist() == [0.0, 1.0, 2.0]
