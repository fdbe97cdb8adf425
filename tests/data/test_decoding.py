"""Cuts -> utterances -> decode batches: one utterance per supervision, features read per cut."""

from __future__ import annotations

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

from k2dec.data import DecodeDataset, make_decode_loader, utterance_cuts
from k2dec.data.features import make_fbank


@pytest.fixture(scope="module")
def cuts(tmp_path_factory):
    """Three noise cuts of 1.0, 2.0 and 0.5 s with fbank features and one full supervision."""
    d = tmp_path_factory.mktemp("utts")
    rng = np.random.default_rng(0)
    recs = []
    for i, dur in enumerate([1.0, 2.0, 0.5]):
        path = d / f"r{i}.wav"
        sf.write(path, (rng.standard_normal(int(16000 * dur)) * 0.1).astype("float32"), 16000)
        recs.append(Recording.from_file(path, recording_id=f"r{i}"))
    cs = CutSet.from_manifests(recordings=RecordingSet.from_recordings(recs))
    cs = CutSet.from_cuts(
        fastcopy(c, id=c.recording_id, supervisions=[SupervisionSegment(
            f"{c.recording_id}-s", c.recording_id, 0.0, c.duration, text=f"T{c.recording_id}")])
        for c in sorted(cs, key=lambda c: c.recording_id))
    return cs.compute_and_store_features(make_fbank(FbankConfig(num_mel_bins=80)), str(d / "f"),
                                         storage_type=LilcomChunkyWriter)


def test_utterances_one_per_supervision(cuts):
    c0, c1, c2 = cuts
    sup = c1.supervisions[0]
    two = fastcopy(c1, supervisions=[fastcopy(sup, id="a", duration=0.8),
                                     fastcopy(sup, id="b", start=0.8, duration=1.2)])
    part = fastcopy(c0, supervisions=[fastcopy(c0.supervisions[0], start=0.25, duration=0.5)])
    nearly = fastcopy(c2, supervisions=[fastcopy(c2.supervisions[0], start=0.004,
                                                 duration=0.492)])
    got = list(utterance_cuts(CutSet.from_cuts([part, two, nearly,
                                                fastcopy(c2, id="bare", supervisions=[])])))
    assert [c.id for c in got] == ["r0", "a", "b", "r2", "bare"]
    assert [round(c.duration, 3) for c in got] == [0.5, 0.8, 1.2, 0.5, 0.5]
    for c in got[:3]:  # trimmed: one supervision that spans the cut
        assert len(c.supervisions) == 1
        assert c.supervisions[0].start == 0 and c.supervisions[0].duration == c.duration
    assert got[3] is nearly  # within half a frame of the cut: decoded as is
    assert got[4].supervisions == []
    # the features of a trimmed utterance are the cut's frames of that span
    np.testing.assert_array_equal(got[0].load_features(), c0.load_features()[25:75])
    with pytest.raises(TypeError, match="cuts must be a lhotse CutSet"):
        utterance_cuts(list(cuts))


def test_decode_batches_read_each_cut_alone(cuts, tmp_path):
    c0, c1, c2 = cuts
    bad = fastcopy(c1, id="bad", features=fastcopy(c1.features,
                                                   storage_path=str(tmp_path / "none")))
    wrong_dims = fastcopy(c2, id="dims", features=fastcopy(c2.features, num_features=40))
    bare = fastcopy(c0, id="bare", supervisions=[])
    batch = DecodeDataset()[CutSet.from_cuts([c2, bad, c0, c1, wrong_dims, bare])]
    assert batch.cut_ids == ["r1", "r0", "bare", "r2"]  # longest first, ties in given order
    assert batch.texts == ["Tr1", "Tr0", None, "Tr2"]
    assert batch.num_frames.tolist() == [200, 100, 100, 50]
    assert batch.features.shape == (4, 200, 80) and batch.features.dtype == torch.float32
    for i, c in enumerate([c1, c0, c0, c2]):
        n = int(batch.num_frames[i])
        assert torch.equal(batch.features[i, :n], torch.from_numpy(c.load_features()))
    assert set(batch.failed) == {"bad", "dims"}
    assert batch.failed["bad"].startswith("cannot read the features: FileNotFoundError")
    assert "its features have 80 dims, the manifest says 40" in batch.failed["dims"]
    empty = DecodeDataset()[CutSet.from_cuts([bad])]
    assert empty.cut_ids == [] and empty.features.shape[0] == 0 and list(empty.failed) == ["bad"]


@pytest.mark.parametrize("max_duration", [2.0, 3.5, 100.0])
def test_decode_loader_yields_every_cut_once(cuts, max_duration):
    many = CutSet.from_cuts(fastcopy(c, id=f"{c.id}-{k}") for k in range(5) for c in cuts)
    seen = []
    for batch in make_decode_loader(many, max_duration, num_buckets=2):
        assert float(batch.num_frames.sum()) / 100 <= max_duration
        seen += batch.cut_ids
    assert sorted(seen) == sorted(many.ids)
