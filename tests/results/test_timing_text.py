import time

import k2
import pytest
import torch

from k2dec.results import RtfTimer, bpe_ids_to_words, token_ids_to_words, word_ids_to_words


def test_rtf_timer():
    timer = RtfTimer()
    with pytest.raises(ValueError, match="no audio timed"):
        _ = timer.rtf
    with timer.measure(audio_seconds=2.0):
        time.sleep(0.05)
    with pytest.raises(RuntimeError):
        with timer.measure(audio_seconds=1.0):
            time.sleep(0.02)
            raise RuntimeError("decode failed")
    timer.add(0.1, 1.0)
    assert timer.audio_seconds == 4.0
    assert 0.17 <= timer.decode_seconds < 1.0
    assert timer.rtf == pytest.approx(timer.decode_seconds / 4.0)
    with pytest.raises(ValueError, match="audio_seconds must be finite"):
        timer.add(0.1, -1.0)
    with pytest.raises(ValueError, match="decode_seconds must be finite"):
        timer.add(float("nan"), 1.0)
    with pytest.raises(ValueError, match="audio_seconds must be finite"):
        with timer.measure(float("inf")):
            pass


WORDS = k2.SymbolTable.from_str("<eps> 0\nHELLO 1\nWORLD 2\nDON'T 3\n")


def test_word_ids_to_words():
    assert word_ids_to_words([[1, 2], [], torch.tensor([3, 1])], WORDS) == [
        ["HELLO", "WORLD"], [], ["DON'T", "HELLO"]]
    assert word_ids_to_words([[2]], {2: "X"}) == [["X"]]
    with pytest.raises(ValueError, match="id 9 is not in the symbol table"):
        word_ids_to_words([[1, 9]], WORDS)
    with pytest.raises(ValueError, match="id 9 is not in the symbol table"):
        word_ids_to_words([[9]], {2: "X"})
    with pytest.raises(TypeError, match="int ids"):
        word_ids_to_words([[1.0]], WORDS)


def test_token_ids_to_words():
    table = {0: "<blk>", 1: "\u2581HE", 2: "LLO", 3: "\u2581WOR", 4: "LD", 5: "\u2581"}
    assert token_ids_to_words([[1, 2, 3, 4], [5, 1], []], table) == [
        ["HELLO", "WORLD"], ["HE"], []]


def test_bpe_ids_to_words(tmp_path):
    spm = pytest.importorskip("sentencepiece")
    text = tmp_path / "text.txt"
    text.write_text("HELLO WORLD\nTHE WORLD IS WIDE\nHELLO THERE\n" * 20)
    spm.SentencePieceTrainer.train(
        input=str(text), model_prefix=str(tmp_path / "bpe"), vocab_size=15,
        model_type="unigram", character_coverage=1.0, bos_id=-1, eos_id=-1, minloglevel=2)
    sp = spm.SentencePieceProcessor(model_file=str(tmp_path / "bpe.model"))
    ids = sp.encode(["HELLO WORLD", "THE WORLD IS WIDE"])
    assert bpe_ids_to_words(ids, sp) == [["HELLO", "WORLD"], ["THE", "WORLD", "IS", "WIDE"]]
    with pytest.raises(ValueError, match="outside the BPE model"):
        bpe_ids_to_words([[sp.get_piece_size()]], sp)
