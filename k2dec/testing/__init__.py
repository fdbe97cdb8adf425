"""Factories for tests and benchmarks (like lhotse's ``lhotse.testing.dummies``): tiny lang dirs
and graphs, random lattices, random transducers, attention decoders and LMs. Nothing in the
decoding code imports this package.

* :mod:`k2dec.testing.lang`: the tiny hand-written lang (lexicon, bigram ARPA, HLG) and random
  lexicons with random ARPA LMs.
* :mod:`k2dec.testing.graphs`: CTC-lexicon (HLG-like) and HMM (HCLG-like) graphs as k2 text,
  random peaked log-probs.
* :mod:`k2dec.testing.lattices`: random word lattices, lattices of random posteriors.
* :mod:`k2dec.testing.transducer`, :mod:`k2dec.testing.aed`, :mod:`k2dec.testing.lm`: seeded
  random networks.
"""
