"""icefall's n-best choices after fast_beam_search, step by step in plain Python (our code,
icefall's algorithm: ``Nbest.from_lattice`` then ``fast_beam_search_nbest`` /
``_nbest_LG`` / ``_nbest_oracle`` of ``beam_search.py``):

1. the lattice's scores times ``nbest_scale``, ``num_paths`` paths per utterance drawn by
   ``k2.random_paths`` (double scores) -- the only k2 call, as it is the sampler whose draws
   must be reproduced; the lattice's own scores are unchanged;
2. each path's key: its ``aux_labels`` > 0 (tokens through the trivial graph, words through
   LG), one path kept per distinct key;
3. each key scored on the whole lattice: the best alignment (max over the lattice's paths
   with that key: ``fast_beam_search_nbest``'s intersection and shortest path) or the log-sum
   over them (``_nbest_LG``'s log-semiring total score), by a dynamic programme over the
   lattice's states (they are numbered in topological order);
4. the key with the largest score wins; :func:`oracle_distance` gives the smallest edit
   distance to a reference among the keys (the oracle's choice, up to ties).
"""

from __future__ import annotations

import math

import k2
import torch

from tests.reference.lattice_rescore import levenshtein


def sampled_keys(lattice: k2.Fsa, num_paths: int, nbest_scale: float) -> list[list[tuple]]:
    """Distinct keys (tuples of ``aux_labels`` > 0) of the sampled paths, per utterance."""
    scaled = lattice.clone()
    scaled.scores = lattice.scores * nbest_scale
    paths = k2.random_paths(scaled, num_paths=num_paths, use_double_scores=True).tolist()
    aux = lattice.aux_labels.tolist()
    out = []
    for utt_paths in paths:
        keys = {tuple(aux[a] for a in path if aux[a] > 0) for path in utt_paths}
        out.append(sorted(keys))
    return out


def key_score(lattice: k2.Fsa, utt: int, key: tuple, log_semiring: bool) -> float:
    """Max (or log-sum) of the scores of utterance ``utt``'s lattice paths whose
    ``aux_labels`` > 0 are ``key``; ``-inf`` if there is none."""
    fsa = lattice[utt]
    arcs = fsa.arcs.values()[:, :3].tolist()
    scores = fsa.scores.to(torch.float64).tolist()
    aux = fsa.aux_labels.tolist()
    num_states = int(fsa.shape[0])
    best: list[dict[int, float]] = [dict() for _ in range(num_states)]
    best[0][0] = 0.0
    order = sorted(range(len(arcs)), key=lambda i: arcs[i][0])
    for i in order:
        src, dst, _ = arcs[i]
        assert src < dst, "lattice states are not in topological order"
        for done, value in best[src].items():
            nxt = done
            if aux[i] > 0:
                if done == len(key) or key[done] != aux[i]:
                    continue
                nxt = done + 1
            total = value + scores[i]
            old = best[dst].get(nxt)
            if old is None:
                best[dst][nxt] = total
            elif log_semiring:
                best[dst][nxt] = max(old, total) + math.log1p(math.exp(-abs(old - total)))
            else:
                best[dst][nxt] = max(old, total)
    return best[num_states - 1].get(len(key), -math.inf) if num_states else -math.inf


def nbest_icefall(lattice: k2.Fsa, num_paths: int, nbest_scale: float = 0.5,
                  log_semiring: bool = False) -> list[list[int]]:
    """The winning key of each utterance (``[]`` for an empty lattice)."""
    out = []
    for utt, keys in enumerate(sampled_keys(lattice, num_paths, nbest_scale)):
        scored = [(key_score(lattice, utt, k, log_semiring), k) for k in keys]
        out.append(list(max(scored)[1]) if scored else [])
    return out


def oracle_distance(lattice: k2.Fsa, num_paths: int, refs: list[list[int]],
                    nbest_scale: float = 0.5) -> list[int]:
    """The smallest edit distance to ``refs[u]`` among utterance ``u``'s sampled keys."""
    keys = sampled_keys(lattice, num_paths, nbest_scale)
    return [min((levenshtein(r, k) for k in ks), default=len(r)) for ks, r in zip(keys, refs)]
