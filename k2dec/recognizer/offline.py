""":class:`Recognizer`: one object that decodes audio files, waveforms or cuts with one method.

It is the decode job without files: the method and its settings planned and checked as
``k2dec decode --method M --set KEY=VALUE`` does (:func:`k2dec.job.plan_methods`), the model,
lang dir, graphs and LMs loaded by :func:`k2dec.job.load_assets`, the utterances decoded by
:func:`k2dec.job.decode_utterances` (the job's batches, network pass and per-batch decoding).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any

import torch

from ..job import (
    DecodeAssets,
    DecodeConfig,
    DecodeSettings,
    MethodRun,
    check_resources,
    decode_utterances,
    load_assets,
    model_settings_file,
    plan_methods,
    read_settings,
)
from ..methods import Method, config_field_path, get_method, icefall_compatible
from ..primitives.sizes import MAX_DURATION
from .align import AlignConfig, AlignmentResult, align_audio
from .inputs import prepare_inputs
from .result import RecognitionResult, ResultMaker
from .stream import EndpointConfig, RecognizerStream

logger = logging.getLogger(__name__)

__all__ = ["Recognizer"]


def _value(value: Any) -> str:
    """A Python value as the VALUE of a ``KEY=VALUE`` assignment (what ``--set`` takes)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple | list):
        return ",".join(_value(v) for v in value)
    if value is None:
        return "none"
    return repr(value) if isinstance(value, float) else str(value)


def _leaf_fields(config: Any, prefix: str = "") -> list[str]:
    out = []
    for f in fields(config):
        value = getattr(config, f.name)
        if is_dataclass(value):
            out += _leaf_fields(value, f"{prefix}{f.name}.")
        else:
            out.append(prefix + f.name)
    return out


def _assignments(method: Method, settings: Mapping[str, Any]) -> list[str]:
    """``KEY=VALUE`` strings of ``settings``; a key the method's config lacks is refused
    naming the method's settings."""
    default = method.default_config()
    for key in settings:
        if not isinstance(key, str) or config_field_path(default, key) is None:
            raise ValueError(f"method {method.name!r} has no setting {key!r}; its settings "
                             f"are {', '.join(_leaf_fields(default))}")
    return [f"{k}={_value(v)}" for k, v in settings.items()]


def _plan(method: str | Method, settings: Mapping[str, Any],
          settings_file: str | Path | DecodeSettings | None, icefall_compat: bool) -> MethodRun:
    """The method with its config: the settings file's entries, then ``settings``, checked as
    ``k2dec decode --config FILE --set KEY=VALUE`` checks them."""
    if not isinstance(method, str | Method):
        raise TypeError(f"method must be a method name (k2dec decode --list-methods), got "
                        f"{type(method).__name__}")
    file = (read_settings(settings_file) if isinstance(settings_file, str | Path)
            else settings_file)
    resolved = get_method(method) if isinstance(method, str) else method
    run = plan_methods([resolved], _assignments(resolved, settings), settings=file)[0]
    if icefall_compat:
        run = MethodRun(run.method, icefall_compatible(run.method, run.config),
                        run.assignments)
    return run


class Recognizer:
    """Decode audio with one method: files, waveforms or cuts in, one
    :class:`~k2dec.recognizer.RecognitionResult` per utterance out.

    Build it with :meth:`from_files` (or from loaded :class:`k2dec.job.DecodeAssets`)::

        rec = Recognizer.from_files("exp/model.pt", "data/lang_bpe_256", method="greedy_search")
        for r in rec.decode(["a.wav", "b.flac"]):
            print(r.id, r.text)

    Args:
      assets: the model, lang dir, graphs, LMs (:func:`k2dec.job.load_assets`).
      method: a method name (icefall's: ``greedy_search``, ``1best``, ...; ``k2dec decode
        --list-methods`` lists them with what each needs).
      settings: the method's settings as its config's fields (``{"beam": 8,
        "num_paths": 50}``; nested fields by their name or ``a.b`` path), checked like
        ``--set``.
      settings_file: a settings file (``k2dec tune``'s output, e.g.
        ``assets/librispeech-synth/decode.json``; or its :class:`~k2dec.job.DecodeSettings`),
        applied before ``settings`` as ``k2dec decode --config`` applies it.
      icefall_compat: icefall's choices where k2dec's defaults differ (``--icefall-compat``).
      max_duration: seconds of audio per batch (``--max-duration``); a longer recording is a
        failed result unless it is longer than ``segment_max`` (30 s,
        :attr:`k2dec.job.DecodeConfig.segment_max`): such a recording is decoded in segments
        and stitched, whatever its length.
      batch_encoder: run the network on whole padded batches (faster on a GPU) instead of on
        each utterance alone (what ``k2dec decode`` does; results then do not depend on the
        batch).

    Raises:
      ValueError, TypeError: an unknown method or setting, a value the config refuses, a
        method the model cannot run or whose graphs / LMs the assets lack, no way to turn
        token ids into words (no ``bpe.model`` / ``tokens.txt``).
    """

    def __init__(self, assets: DecodeAssets, method: str | Method,
                 settings: Mapping[str, Any] | None = None, *,
                 settings_file: str | Path | DecodeSettings | None = None,
                 icefall_compat: bool = False, max_duration: float = MAX_DURATION,
                 batch_encoder: bool = False) -> None:
        if not (isinstance(max_duration, int | float) and math.isfinite(max_duration)
                and max_duration > 0):
            raise ValueError(f"max_duration must be a positive number of seconds, got "
                             f"{max_duration!r}")
        self.assets = assets
        self.settings_file = settings_file
        self.icefall_compat = icefall_compat
        self.run = _plan(method, dict(settings or {}), settings_file, icefall_compat)
        self.decode_config = DecodeConfig(max_duration=float(max_duration),
                                          batch_encoder=batch_encoder)
        if not assets.model.supports(self.run.method):
            raise ValueError(f"method {self.run.method.name!r} "
                             f"({self.run.method.family.value}) needs what this model lacks: "
                             f"{assets.model.describe()}")
        check_resources([self.run], assets.resources)
        if assets.sp is None and assets.tokens is None and assets.lang is None:
            raise ValueError("no bpe.model or tokens.txt to turn token ids into words: give "
                             "lang_dir, or put tokens.txt beside the model")
        self._results = ResultMaker(assets)

    @classmethod
    def from_files(cls, model: str | Path, lang_dir: str | Path | None = None,
                   graph_dir: str | Path | None = None, *, method: str,
                   bpe_model: str | Path | None = None, rnn_lm: str | Path | None = None,
                   hotwords: str | Path | None = None, lodr_arpa: str | Path | None = None,
                   settings_file: str | Path | None = None, model_settings: bool = True,
                   icefall_compat: bool = False, device: torch.device | str = "cpu",
                   max_duration: float = MAX_DURATION, features: Mapping[str, Any] | None = None,
                   **settings: Any) -> Recognizer:
        """Load everything from files, as ``k2dec decode`` does with the same options.

        Args:
          model: ``--model``: a k2dec model file, an icefall TorchScript export or a
            sherpa-onnx folder / file (:func:`k2dec.model.load_model`).
          lang_dir: ``--lang-dir`` (tokens.txt, words.txt, bpe.model; graphs unless in
            ``graph_dir``); without it, tokens.txt / bpe.model beside the model.
          graph_dir: ``--graph-dir``: HLG.pt / LG.pt / G_4_gram.pt (``k2dec compile-graph``).
          method: the method (see :class:`Recognizer`).
          bpe_model, rnn_lm, hotwords, lodr_arpa: a BPE model other than the lang dir's,
            ``--rnn-lm``, ``--hotwords``, ``--lodr-arpa``.
          settings_file, icefall_compat, max_duration: see :class:`Recognizer`.
          model_settings: without ``settings_file``, apply the model's own settings file
            (``decode.json`` beside the model, :func:`k2dec.job.model_settings_file`) as
            ``k2dec decode`` does (logged); ``False``: ``--no-model-settings``.
          device: where the network and searches run.
          features: :class:`k2dec.data.FeatureConfig` fields for a model trained on other
            features (``--feature-*``), e.g. ``{"num_mel_bins": 40}``.
          settings: the method's settings (see :class:`Recognizer`), e.g. ``beam=8``.
        """
        assets = load_assets(model, lang_dir, bpe_model,
                             lm_paths={"rnn_lm": rnn_lm} if rnn_lm is not None else None,
                             device=device, hotwords=hotwords, lodr_arpa=lodr_arpa,
                             feature_overrides=dict(features or {}), graph_dir=graph_dir)
        if settings_file is None and model_settings:
            settings_file = model_settings_file(model)
            if settings_file is not None:
                logger.info("applying the model's settings file %s (model_settings=False: "
                            "without it)", settings_file)
        return cls(assets, method, settings, settings_file=settings_file,
                   icefall_compat=icefall_compat, max_duration=max_duration)

    def with_method(self, method: str | Method, **settings: Any) -> Recognizer:
        """Another recognizer over the same loaded assets (model, graphs, LMs), with another
        method or settings; the settings file, ``icefall_compat``, ``max_duration`` and
        ``batch_encoder`` are kept."""
        return Recognizer(self.assets, method, settings, settings_file=self.settings_file,
                          icefall_compat=self.icefall_compat,
                          max_duration=self.decode_config.max_duration,
                          batch_encoder=self.decode_config.batch_encoder)

    def __repr__(self) -> str:
        return (f"Recognizer(method={self.method!r}, model={self.model.describe()!r}, "
                f"max_duration={self.decode_config.max_duration:g})")

    @property
    def method(self) -> str:
        """The method's name."""
        return self.run.method.name

    @property
    def config(self) -> Any:
        """The method's config (its defaults with the settings applied)."""
        return self.run.config

    @property
    def model(self) -> Any:
        """The acoustic model (:class:`k2dec.model.AcousticModel`)."""
        return self.assets.model

    def decode(self, inputs: Any, sample_rate: int | None = None) -> list[RecognitionResult]:
        """Decode audio files, waveforms or cuts (see :mod:`k2dec.recognizer.inputs`).

        Args:
          inputs: one input or a list of them, or a lhotse ``CutSet``: audio file paths,
            float waveforms (1-D numpy arrays or torch tensors, samples in ``[-1, 1]``), lhotse
            recordings, lhotse cuts (with features, or with audio).
          sample_rate: the sample rate (Hz, an int) of the waveforms (files, recordings and
            cuts carry their own); any rate is resampled to the model's.

        Returns:
          one :class:`~k2dec.recognizer.RecognitionResult` per file and waveform, and per
          utterance of each cut, in the order of ``inputs``. Utterances are batched (at most
          ``max_duration`` seconds per batch) and each goes through the network alone, so a
          result does not depend on the other inputs. A recording longer than
          ``segment_max`` (30 s) is decoded in segments (silero-vad on its file, else fixed
          windows) and stitched into one result in its clock, as ``k2dec decode`` does
          (:mod:`k2dec.job.longform`; ``segments`` says where). A recording that cannot be
          decoded (longer than ``max_duration`` but not than ``segment_max``, too short, an
          empty lattice, a malformed cut: naming the field) has ``error`` set and no words. The
          features of all inputs of one call are held in memory (32 KB per second of audio
          at 80 bins, 100 frames per second): decode very long lists in parts.

        Raises:
          TypeError, ValueError: a malformed input, named, before anything is decoded.
        """
        # any length: a recording longer than segment_max is decoded in segments
        prepared = prepare_inputs(inputs, sample_rate, self.model.feature_config, math.inf)
        from lhotse import CutSet

        cuts = CutSet.from_cuts(p.cut for p in prepared if p.cut is not None)
        decoded = {d.id: d for d in decode_utterances(self.assets, cuts, self.run,
                                                      self.decode_config)} if len(cuts) else {}
        out = []
        for p in prepared:
            d = decoded.get(p.cut.id) if p.cut is not None else None
            if d is None or d.error:
                out.append(self._results(p.result_id, None, [], d.error if d else p.error))
                continue
            record, words = next(iter(d.hyps.values()))  # the configured setting
            out.append(self._results(p.result_id, record, words, segments=d.segments))
        return out

    def create_stream(self, name: str = "stream",
                      endpoint: EndpointConfig | None = None) -> Any:
        """A :class:`~k2dec.recognizer.RecognizerStream` for audio that arrives in pieces
        (a streaming model: a causal zipformer TorchScript export, and a method with a
        streaming search: ``greedy_search``, ``modified_beam_search``,
        ``fast_beam_search``); with ``endpoint`` (an
        :class:`~k2dec.recognizer.EndpointConfig`) it ends an utterance at each endpoint
        and yields one result per utterance (``pop_utterances()``)."""
        return RecognizerStream(self, name, endpoint)

    def align(self, audio: Any, text: str, sample_rate: int | None = None,
              config: AlignConfig | None = None) -> AlignmentResult:
        """Align ``text`` to ``audio`` (forced alignment through the model's CTC output, as
        ``k2dec align``; any length: long recordings go segment by segment): the start, end,
        confidence and BPE pieces of every word (:mod:`k2dec.recognizer.align`).

        Args:
          audio: an audio file path, or float samples ``[S]`` (numpy / torch) in ``[-1, 1]``.
          text: the transcript (whitespace-separated words; any word, in the vocabulary or
            not).
          sample_rate: Hz of a waveform (files carry their own).
          config: :class:`~k2dec.recognizer.align.AlignConfig` (default: its defaults).

        Returns:
          :class:`~k2dec.recognizer.align.AlignmentResult`: its ``missing`` words are those
          the audio likely lacks or says differently (low score), its ``untranscribed``
          spans the speech the transcript lacks; ``ok`` when there are neither.
        """
        return align_audio(self.assets, audio, text, sample_rate, config or AlignConfig())
