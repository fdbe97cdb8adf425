"""The one-object API: :class:`Recognizer` decodes audio files, waveforms or lhotse cuts with
one method and returns a :class:`RecognitionResult` per utterance; for streaming models,
:meth:`Recognizer.create_stream` gives a :class:`RecognizerStream` that decodes audio as it
arrives; :meth:`Recognizer.align` aligns a transcript to audio (forced alignment).

::

    from k2dec import Recognizer

    rec = Recognizer.from_files("exp/model.pt", "data/lang_bpe_256", method="greedy_search")
    for r in rec.decode(["a.wav", "b.wav"]):
        print(r.id, r.text, r.timestamps)

Built on the decode job (:func:`k2dec.job.plan_methods`, :func:`k2dec.job.load_assets`,
:func:`k2dec.job.decode_utterances`) and the method registry (:mod:`k2dec.methods`): the same
settings, checks and decoding as ``k2dec decode``.
"""

from .align import AlignConfig, AlignedToken, AlignedWord, AlignmentResult
from .inputs import AudioInput
from .offline import Recognizer
from .result import RecognitionResult
from .stream import EndpointConfig, EndpointRule, FeatureStream, RecognizerStream

__all__ = ["AlignConfig", "AlignedToken", "AlignedWord", "AlignmentResult", "AudioInput",
           "EndpointConfig", "EndpointRule", "FeatureStream", "RecognitionResult", "Recognizer",
           "RecognizerStream"]
