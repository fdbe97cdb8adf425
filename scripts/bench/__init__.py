"""k2dec's benchmarks (``make bench``), one module per area, each comparing k2dec with a peer
or a reference on the same inputs in the same run.

Run from the repository root::

    python -m scripts.bench [--quick | --smoke] [--areas a,b] [--out DIR] [--reuse]
    python -m scripts.bench.<area> [--quick | --smoke] [--report DIR] [area options]

Areas: ``lattice`` (HLG/HCLG 1best vs kaldi-decoder), ``ctc_lm`` (CTC + n-gram vs torchaudio's
ctc_decoder and pyctcdecode), ``transducer`` (vs icefall's beam_search.py), ``aed`` (vs ESPnet's
BatchBeamSearch), ``nbest``, ``confidence``, ``scorers``, ``streams``, ``memory``;
``lm`` is a standalone neural-LM scoring benchmark (no report).

Shared modules: ``runner`` (runs the areas and writes BENCHMARKS.md), ``common`` (the
report, arguments, timing, memory, WER), ``shipped`` (the shipped model's outputs and graphs),
``machine`` (CPU, load, versions, the busy-loop scaling ceiling), ``plots``, ``synthetic`` (the
lattice area's random graphs), and ``peers/`` (one module per peer).
"""
