"""Tools around decoding that are not decoding: :mod:`k2dec.tools.synth` makes the offline,
LibriSpeech-shaped corpus the shipped model was trained on (imported on demand: it needs Debian's
speech synthesizers only when it runs)."""
