"""scripts/make_align_dev.py: the dev utterances it plans are the shipped corpus' held-out
dev-clean sentences (none is a test-clean / test-other transcript), and it writes them in the
LibriSpeech layout with their transcripts."""

from __future__ import annotations

import shutil

import pytest
import soundfile as sf
from click.testing import CliRunner

from k2dec.demo import ASSETS
from k2dec.train.synth import FORTUNES_DIR
from tests.scripts.loader import load_script

pytestmark = pytest.mark.skipif(
    not FORTUNES_DIR.is_dir() or shutil.which("espeak-ng") is None,
    reason="needs Debian's fortunes and espeak-ng (the corpus' text and a voice)")


def _test_sentences() -> set[str]:
    out = set()
    for trans in (ASSETS / "corpus").rglob("*.trans.txt"):
        out |= {line.split(" ", 1)[1].strip() for line in trans.read_text().splitlines()
                if line.strip()}
    return out


def test_dev_sentences_are_not_test_sentences():
    utts, voices = load_script("make_align_dev").dev_utterances(100)
    assert len(utts) == 100 and all(u.split == "dev-clean" for u in utts)
    assert not {u.text for u in utts} & _test_sentences()
    assert {u.speaker_id for u in utts} <= set(voices)


def test_writes_the_librispeech_layout(tmp_path):
    script = load_script("make_align_dev")
    result = CliRunner().invoke(script.main, ["--output-dir", str(tmp_path), "--num", "2"])
    assert result.exit_code == 0, result.output
    flacs = sorted((tmp_path / "dev-clean").rglob("*.flac"))
    lines = [line for t in (tmp_path / "dev-clean").rglob("*.trans.txt")
             for line in t.read_text().splitlines()]
    assert len(flacs) == 2 and sorted(line.split()[0] for line in lines) == \
        [f.stem for f in flacs]
    assert all(sf.info(str(f)).samplerate == 16000 for f in flacs)
