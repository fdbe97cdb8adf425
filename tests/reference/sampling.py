"""A per-path, per-step Python reference of :func:`k2dec.nbest.sample_paths`: the same draws
(recomputed here from :func:`~k2dec.nbest.sampling.uniform_hash` with the stratification
written out), the same arc choice rule, one path at a time."""

from __future__ import annotations

import bisect

import k2
import torch

from k2dec.nbest.sampling import uniform_hash


def draw(seed: int, num_paths: int, path: int, step: int) -> float:
    """The number path ``path`` uses at ``step``: its stratum (its key's rank among the
    ``num_paths`` keys of that step) plus a uniform offset, over ``num_paths``."""
    paths = torch.arange(num_paths)
    steps = torch.full_like(paths, step)
    keys = uniform_hash(seed ^ 0x2545F491, paths, steps).tolist()
    rank = sorted(keys).index(keys[path])
    offset = float(uniform_hash(seed, torch.tensor([path]), torch.tensor([step]))[0])
    return (rank + offset) / num_paths


def sample_paths_reference(fsa: k2.Fsa, num_paths: int, seed: int = 0) -> list[list[int]]:
    """Paths (arc indexes within ``fsa``, a single FSA) drawn one by one: at each state, the
    last of its arcs after the first whose cumulative probability (k2's arc cdf) is at most
    the path's number for that step (the first arc otherwise)."""
    vec = k2.create_fsa_vec([fsa.to("cpu")])
    if vec.num_arcs == 0:
        return []
    tot = float(vec._get_tot_scores(use_double_scores=True, log_semiring=True)[0])
    if tot == float("-inf"):
        return []
    cdf = vec._get_arc_cdf(use_double_scores=True, log_semiring=True).tolist()
    arcs = vec.arcs.values()[:, :2].tolist()
    leaving: dict[int, list[int]] = {}
    for i, (src, _) in enumerate(arcs):
        leaving.setdefault(src, []).append(i)
    final = fsa.shape[0] - 1
    out = []
    for j in range(num_paths):
        state, step, path = 0, 0, []
        while state != final:
            u = draw(seed, num_paths, j, step)
            out_arcs = leaving[state]
            k = bisect.bisect_right([cdf[a] for a in out_arcs[1:]], u)
            arc = out_arcs[k]
            path.append(arc)
            state = arcs[arc][1]
            step += 1
        out.append(path)
    return out
