"""``1best`` with ``search.lattice_free``: the Viterbi beam search behind the method, set the
way ``--set`` sets it, with the lattice search's words at wide beams."""

from __future__ import annotations

import pytest

from k2dec.lattice import LatticeConfig
from k2dec.methods import get_method
from k2dec.methods.ctc import HlgConfig, OneBestSearchConfig
from k2dec.methods.parts import GraphConfig
from k2dec.methods.settings import override_config
from tests.methods.ctc_inputs import random_ctc_inputs

WIDE = LatticeConfig(search_beam=50.0, output_beam=50.0, max_active_states=100000,
                     min_active_states=0)


def test_lattice_free_is_off_by_default_and_set_by_key():
    cfg = get_method("1best").default_config()
    assert isinstance(cfg, HlgConfig) and cfg.search.lattice_free is False
    assert override_config(cfg, ["search.lattice_free=true"]).search.lattice_free is True
    with pytest.raises(TypeError, match="search.lattice_free must be true or false"):
        OneBestSearchConfig(lattice_free="yes")


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_lattice_free_gives_the_lattice_search_words(setup, seed):
    lang, res = setup
    inp = random_ctc_inputs(10 + seed, lang.max_token_id + 1)
    base = HlgConfig(lattice=WIDE, graph=GraphConfig(0.6))
    free = HlgConfig(lattice=WIDE, graph=GraphConfig(0.6),
                         search=OneBestSearchConfig(lattice_free=True))
    a = get_method("1best")(inp, res, base)[0]
    b = get_method("1best")(inp, res, free)[0]
    assert b.config is free
    assert a.words == b.words and a.failed == b.failed
