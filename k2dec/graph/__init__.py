"""Decoding graphs as ``k2.Fsa``: H, L, G, LG, HLG, HL, OpenFst interop, save/load."""

from .build import (
    GraphType,
    check_lang_graph,
    compile_graph,
    prepare_decoding_graphs,
    write_lexicon_graphs,
)
from .check import GraphCheck, check_graph_words, graph_words
from .compile import (
    compile_HL,
    compile_HLG,
    compile_LG,
    refresh_labels_version,
    remove_epsilon_keep_words,
)
from .draw import GraphvizNotFound, draw_graph
from .hclg import (
    HmmTopology,
    build_hmm_topo,
    compile_HCLG,
    load_kaldi_hclg,
    read_transition_pdf_table,
)
from .io import graph_metadata, load_graph, save_graph
from .lexicon_fst import build_L
from .minimize import minimize_graph
from .ngram import ArpaInfo, build_G, build_rescoring_G, check_arpa, train_arpa
from .openfst import (
    compose_openfst,
    k2_to_kaldi_decoder_fst,
    k2_to_openfst,
    openfst_to_k2,
    read_openfst,
    write_openfst,
)
from .topo import build_ctc_topo

__all__ = [
    "ArpaInfo",
    "GraphCheck",
    "GraphType",
    "HmmTopology",
    "build_G",
    "build_L",
    "build_ctc_topo",
    "build_hmm_topo",
    "build_rescoring_G",
    "check_arpa",
    "check_graph_words",
    "check_lang_graph",
    "compile_HCLG",
    "compile_HL",
    "compile_HLG",
    "compile_LG",
    "compile_graph",
    "compose_openfst",
    "GraphvizNotFound",
    "draw_graph",
    "graph_metadata",
    "graph_words",
    "k2_to_kaldi_decoder_fst",
    "k2_to_openfst",
    "load_graph",
    "load_kaldi_hclg",
    "minimize_graph",
    "openfst_to_k2",
    "prepare_decoding_graphs",
    "read_openfst",
    "read_transition_pdf_table",
    "refresh_labels_version",
    "remove_epsilon_keep_words",
    "save_graph",
    "train_arpa",
    "write_lexicon_graphs",
    "write_openfst",
]
