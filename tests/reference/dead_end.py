"""A graph with a dead end that the input favours, for the 1best searches' "no surviving
path" cases: state 1 has no final arc; the only complete paths loop on state 2. With T >= 20
frames k2 prunes the lattice in chunks and returns the partial lattice of the dead end (arcs,
but no final arc)."""

from __future__ import annotations

import k2
import torch

DEAD_END = "0 1 1 0 0\n0 2 2 0 0\n1 1 1 0 0\n2 2 2 7 0\n2 3 -1 -1 0\n3"


def dead_end_case(t: int, device) -> tuple[k2.Fsa, torch.Tensor, torch.Tensor]:
    """The graph, log-probs ``(2, t, 3)`` and lengths of two utterances: utterance 0 prefers
    the dead end, utterance 1 the good branch."""
    g = k2.Fsa.from_str(DEAD_END, acceptor=False).to(device)
    lp = torch.full((2, t, 3), -10.0)
    lp[:, :, 1] = 0.0
    lp[:, :, 2] = -3.0
    lp[1, :, 2] = 0.0  # utterance 1 prefers the good branch
    lp[1, :, 1] = -3.0
    return g, lp.to(device), torch.tensor([t, t])
