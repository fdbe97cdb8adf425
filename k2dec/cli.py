"""The ``k2dec`` command. Thin: every subcommand forwards to the library."""

from __future__ import annotations

import logging
from pathlib import Path

import click

from . import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="k2dec")
@click.option("-v", "--verbose", is_flag=True, help="Log at INFO level.")
def main(verbose: bool) -> None:
    """k2dec: k2-based FSA decoding for speech recognition."""
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


@main.command("prepare-lang")
@click.option("--lang-dir", required=True, type=click.Path(path_type=Path),
              help="Output lang dir (icefall layout).")
@click.option("--lexicon", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A lexicon.txt (word tok1 tok2 ...) to use as is.")
@click.option("--words", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A word list (or text) to spell with CMUdict (phones) or --bpe-model.")
@click.option("--bpe-model", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="sentencepiece model: build a BPE lang dir (tokens = its pieces).")
@click.option("--sil-token", default=None,
              help="Optional silence token between words (e.g. SIL); none by default.")
@click.option("--sil-prob", default=0.5, show_default=True, type=float,
              help="Probability of the optional silence.")
@click.option("--allow-oov", is_flag=True,
              help="With --words and CMUdict: skip words CMUdict lacks instead of failing.")
def prepare_lang(lang_dir, lexicon, words, bpe_model, sil_token, sil_prob, allow_oov):
    """Write tokens.txt, words.txt, lexicon(_disambig).txt, L.pt and L_disambig.pt."""
    from .graph import write_lexicon_graphs
    from .lang import (
        bpe_lexicon,
        bpe_token_table,
        cmudict_lexicon,
        load_bpe_model,
        read_lexicon,
        write_lang_dir,
    )

    if sum(x is not None for x in (lexicon, words)) != 1:
        raise click.UsageError("give exactly one of --lexicon and --words")
    tokens = None
    if lexicon is not None:
        lex = read_lexicon(lexicon)
    else:
        vocab = sorted({w for line in words.read_text().splitlines() for w in line.split()})
        if bpe_model is not None:
            sp = load_bpe_model(bpe_model)
            lex, tokens = bpe_lexicon(sp, vocab), bpe_token_table(sp)
        else:
            lex, oov = cmudict_lexicon(vocab)
            if oov and not allow_oov:
                raise click.ClickException(
                    f"{len(oov)} words are not in CMUdict (first: {', '.join(oov[:10])}); "
                    "pass --allow-oov to skip them"
                )
    blank = "<blk>" if bpe_model is not None else "<eps>"
    lang = write_lang_dir(lang_dir, lex, tokens=tokens, blank=blank)
    write_lexicon_graphs(lang.path, sil_token=sil_token, sil_prob=sil_prob)
    click.echo(f"wrote {lang.path} ({len(lang.token_table)} tokens, "
               f"{len(lang.word_table)} words)")


@main.command("compile-graph")
@click.option("--lang-dir", required=True, type=click.Path(exists=True, file_okay=False,
                                                           path_type=Path))
@click.option("--type", "graph_type", required=True,
              type=click.Choice(["H", "L", "HL", "HLG", "LG"]), help="Which graph.")
@click.option("--arpa", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="ARPA n-gram LM (needed for HLG and LG).")
@click.option("--max-order", default=-1, show_default=True, type=int,
              help="Use n-grams up to this order (-1: all).")
@click.option("--modified-ctc", is_flag=True, help="Use the modified CTC topology for H.")
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="Output file (default: <lang-dir>/<TYPE>.pt).")
def compile_graph_cmd(lang_dir, graph_type, arpa, max_order, modified_ctc, out):
    """Compile H, L, HL, HLG or LG for a lang dir and save it with metadata."""
    from .graph import compile_graph

    graph, path = compile_graph(lang_dir, graph_type, arpa, max_order, modified_ctc, out)
    click.echo(f"wrote {path} ({graph.shape[0]} states, {graph.num_arcs} arcs)")


@main.command("draw-graph")
@click.argument("graph", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--out", required=True, type=click.Path(path_type=Path),
              help="Output image: .svg, .png or .pdf.")
@click.option("--lang-dir", type=click.Path(exists=True, file_okay=False, path_type=Path),
              default=None, help="Show symbols from this lang dir instead of ids.")
@click.option("--max-arcs", default=2000, show_default=True, type=int,
              help="Refuse graphs bigger than this.")
def draw_graph_cmd(graph, out, lang_dir, max_arcs):
    """Draw a small saved graph (GRAPH is a .pt file) with graphviz."""
    from .graph import draw_graph, load_graph
    from .lang import LangDir

    tokens = words = None
    if lang_dir is not None:
        lang = LangDir(lang_dir)
        tokens, words = lang.token_table, lang.word_table
    fsa = load_graph(graph, tokens, words)
    path = draw_graph(fsa, out, title=graph.stem, token_table=tokens, word_table=words,
                      max_arcs=max_arcs)
    click.echo(f"wrote {path}")


_PASSTHROUGH = {"ignore_unknown_options": True, "allow_extra_args": True,
                "help_option_names": []}


@main.command("train-lm", context_settings=_PASSTHROUGH, add_help_option=False)
@click.pass_context
def train_lm_cmd(ctx):
    """Train an RNN or Transformer LM on a text file (BPE tokens); see --help."""
    from .lm.train import main as train_main

    train_main(ctx.args)


@main.command("lm-perplexity", context_settings=_PASSTHROUGH, add_help_option=False)
@click.pass_context
def lm_perplexity_cmd(ctx):
    """Perplexity of a trained neural LM on a text file; see --help."""
    from .lm.perplexity import main as ppl_main

    result = ppl_main(ctx.args)
    click.echo(f"perplexity {result.perplexity:.3f} over {result.num_tokens} tokens")


@main.command("demo")
@click.option("--work-dir", type=click.Path(path_type=Path), default=Path("exp/demo"),
              show_default=True, help="Where the demo writes its lang dir and results.")
@click.option("--num-utts", default=20, show_default=True, type=int,
              help="Number of synthetic utterances.")
@click.option("--seed", default=0, show_default=True, type=int)
def demo_cmd(work_dir, num_utts, seed):
    """The main job. Until a trained model ships, it compiles the example graphs
    and decodes synthetic posteriors."""
    from .demo import run_demo

    run_demo(work_dir, num_utts=num_utts, seed=seed)


if __name__ == "__main__":  # pragma: no cover
    main()
