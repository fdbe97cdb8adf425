from __future__ import annotations

import pytest

from k2dec.lang import bpe_lexicon, bpe_token_table, load_bpe_model, train_bpe_model, write_lang_dir

TEXT = """THE QUICK BROWN FOX JUMPS OVER THE LAZY DOG
A STITCH IN TIME SAVES NINE
ALL THAT GLITTERS IS NOT GOLD
THE EARLY BIRD CATCHES THE WORM
"""


@pytest.fixture(scope="module")
def sp(tmp_path_factory):
    d = tmp_path_factory.mktemp("bpe")
    (d / "text.txt").write_text(TEXT * 20)
    model = train_bpe_model(d / "text.txt", d, vocab_size=40)
    assert train_bpe_model(d / "text.txt", d, vocab_size=40) == model  # idempotent
    return load_bpe_model(model)


def test_icefall_special_ids(sp):
    table = bpe_token_table(sp)
    assert table.get(0) == "<blk>" and table.get(1) == "<sos/eos>" and table.get(2) == "<unk>"
    assert len(table) == 40


def test_bpe_lang_dir(sp, tmp_path):
    words = sorted(set(TEXT.split()))
    lexicon = bpe_lexicon(sp, words)
    assert lexicon[0] == ("<UNK>", ["<unk>"])
    for word, pieces in lexicon[1:]:
        assert "".join(pieces).replace("\u2581", "") == word
    lang = write_lang_dir(tmp_path / "lang", lexicon, tokens=bpe_token_table(sp), blank="<blk>")
    assert lang.token_table.get(0) == "<blk>"
    assert lang.first_token_disambig_id == 40
    assert lang.max_token_id == 39


def test_load_bpe_model_rejects_other_layouts(tmp_path):
    import sentencepiece as spm

    (tmp_path / "text.txt").write_text(TEXT * 20)
    spm.SentencePieceTrainer.train(
        input=str(tmp_path / "text.txt"), model_prefix=str(tmp_path / "plain"),
        vocab_size=30, minloglevel=2,
    )
    with pytest.raises(ValueError, match="token 0 must be '<blk>'"):
        load_bpe_model(tmp_path / "plain.model")
    with pytest.raises(ValueError, match="does not exist"):
        load_bpe_model(tmp_path / "none.model")
