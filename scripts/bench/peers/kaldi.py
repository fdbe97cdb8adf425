"""PyPI kaldi-decoder's FasterDecoder (Kaldi's ``faster-decoder``) on a k2 graph.

The graph is read as an OpenFst FST (:func:`k2dec.graph.k2_to_kaldi_decoder_fst`: input label =
token id + 1, cost = -score, k2's final arcs become final weights); the decoder reads the same
log-likelihoods as k2dec (``DecodableCtc``), one utterance at a time in one process.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["PEER", "KaldiHyp", "cached_fst", "decode", "import_error"]

PEER = "kaldi-decoder"


def import_error() -> str | None:
    """Why kaldi-decoder cannot be used here (None when it imports)."""
    try:
        import kaldi_decoder  # noqa: F401
        import kaldifst  # noqa: F401
    except ImportError as e:
        return f"cannot import: {e}"
    return None


def cached_fst(graph, source: Path, cache_dir: Path, tag: str = ""):
    """:func:`k2dec.graph.k2_to_kaldi_decoder_fst` of a graph loaded from ``source`` (``tag``
    names a change made after loading, e.g. scaled scores), cached by file size and time."""
    import kaldifst

    from k2dec.graph import k2_to_kaldi_decoder_fst

    st = source.stat()
    path = cache_dir / f"{source.stem}{tag}-{st.st_size}-{st.st_mtime_ns}.fst"
    if path.is_file():
        return kaldifst.StdVectorFst.read(str(path))
    fst = k2_to_kaldi_decoder_fst(graph)
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    fst.write(str(tmp))
    os.replace(tmp, path)
    return fst


@dataclass(frozen=True)
class KaldiHyp:
    """One utterance's 1best: output labels (word ids), score (-cost), and whether the best
    path reached a final state (else it is FasterDecoder's best partial path)."""

    words: tuple[int, ...]
    score: float
    final: bool


def decode(fst, log_probs, lengths, beam: float, max_active: int, min_active: int
           ) -> list[KaldiHyp]:
    """FasterDecoder 1best of each utterance of ``log_probs`` ``(N, T, V)`` float32 with
    ``lengths`` ``(N,)`` (one process, one utterance at a time)."""
    import kaldi_decoder as kd
    import kaldifst

    opts = kd.FasterDecoderOptions(beam=beam, max_active=max_active, min_active=min_active)
    decoder = kd.FasterDecoder(fst, opts)
    out = []
    lp = log_probs.numpy()
    for i in range(lp.shape[0]):
        decoder.decode(kd.DecodableCtc(lp[i, : int(lengths[i])]))
        final = decoder.reached_final()
        ok, lat = decoder.get_best_path()
        if not ok:
            out.append(KaldiHyp((), -float("inf"), False))
            continue
        _, _, olabels, w = kaldifst.get_linear_symbol_sequence(lat)
        out.append(KaldiHyp(tuple(x for x in olabels if x > 0), -(w.value1 + w.value2), final))
    return out
