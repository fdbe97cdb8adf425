"""The peers the benchmark areas compare k2dec with, one module each, imported only when an area
needs them (a peer that is not installed is reported missing, never a crash):

* ``kaldi``: PyPI kaldi-decoder's FasterDecoder on an OpenFst copy of a k2 graph (``lattice``);
* ``torchaudio_ctc``: torchaudio's flashlight lexicon decoder ``ctc_decoder`` with KenLM
  (``ctc_lm``);
* ``pyctc``: pyctcdecode's beam search, with KenLM (``ctc_lm``) or without an LM (``scorers``);
* ``icefall_search``: icefall's own ``beam_search.py`` from a local checkout (``transducer``);
* ``espnet_search``: ESPnet's ``BatchBeamSearch`` with its CTC prefix scorer around k2dec's
  attention decoder (``aed``).

``tokens`` holds what the CTC peers share (tokens.txt as a label list, silencing KenLM's
loading output).
"""
