"""Fixtures shared with the n-best tests, and the CTC methods' resources."""

from dataclasses import replace
from typing import Any

import pytest
import torch

from k2dec.aed import TransformerDecoder
from k2dec.graph import build_rescoring_G
from k2dec.lm import RnnLM, RnnLmConfig
from k2dec.methods import Resources, config_field_path, get_method
from k2dec.testing.lang import TINY_ARPA
from tests.nbest.conftest import tiny_hlg  # noqa: F401


@pytest.fixture(scope="module")
def setup(tiny_hlg, tmp_path_factory):  # noqa: F811
    """The tiny HLG's lang dir and resources: HLG, H, a rescoring G, an attention decoder,
    an RNN LM."""
    lang, HLG, H = tiny_hlg
    d = tmp_path_factory.mktemp("ctc_methods")
    (d / "lm.arpa").write_text(TINY_ARPA)
    G = build_rescoring_G(d / "lm.arpa", lang.word_table)
    torch.manual_seed(0)
    decoder = TransformerDecoder(vocab_size=6, memory_dim=8, d_model=16, nhead=2,
                                 num_layers=1, dim_feedforward=16, dropout=0.0).eval()
    lm = RnnLM(RnnLmConfig(vocab_size=6, embedding_dim=8, hidden_dim=8, num_layers=1)).eval()
    res = Resources(graphs={"HLG": HLG, "H": H, "G": G}, lms={"rnn_lm": lm},
                    attention_decoder=decoder)
    return lang, res


def method_config(name: str, **settings: Any) -> Any:
    """The method's default config with each of ``settings`` that it has (a field of its own,
    a part, or the one field of that name in a part, as ``--set`` finds it); the others are
    left out
    (each method's config has only the fields it reads)."""
    cfg = get_method(name).default_config()
    for key, value in settings.items():
        try:  # a whole part (nbest=NbestConfig(...)) or a settings key
            path = [key] if hasattr(cfg, key) else config_field_path(cfg, key)
        except ValueError:  # a key of version 0.1 here: not one of this method's
            path = None
        if path is not None:
            cfg = _replaced(cfg, path, value)
    return cfg


def _replaced(cfg: Any, path: list[str], value: Any) -> Any:
    if len(path) == 1:
        return replace(cfg, **{path[0]: value})
    return replace(cfg, **{path[0]: _replaced(getattr(cfg, path[0]), path[1:], value)})
