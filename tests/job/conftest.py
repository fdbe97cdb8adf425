"""A tiny decode setup: noise recordings with fbank, a BPE lang dir with HLG, a random model."""

from __future__ import annotations

import shutil
from dataclasses import asdict

import numpy as np
import pytest
import soundfile as sf
import torch
from lhotse import (
    CutSet,
    FbankConfig,
    LilcomChunkyWriter,
    Recording,
    RecordingSet,
    SupervisionSegment,
)
from lhotse.utils import fastcopy

from k2dec.data.features import make_fbank
from k2dec.graph import (
    build_rescoring_G,
    compile_graph,
    graph_metadata,
    save_graph,
    train_arpa,
    write_lexicon_graphs,
)
from k2dec.lang import (
    LangDir,
    bpe_lexicon,
    bpe_token_table,
    load_bpe_model,
    train_bpe_model,
    write_lang_dir,
)
from k2dec.lm import RnnLM, RnnLmConfig
from k2dec.model import ConformerConfig, JointConfig, JointModel, export_model

TEXT = ["THE CAT SAT", "A DOG RAN HOME", "THE DOG SAT ON A MAT", "HOME IS WHERE THE CAT IS",
        "A MAT AND A CAT"]


@pytest.fixture(scope="session")
def decode_setup(tmp_path_factory):
    d = tmp_path_factory.mktemp("decode")
    text = d / "text.txt"
    text.write_text("\n".join(TEXT * 10) + "\n")
    lang_dir = d / "lang"
    sp = load_bpe_model(train_bpe_model(text, lang_dir, vocab_size=24))
    words = sorted({w for t in TEXT for w in t.split()})
    write_lang_dir(lang_dir, bpe_lexicon(sp, words), tokens=bpe_token_table(sp), blank="<blk>")
    write_lexicon_graphs(lang_dir)
    arpa = train_arpa(text, d / "lm.arpa", order=2)
    compile_graph(lang_dir, "HLG", arpa=arpa)
    compile_graph(lang_dir, "LG", arpa=arpa)

    rng = np.random.default_rng(0)
    recs = []
    durations = [1.2, 0.9, 1.5, 0.6, 1.1, 0.03]  # the last one is too short to decode
    for i, dur in enumerate(durations):
        path = d / f"utt{i}.wav"
        sf.write(path, (rng.standard_normal(int(16000 * dur)) * 0.1).astype("float32"), 16000)
        recs.append(Recording.from_file(path, recording_id=f"utt{i}"))
    cuts = CutSet.from_manifests(recordings=RecordingSet.from_recordings(recs))
    cuts = CutSet.from_cuts(
        fastcopy(c, id=f"utt{i}", supervisions=[
            SupervisionSegment(f"utt{i}", c.recording_id, 0.0, c.duration,
                               text=TEXT[i % len(TEXT)])])
        for i, c in enumerate(sorted(cuts, key=lambda c: int(c.recording_id[3:]))))
    cuts = cuts.compute_and_store_features(make_fbank(FbankConfig(num_mel_bins=80)),
                                           str(d / "feats"), storage_type=LilcomChunkyWriter)
    cuts_path = d / "cuts.jsonl.gz"
    cuts.to_file(cuts_path)

    torch.manual_seed(0)
    cfg = JointConfig(vocab_size=24, encoder=ConformerConfig(d_model=32, nhead=2, num_layers=1,
                                                            dim_feedforward=32, conv_kernel=3),
                      decoder_dim=16, joiner_dim=16, attention_dim=16, attention_heads=2,
                      attention_layers=1, attention_ff=16)
    model_path = export_model(JointModel(cfg).eval(), d / "model.pt", half=False)
    return {"dir": d, "lang_dir": lang_dir, "cuts": cuts, "cuts_path": cuts_path,
            "model_path": model_path}


@pytest.fixture(scope="module")
def full_setup(decode_setup, tmp_path_factory):
    """decode_setup plus a rescoring G_4_gram.pt, a small RNN LM and LODR's token bigram:
    every method runs."""
    d = tmp_path_factory.mktemp("same_answer")
    lang_dir = d / "lang"
    shutil.copytree(decode_setup["lang_dir"], lang_dir)
    lang = LangDir(lang_dir)
    arpa = decode_setup["dir"] / "lm.arpa"
    save_graph(build_rescoring_G(arpa, lang.word_table), lang_dir / "G_4_gram.pt",
               graph_metadata("G_4_gram", lang.token_table, lang.word_table))
    torch.manual_seed(0)
    cfg = RnnLmConfig(vocab_size=24, embedding_dim=8, hidden_dim=8, num_layers=1)
    lm_path = d / "rnn_lm.pt"
    torch.save({"model_type": "rnn", "model_config": asdict(cfg),
                "model": RnnLM(cfg).state_dict()}, lm_path)
    from k2dec.scorers import train_token_arpa

    lodr = train_token_arpa(decode_setup["dir"] / "text.txt", lang_dir / "bpe.model",
                            d / "lodr.arpa", order=2)
    return {**decode_setup, "lang_dir": lang_dir, "lm_path": lm_path, "lodr": lodr}
