"""How a long recording's segments are batched (k2dec.job.longform): methods that build a
lattice get smaller batches than the others (their peak memory is the largest lattice of one
batch), every segment is in exactly one batch, and a batch holds at most its bound's seconds
unless it is one segment; against a brute-force reference on random segments."""

from __future__ import annotations

import random

import pytest

from k2dec.job import DecodeConfig
from k2dec.job.longform import (
    LATTICE_BATCH_FACTOR,
    LONG_BATCH_FACTOR,
    _batches,
    builds_lattice,
    long_batch_seconds,
)
from k2dec.longform import Segment
from k2dec.methods import get_method, list_methods

LATTICE = {"1best", "nbest", "nbest-rescoring", "whole-lattice-rescoring", "mbr", "rnn-lm",
           "ctc-decoding", "attention-decoder", "fast_beam_search", "fast_beam_search_LG",
           "fast_beam_search_nbest_LG", "fast_beam_search_with_nbest_rescoring"}
NOT_LATTICE = {"greedy_search", "modified_beam_search", "beam_search", "ctc-greedy-search",
               "ctc-prefix-beam-search", "modified_beam_search_LODR", "attention-beam-search"}


def test_which_methods_build_a_lattice():
    for name in LATTICE | NOT_LATTICE:
        m = get_method(name)
        assert builds_lattice(m, m.default_config()) == (name in LATTICE), name
    for m in list_methods():  # every method searching a graph or with fast_beam_search
        if {"H", "HLG", "LG", "G"} & set(m.requires) or m.name.startswith("fast_beam_search"):
            assert builds_lattice(m, m.default_config()), m.name


def test_a_lattice_methods_bound_is_smaller():
    assert LATTICE_BATCH_FACTOR < LONG_BATCH_FACTOR
    config = DecodeConfig()  # segment_max 30 s, max_duration 200 s
    assert long_batch_seconds(config, lattice=True) == 30.0
    assert long_batch_seconds(config) == 60.0
    small = DecodeConfig(segment_max=10.0, max_duration=15.0)
    assert long_batch_seconds(small, lattice=True) == 10.0
    assert long_batch_seconds(small) == 15.0
    # never less than one segment
    assert long_batch_seconds(DecodeConfig(segment_max=30.0, max_duration=20.0), True) == 30.0


def _reference(durations: list[float], bound: float) -> list[list[int]]:
    """Shortest first (ties by index), a new batch when the next would pass the bound."""
    order = sorted(range(len(durations)), key=lambda i: (durations[i], i))
    out: list[list[int]] = []
    for i in order:
        if out and sum(durations[j] for j in out[-1]) + durations[i] > bound:
            out.append([])
        if not out:
            out.append([])
        out[-1].append(i)
    return [sorted(b) for b in out]


@pytest.mark.parametrize("seed", range(40))
def test_batches_match_the_reference_and_their_bound(seed):
    rng = random.Random(seed)
    n = rng.choice([0, 1, 2, rng.randint(3, 60)])
    durations = [round(rng.uniform(0.3, 30.0), 2) for _ in range(n)]
    if n and seed % 4 == 0:
        durations[rng.randrange(n)] = 30.0  # a segment of the full bound
    starts = [10.0 * i for i in range(n)]
    segments = [Segment(s, s + d) for s, d in zip(starts, durations)]
    bound = rng.choice([30.0, 60.0, 45.5])
    got = list(_batches(segments, bound))
    assert got == _reference(durations, bound)
    assert sorted(i for b in got for i in b) == list(range(n))
    for b in got:
        assert len(b) == 1 or sum(durations[i] for i in b) <= bound + 1e-9, (b, bound)
