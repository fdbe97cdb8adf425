"""``k2dec decode`` with a cuts manifest that is empty, not UTF-8 JSON lines, or for a model of
another vocabulary: a usage error naming the file, before any decoding (no traceback)."""

from __future__ import annotations

import gzip
import shutil

import pytest
from click.testing import CliRunner

from k2dec.cli import main
from k2dec.graph import compile_graph
from k2dec.lang import cmudict_lexicon, write_lang_dir


def _decode(s, cuts, out, lang_dir=None):
    return CliRunner().invoke(main, [
        "decode", "--cuts", str(cuts), "--model", str(s["model_path"]),
        "--lang-dir", str(lang_dir or s["lang_dir"]), "--method", "1best",
        "--out-dir", str(out)])


@pytest.mark.parametrize("name, data, message", [
    ("empty.jsonl.gz", gzip.compress(b""), "is empty: there is nothing to decode"),
    ("empty.jsonl", b"", "is empty: there is nothing to decode"),
    ("text.jsonl", b"utt1 hello world\n", "text.jsonl:1: cuts manifest line is not JSON"),
    ("latin1.jsonl", '{"id": "caf\xe9"}\n'.encode("latin-1"),
     "latin1.jsonl:1: cuts manifest is not UTF-8 text"),
])
def test_unusable_cuts_manifests_are_usage_errors(decode_setup, tmp_path, name, data, message):
    path = tmp_path / name
    path.write_bytes(data)
    r = _decode(decode_setup, path, tmp_path / "out")
    assert r.exit_code == 2, (r.output, r.exception)
    assert message in r.output and str(path.name) in r.output
    assert not (tmp_path / "out" / "1best").exists()


def test_a_lang_dir_for_another_vocabulary_is_refused(decode_setup, tmp_path):
    """A phone lang dir (CMUdict, 40 tokens) with the 24-token BPE model of the setup."""
    s = decode_setup
    lexicon, _ = cmudict_lexicon(["THE", "CAT", "SAT"], max_prons=1, add_silence_entries=False)
    lang = write_lang_dir(tmp_path / "lang_phone", lexicon)
    shutil.copy(s["dir"] / "lm.arpa", tmp_path / "lm.arpa")
    with pytest.raises(ValueError):  # the LM's words are not all in this lexicon
        compile_graph(lang.path, "HLG", arpa=tmp_path / "lm.arpa")
    r = _decode(s, s["cuts_path"], tmp_path / "out", lang.path)
    assert r.exit_code == 2, (r.output, r.exception)
    assert "tokens.txt has" in r.output and "but the model has 24 outputs" in r.output
