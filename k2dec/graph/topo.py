"""Token topologies: CTC (H)."""

from __future__ import annotations

import k2
import torch

__all__ = ["build_ctc_topo"]


def _check_max_token(max_token: int) -> None:
    if not isinstance(max_token, int) or isinstance(max_token, bool) or max_token < 1:
        raise ValueError(f"max_token must be an int >= 1 (largest token id), got {max_token!r}")


def build_ctc_topo(
    max_token: int, modified: bool = False, device: torch.device | str = "cpu"
) -> k2.Fsa:
    """H: the CTC topology over tokens ``0..max_token`` (0 is blank).

    Args:
      max_token: the largest token id (the network's output dim minus one); exclude
        disambiguation symbols.
      modified: the "modified" topology (one state per token is shared, O(V) arcs
        instead of O(V^2); a token may not repeat without a blank in between being
        optional), as in ``k2.ctc_topo``.

    Returns:
      an ``k2.Fsa`` whose ``labels`` are network outputs (0 = blank) and whose
      ``aux_labels`` are tokens (0 = epsilon).
    """
    _check_max_token(max_token)
    return k2.arc_sort(k2.ctc_topo(max_token, modified=modified, device=torch.device(device)))

