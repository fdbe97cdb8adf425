"""train_lm on a tiny corpus: the loss goes down, a resumed run repeats an uninterrupted one,
checkpoints load back with load_lm, and the argparse entry point works."""

from __future__ import annotations

import dataclasses
import logging
import math

import pytest
import torch

from k2dec.lm import (
    RnnLM,
    RnnLmConfig,
    TransformerLM,
    TransformerLmConfig,
    compute_text_perplexity,
    load_lm,
)
from k2dec.lm.perplexity import main as perplexity_main
from k2dec.train import TrainLmConfig, latest_checkpoint, train_lm
from k2dec.train.lm_trainer import epoch_batches, main

SENTENCES = [
    "THE CAT SAT ON THE MAT",
    "THE DOG SAT ON THE LOG",
    "A CAT AND A DOG",
    "THE BIRD SANG A SONG",
    "ON THE MAT THE CAT SLEPT",
    "THE DOG RAN TO THE CAT",
    "A SONG FOR THE BIRD",
    "THE LOG WAS ON THE MAT",
]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    import sentencepiece as spm

    d = tmp_path_factory.mktemp("lm_corpus")
    (d / "train.txt").write_text("\n".join(SENTENCES * 5) + "\n\n")
    (d / "valid.txt").write_text("THE CAT SAT ON THE LOG\nA DOG AND A BIRD\n")
    spm.SentencePieceTrainer.train(
        input=str(d / "train.txt"), model_prefix=str(d / "bpe"), model_type="unigram",
        vocab_size=30, character_coverage=1.0, user_defined_symbols=["<blk>", "<sos/eos>"],
        unk_id=2, bos_id=-1, eos_id=-1, minloglevel=2,
    )
    return d


def _config(corpus, exp_dir, model, **kw) -> TrainLmConfig:
    defaults = dict(num_steps=30, batch_size=8, lr=1e-2, save_every_n=10, log_interval=10,
                    progress=False)
    defaults.update(kw)
    return TrainLmConfig(text=corpus / "train.txt", bpe_model=corpus / "bpe.model",
                         exp_dir=exp_dir, model=model, **defaults)


def test_rnn_training_lowers_loss(corpus, tmp_path, caplog, device):
    model = RnnLmConfig(embedding_dim=16, hidden_dim=16, num_layers=1)  # vocab_size from BPE
    with caplog.at_level(logging.INFO, logger="k2dec.train.lm_trainer"):
        result = train_lm(_config(corpus, tmp_path, model, num_steps=40, device=str(device),
                                  valid_text=corpus / "valid.txt", keep_last_k=2))
    assert result.start_step == 0 and len(result.losses) == 40
    first, last = sum(result.losses[:5]) / 5, sum(result.losses[-5:]) / 5
    assert first > math.log(30) - 0.5  # starts near uniform
    assert last < 0.7 * first, (first, last)
    assert result.checkpoint == tmp_path / "checkpoint-40.pt"
    assert sorted(p.name for p in tmp_path.glob("checkpoint-*.pt")) == [
        "checkpoint-30.pt", "checkpoint-40.pt"]
    assert "step 40 epoch" in caplog.text
    lm = load_lm(result.checkpoint)
    assert isinstance(lm, RnnLM) and not lm.training
    assert lm.config == dataclasses.replace(model, vocab_size=30)
    ppl = compute_text_perplexity(lm, corpus / "valid.txt", corpus / "bpe.model",
                                  progress=False)
    assert result.valid is not None
    assert ppl.perplexity == pytest.approx(result.valid.perplexity, rel=1e-6)
    assert ppl.num_sentences == 2
    assert ppl.perplexity < 30 / 2  # learned something


def test_transformer_resume_repeats_uninterrupted_run(corpus, tmp_path, device):
    model = TransformerLmConfig(d_model=16, nhead=2, num_layers=1, dim_feedforward=32,
                                dropout=0.1)
    # 40 sentences / 8 = 5 steps per epoch: the resume point (step 12) is inside epoch 2
    kw = dict(save_every_n=12, device=str(device))
    straight = train_lm(_config(corpus, tmp_path / "a", model, num_steps=20, **kw))
    first = train_lm(_config(corpus, tmp_path / "b", model, num_steps=12, **kw))
    resumed = train_lm(_config(corpus, tmp_path / "b", model, num_steps=20, **kw))
    assert first.start_step == 0 and resumed.start_step == 12
    assert first.losses + resumed.losses == pytest.approx(straight.losses, rel=1e-6)
    a, b = load_lm(straight.checkpoint), load_lm(resumed.checkpoint)
    assert isinstance(b, TransformerLM)
    for (na, pa), (nb, pb) in zip(a.state_dict().items(), b.state_dict().items(), strict=True):
        assert na == nb
        torch.testing.assert_close(pa, pb)
    # nothing left to do: returns the newest checkpoint, runs no step
    again = train_lm(_config(corpus, tmp_path / "b", model, num_steps=20))
    assert again.losses == [] and again.checkpoint == latest_checkpoint(tmp_path / "b")


def test_resume_refuses_another_model(corpus, tmp_path):
    train_lm(_config(corpus, tmp_path, RnnLmConfig(embedding_dim=8, hidden_dim=8, num_layers=1),
                     num_steps=2))
    with pytest.raises(ValueError, match="cannot resume from .*checkpoint-2.pt.*another exp_dir"):
        train_lm(_config(corpus, tmp_path, RnnLmConfig(embedding_dim=8, hidden_dim=16,
                                                       num_layers=1), num_steps=4))


def test_bad_train_configs(corpus, tmp_path):
    model = RnnLmConfig(embedding_dim=8, hidden_dim=8, num_layers=1)
    with pytest.raises(ValueError, match="config.num_steps must be a positive int, got 0"):
        train_lm(_config(corpus, tmp_path, model, num_steps=0))
    with pytest.raises(ValueError, match="config.lr must be finite and > 0, got 0.0"):
        train_lm(_config(corpus, tmp_path, model, lr=0.0))
    with pytest.raises(TypeError, match="config.model must be an RnnLmConfig or "):
        train_lm(_config(corpus, tmp_path, model={"hidden_dim": 8}))
    with pytest.raises(ValueError, match="text file .*missing.txt' does not exist"):
        train_lm(dataclasses.replace(_config(corpus, tmp_path, model),
                                     text=tmp_path / "missing.txt"))
    with pytest.raises(ValueError, match="no training sentences left"):
        train_lm(_config(corpus, tmp_path, model, max_sentence_length=1))
    with pytest.raises(ValueError, match="is not a k2dec LM checkpoint"):
        torch.save({"foo": 1}, tmp_path / "x.pt")
        load_lm(tmp_path / "x.pt")
    with pytest.raises(ValueError, match="checkpoint .*nope.pt' does not exist"):
        load_lm(tmp_path / "nope.pt")
    other = RnnLM(dataclasses.replace(model, vocab_size=31))
    with pytest.raises(ValueError, match="has 30 tokens but lm.vocab_size is 31"):
        compute_text_perplexity(other, corpus / "valid.txt", corpus / "bpe.model")


def test_main_entry_point(corpus, tmp_path):
    result = main(["--text", str(corpus / "train.txt"), "--bpe-model", str(corpus / "bpe.model"),
                   "--exp-dir", str(tmp_path), "--model-type", "transformer", "--d-model", "8",
                   "--nhead", "2", "--num-layers", "1", "--dim-feedforward", "8",
                   "--num-steps", "3", "--batch-size", "4", "--tie-weights", "--no-progress"])
    lm = load_lm(result.checkpoint)
    assert isinstance(lm, TransformerLM)
    ppl = perplexity_main(["--rnn-lm", str(result.checkpoint), "--text",
                           str(corpus / "valid.txt"), "--bpe-model", str(corpus / "bpe.model"),
                           "--no-progress"])
    assert ppl.perplexity == pytest.approx(
        compute_text_perplexity(lm, corpus / "valid.txt", corpus / "bpe.model").perplexity)
    # lower-case text with an upper-case BPE model: the perplexity of the upper-case text
    (tmp_path / "lower.txt").write_text((corpus / "valid.txt").read_text().lower())
    lower = perplexity_main(["--rnn-lm", str(result.checkpoint), "--text",
                             str(tmp_path / "lower.txt"), "--bpe-model",
                             str(corpus / "bpe.model"), "--no-progress"])
    assert (lower.perplexity, lower.num_tokens) == (ppl.perplexity, ppl.num_tokens)
    assert lm.config == TransformerLmConfig(vocab_size=30, d_model=8, nhead=2, num_layers=1,
                                            dim_feedforward=8, tie_weights=True)
    with pytest.raises(SystemExit, match="--hidden-dim does not apply to a TransformerLmConfig"):
        main(["--text", "t", "--bpe-model", "b", "--exp-dir", str(tmp_path), "--model-type",
              "transformer", "--hidden-dim", "8"])


def test_epoch_batches_cover_every_sentence_once():
    lengths = torch.randint(0, 30, (1003,), generator=torch.Generator().manual_seed(0))
    batches = epoch_batches(lengths, 10, seed=5, bucket_batches=4)
    assert len(batches) == 101 and all(0 < b.numel() <= 10 for b in batches)
    assert sorted(torch.cat(batches).tolist()) == list(range(1003))
    assert all(b.dtype == torch.int32 for b in batches)
    again = epoch_batches(lengths, 10, seed=5, bucket_batches=4)
    assert all(torch.equal(a, b) for a, b in zip(batches, again, strict=True))
    other = epoch_batches(lengths, 10, seed=6, bucket_batches=4)
    assert not all(torch.equal(a, b) for a, b in zip(batches, other, strict=True))
    # length bucketing: far less padding than a plain random split
    def padded(bs):
        return sum(int(lengths[b.long()].max()) * b.numel() for b in bs)
    plain = torch.randperm(1003, generator=torch.Generator().manual_seed(5)).split(10)
    assert padded(batches) < 0.8 * padded(plain)


def test_export_lm_averages_checkpoints_into_a_small_loadable_file(corpus, tmp_path):
    from k2dec.lm import export_lm

    model = RnnLmConfig(embedding_dim=8, hidden_dim=8, num_layers=1)
    train_lm(_config(corpus, tmp_path / "exp", model, num_steps=20, save_every_n=10,
                     keep_last_k=0))
    c10, c20 = tmp_path / "exp" / "checkpoint-10.pt", tmp_path / "exp" / "checkpoint-20.pt"
    out = export_lm([c10, c20], tmp_path / "lm.pt")
    assert out.stat().st_size < c20.stat().st_size / 2  # no optimizer state, float16
    a, b, avg = load_lm(c10), load_lm(c20), load_lm(out)
    assert isinstance(avg, RnnLM)
    for name, p in avg.state_dict().items():
        assert p.dtype == torch.float32
        want = (a.state_dict()[name].double() + b.state_dict()[name].double()) / 2
        torch.testing.assert_close(p.double(), want, rtol=1e-3, atol=1e-3)
    # one checkpoint kept in float32: exactly the same weights
    one = load_lm(export_lm([c20], tmp_path / "one.pt", dtype=torch.float32))
    for name, p in one.state_dict().items():
        torch.testing.assert_close(p, b.state_dict()[name])
    with pytest.raises(ValueError, match="at least one checkpoint"):
        export_lm([], tmp_path / "x.pt")
    other = train_lm(_config(corpus, tmp_path / "other",
                             RnnLmConfig(embedding_dim=4, hidden_dim=4, num_layers=1),
                             num_steps=1))
    with pytest.raises(ValueError, match="another model"):
        export_lm([c10, other.checkpoint], tmp_path / "x.pt")
    with pytest.raises(ValueError, match="does not exist"):
        export_lm([tmp_path / "nope.pt"], tmp_path / "x.pt")
