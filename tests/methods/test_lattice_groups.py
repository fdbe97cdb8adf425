"""The HLG n-best and MBR methods, and the n-best through H, that search their own lattices
(no lattice cache) search and decode a batch group by group (``nbest.max_group_arcs``;
``whole_lattice.max_group_arcs`` for ``mbr``), holding one group's lattices at a time: at any
group size (one utterance per group, a few, the whole batch in the search's length order)
every utterance gets the records of the whole batch's shared lattices (words, frames,
scores, confidences, notes, errors), an utterance with an empty lattice included."""

from __future__ import annotations

from dataclasses import replace

import pytest

import k2dec.methods.ctc as ctc
from k2dec.lattice import LatticeCache
from k2dec.methods import CtcInputs, config_keys, get_method, override_config
from k2dec.nbest import MultiPassConfig
from tests.methods.conftest import method_config
from tests.methods.ctc_inputs import ctc_batch_with_empty

#: the grouped methods and where their group bound is
GROUPED = {"nbest": "nbest", "nbest-rescoring": "nbest", "nbest-oracle": "nbest",
           "attention-decoder": "nbest", "rnn-lm": "nbest", "multi-pass": "nbest",
           "mbr": "whole_lattice", "attention-decoder-rescoring-no-ngram": "nbest"}

#: the methods whose lattices are searched through H (any token sequence is a path)
THROUGH_H = ("attention-decoder-rescoring-no-ngram",)

#: the methods whose scores come from a neural network: a batch of other paths rounds its
#: float32 matrix products differently (~1e-7 relative), so their scores and confidences
#: agree to that; everything else is identical
NEURAL = ("attention-decoder", "rnn-lm", "multi-pass", "attention-decoder-rescoring-no-ngram")

#: (seed, lengths of the random utterances, where the empty lattice's utterance goes)
BATCHES = [(0, [9], None), (1, [], 0), (2, [3, 12, 7, 1, 10], 2), (3, [6, 11, 8], 3)]


def _config(name: str, rescore_with_g: bool):
    cfg = method_config(name, ngram_lm_scale=0.6, attention_scale=0.4, lm_scale=0.5,
                        sweep=True, ngram_lm_scales=(0.3, 1.2), lm_scales=(0.3, 1.2),
                        attention_scales=(0.2, 0.9))
    if name == "mbr":
        return replace(cfg, mbr=replace(cfg.mbr, rescore_with_g=rescore_with_g))
    cfg = replace(cfg, nbest=replace(cfg.nbest, num_paths=20))
    if name == "multi-pass":
        cfg = replace(cfg, multi_pass=MultiPassConfig(first_k=1, batch_k=1, stop_sigmas=0.5,
                                                      lm_scale=0.5, top_k=6))
    return cfg


def _bounded(cfg, part: str, max_group_arcs: int):
    return replace(cfg, **{part: replace(getattr(cfg, part), max_group_arcs=max_group_arcs)})


def _cases():
    for name in GROUPED:
        for g in ((False, True) if name == "mbr" else (False,)):
            yield pytest.param(name, g, id=f"{name}{'-rescored' if g else ''}")


@pytest.mark.parametrize("name, rescore_with_g", list(_cases()))
@pytest.mark.parametrize("seed, lengths, dead_at", BATCHES,
                         ids=["one", "one-empty", "six-empty", "four-empty-last"])
def test_groups_give_the_records_of_the_whole_batch(setup, monkeypatch, name, rescore_with_g,
                                                    seed, lengths, dead_at):
    lang, res = setup
    inp = ctc_batch_with_empty(seed, lang.max_token_id + 1, lengths,
                               lang.token_table["d"], dead_at)
    if dead_at is not None and name in THROUGH_H:  # no token possible: H has no path either
        inp.log_probs[dead_at] = float("-inf")
    n = inp.log_probs.shape[0]
    cfg = _config(name, rescore_with_g)
    part = GROUPED[name]
    groups: list[list[int]] = []
    real = ctc.lattice_groups

    def spy(*args, **kwargs):
        for utts, result in real(*args, **kwargs):
            groups.append(utts.tolist())
            yield utts, result

    monkeypatch.setattr(ctc, "lattice_groups", spy)
    shared = get_method(name)(CtcInputs(inp.log_probs, inp.log_probs_lens, inp.ref_words,
                                        inp.memory, inp.memory_lens,
                                        lattices=LatticeCache(64)), res, cfg)
    assert groups == []  # the shared lattices: no groups
    errors = [h.error for h in shared[0].hyps]
    if lengths:
        assert any(h.words or h.tokens for r in shared for h in r.hyps), \
            "no words: the test checks nothing"
    if dead_at is not None:
        assert errors[dead_at] and errors.count("") == n - 1, errors
    for bound in (1, 150, 100_000_000):
        groups.clear()
        grouped = get_method(name)(inp, res, _bounded(cfg, part, bound))
        assert sorted(u for g in groups for u in g) == list(range(n))
        if bound == 1:  # one utterance per search call, one group each
            assert len(groups) == n
        elif bound == 150 and n >= 4:  # several groups, one of several utterances
            assert len(groups) > 1 and max(len(g) for g in groups) > 1, groups
        elif bound > 150:  # one group: the whole batch, longest first
            assert len(groups) == 1
        assert [r.key for r in grouped] == [r.key for r in shared]
        for a, b in zip(grouped, shared, strict=True):
            assert a.config is cfg or a.config == _bounded(cfg, part, bound)
            _same(a.hyps, b.hyps, exact=name not in NEURAL)


def _same(got, want, exact: bool) -> None:
    """The records ``got`` are ``want`` (``exact``: equal; else scores and confidences to
    float32 rounding, everything else equal)."""
    if exact:
        assert got == want
        return
    loose = dict(score=None, word_confidences=None, token_confidences=None)
    assert [replace(h, **loose) for h in got] == [replace(h, **loose) for h in want]
    for a, b in zip(got, want):
        assert (a.score is None) == (b.score is None)
        if a.score is not None:
            assert a.score == pytest.approx(b.score, rel=1e-6, abs=1e-6)
        for x, y in ((a.word_confidences, b.word_confidences),
                     (a.token_confidences, b.token_confidences)):
            assert (x is None) == (y is None)
            if x is not None:
                assert list(x) == pytest.approx(list(y), rel=1e-6, abs=1e-6)


def test_the_whole_batch_at_once_when_the_bound_is_off(setup, monkeypatch):
    lang, res = setup
    inp = ctc_batch_with_empty(5, lang.max_token_id + 1, [4, 9, 6], lang.token_table["d"], 1)
    monkeypatch.setattr(ctc, "lattice_groups", None)  # never called
    cfg = _bounded(_config("nbest", False), "nbest", 1)
    off = get_method("nbest")(inp, res, replace(cfg, nbest=replace(cfg.nbest,
                                                                   max_group_arcs=None)))
    shared = get_method("nbest")(replace(inp, lattices=LatticeCache(64)), res, cfg)
    assert off[0].hyps == shared[0].hyps


def test_the_bound_is_a_setting_of_the_grouped_methods_only():
    for name, part in GROUPED.items():
        default = get_method(name).default_config()
        assert getattr(override_config(default, [f"{part}.max_group_arcs=7"]),
                       part).max_group_arcs == 7
        assert config_keys(get_method(name).default_config())[f"{part}.max_group_arcs"] \
            == 100_000
    for name in ("fast_beam_search_nbest",):
        assert "nbest.max_group_arcs" not in config_keys(get_method(name).default_config())
        with pytest.raises(ValueError, match="has no field 'nbest.max_group_arcs'"):
            override_config(get_method(name).default_config(), ["nbest.max_group_arcs=7"])



#: accepts token 1 one or more times, then token 2 (words 11 and 12): an utterance of token
#: 1 only ends in a state that is not final, so its lattice is a best partial path
PARTIAL_GRAPH = """0 1 1 11 0.0
1 1 1 0 0.0
1 2 2 12 0.0
2 3 -1 -1 0.0
3"""


@pytest.mark.parametrize("bound", [None, 1, 100_000_000], ids=["whole", "one-each", "one"])
def test_every_grouped_method_notes_a_best_partial_path(bound):
    """``decode_lattice_groups`` (through which every grouped n-best / MBR method decodes its
    lattices) adds the search's partial-path note (``lattice.allow_partial``) to the records
    of exactly the utterances whose lattice is a best partial path, in any grouping."""
    import k2
    import torch

    from k2dec.lattice import LatticeConfig, LatticeStatus
    from k2dec.methods.records import from_lattice
    from k2dec.primitives.hypothesis import HypothesisRecord

    graph = k2.arc_sort(k2.Fsa.from_str(PARTIAL_GRAPH, acceptor=False))
    lp = torch.full((3, 3, 3), float("-inf"))
    lp[:, :, 1] = 0.0  # utterance 0: token 1 only (partial); 1 and 2 end with token 2
    lp[1, 2] = lp[2, 1] = torch.tensor([float("-inf"), float("-inf"), 0.0])
    lens = torch.tensor([3, 3, 2])
    cfg = replace(method_config("nbest"), lattice=LatticeConfig(
        allow_partial=True, retry_scales=(), min_active_states=0))
    seen = []

    def decode(group, result):
        seen.append([r.status for r in result.reports])
        return [ctc.MethodResult("m", tuple(HypothesisRecord(words=(), notes="own")
                                            for _ in result.reports), cfg)]

    [got] = ctc.decode_lattice_groups(CtcInputs(lp, lens), graph, cfg, bound, decode)
    assert LatticeStatus.PARTIAL in [s for g in seen for s in g]
    one_best = from_lattice(ctc.one_best_decoding(lp, lens, graph, cfg.lattice), True)
    note = one_best[0].notes
    assert note and [h.notes for h in one_best[1:]] == ["", ""], one_best
    assert [h.notes for h in got.hyps] == [f"own; {note}", "own", "own"]


@pytest.mark.parametrize("shared", [False, True], ids=["grouped", "shared-lattices"])
def test_whole_lattice_rescoring_notes_a_best_partial_path(shared):
    """whole-lattice-rescoring (searched and rescored in groups, or through the job's shared
    lattices) notes the search's partial path (``lattice.allow_partial``) on exactly the
    utterance whose lattice is one, after its rescoring's own notes."""
    import k2
    import torch

    from k2dec.lattice import LatticeConfig, LatticeStatus
    from k2dec.methods import Resources
    from k2dec.methods.records import from_lattice

    hlg = k2.arc_sort(k2.Fsa.from_str(PARTIAL_GRAPH, acceptor=False))
    hlg.lm_scores = hlg.scores.clone()
    G = k2.arc_sort(k2.add_epsilon_self_loops(k2.Fsa.from_str(
        "0 0 11 -0.5\n0 0 12 -0.25\n0 1 -1 0.0\n1", acceptor=True)))
    G.lm_scores = G.scores.clone()
    lp = torch.full((3, 3, 3), float("-inf"))
    lp[:, :, 1] = 0.0  # as above: utterance 0 ends on token 1 only (partial)
    lp[1, 2] = lp[2, 1] = torch.tensor([float("-inf"), float("-inf"), 0.0])
    lens = torch.tensor([3, 3, 2])
    lattice = LatticeConfig(allow_partial=True, retry_scales=(), min_active_states=0)
    cfg = replace(method_config("whole-lattice-rescoring"), lattice=lattice)
    inputs = CtcInputs(lp, lens, lattices=LatticeCache(64) if shared else None)
    [got] = get_method("whole-lattice-rescoring")(inputs, Resources(graphs={"HLG": hlg, "G": G}),
                                                  cfg)
    one_best = ctc.one_best_decoding(lp, lens, hlg, lattice)
    assert [h.status for h in one_best][0] is LatticeStatus.PARTIAL
    note = from_lattice(one_best, True)[0].notes
    assert note and [h.error for h in got.hyps] == ["", "", ""], got.hyps
    assert [h.notes for h in got.hyps] == [note, "", ""]
    assert [h.words for h in got.hyps] == [(11,), (11, 12), (11, 12)]
