"""Hotword settings and lists at scale through the methods and the CLI: the bonus' range in
the method configs, a list too large refused up front (before any cut), and
``python -m k2dec.cli decode --hotwords FILE`` on the shipped assets with a bad score, a
lower-case list and a tab before ``:SCORE``."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from k2dec.methods.hotword_biasing import HotwordConfig, WordHotwordConfig

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "assets" / "librispeech-synth"
AUDIO = SHIPPED / "corpus" / "test-clean" / "101" / "3000" / "101-3000-0000.flac"
needs_shipped = pytest.mark.skipif(not (SHIPPED / "model.pt").is_file() or not AUDIO.is_file(),
                                   reason="no shipped model in this checkout")


@pytest.mark.parametrize("score", [1e30, float("inf"), float("nan"), -51.0])
def test_hotword_scores_have_a_range(score):
    with pytest.raises(ValueError, match=r"^hotwords.token_score: a hotword score must be a "
                                         r"finite number in \[-50, 50\]"):
        HotwordConfig(token_score=score)
    assert HotwordConfig(token_score=50.0).token_score == 50.0
    with pytest.raises(ValueError, match=r"^word_hotwords.word_score: a hotword score must "):
        WordHotwordConfig(word_score=score)
    assert WordHotwordConfig(word_score=-50.0).word_score == -50.0


@needs_shipped
def test_a_list_too_large_is_refused_when_loaded(tmp_path):
    from k2dec.job import load_assets
    from k2dec.scorers import HOTWORD_MAX_STATES

    hot = tmp_path / "hot.txt"
    # every line is many pieces; together more than the bound
    line = " ".join(["ANTIDISESTABLISHMENTARIANISM"] * 40)
    count = HOTWORD_MAX_STATES // 200 + 1
    hot.write_text((line + "\n") * count)
    with pytest.raises(ValueError, match=rf"^--hotwords {hot}: {count} hotword phrases have "
                                         r"\d+ tokens: their automaton could have \d+ states, "
                                         rf"more than the bound {HOTWORD_MAX_STATES}"):
        load_assets(SHIPPED / "model.pt", SHIPPED / "lang", hotwords=hot)


def _decode(tmp_path: Path, name: str, text: str) -> subprocess.CompletedProcess:
    audio = tmp_path / "audio"
    if not audio.is_dir():
        audio.mkdir()
        shutil.copy(AUDIO, audio / AUDIO.name)
    hot = tmp_path / f"{name}.txt"
    hot.write_text(text)
    return subprocess.run(
        [sys.executable, "-m", "k2dec.cli", "decode", "--audio-dir", str(audio), "--model",
         str(SHIPPED / "model.pt"), "--lang-dir", str(SHIPPED / "lang"), "--method",
         "modified_beam_search", "--hotwords", str(hot), "--out-dir", str(tmp_path / name)],
        cwd=REPO, capture_output=True, text=True, timeout=300)


def _hyps(out: Path) -> list[tuple[list[str], float]]:
    (path,) = out.glob("modified_beam_search/results-*.jsonl")
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return [(r["hyp"], r["hyps"]["modified_beam_search"]["score"]) for r in rows]


@needs_shipped
def test_cli_hotwords_file_checks(tmp_path):
    bad = _decode(tmp_path, "bad", "GOOD WORDS :2\nBIG BONUS :1e30\n")
    assert bad.returncode == 2, bad.stderr
    assert "Traceback" not in bad.stderr
    assert ("bad.txt:2: phrase 'BIG BONUS': a hotword score must be a finite number in "
            "[-50, 50] (HOTWORD_MAX_SCORE), got 1e+30") in bad.stderr
    # a lower-case list with a tab before its score decodes as the upper-case one
    # (the utterance is DON'T DISCOUNT FLYING PICKS ...: the phrase earns its bonus)
    other = _decode(tmp_path, "other", "ZEBRA CROSSING :3\n")
    upper = _decode(tmp_path, "upper", "DISCOUNT FLYING :3\n")
    lower = _decode(tmp_path, "lower", "discount Flying\t:3\n")
    assert other.returncode == upper.returncode == lower.returncode == 0, lower.stderr
    assert _hyps(tmp_path / "lower") == _hyps(tmp_path / "upper")
    assert _hyps(tmp_path / "upper")[0][1] > _hyps(tmp_path / "other")[0][1] + 1.0


def test_a_token_graph_too_large_for_lg_is_not_built():
    """Past HOTWORD_LG_MAX_ARCS (checked on the trie) the LG methods get the lattice bias
    instead of LG intersected with a token graph: nothing of nodes x tokens is built."""
    import k2
    import torch

    from k2dec.methods import Resources
    from k2dec.methods.hotword_biasing import HOTWORD_LG_MAX_ARCS, token_biased_graph
    from k2dec.scorers.hotword_lattices import TokenLatticeHotwords

    vocab = 500
    per_phrase = 100
    count = HOTWORD_LG_MAX_ARCS // (vocab * per_phrase) + 1
    phrases = tuple((tuple(range(1 + i, 1 + i + per_phrase)), None) for i in range(count))
    res = Resources(hotwords=phrases)
    lg = k2.arc_sort(k2.Fsa.from_str("0 1 1 0\n1 2 -1 0\n2"))
    lg.aux_labels = torch.tensor([3, -1], dtype=torch.int32)
    got = token_biased_graph(res, lg, HotwordConfig(), vocab, 0, torch.device("cpu"))
    assert isinstance(got, TokenLatticeHotwords)
    assert not [v for v in res.cache.values() if isinstance(v, k2.Fsa)]  # no graph built
    # a list within the bound: LG intersected with its token graph
    small = Resources(hotwords=phrases[:2])
    assert isinstance(token_biased_graph(small, lg, HotwordConfig(), vocab, 0,
                                         torch.device("cpu")), k2.Fsa)


def _ctc_inputs(seed: int, vocab: int, lengths: list[int]):
    import torch

    from k2dec.methods import CtcInputs

    g = torch.Generator().manual_seed(seed)
    log_probs = (torch.randn(len(lengths), max(lengths), vocab, generator=g) * 1.5
                 ).log_softmax(-1)
    return CtcInputs(log_probs, torch.tensor(lengths))


@pytest.mark.parametrize("name", ["1best", "nbest", "mbr"])
def test_hlg_methods_bias_the_lattices_when_the_biased_graph_is_too_large(setup, name):
    """word_hotwords.max_arcs below the biased HLG's estimate: the methods decode through the
    lattice bias (no error, the graph not rebuilt) and a large bonus brings the hotword into
    hypotheses (into every one with the biased graph, which biases the search too)."""
    from k2dec.methods import Resources, get_method, override_config

    lang, res = setup
    wt = lang.word_table
    inp = _ctc_inputs(4, lang.max_token_id + 1, [7, 5, 6])
    method = get_method(name)
    hot = Resources(graphs=dict(res.graphs), hotword_words=(((wt["C"],), None),))
    cfg = method.default_config()
    plain = method(inp, res, cfg)[0]
    outs = {}
    for max_arcs in (1, 1 << 26):  # lattice biasing; graph biasing
        biased = override_config(cfg, [f"word_hotwords.word_score={30.0}",
                                       f"word_hotwords.max_arcs={max_arcs}"])
        assert isinstance(biased.word_hotwords, WordHotwordConfig)
        outs[max_arcs] = method(inp, hot, biased)[0]
    def count(words):
        return sum(ws.count(wt["C"]) for ws in words)

    assert all(wt["C"] in w for w in outs[1 << 26].words), (name, outs[1 << 26].words)
    # the lattices hold fewer paths than the graph: more of the hotword, not always
    assert count(outs[1].words) > count(plain.words), (name, outs[1].words, plain.words)
    carrying = [g for k, g in hot.cache.items() if k[0] == "word_hotword_graph" and k[-1] == 1]
    assert carrying and all("hotword_lattice_bias" in dict(g.named_non_tensor_attr())
                            for g in carrying)
