"""Equality of ``k2dec.icefall`` with icefall's own functions: every function of icefall's
``beam_search.py`` and ``icefall/decode.py`` that ``k2dec.icefall`` offers, run by both on the
same inputs, hypotheses compared utterance by utterance (every result key of the functions
that return dicts).

Inputs: the shipped model's encoder and CTC outputs on the first ``--cuts`` cuts of each
shipped test set, its graphs (trivial, LG, HLG with ``lm_scores``, H, the 4-gram G), its
RNN LM, its attention decoder and LODR's token bigram. Both sides get the same objects, of
icefall's kinds: icefall's ``RnnLmModel`` (the shipped LM's weights) in icefall's
``LmScorer``, icefall's ``NgramLm`` (kaldilm's FST of the bigram), icefall's
``ContextGraph``, and the attention decoder behind icefall's two conventions (``nll``,
``decoder_nll``); ``k2dec.icefall`` runs them through its adapters. The rows naming a "k2dec
LM" or "k2dec ContextGraph" give ``k2dec.icefall`` k2dec's own object instead.

Needs an icefall checkout (``--icefall-dir`` or ``ICEFALL_DIR``)::

    ICEFALL_DIR=/path/to/icefall python -m scripts.bench.icefall_dropin --cuts 10 \\
        --icefall-commit 36e0420c --report docs/bench/recorded

The report (``docs/bench/recorded/icefall_dropin.json``) is shown in BENCHMARKS.md by
``make bench`` (``scripts/bench/runner.py``: recorded reports).
"""

from __future__ import annotations

import argparse
import math
import os
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import k2
import torch

from .common import SHIPPED, WORK, peak_rss_mb
from .peers import icefall_search

#: scales of the sweeping functions (small grids keep the run short; icefall's defaults where
#: a function has one)
NGRAM_SCALES = [0.01, 0.1, 0.5]
LM_SCALES = [0.1, 0.3, 0.5]
#: get_lattice's output beam: k2dec's CTC default 4 (at icefall's 8 the weak shipped model's
#: lattices are so dense that icefall's nbest_decoding of 20 utterances x 100 paths was killed
#: at 19 GB; k2dec.icefall's peaked at 0.9 GB)
OUTPUT_BEAM = 4.0


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--icefall-dir", type=Path, default=os.environ.get("ICEFALL_DIR"))
    p.add_argument("--cuts", type=int, default=10, help="cuts per shipped test set")
    p.add_argument("--num-paths", type=int, default=100)
    p.add_argument("--icefall-commit", default="unknown", help="the checkout's commit")
    p.add_argument("--report", type=Path, default=None,
                   help="write icefall_dropin.json here (docs/bench/recorded/ for "
                        "BENCHMARKS.md)")
    p.add_argument("--only", default="",
                   help="run the cases whose name contains one of these (comma-separated)")
    p.add_argument("--merge", action="store_true",
                   help="keep the rows of the report already in --report that were not run "
                        "now (with --only: re-run some cases of a recorded report)")
    p.add_argument("--class-vocabs", default=",".join(str(v) for v, _, _ in CLASS_SIZES),
                   help="the sizes of icefall's own model objects to run, by vocabulary "
                        "(comma-separated)")
    p.add_argument("--runs", type=int, default=1,
                   help="timed runs of each side, alternating (the median is reported)")
    return p.parse_args()


# ----------------------------------------------------------------- icefall-kind objects


def icefall_rnn_lm(ice: Any, lm: Any) -> torch.nn.Module:
    """icefall's ``RnnLmModel`` holding the weights of a k2dec :class:`~k2dec.lm.RnnLM`."""
    cfg = lm.config
    model = ice.RnnLmModel(cfg.vocab_size, cfg.embedding_dim, cfg.hidden_dim, cfg.num_layers,
                           tie_weights=cfg.tie_weights)
    model.input_embedding.load_state_dict(lm.embedding.state_dict())
    model.rnn.load_state_dict(lm.rnn.state_dict())
    model.output_linear.load_state_dict(lm.output.state_dict())
    return model.eval()


def icefall_lm_scorer(ice: Any, rnn_lm: torch.nn.Module, lm_scale: float) -> Any:
    """icefall's ``LmScorer`` around ``rnn_lm`` (its constructor would load a checkpoint)."""
    scorer = ice.LmScorer.__new__(ice.LmScorer)
    torch.nn.Module.__init__(scorer)
    scorer.lm_type, scorer.lm, scorer.lm_scale = "rnn", rnn_lm, lm_scale
    return scorer


class ZipformerAttention:
    """icefall's ``AttentionDecoderModel.nll(encoder_out, encoder_out_lens, token_ids)`` over
    a k2dec decoder's ``score_sequences``."""

    def __init__(self, decoder: Any) -> None:
        self.decoder = decoder

    def nll(self, encoder_out, encoder_out_lens, token_ids):
        tokens = k2.RaggedTensor(token_ids, dtype=torch.int32)
        with torch.no_grad():
            lp = self.decoder.score_sequences(encoder_out, encoder_out_lens, tokens,
                                              torch.arange(len(token_ids)))
        return -lp.pad(mode="constant", padding_value=0.0)


class ConformerAttention(ZipformerAttention):
    """conformer_ctc's ``decoder_nll(memory (T, N, C), memory_key_padding_mask, token_ids,
    sos_id, eos_id)`` over a k2dec decoder's ``score_sequences``."""

    def decoder_nll(self, memory, memory_key_padding_mask, token_ids, sos_id, eos_id):
        lens = (~memory_key_padding_mask).sum(dim=1)
        return self.nll(memory.permute(1, 0, 2), lens, token_ids)


class KenLmLike:
    """kenlm's ``Model.score(sentence)`` (log10, with ``<s>``/``</s>``) of a k2dec token
    n-gram, the sentence being decimal token ids (what ``sp.id_to_piece`` gives here)."""

    def __init__(self, scorer: Any) -> None:
        self.scorer = scorer

    def score(self, sentence: str) -> float:
        from k2dec.methods.lists import HypothesisLists, scorer_scores

        hyp = types.SimpleNamespace(tokens=[int(p) for p in sentence.split()], timestamps=[])
        lists = HypothesisLists.from_lists([[hyp]], torch.device("cpu"))
        return float(scorer_scores(self.scorer, lists)[0]) / math.log(10)


class IdPieces:
    """``sp`` whose ``id_to_piece`` gives decimal ids (the bigram's words), ``decode`` the
    real BPE model's text."""

    def __init__(self, sp: Any) -> None:
        self.sp = sp

    def id_to_piece(self, ids):
        return [str(i) for i in ids]

    def decode(self, seqs):
        return self.sp.decode(seqs)


def ngram_fst(ice: Any, arpa: Path, vocab: int, work: Path) -> Any:
    """icefall's ``NgramLm`` of a token ARPA (words: decimal ids), made as icefall's LODR
    recipe makes it (kaldilm, ``#0`` on backoff arcs, whose id is ``vocab``)."""
    import kaldilm

    table = work / "lodr_tokens.txt"
    syms = ["<eps> 0"] + [f"{i} {i}" for i in range(1, vocab)] + [
        f"#0 {vocab}", f"<s> {vocab + 1}", f"</s> {vocab + 2}"]
    table.write_text("\n".join(syms) + "\n")
    fst = work / "lodr_2gram.fst.txt"
    fst.write_text(kaldilm.arpa2fst(str(arpa), read_symbol_table=str(table),
                                    disambig_symbol="#0", max_order=2))
    return ice.NgramLm(str(fst), backoff_id=vocab, is_binary=False)


def hotwords(ice: Any, sp: Any, refs: list[list[str]], vocab: int) -> tuple[Any, Any]:
    """Words of the references as hotwords: icefall's ContextGraph and k2dec's."""
    from k2dec.scorers import ContextGraph

    words = sorted({w for r in refs for w in r if len(w) > 5})[:20]
    ids = [sp.encode(w) for w in words]
    graph = ice.ContextGraph(context_score=2.0)
    graph.build(token_ids=ids)
    return graph, ContextGraph([(i, None) for i in ids], context_score=2.0)


# ----------------------------------------------------------------------------- inputs


def _without_self_loops(G: k2.Fsa) -> k2.Fsa:
    """The 4-gram as icefall's n-best rescoring takes it: no epsilon self-loops (those are
    added for whole-lattice rescoring only), ``lm_scores`` kept."""
    plain = k2.arc_sort(k2.remove_epsilon_self_loops(G))
    plain.lm_scores = plain.scores.clone()
    return k2.create_fsa_vec([plain])


def build_inputs(args: argparse.Namespace, ice: Any) -> types.SimpleNamespace:
    """The shipped batch (sorted by decreasing length, as icefall's decode scripts sort
    supervisions) and every object the functions take."""
    from k2dec.lm.checkpoint import load_lm
    from k2dec.scorers import TokenNgramScorer

    from .shipped import shipped_batch, token_bigram_arpa

    b = shipped_batch(max_cuts=args.cuts)
    order = torch.argsort(b.encoder_lens, descending=True, stable=True)
    model = b.assets.model
    vocab = int(model.decoder.vocab_size)
    graphs = b.assets.resources.graphs
    HLG = graphs["HLG"].clone()
    HLG.lm_scores = HLG.scores.clone()
    LG = graphs["LG"].clone()
    LG.scores = LG.scores * 0.01  # icefall's --ngram-lm-scale
    lm = load_lm(SHIPPED / "lm" / "rnn_lm.pt").eval()
    rnn_lm = icefall_rnn_lm(ice, lm)
    arpa = token_bigram_arpa(b.lang_dir)
    work = WORK / "icefall_dropin"
    work.mkdir(parents=True, exist_ok=True)
    sp = b.assets.sp
    refs = [b.refs[i] for i in order.tolist()]
    ice_graph, k2dec_graph = hotwords(ice, sp, refs, vocab)
    return types.SimpleNamespace(
        model=model, enc=b.encoder_out[order], lens=b.encoder_lens[order],
        ctc=b.ctc_log_probs[order], refs=refs, ref_tokens=[sp.encode(" ".join(r)) for r in refs],
        vocab=vocab, trivial=k2.trivial_graph(vocab - 1), LG=k2.arc_sort(LG), HLG=HLG,
        H=graphs["H"], G=k2.create_fsa_vec([graphs["G"]]), G_plain=_without_self_loops(
            graphs["G"]), sp=sp, pieces=IdPieces(sp),
        word_table=b.assets.lang.word_table, lm=lm, rnn_lm=rnn_lm,
        ice_lm=icefall_lm_scorer(ice, rnn_lm, 0.3), lodr_fst=ngram_fst(ice, arpa, vocab, work),
        lodr=TokenNgramScorer.from_arpa(arpa, vocab), kenlm=KenLmLike(
            TokenNgramScorer.from_arpa(arpa, vocab)), ice_graph=ice_graph,
        k2dec_graph=k2dec_graph, decoder=model.attention_decoder)


# ---------------------------------------------------------------------------- compare


def normalize(x: Any) -> Any:
    """Results as plain lists (per utterance), dicts of them, or None."""
    from k2dec.icefall import get_texts

    if isinstance(x, dict):
        return {k: normalize(v) for k, v in x.items()}
    if isinstance(x, k2.Fsa):
        return get_texts(x)
    if hasattr(x, "hyps") and hasattr(x, "timestamps"):
        hyps = x.hyps.tolist() if isinstance(x.hyps, k2.RaggedTensor) else x.hyps
        return [list(p) for p in zip(hyps, x.timestamps)]
    if isinstance(x, list) and x and hasattr(x[0], "data") and hasattr(x[0], "__iter__"):
        return [[list(h.ys) for h in hl] for hl in x]
    return x


def per_utterance(got: Any, want: Any) -> tuple[int, int, str]:
    """``(identical utterances, utterances, note)``; with dicts an utterance is identical when
    it is under every key of both (the note counts the identical (key, utterance) pairs)."""
    if isinstance(want, dict):
        if not isinstance(got, dict) or set(got) != set(want):
            return 0, len(next(iter(want.values()), [])), "other keys"
        pairs = [(got[k], want[k]) for k in want]
        n = len(pairs[0][1]) if pairs else 0
        same = sum(all(g[i] == w[i] for g, w in pairs) for i in range(n))
        cells = sum(g[i] == w[i] for g, w in pairs for i in range(n))
        return same, n, f"{len(want)} keys; {cells}/{n * len(pairs)} (key, utterance) same"
    done = [(g, w) for g, w in zip(got, want) if w is not None]
    note = "" if len(done) == len(want) else (
        f"{len(want) - len(done)} utterances: icefall did not finish in "
        f"{BEAM_SEARCH_SECONDS} s (not counted)")
    return sum(g == w for g, w in done), len(done), note


def run_case(name: str, ours: Callable[[], Any], theirs: Callable[[], Any], runs: int = 1
             ) -> list:
    """One table row: identical utterances, each side's seconds (the median of ``runs``
    alternating runs) and their ratio (icefall's over k2dec's)."""
    times: list[list[float]] = [[], []]
    outs: list[Any] = [None, None]
    for _ in range(max(1, runs)):
        for i, fn in enumerate((ours, theirs)):
            t0 = time.perf_counter()
            with torch.no_grad():
                outs[i] = normalize(fn())
            times[i].append(time.perf_counter() - t0)
    same, n, note = per_utterance(*outs)
    ours_s, theirs_s = (sorted(t)[len(t) // 2] for t in times)
    print(f"[icefall_dropin] {name}: {same}/{n} identical {note}, {theirs_s / ours_s:.2f}x "
          f"(peak RSS {peak_rss_mb():.0f} MiB)", flush=True)
    return [name, f"{same}/{n}", "yes" if same == n else "**no**", note,
            f"{ours_s:.2f}", f"{theirs_s:.2f}", f"{theirs_s / max(ours_s, 1e-9):.2f}"]


# ------------------------------------------------------------------------------- cases

FBS = dict(beam=20.0, max_states=64, max_contexts=8)


#: frames of each utterance given to ``beam_search``, and the seconds icefall's may take on
#: one: its expansion loop has no bound (k2dec.icefall's stops after 1000 expansions per frame,
#: k2dec's method after 32) and ran for many minutes on some of the shipped model's utterances
BEAM_SEARCH_FRAMES = 30
BEAM_SEARCH_SECONDS = 60
#: k2dec.icefall's beam_search at the expansion bound of k2dec's own beam_search method (its
#: default is 1000, the most the config allows; icefall has none)
METHOD_EXPANSIONS = 32


class _Timeout(Exception):
    pass


def _within(seconds: int, fn: Callable[[], Any]) -> Any:
    """``fn()``, or None when it takes more than ``seconds`` (SIGALRM, main thread)."""
    import signal

    def stop(*_):
        raise _Timeout

    old = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        return fn()
    except _Timeout:
        return None
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _each(fn: Callable[[torch.Tensor], Any], inp: types.SimpleNamespace,
          max_frames: int | None = None, seconds: int | None = None) -> Callable[[], list]:
    """A one-utterance search run on every utterance of the batch (on its first
    ``max_frames`` frames; None for an utterance it took more than ``seconds`` on)."""
    def run(i: int, n: int) -> Any:
        x = inp.enc[i: i + 1, : min(n, max_frames or n)]
        return fn(x) if seconds is None else _within(seconds, lambda: fn(x))

    return lambda: [run(i, int(n)) for i, n in enumerate(inp.lens)]


def transducer_cases(K: Any, B: Any, inp: types.SimpleNamespace) -> list:
    m, e, n, g = inp.model, inp.enc, inp.lens, inp.trivial
    refs = inp.ref_tokens
    return [
        ("greedy_search (max_sym_per_frame 2)",
         _each(lambda x: K.greedy_search(m, x, 2, return_timestamps=True).hyps[0], inp),
         _each(lambda x: B.greedy_search(m, x, 2, return_timestamps=True).hyps[0], inp)),
        ("greedy_search_batch (+ timestamps)",
         lambda: K.greedy_search_batch(m, e, n, return_timestamps=True),
         lambda: B.greedy_search_batch(m, e, n, return_timestamps=True)),
        ("modified_beam_search (+ timestamps)",
         lambda: K.modified_beam_search(m, e, n, return_timestamps=True),
         lambda: B.modified_beam_search(m, e, n, return_timestamps=True)),
        ("modified_beam_search, icefall ContextGraph",
         lambda: K.modified_beam_search(m, e, n, context_graph=inp.ice_graph),
         lambda: B.modified_beam_search(m, e, n, context_graph=inp.ice_graph)),
        ("modified_beam_search, k2dec ContextGraph",
         lambda: K.modified_beam_search(m, e, n, context_graph=inp.k2dec_graph),
         lambda: B.modified_beam_search(m, e, n, context_graph=inp.ice_graph)),
        (f"beam_search (first {BEAM_SEARCH_FRAMES} frames)",
         _each(lambda x: K.beam_search(m, x), inp, BEAM_SEARCH_FRAMES),
         _each(lambda x: B.beam_search(m, x), inp, BEAM_SEARCH_FRAMES, BEAM_SEARCH_SECONDS)),
        (f"beam_search, max_expansions_per_frame {METHOD_EXPANSIONS} (first "
         f"{BEAM_SEARCH_FRAMES} frames)",
         _each(lambda x: K.beam_search(m, x, max_expansions_per_frame=METHOD_EXPANSIONS), inp,
               BEAM_SEARCH_FRAMES),
         _each(lambda x: B.beam_search(m, x), inp, BEAM_SEARCH_FRAMES, BEAM_SEARCH_SECONDS)),
        ("fast_beam_search (lattice: best path)",
         lambda: K.fast_beam_search(m, g, e, n, **FBS),
         lambda: B.fast_beam_search(m, g, e, n, **FBS)),
        ("fast_beam_search_one_best (+ timestamps)",
         lambda: K.fast_beam_search_one_best(m, g, e, n, return_timestamps=True, **FBS),
         lambda: B.fast_beam_search_one_best(m, g, e, n, return_timestamps=True, **FBS)),
        ("fast_beam_search_one_best, LG",
         lambda: K.fast_beam_search_one_best(m, inp.LG, e, n, **FBS),
         lambda: B.fast_beam_search_one_best(m, inp.LG, e, n, **FBS)),
        ("fast_beam_search_nbest",
         lambda: K.fast_beam_search_nbest(m, g, e, n, num_paths=inp.num_paths, **FBS),
         lambda: B.fast_beam_search_nbest(m, g, e, n, num_paths=inp.num_paths, **FBS)),
        ("fast_beam_search_nbest_LG",
         lambda: K.fast_beam_search_nbest_LG(m, inp.LG, e, n, num_paths=inp.num_paths, **FBS),
         lambda: B.fast_beam_search_nbest_LG(m, inp.LG, e, n, num_paths=inp.num_paths, **FBS)),
        ("fast_beam_search_nbest_oracle",
         lambda: K.fast_beam_search_nbest_oracle(m, g, e, n, num_paths=inp.num_paths,
                                                 ref_texts=refs, **FBS),
         lambda: B.fast_beam_search_nbest_oracle(m, g, e, n, num_paths=inp.num_paths,
                                                 ref_texts=refs, **FBS)),
    ]


#: icefall's own zipformer Decoder / Joiner objects at these sizes (vocab, decoder and
#: joiner dim, encoder dim), on random frames of :data:`CLASS_UTTS` utterances
CLASS_SIZES = [(20, 32, 32), (500, 256, 384), (2000, 512, 512)]
CLASS_UTTS = 16


def class_inputs(ice_dir: Path, sizes: tuple[int, int, int], seed: int = 0
                 ) -> types.SimpleNamespace:
    """Inputs of :func:`transducer_cases` with a model of icefall's own classes (peaked
    output distributions: about 0.3 greedy tokens per frame), random frames sorted by
    length, the trivial graph, a word-loop LG and references from greedy search."""
    from .transducer import icefall_class_problem

    classes = icefall_search.model_classes(ice_dir)
    prob = icefall_class_problem(classes, sizes, seed, CLASS_UTTS)
    LG = prob.resources.graphs["LG"].clone()
    LG.scores = LG.scores * 0.01
    vocab = sizes[0]
    return types.SimpleNamespace(model=prob.model, enc=prob.encoder_out, lens=prob.encoder_lens,
                                 trivial=k2.trivial_graph(vocab - 1), LG=k2.arc_sort(LG),
                                 ref_tokens=prob.ref_tokens, description=prob.description)


def class_cases(K: Any, B: Any, inp: types.SimpleNamespace, label: str) -> list:
    """The transducer functions (no LM, no hotwords) on icefall's own model objects,
    including fast_beam_search_one_best's ILME and allow_partial variants."""
    m, e, n, g = inp.model, inp.enc, inp.lens, inp.trivial
    picked = [c for c in transducer_cases(K, B, inp)
              if "ContextGraph" not in c[0] and not c[0].startswith("beam_search")]
    picked += [
        ("greedy_search (max_sym_per_frame 1)",
         _each(lambda x: K.greedy_search(m, x, 1, return_timestamps=True).hyps[0], inp),
         _each(lambda x: B.greedy_search(m, x, 1, return_timestamps=True).hyps[0], inp)),
        ("fast_beam_search_one_best, ILME 0.1",
         lambda: K.fast_beam_search_one_best(m, g, e, n, ilme_scale=0.1, **FBS),
         lambda: B.fast_beam_search_one_best(m, g, e, n, ilme_scale=0.1, **FBS)),
        ("fast_beam_search_one_best, allow_partial",
         lambda: K.fast_beam_search_one_best(m, g, e, n, allow_partial=True, **FBS),
         lambda: B.fast_beam_search_one_best(m, g, e, n, allow_partial=True, **FBS)),
    ]
    return [(f"{name} [{label}]", ours, theirs) for name, ours, theirs in picked]


def transducer_lm_cases(K: Any, B: Any, inp: types.SimpleNamespace) -> list:
    m, e, n, g = inp.model, inp.enc, inp.lens, inp.trivial
    rescoring = dict(ngram_lm_scale_list=NGRAM_SCALES, num_paths=inp.num_paths, G=inp.G,
                     sp=inp.sp, word_table=inp.word_table, **FBS)
    rnn = dict(rnn_lm_model=inp.rnn_lm, rnn_lm_scale_list=LM_SCALES, **rescoring)
    k2dec_lm = K.LmScorer(inp.lm, 0.3)
    return [
        ("fast_beam_search_with_nbest_rescoring",
         lambda: K.fast_beam_search_with_nbest_rescoring(m, g, e, n, **rescoring),
         lambda: B.fast_beam_search_with_nbest_rescoring(m, g, e, n, **rescoring)),
        ("fast_beam_search_with_nbest_rnn_rescoring",
         lambda: K.fast_beam_search_with_nbest_rnn_rescoring(m, g, e, n, **rnn),
         lambda: B.fast_beam_search_with_nbest_rnn_rescoring(m, g, e, n, **rnn)),
        ("modified_beam_search_lm_shallow_fusion",
         lambda: K.modified_beam_search_lm_shallow_fusion(m, e, n, inp.ice_lm),
         lambda: B.modified_beam_search_lm_shallow_fusion(m, e, n, inp.ice_lm)),
        ("modified_beam_search_lm_shallow_fusion, k2dec LM",
         lambda: K.modified_beam_search_lm_shallow_fusion(m, e, n, k2dec_lm),
         lambda: B.modified_beam_search_lm_shallow_fusion(m, e, n, inp.ice_lm)),
        ("modified_beam_search_LODR (NgramLm, ContextGraph)",
         lambda: K.modified_beam_search_LODR(m, e, n, inp.lodr_fst, -0.24, inp.ice_lm,
                                             context_graph=inp.ice_graph),
         lambda: B.modified_beam_search_LODR(m, e, n, inp.lodr_fst, -0.24, inp.ice_lm,
                                             context_graph=inp.ice_graph)),
        ("modified_beam_search_lm_rescore",
         lambda: K.modified_beam_search_lm_rescore(m, e, n, inp.ice_lm, LM_SCALES),
         lambda: B.modified_beam_search_lm_rescore(m, e, n, inp.ice_lm, LM_SCALES)),
        ("modified_beam_search_lm_rescore_LODR",
         lambda: K.modified_beam_search_lm_rescore_LODR(m, e, n, inp.ice_lm, inp.kenlm,
                                                        inp.pieces, [0.5, 1.0]),
         lambda: B.modified_beam_search_lm_rescore_LODR(m, e, n, inp.ice_lm, inp.kenlm,
                                                        inp.pieces, [0.5, 1.0])),
    ]


def ctc_cases(K: Any, D: Any, inp: types.SimpleNamespace) -> list:
    x, n = inp.ctc, inp.lens
    att = ZipformerAttention(inp.decoder)
    fusion = dict(LODR_lm=inp.lodr_fst, LODR_lm_scale=-0.2, NNLM=inp.ice_lm,
                  context_graph=inp.ice_graph)
    return [
        ("ctc_greedy_search", lambda: K.ctc_greedy_search(x, n),
         lambda: D.ctc_greedy_search(x, n)),
        ("ctc_prefix_beam_search", lambda: K.ctc_prefix_beam_search(x, n),
         lambda: D.ctc_prefix_beam_search(x, n)),
        ("ctc_prefix_beam_search (return_nbest)",
         lambda: K.ctc_prefix_beam_search(x, n, return_nbest=True),
         lambda: D.ctc_prefix_beam_search(x, n, return_nbest=True)),
        ("ctc_prefix_beam_search_shallow_fussion (LmScorer, NgramLm, ContextGraph)",
         lambda: K.ctc_prefix_beam_search_shallow_fussion(x, n, **fusion),
         lambda: D.ctc_prefix_beam_search_shallow_fussion(x, n, **fusion)),
        ("ctc_prefix_beam_search_attention_decoder_rescoring",
         lambda: K.ctc_prefix_beam_search_attention_decoder_rescoring(x, att, inp.enc, n),
         lambda: D.ctc_prefix_beam_search_attention_decoder_rescoring(x, att, inp.enc, n)),
    ]


def lattice_cases(K: Any, D: Any, inp: types.SimpleNamespace) -> list:
    segs = torch.stack([torch.arange(len(inp.lens)), torch.zeros_like(inp.lens), inp.lens],
                       dim=1).to(torch.int32)

    def lat(mod: Any, graph: k2.Fsa | None = None) -> k2.Fsa:  # a fresh lattice per call
        return mod.get_lattice(inp.ctc, inp.HLG if graph is None else graph, segs, 20.0,
                               OUTPUT_BEAM, 30, 10000)

    mask = torch.arange(inp.enc.size(1)).unsqueeze(0) >= inp.lens.unsqueeze(1)
    memory, zipformer = inp.enc.permute(1, 0, 2), ZipformerAttention(inp.decoder)
    ids = (inp.decoder.sos_id, inp.decoder.eos_id)
    conformer = ConformerAttention(inp.decoder)
    texts, p = [" ".join(r) for r in inp.refs], inp.num_paths
    calls = {
        "get_lattice (best path)": lambda M: k2.shortest_path(lat(M), True),
        "one_best_decoding": lambda M: M.one_best_decoding(lat(M)),
        "one_best_decoding (lm_scale_list)": lambda M: M.one_best_decoding(
            lat(M), lm_scale_list=[0.5, 1.0, 1.3]),
        "nbest_decoding": lambda M: M.nbest_decoding(lat(M), p, nbest_scale=0.5),
        "nbest_oracle": lambda M: M.nbest_oracle(lat(M), p, texts, inp.word_table),
        "rescore_with_n_best_list": lambda M: M.rescore_with_n_best_list(
            lat(M), inp.G_plain, p, [0.5, 1.0, 1.3], nbest_scale=0.5),
        "rescore_with_whole_lattice": lambda M: M.rescore_with_whole_lattice(
            lat(M), inp.G, [0.5, 1.0, 1.3]),
        "rescore_with_attention_decoder (decoder_nll)": lambda M: (
            M.rescore_with_attention_decoder(lat(M), p, conformer, memory, mask, *ids, 0.5)),
        "rescore_with_attention_decoder_with_ngram (nll)": lambda M: (
            M.rescore_with_attention_decoder_with_ngram(lat(M), p, zipformer, inp.enc,
                                                        inp.lens, 0.5)),
        "rescore_with_attention_decoder_no_ngram (H)": lambda M: (
            M.rescore_with_attention_decoder_no_ngram(lat(M, inp.H), p, zipformer, inp.enc,
                                                      inp.lens)),
        "rescore_with_rnn_lm": lambda M: M.rescore_with_rnn_lm(
            lat(M), p, inp.rnn_lm, conformer, memory, mask, *ids, 0, 0.5, 1.3, 1.2, 0.5),
    }
    return [(name, (lambda c=call: c(K)), (lambda c=call: c(D))) for name, call in calls.items()]


#: where k2dec.icefall differs from icefall by design (see its module docstring)
NOTES = [
    "oracles (nbest_oracle, fast_beam_search_nbest_oracle): among paths at the same edit "
    "distance k2dec.icefall chooses as icefall, by the float32 scores of "
    "k2.levenshtein_alignment (whose rounding, -5.9999995 for 6 insertions or deletions, "
    "decides); it computes them only for the paths at an utterance's smallest distance when "
    "there are several (and for every path where a hypothesis and its reference have 1000 "
    "symbols or more).",
    f"beam_search runs on the first {BEAM_SEARCH_FRAMES} frames of each utterance, and an "
    f"utterance icefall's takes more than {BEAM_SEARCH_SECONDS} s on is not counted: its "
    "expansion loop has no bound and ran for minutes on some of the shipped model's "
    "utterances. k2dec.icefall's beam_search stops at max_expansions_per_frame expansions "
    "per frame (default 1000, the most k2dec's config allows: time and memory bounded by "
    f"configuration); the row 'max_expansions_per_frame {METHOD_EXPANSIONS}' measures it at "
    "the bound of k2dec's own beam_search method, which is much faster where a frame needs "
    "many expansions.",
    "fast_beam_search_with_nbest_rnn_rescoring: both score with icefall's sos/eos, "
    "sp.piece_to_id('sos_id') / ('eos_id'), which for a BPE model without those pieces is "
    "<unk>'s id (2); k2dec.icefall's sos_id= / eos_id= keywords score with the LM's own (1).",
    "Timings of the shipped-model rows are one run of each on a shared machine (not a speed "
    "comparison); the rows of icefall's own model objects ([icefall classes ...]) are "
    "medians of --runs alternating runs, their speed ratios checked against issue 38's "
    "targets.",
]


def report(args: argparse.Namespace, inp: types.SimpleNamespace, rows: list) -> Any:
    """The area-style report (rendered into BENCHMARKS.md from docs/bench/recorded/)."""
    from .common import Report
    from .machine import git_commit, load_average

    rep = Report(area="icefall_dropin",
                 title="icefall drop-in: k2dec.icefall vs icefall's own functions")
    rep.settings = (
        f"k2dec {git_commit()} against icefall {args.icefall_commit} (its beam_search.py and "
        f"icefall/decode.py). Inputs: the shipped model's outputs on the first {args.cuts} "
        f"cuts of each shipped test set ({len(inp.lens)} utterances, sorted by length), its "
        "graphs (trivial, LG scaled by 0.01, HLG, H, the 4-gram G), its RNN LM in icefall's "
        "RnnLmModel and LmScorer (lm_scale 0.3), LODR's token bigram as icefall's NgramLm "
        "(kaldilm FST) and as a kenlm-like score(), hotwords (20 reference words) in icefall's "
        f"ContextGraph, the attention decoder behind decoder_nll / nll; {args.num_paths} "
        f"n-best paths, fast_beam_search beam 20 / 8 contexts / 64 states, get_lattice "
        f"search beam 20, output beam {OUTPUT_BEAM:g}; one torch thread; "
        f"load average {load_average()}.")
    headers = ["function", "utterances identical", "all identical", "keys", "k2dec s",
               "icefall s", "speed ratio"]
    rep.table("Hypotheses of k2dec.icefall and icefall on the same inputs (per utterance; a "
              "dict result counts an utterance identical when every key is)", headers, rows)
    for row in rows:  # rows of an earlier recording: the ratio of its one run
        if len(row) == 6 and row[4] and row[5]:
            row.append(f"{float(row[5]) / max(float(row[4]), 1e-9):.2f}")
    same = sum(r[2] == "yes" for r in rows)
    rep.target("k2dec.icefall gives icefall's hypotheses (every case, every utterance)",
               f"{same} of {len(rows)} cases", same == len(rows))
    for label, desc in getattr(inp, "class_models", []):
        rep.note(f"[{label}]: {desc}; its rows run each side {args.runs} time(s), "
                 "alternating (median).")
    _speed_targets(rep, rows)
    for note in NOTES:
        rep.note(note)
    return rep


#: issue 38: k2dec.icefall's speed over icefall's on icefall's own model objects
CLASS_TARGETS = {"fast_beam_search": 1.5, "greedy_search (max_sym": 1.3, "": 1.0}


def _speed_targets(rep: Any, rows: list) -> None:
    """The speed targets over the rows of icefall's own model objects (names ending in
    ``[...]``): the fast_beam_search family >= 1.5x, the one-utterance greedy_search >= 1.3x,
    every other function >= 1.0x."""
    groups: dict[str, list] = {}
    for row in rows:
        if not row[0].endswith("]") or len(row) < 7 or not row[6]:
            continue
        prefix = next(p for p in CLASS_TARGETS if row[0].startswith(p))
        groups.setdefault(prefix, []).append(row)
    for prefix, target in CLASS_TARGETS.items():
        mine = groups.get(prefix, [])
        if not mine:
            continue
        what = {"": "every other function"}.get(prefix, prefix.rstrip(" (") + "*")
        worst = min(mine, key=lambda r: float(r[6]))
        rep.target(f"icefall's own model objects: {what} >= {target}x icefall's speed",
                   f"lowest {worst[6]}x ({worst[0]}); {len(mine)} rows",
                   float(worst[6]) >= target)


def main() -> None:
    from k2dec import icefall as K

    from .common import clean_error

    args = parse_args()
    if args.icefall_dir is None:
        raise SystemExit("needs an icefall checkout: --icefall-dir DIR or ICEFALL_DIR")
    torch.set_num_threads(1)
    ice = icefall_search.load_decode(args.icefall_dir)
    inp = build_inputs(args, ice)
    inp.num_paths = args.num_paths
    cases = (transducer_cases(K, ice.beam_search, inp) + transducer_lm_cases(
        K, ice.beam_search, inp) + ctc_cases(K, ice.decode, inp) + lattice_cases(
        K, ice.decode, inp))
    inp.class_models = []
    vocabs = {int(v) for v in args.class_vocabs.split(",") if v}
    for sizes in [z for z in CLASS_SIZES if z[0] in vocabs]:
        label = f"icefall classes V{sizes[0]} D{sizes[1]}"
        if args.only and label not in args.only and "icefall classes" not in args.only:
            continue
        cls_inp = class_inputs(Path(args.icefall_dir), sizes)
        cls_inp.num_paths = args.num_paths
        inp.class_models.append((label, cls_inp.description))
        cases += class_cases(K, ice.beam_search, cls_inp, label)
    rows = []
    for name, ours, theirs in cases:
        if args.only and not any(part in name for part in args.only.split(",")):
            continue
        try:
            rows.append(run_case(name, ours, theirs, args.runs if name.endswith("]") else 1))
        except Exception as e:  # report the case, go on with the others
            rows.append([name, "error", "**no**", clean_error(e), "", "", ""])
    earlier = None
    if args.merge and args.report is not None:
        earlier, rows = _merged(args.report / "icefall_dropin.json", rows)
    rep = report(args, inp, rows)
    if earlier:
        rep.note(f"Re-run now: the cases matching --only {args.only!r}; the other rows are "
                 f"kept from the earlier recording, whose settings were: {earlier}")
    rep.write(args.report)


def _merged(path: Path, rows: list) -> tuple[str | None, list]:
    """The settings of the report at ``path`` and its rows (in its order; its cases run now
    replaced), then the new cases."""
    from .common import Report

    if not path.is_file():
        return None, rows
    new = {r[0]: r for r in rows}
    earlier = Report.read(path)
    out = [new.pop(r[0], r) for r in earlier.tables[0]["rows"]]
    return earlier.settings, out + [r for r in rows if r[0] in new]


if __name__ == "__main__":
    main()
