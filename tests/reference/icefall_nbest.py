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
   distance to a reference among the keys, :func:`oracle_icefall` the oracle's very choice:
   each key scored by its own ``k2.levenshtein_alignment`` with its reference (float32 total,
   as icefall's ``nbest_oracle`` / ``fast_beam_search_nbest_oracle`` score them), the last
   of equal scores in the order of k2's ``unique`` (which icefall's n-best has).
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


def levenshtein_score(hyp: list[int], ref: list[int]) -> float:
    """icefall's oracle score of one hypothesis: the float32 total score of
    ``k2.levenshtein_alignment`` of the two Levenshtein graphs (minus the edit distance, with
    float32 rounding)."""
    alignment = k2.levenshtein_alignment(
        refs=k2.levenshtein_graph([ref]), hyps=k2.levenshtein_graph([hyp]),
        hyp_to_ref_map=torch.zeros(1, dtype=torch.int32), sorted_match_ref=True)
    return float(alignment.get_tot_scores(use_double_scores=False, log_semiring=False)[0])


def oracle_icefall(lattice: k2.Fsa, num_paths: int, refs: list[list[int]],
                   nbest_scale: float = 0.5) -> list[list[int]]:
    """icefall's oracle choice per utterance (``[]`` without paths): of the sampled keys
    (``aux_labels`` > 0; a tensor ``aux_labels`` only), the one whose
    :func:`levenshtein_score` against ``refs[u]`` is largest, one key at a time."""
    scaled = lattice.clone()
    scaled.scores = lattice.scores * nbest_scale
    paths = k2.random_paths(scaled, num_paths=num_paths, use_double_scores=True).tolist()
    aux = lattice.aux_labels.tolist()
    out = []
    for utt_paths, ref in zip(paths, refs):
        keys = [[aux[a] for a in path if aux[a] > 0] for path in utt_paths]
        if not keys:
            out.append([])
            continue
        # k2's order of the distinct keys (icefall's), which decides between equal scores
        distinct = k2.RaggedTensor([keys], dtype=torch.int32).unique()[0].tolist()[0]
        best, best_score = [], -math.inf
        for key in distinct:
            score = levenshtein_score(key, ref)
            if score >= best_score:
                best, best_score = key, score
        out.append(best)
    return out
