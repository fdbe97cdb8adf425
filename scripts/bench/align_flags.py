"""How trustworthy `k2dec align`'s flags are: transcripts that match the audio, and ones
changed in one word, aligned to the shipped model's CTC output::

    python scripts/make_align_dev.py --output-dir data/align-dev
    python -m scripts.bench.align_flags --dev data/align-dev/dev-clean --out-dir exp/align-flags

Per utterance, four transcripts: (a) the right one; (b) one word substituted by another word
of the lang dir's vocabulary; (c) one word deleted (the audio has a word the transcript
lacks); (d) one word of the vocabulary inserted (the transcript has a word the audio lacks);
the changed position is drawn at random (seeded). A flag is a word under the confidence
threshold or a stretch of speech not in the transcript (a garbage run). A flag is **on
target** when it is the substituted / inserted word, or a garbage run within 0.2 s of the
substituted / deleted word's frames on the right transcript's alignment.

1. On the **dev** set (the corpus' held-out dev-clean, synthesized by
   ``scripts/make_align_dev.py``), a grid of ``AlignConfig``'s ``untranscribed_penalty`` x
   ``skip_penalty`` x ``min_word_score`` x ``min_confidence`` is scored; the chosen setting
   is the one catching the most changed words among those that flag at most
   ``--max-false`` of the right transcripts (on a tie, the most flags on target, then the
   fewest false flags). A skipped word is a flagged word (confidence 0).
2. With that setting, the shipped test-clean and test-other, and the long recording
   ``scripts/make_long_recording.py`` makes from test-clean (aligned through
   ``align_recording``, segment by segment; ``--long-changes`` changes of each kind), are
   reported: per case, the share of utterances flagged, the share of changed words caught
   (on target) and the share of flags on target; then the same for the rule before the
   word-skip path (:data:`BEFORE`), and ``align_words``' time plain, with the garbage path
   and with garbage and skips.

The network runs once per utterance (log-probs cached); the grid re-runs only the alignment.
1 torch thread.
"""

from __future__ import annotations

import argparse
import itertools
import random
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from k2dec.job import load_assets
from k2dec.lattice.forced_align import Untranscribed, align_words
from k2dec.recognizer.align import (
    GARBAGE_FRAME_PENALTY,
    AlignConfig,
    align_recording,
    flag_word,
    transcript_units,
)

from ..make_long_recording import corpus_utterances, make_long_recording
from .common import REPO
from .machine import cpu_model, git_commit, load_average

ASSETS = REPO / "assets" / "librispeech-synth"
CASES = ("right", "substituted", "deleted", "inserted")
ENTRY = (3.0, 4.0, 5.0)
SKIP = (None, 8.0, 12.0, 16.0, 20.0, 25.0, 30.0, 40.0)
SKIP_SPEED = 20.0
WORD_SCORE = (-15.0, -20.0, -25.0, -30.0, -40.0)
CONFIDENCE = (0.0, 0.001, 0.003, 0.01)
BEFORE = ((4.0, None), -25.0, 0.001)
"""The rule before the word-skip path: the garbage path at 4, words flagged under a score of
-25 or a confidence of 0.001, no word skipped."""
TOLERANCE = 0.2


@dataclass
class Utt:
    """One utterance: its CTC log-probs ``[T, V]``, words, and the right words' spans (s)."""

    id: str
    log_probs: torch.Tensor
    words: list[str]
    spans: list[tuple[float, float]]


def _log_probs(assets, path: Path) -> torch.Tensor:
    import soundfile as sf

    samples, rate = sf.read(str(path), dtype="float32")
    fc = assets.model.feature_config
    if rate != fc.sampling_rate:
        raise ValueError(f"{path}: {rate} Hz, the model wants {fc.sampling_rate}")
    feats = torch.from_numpy(fc.extractor().extract(samples, rate)).unsqueeze(0)
    out = assets.model.encode(feats, torch.tensor([feats.shape[1]]))
    return out.ctc_log_probs[0, : int(out.encoder_out_lens[0])].float()


def load_set(assets, corpus: Path) -> list[Utt]:
    shift = assets.model.output_frame_shift
    utts = []
    for uid, flac, text in corpus_utterances(corpus):
        lp = _log_probs(assets, flac)
        units = transcript_units(text, assets.sp)
        a = align_words(lp[None], torch.tensor([lp.shape[0]]), [[list(u.pieces) for u in units]])
        spans = [(b * shift, e * shift) for b, e in zip(a.word_begin.tolist()[0],
                                                        a.word_end.tolist()[0])]
        utts.append(Utt(uid, lp, text.split(), spans))
    return utts


def changed(words: list[str], case: str, rng: random.Random, vocab: list[str]
            ) -> tuple[list[str], int]:
    """The transcript of a case and the changed position (-1 for the right one)."""
    if case == "right":
        return list(words), -1
    i = rng.randrange(len(words))
    other = rng.choice([w for w in vocab if w != words[i]])
    if case == "substituted":
        return words[:i] + [other] + words[i + 1:], i
    if case == "deleted":
        return words[:i] + words[i + 1:], i
    i = rng.randrange(len(words) + 1)
    return words[:i] + [other] + words[i:], i


def _flags(utts, texts, assets, setting: tuple, batch: int = 16):
    """Per utterance: word scores, confidences and garbage runs (seconds)."""
    shift = assets.model.output_frame_shift
    out = []
    for k in range(0, len(utts), batch):
        part = utts[k:k + batch]
        lp = torch.nn.utils.rnn.pad_sequence([u.log_probs for u in part], batch_first=True)
        lens = torch.tensor([u.log_probs.shape[0] for u in part])
        words = [[list(x.pieces) for x in transcript_units(" ".join(t), assets.sp)]
                 for t in texts[k:k + batch]]
        entry, skip = setting
        garbage = None if entry is None else Untranscribed(entry, GARBAGE_FRAME_PENALTY, skip)
        a = align_words(lp, lens, words, garbage)
        for i in range(len(part)):
            runs = [(b * shift, e * shift) for b, e in zip(a.garbage_begin.tolist()[i],
                                                           a.garbage_end.tolist()[i])]
            out.append((a.word_score.tolist()[i], a.word_confidence.tolist()[i], runs))
    return out


def _near(run, span) -> bool:
    return run[0] < span[1] + TOLERANCE and run[1] > span[0] - TOLERANCE


def score_case(utts, case, changes, flags, threshold):
    """(utterances flagged, changed words caught, flags, flags on target) of one case."""
    flagged = caught = num_flags = on_target = 0
    for u, (pos, _), (score, conf, runs) in zip(utts, changes, flags):
        low = [j for j, (x, c) in enumerate(zip(score, conf))
               if flag_word(c, x, threshold)]
        num_flags += len(low) + len(runs)
        flagged += bool(low or runs)
        hits = 0
        if case in ("substituted", "inserted"):
            hits += pos in low
        if case in ("substituted", "deleted"):
            hits += sum(_near(r, u.spans[pos]) for r in runs)
        on_target += hits
        caught += hits > 0
    return flagged, caught, num_flags, on_target


def evaluate(utts, assets, vocab, settings, word_scores, confidences, seed=0):
    """``{((entry, skip), word score, confidence): {case: (flagged, caught, flags, on
    target)}}`` over ``settings``, a list of ``(untranscribed_penalty, skip_penalty)``."""
    results: dict = {}
    for case in CASES:
        rng = random.Random(f"{seed}-{case}")
        changes = [changed(u.words, case, rng, vocab) for u in utts]
        texts = [c[0] for c in changes]
        pos = [(c[1], None) for c in changes]
        for entry in settings:
            flags = _flags(utts, texts, assets, entry)
            for low, conf in itertools.product(word_scores, confidences):
                config = AlignConfig(min_word_score=low, min_confidence=conf)
                results.setdefault((entry, low, conf), {})[case] = score_case(
                    utts, case, pos, flags, config)
    return results


def choose(results, num: int, max_false: float) -> tuple:
    """The setting catching the most changed words among those flagging at most
    ``max_false`` of the right transcripts; on a tie the one with the most flags on target,
    then the fewest false flags."""
    ok = [(k, v) for k, v in results.items() if v["right"][0] <= max_false * num]
    if not ok:
        raise ValueError(f"no setting flags at most {max_false:.0%} of right transcripts")
    def key(kv):
        res = kv[1]
        on = sum(res[c][3] for c in CASES[1:])
        flags = sum(res[c][2] for c in CASES[1:])
        return sum(res[c][1] for c in CASES[1:]), on / max(1, flags), -res["right"][0]

    return max(ok, key=key)[0]


def table(name: str, num: int, res: dict) -> list[str]:
    rows = []
    for case in CASES:
        flagged, caught, flags, on = res[case]
        rows.append(f"| {name} | {case} | {num} | {flagged / num:.0%} | "
                    + ("-" if case == "right" else f"{caught / num:.0%}") + " | "
                    + ("-" if case == "right" or not flags else f"{on / flags:.0%}") + " |")
    return rows


def _long(assets, vocab, work: Path, config: AlignConfig, num: int) -> list[str]:
    """The long recording, each case with ``num`` changes at random positions."""
    corpus = ASSETS / "corpus" / "test-clean"
    make_long_recording(corpus, work / "long")
    words = (work / "long" / "text").read_text().split()[1:]
    right = align_recording(assets.model, assets.sp, work / "long" / "long.wav",
                            " ".join(words), config=config)
    spans = _spans(right.words)
    rows = []
    for case in CASES:
        rng = random.Random(f"long-{case}")
        positions = sorted(rng.sample(range(len(words)), 0 if case == "right" else num))
        text = list(words)
        inserted = []
        for i in reversed(positions):
            other = rng.choice(vocab)
            if case == "substituted":
                text[i] = other
            elif case == "deleted":
                del text[i]
            else:
                text.insert(i, other)
        if case == "inserted":
            inserted = [i + k for k, i in enumerate(positions)]
        t0 = time.perf_counter()
        r = right if case == "right" else align_recording(
            assets.model, assets.sp, work / "long" / "long.wav", " ".join(text), config=config)
        wall = time.perf_counter() - t0
        low = {j for j, w in enumerate(r.words) if w.missing}
        runs = [(s.start, s.end) for s in r.untranscribed]
        caught = 0
        on = 0
        for i in positions:
            hit = 0
            if case == "substituted":
                hit += i in low
            if case in ("substituted", "deleted"):
                hit += sum(_near(run, spans[i]) for run in runs)
            on += hit
            caught += hit > 0
        on += sum(i in low for i in inserted)
        caught += sum(i in low for i in inserted)
        flags = len(low) + len(runs)
        rows.append(f"| long test-clean ({r.duration / 60:.1f} min, {wall:.0f} s) | {case} | "
                    f"{len(positions)} changes | {flags} flags | "
                    + ("-" if case == "right" else f"{caught / max(1, len(positions)):.0%}")
                    + " | " + ("-" if case == "right" or not flags else f"{on / flags:.0%}")
                    + " |")
    return rows


def _spans(words) -> list[tuple[float, float]]:
    """Each word's ``(start, end)``; a word without times (skipped) spans the gap between
    the words around it that have times."""
    ends = [w.end for w in words if w.end is not None]
    out, prev_end = [], 0.0
    for k, w in enumerate(words):
        if w.start is None:
            nxt = next((x.start for x in words[k + 1:] if x.start is not None),
                       ends[-1] if ends else 0.0)
            out.append((prev_end, nxt))
        else:
            out.append((w.start, w.end))
            prev_end = w.end
    return out


def speed_rows(utts, assets, skip: float, repeats: int = 3, batch: int = 16) -> list[str]:
    """Wall time of ``align_words`` over the set's right transcripts, plain vs with the
    garbage path vs with the garbage and word-skip paths (alternating, best of
    ``repeats``), and the ratios to plain."""
    units = [[list(x.pieces) for x in transcript_units(" ".join(u.words), assets.sp)]
             for u in utts]
    best = {"plain": float("inf"), "garbage": float("inf"), "skip": float("inf")}
    for _ in range(repeats):
        for name, garbage in (("plain", None), ("garbage", Untranscribed(4.0, 0.05)),
                              ("skip", Untranscribed(4.0, 0.05, skip))):
            t0 = time.perf_counter()
            for k in range(0, len(utts), batch):
                part = utts[k:k + batch]
                lp = torch.nn.utils.rnn.pad_sequence([u.log_probs for u in part],
                                                     batch_first=True)
                lens = torch.tensor([u.log_probs.shape[0] for u in part])
                align_words(lp, lens, units[k:k + batch], garbage)
            best[name] = min(best[name], time.perf_counter() - t0)
    seconds = sum(u.log_probs.shape[0] for u in utts) * assets.model.output_frame_shift
    return [f"| align_words, {len(utts)} utterances ({seconds:.0f} s of audio), batches of "
            f"{batch} | {best['plain']:.2f} s | {best['garbage']:.2f} s | {best['skip']:.2f} s | "
            f"{best['garbage'] / best['plain']:.2f}x | {best['skip'] / best['plain']:.2f}x |"]


def _grid_rows(grid: dict, num: int) -> list[str]:
    rows = ["| dev: untranscribed_penalty | skip_penalty | min_word_score | min_confidence "
            "| right flagged | " + " | ".join(f"{c} caught" for c in CASES[1:])
            + " | inserted on target |", "| --- " * 9 + "|"]
    for ((entry, skip), low, conf), res in sorted(grid.items(), key=lambda kv: (
            kv[0][0][0], kv[0][0][1] or 0, kv[0][1], kv[0][2])):
        ins = res["inserted"]
        rows.append(f"| {entry:g} | {skip} | {low:g} | {conf:g} | {res['right'][0] / num:.0%} | "
                    + " | ".join(f"{res[c][1] / num:.0%}" for c in CASES[1:])
                    + f" | {ins[3] / max(1, ins[2]):.0%} |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dev", type=Path, required=True,
                        help="The dev set (scripts/make_align_dev.py's dev-clean).")
    parser.add_argument("--out-dir", type=Path, default=Path("exp/align-flags"))
    parser.add_argument("--max-false", type=float, default=0.05,
                        help="Most right transcripts flagged on dev, as a share.")
    parser.add_argument("--long-changes", type=int, default=20)
    parser.add_argument("--setting", default=None,
                        help="ENTRY,SKIP,SCORE,CONFIDENCE: score only this setting on dev "
                             "(one chosen by an earlier run's grid) instead of the grid.")
    args = parser.parse_args()
    torch.set_num_threads(1)
    load = load_average()
    assets = load_assets(ASSETS / "model.pt", ASSETS / "lang")
    vocab = sorted(w for w in assets.lang.word_table.symbols
                   if w.isalpha() and w.isupper() and len(w) > 1)
    with torch.no_grad():
        dev = load_set(assets, args.dev)
        if args.setting:
            e, sk, lo, co = (float(x) for x in args.setting.split(","))
            grid = evaluate(dev, assets, vocab, [(e, sk)], (lo,), (co,))
        else:
            grid = evaluate(dev, assets, vocab, list(itertools.product(ENTRY, SKIP)),
                            WORD_SCORE, CONFIDENCE)
        speed = speed_rows(dev, assets, skip=SKIP_SPEED)
        for row in _grid_rows(grid, len(dev)):
            print(row)
        entry, low, conf = choose(grid, len(dev), args.max_false)
        print(f"\nchosen on dev: untranscribed_penalty {entry[0]:g}, skip_penalty {entry[1]}, "
              f"min_word_score {low:g}, min_confidence {conf:g}\n", flush=True)
        rows = table("dev-clean", len(dev), grid[(entry, low, conf)])
        before = table("dev-clean", len(dev), _before(dev, assets, vocab))
        for name in ("test-clean", "test-other"):
            utts = load_set(assets, ASSETS / "corpus" / name)
            res = evaluate(utts, assets, vocab, [entry], (low,), (conf,))
            rows += table(name, len(utts), res[(entry, low, conf)])
            before += table(name, len(utts), _before(utts, assets, vocab))
        config = AlignConfig(min_word_score=low, min_confidence=conf,
                             untranscribed_penalty=entry[0], skip_penalty=entry[1])
        rows += _long(assets, vocab, args.out_dir, config, args.long_changes)
        before += _long(assets, vocab, args.out_dir, AlignConfig(
            min_word_score=BEFORE[1], min_confidence=BEFORE[2],
            untranscribed_penalty=BEFORE[0][0], skip_penalty=BEFORE[0][1]),
            args.long_changes)
    print(f"# align flags: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, commit "
          f"{git_commit()}, {cpu_model()}, load before: {load}, after: {load_average()}")
    print("| set | transcript | utterances | flagged | changed word caught | flags on target |")
    print("| --- | --- | --- | --- | --- | --- |")
    for row in rows:
        print(row)
    print("\n| speed (1 thread, best of 3) | plain | with garbage | with garbage and skips "
          "| ratio | ratio |")
    print("| --- | --- | --- | --- | --- | --- |")
    for row in speed:
        print(row)
    print("\nThe rule before (garbage path at 4, score -25, confidence 0.001; no word "
          "skipped):")
    print("| set | transcript | utterances | flagged | changed word caught | flags on target |")
    print("| --- | --- | --- | --- | --- | --- |")
    for row in before:
        print(row)


def _before(utts, assets, vocab) -> dict:
    return evaluate(utts, assets, vocab, [BEFORE[0]], BEFORE[1:2], BEFORE[2:])[BEFORE]


if __name__ == "__main__":
    main()
