"""One method over cuts in memory: the decode job's batches and network pass, without files.

:func:`decode_utterances` is what :func:`k2dec.job.decode_cuts` does per batch (the same
batches of at most ``max_duration`` seconds, the same network pass through a
:class:`~k2dec.job.encoder.JobEncoder`, the same per-batch decoding that retries a failing
batch cut by cut, the same checks of too short, too long and silent cuts), returning each
utterance's hypotheses instead of writing result files. The one-object API
(:class:`k2dec.Recognizer`) decodes through it, so it gives the words ``k2dec decode`` gives
for the same features.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from lhotse import CutSet

from ..data import make_decode_loader
from ..lang import match_case
from ..primitives.hypothesis import HypothesisRecord
from .assets import DecodeAssets, reference_case
from .batches import decode_or_split, silence_check, silenced
from .checks import check_cuts
from .config import DecodeConfig
from .driver import MethodRun
from .encoder import JobEncoder
from .longform import decode_long, is_long
from .resume import todo_cuts

__all__ = ["DecodedUtterance", "decode_utterances"]


@dataclass(frozen=True)
class DecodedUtterance:
    """One utterance decoded by :func:`decode_utterances`.

    Attributes:
      id: the utterance id (:func:`k2dec.data.utterance_cuts`: the cut id, or the
        supervision id for a cut with several supervisions).
      hyps: ``{setting key: (record, words)}`` in the method's order (the configured setting
        first); empty when the utterance failed.
      error: why the utterance has no hypothesis (``""`` when it has one).
      segments: ``(start, end)`` seconds of the segments an utterance longer than
        ``segment_max`` was decoded in (:mod:`k2dec.job.longform`; its record's frames
        count from its start); ``()`` for one decoded whole.
      dropped_speech: seconds of speech the VAD dropped in it.
    """

    id: str
    hyps: dict[str, tuple[HypothesisRecord, list[str]]] = field(default_factory=dict)
    error: str = ""
    segments: tuple[tuple[float, float], ...] = ()
    dropped_speech: float = 0.0


class _Failures:
    """What :func:`k2dec.job.resume.todo_cuts` asks of a results writer, in memory: nothing is
    done yet, failures are kept."""

    def __init__(self) -> None:
        self.reasons: dict[str, str] = {}

    def __contains__(self, cut_id: str) -> bool:
        return cut_id in self.reasons

    def get(self, cut_id: str) -> None:
        return None

    def forget(self, cut_id: str) -> None:
        self.reasons.pop(cut_id, None)

    def write_failure(self, cut_id: str, reason: str, input: str = "") -> None:  # noqa: A002
        self.reasons[cut_id] = reason


def _batches(assets: DecodeAssets, cuts: CutSet, run: MethodRun, config: DecodeConfig,
             encoder: JobEncoder, failures: _Failures) -> Iterator[DecodedUtterance]:
    """The decoded utterances of ``cuts`` (checked), batch by batch."""
    todo, _ = todo_cuts(cuts, {}, failures, assets.model.min_input_frames, config.max_duration,
                        retry_failures=True, segment_max=config.segment_max)
    if not len(todo):
        return
    silence, case = silence_check(assets, config), reference_case(assets)
    for cut in (c for c in todo if is_long(c, config)):  # in segments, stitched
        text = cut.supervisions[0].text if cut.supervisions else None
        done = decode_long(run.method, run.config, assets, cut, config, encoder, silence,
                           None if text is None else match_case(text, case).split())
        hyps, error = done.decoded
        yield DecodedUtterance(cut.id, {} if error else hyps, error, done.segments,
                               done.dropped_speech)
    todo = CutSet.from_cuts(c for c in todo if not is_long(c, config))
    if not len(todo):
        return
    for batch in make_decode_loader(todo, config.max_duration, config.num_buckets):
        for cut_id, reason in batch.failed.items():
            failures.write_failure(cut_id, reason)
        if not batch.cut_ids:
            continue
        refs = [match_case(t or "", case).split() for t in batch.texts]
        decoded = decode_or_split(run.method, run.config, assets, batch.features,
                                   batch.num_frames, refs, encoder)
        decoded = silenced(decoded, batch.features, batch.num_frames, silence)
        for cut_id, (hyps, error) in zip(batch.cut_ids, decoded):
            yield DecodedUtterance(cut_id, {} if error else hyps, error)


def decode_utterances(assets: DecodeAssets, cuts: CutSet, run: MethodRun,
                      config: DecodeConfig = DecodeConfig(),  # noqa: B008 (frozen)
                      encoder: JobEncoder | None = None) -> list[DecodedUtterance]:
    """Decode ``cuts`` (with features) with one planned method, in memory.

    Args:
      assets: the model, lang dir, graphs and LMs (:func:`k2dec.job.load_assets`).
      cuts: cuts with features; one result per utterance of
        :func:`k2dec.data.utterance_cuts` (a cut with several supervisions gives one per
        supervision).
      run: the method and its config (:func:`k2dec.job.plan_methods`).
      config: ``max_duration`` (seconds per batch; a longer utterance fails unless it is
        longer than ``segment_max``: then it is decoded in segments and stitched, as a
        decode job does), ``segmenter`` / ``segment_max`` / ``segment_context`` and
        ``batch_encoder`` / ``num_buckets`` as in a decode job; the file settings are unused.
      encoder: the network pass to use (e.g. one whose cache several calls share); default:
        a new one without cache (each utterance through the network alone, as the job does).

    Returns:
      one :class:`DecodedUtterance` per utterance, in the order of the utterances; failed
      ones (too short, too long, unreadable features, an empty lattice) have ``error`` set.

    Raises:
      ValueError: before anything is decoded: repeated utterance ids, an oracle method with
        an utterance without a reference, a method the model cannot run, cuts without
        features.
    """
    utterances = check_cuts([run.method], cuts)
    if not assets.model.supports(run.method):
        raise ValueError(f"method {run.method.name!r} ({run.method.family.value}) needs what "
                         f"this model lacks: {assets.model.describe()}")
    failures = _Failures()
    encoder = encoder if encoder is not None else JobEncoder(config.batch_encoder)
    done = {d.id: d for d in _batches(assets, utterances, run, config, encoder, failures)}
    out = []
    for cut_id in utterances.ids:
        if cut_id not in done:  # recorded by todo_cuts or as an unreadable feature file
            if cut_id not in failures:
                raise RuntimeError(f"utterance {cut_id!r} was neither decoded nor failed")
            done[cut_id] = DecodedUtterance(cut_id, error=failures.reasons[cut_id])
        out.append(done[cut_id])
    return out
