"""`k2dec lm-perplexity` spells its inputs as the other commands do: the LM is ``--rnn-lm``
(as in ``k2dec decode``), the BPE model comes from ``--lang-dir`` or ``--bpe-model`` (as in
``k2dec train-token-lm``); the old ``--checkpoint`` says its new name."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from k2dec.cli import main

SHIPPED = Path(__file__).resolve().parents[2] / "assets" / "librispeech-synth"
LM = SHIPPED / "lm" / "rnn_lm.pt"
LANG = SHIPPED / "lang"

pytestmark = pytest.mark.skipif(not LM.is_file(), reason="no shipped RNN LM in this checkout")


@pytest.fixture
def text(tmp_path) -> Path:
    path = tmp_path / "text.txt"
    path.write_text("THE CAT SAT ON THE MAT\nA DOG AND A CAT\n")
    return path


def _run(*args: str):
    return CliRunner().invoke(main, ["lm-perplexity", *args, "--no-progress"])


def test_lang_dir_and_bpe_model_give_the_same_perplexity(text):
    by_dir = _run("--rnn-lm", str(LM), "--text", str(text), "--lang-dir", str(LANG))
    by_model = _run("--rnn-lm", str(LM), "--text", str(text), "--bpe-model",
                    str(LANG / "bpe.model"))
    assert by_dir.exit_code == 0, by_dir.output
    assert by_dir.output == by_model.output and by_dir.output.startswith("perplexity ")
    assert float(by_dir.output.split()[1]) > 1.0


@pytest.mark.parametrize("args, message", [
    (["--checkpoint", str(LM), "--lang-dir", str(LANG)], "--checkpoint is now --rnn-lm"),
    (["--rnn-lm", str(LM)], "give exactly one of --lang-dir and --bpe-model"),
    (["--rnn-lm", str(LM), "--lang-dir", str(LANG), "--bpe-model", str(LANG / "bpe.model")],
     "give exactly one of --lang-dir and --bpe-model"),
    (["--rnn-lm", str(LM), "--lang-dir", str(SHIPPED / "lm")], "has no bpe.model"),
], ids=["old-spelling", "neither", "both", "no-bpe-model"])
def test_wrong_spellings_say_what_to_give(text, args, message):
    if args[0] == "--checkpoint":
        args = [*args, "--rnn-lm", str(LM)]
    r = _run("--text", str(text), *args)
    assert r.exit_code == 2 and message in r.output + str(r.exception), r.output
