"""Every file a decode job reads besides the model is checked against the model's vocabulary
(and for being readable) before the first cut: neural LMs, the LODR token n-gram, the BPE
model, tokens.txt, hotword lists. ``k2dec decode`` exits 2 naming the file; nothing is
decoded."""

from __future__ import annotations

import dataclasses
import gzip
import shutil

import pytest
import torch
from click.testing import CliRunner

from k2dec.cli import main
from k2dec.job import check_lm_vocab, load_assets
from k2dec.lang import train_bpe_model
from k2dec.lm import build_lm, export_lm, load_lm
from k2dec.lm.rnn import RnnLmConfig
from k2dec.scorers import train_token_arpa
from k2dec.train import TrainLmConfig, train_lm

VOCAB = 24  # decode_setup's model and lang dir


def _lm(path, vocab):
    cfg = RnnLmConfig(vocab_size=vocab, embedding_dim=8, hidden_dim=8, num_layers=1)
    torch.save({"model_type": "rnn", "model_config": dataclasses.asdict(cfg),
                "model": build_lm(cfg).state_dict()}, path)
    return path


def _decode(s, out, *extra):
    return CliRunner().invoke(main, [
        "decode", "--cuts", str(s["cuts_path"]), "--model", str(s["model_path"]),
        "--out-dir", str(out), "--method", "modified_beam_search", *extra])


def test_an_lm_of_another_vocabulary_is_refused_before_decoding(decode_setup, tmp_path):
    s = decode_setup
    good = _lm(tmp_path / "lm24.pt", VOCAB)
    assets = load_assets(s["model_path"], s["lang_dir"], lm_paths={"rnn_lm": good})
    assert assets.resources.lms["rnn_lm"].vocab_size == VOCAB
    for vocab in (VOCAB + 1, 500, VOCAB - 4):
        bad = _lm(tmp_path / f"lm{vocab}.pt", vocab)
        with pytest.raises(ValueError) as e:
            load_assets(s["model_path"], s["lang_dir"], lm_paths={"rnn_lm": bad})
        assert str(e.value).startswith(f"neural LM {bad} has {vocab} tokens but the model has "
                                       f"{VOCAB}")
        r = _decode(s, tmp_path / f"out{vocab}", "--lang-dir", str(s["lang_dir"]),
                    "--method", "modified_beam_search_lm_shallow_fusion", "--rnn-lm", str(bad))
        assert r.exit_code == 2 and f"neural LM {bad} has {vocab} tokens" in r.output
        assert not (tmp_path / f"out{vocab}" / "modified_beam_search").exists()


def _trained_lm(text, bpe_model, exp_dir):
    cfg = TrainLmConfig(text=text, bpe_model=bpe_model, exp_dir=exp_dir,
                        model=RnnLmConfig(embedding_dim=8, hidden_dim=8, num_layers=1),
                        num_steps=2, batch_size=8, progress=False)
    return train_lm(cfg).checkpoint


def test_an_lm_trained_on_another_bpe_model_of_the_same_size_is_refused(decode_setup,
                                                                        tmp_path):
    s = decode_setup
    lang_bpe = s["lang_dir"] / "bpe.model"
    own = _trained_lm(s["dir"] / "text.txt", lang_bpe, tmp_path / "own")
    own_export = export_lm([own], tmp_path / "own.pt")
    for path in (own, own_export):  # the model's own pieces: accepted
        lm = load_assets(s["model_path"], s["lang_dir"], lm_paths={"rnn_lm": path})
        assert lm.resources.lms["rnn_lm"].tokens_sha256 is not None
    other_text = tmp_path / "other.txt"
    lines = (s["dir"] / "text.txt").read_text().splitlines()  # the same letters, other pieces
    other_text.write_text("\n".join(" ".join(w[::-1] for w in line.split()) for line in lines))
    other_bpe = train_bpe_model(other_text, tmp_path / "other_lang", vocab_size=VOCAB)
    assert other_bpe.read_bytes() != lang_bpe.read_bytes()
    bad = export_lm([_trained_lm(s["dir"] / "text.txt", other_bpe, tmp_path / "other")],
                    tmp_path / "other.pt")
    assert load_lm(bad).vocab_size == VOCAB  # the size check alone would let it through
    with pytest.raises(ValueError, match=r"neural LM .*other.pt was trained on other tokens "
                                         r"than .*tokens.txt has under the same 24 ids"):
        load_assets(s["model_path"], s["lang_dir"], lm_paths={"rnn_lm": bad})
    r = _decode(s, tmp_path / "out", "--lang-dir", str(s["lang_dir"]),
                "--method", "modified_beam_search_lm_shallow_fusion", "--rnn-lm", str(bad))
    assert r.exit_code == 2 and "was trained on other tokens" in r.output, r.output
    assert not (tmp_path / "out" / "modified_beam_search").exists()
    # a checkpoint without the digest (older k2dec, other trainers) is not checked
    ckpt = torch.load(bad, weights_only=False)
    del ckpt["tokens_sha256"]
    torch.save(ckpt, tmp_path / "old.pt")
    load_assets(s["model_path"], s["lang_dir"], lm_paths={"rnn_lm": tmp_path / "old.pt"})


def test_check_lm_vocab_without_a_model_size_uses_the_tokens(tmp_path):
    class Lm:
        vocab_size = 30

    check_lm_vocab(Lm(), "lm.pt", None)  # nothing says: nothing to compare
    check_lm_vocab(Lm(), "lm.pt", 30, "tokens.txt has")
    with pytest.raises(ValueError, match=r"neural LM lm.pt has 30 tokens but tokens.txt has 24"):
        check_lm_vocab(Lm(), "lm.pt", 24, "tokens.txt has")


@pytest.mark.parametrize("case", ["ids beyond the vocabulary", "binary", "gzipped garbage",
                                  "another bpe model's pieces"])
def test_a_bad_lodr_ngram_is_refused_naming_it(decode_setup, tmp_path, case):
    s = decode_setup
    good = train_token_arpa(s["dir"] / "text.txt", s["lang_dir"] / "bpe.model",
                            tmp_path / "good.arpa")
    arpa = tmp_path / "lodr.arpa"
    text = good.read_text()
    if case == "ids beyond the vocabulary":
        arpa.write_text(text.replace("\t3\t", "\t300\t").replace("\t3\n", "\t300\n"))
        expect = "ARPA word '300' is not a token id in [0, 24)"
    elif case == "binary":
        arpa.write_bytes(bytes(range(128, 256)))
        expect = f"{arpa}:1: ARPA file is not UTF-8"
    elif case == "gzipped garbage":
        arpa.write_bytes(gzip.compress(bytes(range(128, 256))))
        expect = f"{arpa}:1: ARPA file is not UTF-8"
    else:  # words are pieces, one the lang dir's bpe.model does not have
        arpa.write_text(text.replace("\t3\t", "\t\u2581ZEBRA\t").replace("\t3\n",
                                                                         "\t\u2581ZEBRA\n"))
        expect = "ARPA word '\u2581ZEBRA' is not a token id in [0, 24) of token_table"
    assert arpa.read_bytes() != good.read_bytes()
    with pytest.raises(ValueError) as e:
        load_assets(s["model_path"], s["lang_dir"], lodr_arpa=arpa)
    assert str(arpa) in str(e.value) and expect in str(e.value)
    r = _decode(s, tmp_path / "out", "--lang-dir", str(s["lang_dir"]), "--lodr-arpa", str(arpa))
    assert r.exit_code == 2 and expect in r.output


def test_lodr_ngram_over_pieces_is_read_through_the_bpe_model(decode_setup, tmp_path):
    import sentencepiece as spm

    s = decode_setup
    sp = spm.SentencePieceProcessor()
    sp.load(str(s["lang_dir"] / "bpe.model"))
    ids = train_token_arpa(s["dir"] / "text.txt", s["lang_dir"] / "bpe.model",
                           tmp_path / "ids.arpa")
    lines = []
    for line in ids.read_text().splitlines():
        fields = line.split("\t")
        if len(fields) >= 2:
            fields[1] = " ".join(w if not w.isdigit() else sp.id_to_piece(int(w))
                                 for w in fields[1].split())
        lines.append("\t".join(fields))
    pieces = tmp_path / "pieces.arpa"
    pieces.write_text("\n".join(lines) + "\n")
    a = load_assets(s["model_path"], s["lang_dir"], lodr_arpa=ids).resources.lodr
    b = load_assets(s["model_path"], s["lang_dir"], lodr_arpa=pieces).resources.lodr
    assert a.vocab_size == b.vocab_size == VOCAB
    assert sorted(a.final.tolist()) == pytest.approx(sorted(b.final.tolist()))


@pytest.mark.parametrize("case", ["duplicate id", "binary", "a BPE model of another size",
                                  "binary hotwords", "empty hotwords", "hotwords without BPE"])
def test_bad_lang_files_stop_decode_naming_them(decode_setup, tmp_path, case):
    s = decode_setup
    lang = tmp_path / "lang"
    shutil.copytree(s["lang_dir"], lang)
    extra = ["--lang-dir", str(lang)]
    if case == "duplicate id":
        lines = (lang / "tokens.txt").read_text().splitlines()
        lines[4] = lines[4].split()[0] + " 3"
        (lang / "tokens.txt").write_text("\n".join(lines) + "\n")
        expect = f"{lang / 'tokens.txt'}:5: duplicate id 3"
    elif case == "binary":
        (lang / "tokens.txt").write_bytes(bytes(range(128, 256)))
        expect = f"{lang / 'tokens.txt'}:1: symbol table is not UTF-8"
    elif case == "a BPE model of another size":
        from k2dec.lang import train_bpe_model

        other = train_bpe_model(s["dir"] / "text.txt", tmp_path / "other", vocab_size=20)
        shutil.copy(other, lang / "bpe.model")
        expect = f"{lang / 'bpe.model'} has 20 pieces but the model has 24 outputs"
    elif case == "binary hotwords":
        hot = tmp_path / "hot.txt"
        hot.write_bytes(b"CAT\n" + bytes(range(128, 256)))
        extra += ["--hotwords", str(hot)]
        expect = f"{hot}:2: hotwords file is not UTF-8"
    elif case == "empty hotwords":
        hot = tmp_path / "hot.txt"
        hot.write_text("# none yet\n")
        extra += ["--hotwords", str(hot)]
        expect = f"hotwords file {hot} has no phrases"
    else:
        (lang / "bpe.model").unlink()
        hot = tmp_path / "hot.txt"
        hot.write_text("CAT\n")
        extra += ["--hotwords", str(hot)]
        expect = f"--hotwords {hot}: need the BPE model"
    r = _decode(s, tmp_path / "out", *extra)
    assert r.exit_code == 2, r.output
    assert expect in r.output and "Traceback" not in r.output
    assert not (tmp_path / "out" / "modified_beam_search").exists()
