"""A folder of someone's own recordings -> decodable cuts, and the references for them.

:func:`cuts_from_audio_dir` turns every audio file under a folder (any depth, following
symlinks to folders) into one mono cut with fbank features at the feature extractor's sampling
rate (16 kHz for the shipped models):

- formats: ``.wav``, ``.flac``, ``.mp3``, ``.ogg`` (Vorbis), ``.opus`` (Ogg Opus) and a few
  more (:data:`AUDIO_EXTENSIONS`), matched case-insensitively (``.WAV``, ``.Flac``), read by
  lhotse's audio backends (libsndfile through soundfile first, then torchaudio and audioread)
  and, for what none of them reads (``.m4a``, ``.aac``, ``.wma``, ``.webm``), the ``ffmpeg``
  command when it is installed (:mod:`k2dec.data.audio_io`);
- any plausible sampling rate (4 to 384 kHz, :class:`~k2dec.data.AudioLimits`): a file at
  another rate than the model's is resampled lazily by lhotse (``Recording.resample``) while
  its features are computed;
- any number of channels: the channels are averaged into one (lhotse: one track per channel,
  each scaled by ``1 / num_channels``, mixed);
- every file is checked from its header before its samples are read (rate, duration against
  the job's ``max_duration``, memory, truncation: :func:`k2dec.data.probe_recording`);
- a file that cannot be used (corrupt, truncated, empty, shorter than a feature frame, NaN
  samples, no reader for it, a dangling symlink or a symlink loop) does not stop the folder:
  it becomes an :class:`AudioFailure` with a one-line reason naming the file, and the decode
  job records it as a failed cut.

The cut id is the file's stem (``spk1/utt7.FLAC`` -> ``utt7``; whitespace as ``_``, bytes
that are not UTF-8 as ``%XX``: :func:`k2dec.data.utterance_id`), which is also the utterance
id references use: a Kaldi ``text`` file (:func:`read_kaldi_text`: ``<utt-id> WORD WORD ...``
per line) or LibriSpeech ``*.trans.txt`` files found in the folder (:func:`load_references`).
The reference becomes the cut's supervision text. The recording keeps the file's path.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import shutil
import stat
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from lhotse import (
    CutSet,
    FbankConfig,
    NumpyFilesWriter,
    Recording,
    SupervisionSegment,
)
from lhotse.audio.utils import AudioLoadingError
from lhotse.cut import Cut
from lhotse.features.base import FeatureExtractor
from lhotse.features.io import FeaturesWriter
from lhotse.utils import fastcopy
from tqdm import tqdm

from ..primitives.files import text_lines
from .audio_io import (
    AUDIO_READ_ERRORS,
    AudioLimits,
    cut_features,
    id_clashes,
    probe_recording,
    shown_path,
    utterance_id,
)
from .decoding import utterance_cuts
from .features import NUM_MEL_BINS, make_fbank

__all__ = [
    "read_failure_reason",
    "AUDIO_EXTENSIONS",
    "AudioDirCuts",
    "AudioFailure",
    "AudioFolder",
    "compute_cut_features",
    "cuts_from_audio_dir",
    "find_audio_files",
    "load_references",
    "read_kaldi_text",
    "scan_audio_dir",
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


@dataclass(frozen=True)
class AudioFolder:
    """The audio files under a folder (:func:`scan_audio_dir`).

    Attributes:
      files: ``{utterance id: path}`` of the files to read, sorted by path (ids from
        :func:`k2dec.data.utterance_id`).
      unusable: entries named like audio files that cannot be opened at all (a dangling
        symlink, a symlink loop, a FIFO), each with the reason: the decode job records them
        as failed cuts.
    """

    files: dict[str, Path]
    unusable: tuple[AudioFailure, ...]

    @property
    def ids(self) -> list[str]:
        """Every utterance id, of the files and of the unusable entries."""
        return [*self.files, *(f.cut_id for f in self.unusable)]


def _unopenable(path: Path, err: OSError) -> str:
    """Why an entry cannot be opened, in words."""
    if os.path.islink(path):
        target = shown_path(os.readlink(path))
        if err.errno == errno.ELOOP:
            return f"symlink loop: {target} leads back to itself; fix or remove the link"
        if err.errno == errno.ENOENT:
            return f"dangling symlink: it points to {target}, which does not exist"
    return f"cannot open it: {err.strerror or err}"


def _walk(root: Path) -> Iterator[tuple[Path, str]]:
    """``(path, "")`` for every file below ``root`` (following links to folders, each folder
    once) and ``(path, why)`` for every entry that is neither a file nor a folder."""
    seen = {os.path.realpath(root)}
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            names = sorted(os.listdir(folder))
        except OSError as e:
            logger.warning("cannot list the folder %s (%s): its files are not decoded",
                           shown_path(folder), e.strerror or e)
            continue
        for name in names:
            path = folder / name
            try:
                mode = os.stat(path).st_mode
            except OSError as e:
                yield path, _unopenable(path, e)
                continue
            if stat.S_ISDIR(mode):
                real = os.path.realpath(path)
                if real in seen:
                    logger.warning("%s links to a folder searched already (%s); not searched "
                                   "again", shown_path(path), shown_path(real))
                else:
                    seen.add(real)
                    stack.append(path)
            elif stat.S_ISREG(mode):
                yield path, ""
            else:
                yield path, "not a regular file (a FIFO, socket or device)"


def scan_audio_dir(audio_dir: str | Path,
                   extensions: Sequence[str] = AUDIO_EXTENSIONS) -> AudioFolder:
    """Everything under ``audio_dir`` (any depth, following symlinks to folders) whose name
    ends (in any case) with one of ``extensions``: the files to read, and the entries that
    cannot be opened (dangling symlinks, symlink loops), which are reported, not skipped.

    Raises:
      ValueError: ``audio_dir`` is not a directory, has no such entries, or two of them have
        the same utterance id (:func:`k2dec.data.utterance_id`), naming them.
    """
    audio_dir = Path(audio_dir)
    if not audio_dir.is_dir():
        raise ValueError(f"audio_dir: no such directory: {shown_path(audio_dir)}")
    wanted = {e.lower() for e in extensions}
    entries = sorted(_walk(audio_dir))
    audio = [(p, why) for p, why in entries if p.suffix.lower() in wanted]
    others = [(p, why) for p, why in entries if p.suffix.lower() not in wanted]
    if others:
        logger.info("%d files under %s are not audio by their name, e.g. %s", len(others),
                    shown_path(audio_dir), shown_path(others[0][0].relative_to(audio_dir)))
    if any(why for _, why in others):
        path, why = next((p, w) for p, w in others if w)
        logger.warning("%s: %s", shown_path(path), why)
    if not audio:
        raise ValueError(f"no audio files ({', '.join(sorted(wanted))}, any case) under "
                         f"{shown_path(audio_dir)}")
    clashes = id_clashes([p for p, _ in audio])
    if clashes:
        utt, paths = next(iter(clashes.items()))
        raise ValueError(
            f"{len(clashes)} utterance ids belong to more than one file under "
            f"{shown_path(audio_dir)}, e.g. {utt!r}: "
            f"{', '.join(shown_path(p.relative_to(audio_dir)) for p in paths)}; the file stem "
            "(spaces as _) is the utterance id, so rename or remove one of them")
    files = {utterance_id(p): p for p, why in audio if not why}
    unusable = tuple(AudioFailure(utterance_id(p), p, f"{shown_path(p)}: {why}")
                     for p, why in audio if why)
    for f in unusable:
        logger.warning("%s", f.reason)
    return AudioFolder(files, unusable)


def find_audio_files(audio_dir: str | Path,
                     extensions: Sequence[str] = AUDIO_EXTENSIONS) -> list[Path]:
    """The audio files under ``audio_dir`` that can be opened (:func:`scan_audio_dir`),
    sorted by path.

    Raises:
      ValueError: from :func:`scan_audio_dir`.
    """
    return list(scan_audio_dir(audio_dir, extensions).files.values())


def read_kaldi_text(path: str | Path) -> dict[str, str]:
    """References from a Kaldi ``text`` file (or a LibriSpeech ``*.trans.txt``): one
    ``<utt-id> WORD WORD ...`` per line; words are kept as they are, joined by single spaces;
    blank lines are skipped; an id alone on its line has the empty reference.

    The file is UTF-8 (a byte-order mark at its start is dropped), optionally gzipped.

    Raises:
      ValueError: the file does not exist, is not UTF-8 text (naming the line), has no
        utterance at all (WER would be undefined), or an utterance id appears twice (line
        numbers given).
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"references: no such file: {path}")
    refs: dict[str, str] = {}
    first_line: dict[str, int] = {}
    for n, line in _utf8_lines(path, "references file"):
        parts = line.split(maxsplit=1)
        if not parts:
            continue
        utt = parts[0]
        if utt in refs:
            raise ValueError(f"{path}:{n}: utterance id {utt!r} already has a reference on "
                             f"line {first_line[utt]}")
        refs[utt] = " ".join(parts[1].split()) if len(parts) > 1 else ""
        first_line[utt] = n
    if not refs:
        raise ValueError(f"references file {path} is empty: it needs one '<utt-id> WORD "
                         "WORD ...' line per utterance (leave --text out to decode without "
                         "references)")
    return refs


def _utf8_lines(path: Path, what: str) -> Iterator[tuple[int, str]]:
    """:func:`k2dec.primitives.files.text_lines` whose message for a file that is not UTF-8
    (Latin-1, UTF-16, binary) says what to do."""
    try:
        yield from text_lines(path, what)
    except ValueError as e:
        if "is not UTF-8" not in str(e) and "NUL bytes" not in str(e):
            raise
        raise ValueError(f"{e}; the encoding must be UTF-8 (convert it, e.g. iconv -f "
                         "latin1 -t utf-8)") from None


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


_LHOTSE_CAUSE = re.compile(r"Exception #\d+ \(<class '[\w.]+\.(\w+)'>\): <class '[\w.]+'>: ?(.*)")


def read_failure_reason(err: BaseException) -> str:
    """One line saying why a file cannot be used: our own checks' messages as they are,
    lhotse's multi-backend dumps reduced to each backend's cause, an OS error's reason."""
    if isinstance(err, ValueError) and not isinstance(err, AudioLoadingError):
        return str(err)
    if isinstance(err, OSError) and err.strerror:
        return f"cannot read it: {err.strerror}"
    msg = str(err).split("\n[extra info]")[0]
    if "number of declared samples" in msg:  # lhotse's words for a truncated file
        return ("truncated or corrupt: fewer samples could be read than the header declares ("
                + " ".join(msg.split(" This could be")[0].split()) + ")")
    causes = [f"{backend}: {cause.strip()}" for backend, cause in _LHOTSE_CAUSE.findall(msg)
              if cause.strip()]
    text = "; ".join(causes) or " ".join(
        x.strip() for x in msg.splitlines()
        if x.strip() and not x.startswith("Set LHOTSE_AUDIO_LOADING_EXCEPTION_VERBOSE"))
    text = f"{type(err).__name__}: {text or repr(err)}"
    return text if len(text) <= 300 else text[:297] + "..."


def _features(cut: Cut, path: str, extractor: FeatureExtractor, writer: FeaturesWriter,
              limits: AudioLimits) -> tuple[Cut | None, str]:
    """``(cut with features, "")`` or ``(None, "<path>: <why>")``."""
    try:
        return cut_features(cut, extractor, writer, limits), ""
    except AUDIO_READ_ERRORS as e:
        return None, f"{path}: {read_failure_reason(e)}"


def _file_cut(utt: str, path: Path, extractor: FeatureExtractor, writer: FeaturesWriter,
              limits: AudioLimits) -> tuple[Cut | None, Recording | None, str]:
    """``(cut with features, its recording, "")`` of one file, or ``(None, None, "<path>:
    <why>")``."""
    try:
        rec = probe_recording(path, utt, limits, in_pieces=True)  # cut_features reads pieces
    except AUDIO_READ_ERRORS as e:
        return None, None, f"{shown_path(path)}: {read_failure_reason(e)}"
    cut, why = _features(rec.to_cut(), shown_path(path), extractor, writer, limits)
    return cut, rec, why


def _log_summary(rates: Counter[int], multi: list[tuple[str, int]], failed: Sequence[str],
                 total: int, target: int) -> None:
    """Say once what was resampled, downmixed and could not be used."""
    resampled = {r: n for r, n in rates.items() if r != target}
    if resampled:
        logger.info("resampled %d files to %d Hz (%s)", sum(resampled.values()), target,
                    ", ".join(f"{n} at {r} Hz" for r, n in sorted(resampled.items())))
    if multi:
        logger.warning("%d of %d files have more than one channel (e.g. %s: %d channels); "
                       "their channels are averaged into one", len(multi), total, *multi[0])
    if failed:
        logger.warning("%d of %d audio files cannot be used, e.g. %s", len(failed), total,
                       failed[0])


def _check_references(references: Mapping[str, str], ids: Sequence[str]) -> tuple[str, ...]:
    """Ids without a reference (logged with the references that match no file)."""
    if not references:
        return ()
    missing = tuple(u for u in ids if u not in references)
    unused = sorted(set(references) - set(ids))
    if missing:
        logger.warning("%d of %d audio files have no reference (e.g. %s); they are decoded "
                       "but not scored", len(missing), len(ids), missing[0])
    if unused:
        logger.warning("%d references match no audio file (e.g. %s)", len(unused), unused[0])
    return missing


def _default_extractor(extractor: FeatureExtractor | None) -> FeatureExtractor:
    """The given extractor, or 80-bin fbank at 16 kHz (what compute_fbank computes)."""
    return extractor if extractor is not None else make_fbank(
        FbankConfig(num_mel_bins=NUM_MEL_BINS))


def _fresh_feature_folder(storage_path: str | Path) -> None:
    """Make ``storage_path`` an empty folder for lhotse's ``NumpyFilesWriter`` (which names
    its files at random): the files of an earlier run are removed, so reruns do not pile
    them up. A folder holding anything but ``.npy`` files is not touched (``ValueError``)."""
    folder = Path(storage_path)
    if folder.is_dir():
        other = next((p for p in folder.rglob("*") if p.is_file() and p.suffix != ".npy"), None)
        if other is not None:
            raise ValueError(f"{folder}: a feature folder holds {other.name}, which k2dec did "
                             "not write; choose another feature folder or remove it")
        shutil.rmtree(folder)
    elif folder.exists():
        raise ValueError(f"{folder}: exists and is not a folder; remove it or choose another "
                         "feature folder")
    folder.mkdir(parents=True)


def cuts_from_audio_dir(
    audio_dir: str | Path,
    storage_path: str | Path,
    references: Mapping[str, str] | None = None,
    extractor: FeatureExtractor | None = None,
    extensions: Sequence[str] = AUDIO_EXTENSIONS,
    progress: bool = True,
    limits: AudioLimits = AudioLimits(),  # noqa: B008 (frozen)
) -> AudioDirCuts:
    """Mono cuts with fbank features for every audio file under ``audio_dir``, one file at a
    time: its header checked (:func:`k2dec.data.probe_recording`), then read, resampled to
    the extractor's rate, its channels averaged, its features stored (memory: one file's
    samples and features). A file that cannot be used, a dangling symlink included, becomes
    an :class:`AudioFailure` with a one-line reason instead of a cut.

    Args:
      audio_dir: the folder (searched recursively, see :func:`scan_audio_dir`).
      storage_path: a folder where the features are written losslessly, one ``.npy`` file
        per recording (created; overwritten). Lossless on purpose: lilcom's compression
        error is enough to change a search's choice between near-tied hypotheses, and
        decoding your own files should give what the model gives on the recordings
        (icefall's ``pretrained.py`` does not compress either).
      references: ``{utterance id: words}`` (:func:`load_references`); ``None`` or ``{}`` for
        none. A reference whose id matches no file is reported in the log.
      extractor: the feature extractor; its config's ``sampling_rate`` is the target rate.
        Default: 80-bin fbank at 16 kHz (what :func:`k2dec.data.compute_fbank` computes).
      extensions: file name endings to pick up (any case).
      progress: show a progress bar.
      limits: what a file may be (:class:`k2dec.data.AudioLimits`; the decode job sets its
        ``max_duration``).

    Returns:
      :class:`AudioDirCuts` (cuts in path order; ids from :func:`k2dec.data.utterance_id`).

    Raises:
      ValueError: from :func:`scan_audio_dir`.
    """
    folder = scan_audio_dir(audio_dir, extensions)
    extractor = _default_extractor(extractor)
    references = dict(references or {})
    _fresh_feature_folder(storage_path)
    cuts: list[Cut] = []
    failed = list(folder.unusable)
    rates: Counter[int] = Counter()
    multi: list[tuple[str, int]] = []
    with NumpyFilesWriter(storage_path) as writer:
        for utt, path in tqdm(folder.files.items(), desc="audio -> fbank", unit="file",
                              disable=not progress):
            cut, rec, why = _file_cut(utt, path, extractor, writer, limits)
            if cut is None:
                failed.append(AudioFailure(utt, path, why))
                continue
            rates[rec.sampling_rate] += 1
            if rec.num_channels > 1:
                multi.append((shown_path(path.name), rec.num_channels))
            cuts.append(_with_supervision(cut, utt, references.get(utt)))
    _log_summary(rates, multi, [f.reason for f in failed], len(folder.ids),
                 int(extractor.config.sampling_rate))
    missing = _check_references(references, folder.ids)
    return AudioDirCuts(CutSet.from_cuts(cuts), tuple(failed), missing)


def _with_supervision(cut: Cut, utt: str, text: str | None) -> Cut:
    """``cut`` with one supervision, utterance ``utt`` over the whole cut, words ``text``
    (``None``: no reference; ``""``: the empty reference of a silent file)."""
    sup = SupervisionSegment(id=utt, recording_id=utt, start=0.0, duration=cut.duration,
                             channel=0, text=text)
    return fastcopy(cut, supervisions=[sup])


def _cut_label(cut: Cut) -> str:
    """``cut <id> (<audio file>)`` for messages."""
    rec = getattr(cut, "recording", None)
    src = rec.sources[0] if rec is not None and rec.sources else None
    return f"cut {cut.id}" + (f" ({shown_path(src.source)})" if src is not None
                              and src.type == "file" else "")


def compute_cut_features(
    cuts: CutSet,
    storage_path: str | Path,
    extractor: FeatureExtractor | None = None,
    limits: AudioLimits = AudioLimits(),  # noqa: B008 (frozen)
    progress: bool = True,
) -> tuple[CutSet, dict[str, str]]:
    """Features for the utterances of a manifest whose cuts have none (cuts of recordings,
    e.g. ``CutSet.from_manifests(recordings=..., supervisions=...)``), computed as for an
    audio folder (the checks of :func:`k2dec.data.cut_features`) for each utterance
    (:func:`k2dec.data.utterance_cuts`: one per supervision, so a long recording with short
    supervisions is read one segment at a time); utterances with features are kept as they
    are. What ``k2dec decode --cuts`` does for a manifest without features.

    Args:
      cuts: the cuts (each one without features needs its recording).
      storage_path: a folder where the features are written losslessly, one ``.npy`` file
        per utterance, as for :func:`cuts_from_audio_dir` (created; overwritten).
      extractor: as for :func:`cuts_from_audio_dir` (the model's: ``FeatureConfig.extractor``).
      limits: what a recording may be (:class:`k2dec.data.AudioLimits`).
      progress: show a progress bar.

    Returns:
      ``(utterances with features, {utterance id: reason})``: an utterance whose audio cannot
      be used is left out, with the reason.

    Raises:
      ValueError: from :func:`k2dec.data.utterance_cuts`.
    """
    extractor = _default_extractor(extractor)
    _fresh_feature_folder(storage_path)
    out: list[Cut] = []
    failed: dict[str, str] = {}
    with NumpyFilesWriter(storage_path) as writer:
        for cut in tqdm(utterance_cuts(cuts), desc="audio -> fbank", unit="cut",
                        disable=not progress):
            if cut.has_features:
                out.append(cut)
            elif not cut.has_recording:
                failed[cut.id] = (f"{_cut_label(cut)}: it has neither features nor a "
                                  "recording to compute them from")
            else:
                done, why = _features(cut, _cut_label(cut), extractor, writer, limits)
                if done is None:
                    failed[cut.id] = why
                else:
                    out.append(done)
    if failed:
        logger.warning("%d cuts cannot be used, e.g. %s", len(failed),
                       next(iter(failed.values())))
    return CutSet.from_cuts(out), failed
