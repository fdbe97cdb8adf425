"""A folder of someone's own recordings -> decodable cuts, and the references for them.

:func:`cuts_from_audio_dir` turns every audio file under a folder (any depth) into one mono cut
with fbank features at the feature extractor's sampling rate (16 kHz for the shipped models):

- formats: ``.wav``, ``.flac``, ``.mp3``, ``.ogg`` (Vorbis), ``.opus`` (Ogg Opus) and a few
  more (:data:`AUDIO_EXTENSIONS`), matched case-insensitively (``.WAV``, ``.Flac``), read by
  lhotse's audio backends (libsndfile through soundfile first, then torchaudio and audioread);
- any sampling rate: a file at another rate is resampled lazily by lhotse
  (``Recording.resample``) while its features are computed;
- any number of channels: the channels are averaged into one (lhotse: one track per channel,
  each scaled by ``1 / num_channels``, mixed);
- a file that cannot be used (corrupt, truncated, empty, shorter than a feature frame, no
  backend reads it) does not stop the folder: it becomes an :class:`AudioFailure` with the
  reason, and the decode job records it as a failed cut.

The cut id is the file's stem (``spk1/utt7.FLAC`` -> ``utt7``), which is also the utterance id
references use: a Kaldi ``text`` file (:func:`read_kaldi_text`: ``<utt-id> WORD WORD ...`` per
line) or LibriSpeech ``*.trans.txt`` files found in the folder (:func:`load_references`). The
reference becomes the cut's supervision text.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from lhotse import CutSet, Fbank, FbankConfig, LilcomChunkyWriter, Recording, SupervisionSegment
from lhotse.audio.utils import AudioLoadingError, DurationMismatchError
from lhotse.cut import Cut, MixedCut, MixTrack, MultiCut
from lhotse.utils import fastcopy
from tqdm import tqdm

from .features import NUM_MEL_BINS, make_fbank

__all__ = [
    "AUDIO_EXTENSIONS",
    "AudioDirCuts",
    "AudioFailure",
    "cuts_from_audio_dir",
    "find_audio_files",
    "load_references",
    "read_kaldi_text",
]

logger = logging.getLogger(__name__)

AUDIO_EXTENSIONS: tuple[str, ...] = (
    ".wav", ".flac", ".mp3", ".ogg", ".opus", ".aif", ".aiff", ".au", ".caf", ".w64",
    ".m4a", ".aac", ".wma", ".webm", ".sph",
)
"""File name endings :func:`find_audio_files` picks up (compared in lower case). With k2dec's
pinned packages (soundfile 0.13 with libsndfile 1.2, torchaudio 0.13, no FFmpeg) the first ten
are read; ``.m4a``, ``.aac``, ``.wma`` and ``.webm`` need FFmpeg's libraries and NIST ``.sph``
needs lhotse's sph2pipe: without them such files become failures that say so, rather than
being left out unseen."""

# What reading or decoding a bad file raises through lhotse (its backends wrap most errors in
# AudioLoadingError; soundfile's LibsndfileError is a RuntimeError).
_READ_ERRORS = (AudioLoadingError, DurationMismatchError, OSError, RuntimeError, ValueError,
                EOFError)


@dataclass(frozen=True)
class AudioFailure:
    """An audio file that could not become a cut.

    Attributes:
      cut_id: the id the cut would have had (the file's stem).
      path: the file.
      reason: ``"<path>: <ExceptionType>: <what went wrong>"``, one line.
    """

    cut_id: str
    path: Path
    reason: str


@dataclass(frozen=True)
class AudioDirCuts:
    """What :func:`cuts_from_audio_dir` made of a folder.

    Attributes:
      cuts: one mono cut per readable file, id = the file's stem, with features (float32
        ``[num_frames, num_mel_bins]``, 100 frames per second for the default fbank) and one
        supervision over the whole cut whose text is the reference (``""`` when there is none).
      failed: the files that could not be read, with reasons.
      missing_references: ids of cuts (and failures) without a reference while references
        were given; empty when no references were given at all.
    """

    cuts: CutSet
    failed: tuple[AudioFailure, ...]
    missing_references: tuple[str, ...]

    @property
    def failures(self) -> dict[str, str]:
        """``{cut_id: reason}`` of :attr:`failed` (what the decode job records)."""
        return {f.cut_id: f.reason for f in self.failed}


def find_audio_files(audio_dir: str | Path,
                     extensions: Sequence[str] = AUDIO_EXTENSIONS) -> list[Path]:
    """Audio files anywhere under ``audio_dir`` whose name ends (in any case) with one of
    ``extensions``, sorted by path.

    Raises:
      ValueError: ``audio_dir`` is not a directory, has no such files, or two files have the
        same stem (the stem is the utterance id, so it must be unique), naming the files.
    """
    audio_dir = Path(audio_dir)
    if not audio_dir.is_dir():
        raise ValueError(f"audio_dir: no such directory: {audio_dir}")
    wanted = {e.lower() for e in extensions}
    everything = sorted(p for p in audio_dir.rglob("*") if p.is_file())
    files = [p for p in everything if p.suffix.lower() in wanted]
    others = [p for p in everything if p.suffix.lower() not in wanted]
    if others:
        logger.info("%d files under %s are not audio by their name, e.g. %s", len(others),
                    audio_dir, others[0].relative_to(audio_dir))
    if not files:
        raise ValueError(f"no audio files ({', '.join(sorted(wanted))}, any case) under "
                         f"{audio_dir}")
    by_stem: dict[str, list[Path]] = {}
    for p in files:
        by_stem.setdefault(p.stem, []).append(p)
    clashes = {s: ps for s, ps in by_stem.items() if len(ps) > 1}
    if clashes:
        stem, paths = next(iter(clashes.items()))
        raise ValueError(
            f"{len(clashes)} utterance ids belong to more than one file under {audio_dir}, e.g. "
            f"{stem!r}: {', '.join(str(p.relative_to(audio_dir)) for p in paths)}; the file "
            "stem is the utterance id, so rename or remove one of them")
    return files


def read_kaldi_text(path: str | Path) -> dict[str, str]:
    """References from a Kaldi ``text`` file (or a LibriSpeech ``*.trans.txt``): one
    ``<utt-id> WORD WORD ...`` per line; words are kept as they are, joined by single spaces;
    blank lines are skipped; an id alone on its line has the empty reference.

    Raises:
      ValueError: the file does not exist, or an utterance id appears twice (line numbers
        given).
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"references: no such file: {path}")
    refs: dict[str, str] = {}
    first_line: dict[str, int] = {}
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        parts = line.split(maxsplit=1)
        if not parts:
            continue
        utt = parts[0]
        if utt in refs:
            raise ValueError(f"{path}:{n}: utterance id {utt!r} already has a reference on "
                             f"line {first_line[utt]}")
        refs[utt] = " ".join(parts[1].split()) if len(parts) > 1 else ""
        first_line[utt] = n
    return refs


def load_references(audio_dir: str | Path, text: str | Path | None = None) -> dict[str, str]:
    """The references for the files of ``audio_dir``: from ``text`` (a Kaldi text file) when
    given, else from every LibriSpeech ``*.trans.txt`` under ``audio_dir``; ``{}`` when there
    are none.

    Returns:
      ``{utterance id: reference words joined by spaces}``.

    Raises:
      ValueError: from :func:`read_kaldi_text`, or an utterance id in two ``*.trans.txt``
        files.
    """
    audio_dir = Path(audio_dir)
    trans = sorted(audio_dir.rglob("*.trans.txt"))
    if text is not None:
        if trans:
            logger.info("references from %s; ignoring %d *.trans.txt files under %s", text,
                        len(trans), audio_dir)
        return read_kaldi_text(text)
    refs: dict[str, str] = {}
    origin: dict[str, Path] = {}
    for t in trans:
        for utt, words in read_kaldi_text(t).items():
            if utt in refs:
                raise ValueError(f"utterance id {utt!r} has references in {origin[utt]} and {t}")
            refs[utt] = words
            origin[utt] = t
    if trans:
        logger.info("references for %d utterances from %d *.trans.txt files under %s",
                    len(refs), len(trans), audio_dir)
    return refs


def _reason(err: BaseException) -> str:
    """One line from lhotse's multi-line loading errors (without its tracebacks hint and the
    repr of the recording it appends)."""
    msg = str(err).split("\n[extra info]")[0]
    if "number of declared samples" in msg:  # lhotse's words for a truncated file
        msg = ("truncated or corrupt: fewer samples could be read than the header declares ("
               + msg.split(" This could be")[0] + ")")
    lines = [x.strip() for x in msg.splitlines()
             if x.strip() and not x.startswith("Set LHOTSE_AUDIO_LOADING_EXCEPTION_VERBOSE")]
    return f"{type(err).__name__}: {' | '.join(lines) or repr(err)}"


def _mono_cut(recording: Recording) -> Cut:
    """A one-channel cut of ``recording``: itself, or the average of its channels."""
    cut = recording.to_cut()
    if not isinstance(cut, MultiCut):
        return cut
    channels = cut.to_mono(mono_downmix=False)
    scale = 1.0 / len(channels)
    return MixedCut(id=cut.id, tracks=[
        MixTrack(cut=c.perturb_volume(scale, affix_id=False)) for c in channels])


def cuts_from_audio_dir(
    audio_dir: str | Path,
    storage_path: str | Path,
    references: Mapping[str, str] | None = None,
    extractor: Fbank | None = None,
    extensions: Sequence[str] = AUDIO_EXTENSIONS,
    progress: bool = True,
) -> AudioDirCuts:
    """Mono cuts with fbank features for every audio file under ``audio_dir``.

    Each file is read with lhotse, resampled (lazily, by lhotse) to the extractor's sampling
    rate when it has another one, its channels averaged when it has several, and its features
    computed and stored, one file at a time (memory: one file's samples and features). A file
    that cannot be read, or is shorter than one feature frame, becomes an
    :class:`AudioFailure` instead of a cut.

    Args:
      audio_dir: the folder (searched recursively, see :func:`find_audio_files`).
      storage_path: where the features are written (a lilcom-chunky archive; ``.lca`` is
        appended; its folder is created). Overwritten.
      references: ``{utterance id: words}`` (:func:`load_references`); ``None`` or ``{}`` for
        none. A reference whose id matches no file is reported in the log.
      extractor: the feature extractor; its config's ``sampling_rate`` is the target rate.
        Default: 80-bin fbank at 16 kHz (what :func:`k2dec.data.compute_fbank` computes).
      extensions: file name endings to pick up (any case).
      progress: show a progress bar.

    Returns:
      :class:`AudioDirCuts` (cuts in path order).

    Raises:
      ValueError: from :func:`find_audio_files`.
    """
    files = find_audio_files(audio_dir, extensions)
    extractor = extractor if extractor is not None else make_fbank(FbankConfig(
        num_mel_bins=NUM_MEL_BINS))
    rate = int(extractor.config.sampling_rate)
    frame = float(extractor.config.frame_length)
    references = dict(references or {})
    storage_path = Path(storage_path)
    storage_path.parent.mkdir(parents=True, exist_ok=True)
    cuts: list[Cut] = []
    failed: list[AudioFailure] = []
    resampled: Counter[int] = Counter()
    multi: list[tuple[str, int]] = []
    with LilcomChunkyWriter(storage_path) as writer:
        for path in tqdm(files, desc="audio -> fbank", unit="file", disable=not progress):
            utt = path.stem
            try:
                rec = Recording.from_file(path, recording_id=utt)
                if rec.duration < frame:
                    raise ValueError(f"too short: {rec.num_samples} samples ({rec.duration:g} "
                                     f"s), less than one {frame:g} s feature frame")
                if rec.sampling_rate != rate:
                    resampled[rec.sampling_rate] += 1
                    rec = rec.resample(rate)
                if rec.num_channels > 1:
                    multi.append((path.name, rec.num_channels))
                cut = _mono_cut(rec).compute_and_store_features(extractor, writer)
            except _READ_ERRORS as e:
                failed.append(AudioFailure(utt, path, f"{path}: {_reason(e)}"))
                continue
            sup = SupervisionSegment(id=utt, recording_id=utt, start=0.0,
                                     duration=cut.duration, channel=0,
                                     text=references.get(utt, ""))
            cuts.append(fastcopy(cut, supervisions=[sup]))
    if resampled:
        logger.info("resampled %d files to %d Hz (%s)", sum(resampled.values()), rate,
                    ", ".join(f"{n} at {r} Hz" for r, n in sorted(resampled.items())))
    if multi:
        logger.warning("%d of %d files have more than one channel (e.g. %s: %d channels); "
                       "their channels are averaged into one", len(multi), len(files), *multi[0])
    if failed:
        logger.warning("%d of %d audio files cannot be used, e.g. %s", len(failed), len(files),
                       failed[0].reason)
    ids = [p.stem for p in files]
    missing: tuple[str, ...] = ()
    if references:
        missing = tuple(u for u in ids if u not in references)
        unused = sorted(set(references) - set(ids))
        if missing:
            logger.warning("%d of %d audio files have no reference (e.g. %s); they are decoded "
                           "but not scored", len(missing), len(ids), missing[0])
        if unused:
            logger.warning("%d references match no audio file (e.g. %s)", len(unused), unused[0])
    return AudioDirCuts(CutSet.from_cuts(cuts), tuple(failed), missing)
