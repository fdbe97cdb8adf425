"""Symbol tables, lexicons, disambiguation symbols and the icefall lang-dir layout."""

from .bpe import (
    bpe_lexicon,
    bpe_model_path,
    bpe_token_table,
    bpe_word_start_mask,
    load_bpe_model,
    train_bpe_model,
)
from .case import bpe_case, match_case, vocabulary_case
from .langdir import SPECIAL_WORDS, LangDir, write_lang_dir
from .lexicon import (
    Lexicon,
    add_disambig_symbols,
    check_lexicon_tokens,
    lexicon_tokens,
    lexicon_words,
    read_lexicon,
    write_lexicon,
)
from .phone import SILENCE_ENTRIES, cmudict_lexicon
from .prepare import LexiconSource, prepare_lexicon, read_word_list
from .spelling import TokenWords
from .symbols import (
    check_vocab_size,
    disambig_ids,
    make_symbol_table,
    read_symbol_table,
    symbol_table_digest,
    token_inventory_digest,
    write_symbol_table,
)

__all__ = [
    "LangDir",
    "Lexicon",
    "LexiconSource",
    "SILENCE_ENTRIES",
    "SPECIAL_WORDS",
    "TokenWords",
    "add_disambig_symbols",
    "bpe_case",
    "bpe_lexicon",
    "bpe_token_table",
    "bpe_word_start_mask",
    "check_lexicon_tokens",
    "cmudict_lexicon",
    "check_vocab_size",
    "disambig_ids",
    "lexicon_tokens",
    "lexicon_words",
    "bpe_model_path",
    "load_bpe_model",
    "make_symbol_table",
    "match_case",
    "prepare_lexicon",
    "read_lexicon",
    "read_symbol_table",
    "read_word_list",
    "symbol_table_digest",
    "token_inventory_digest",
    "train_bpe_model",
    "vocabulary_case",
    "write_lang_dir",
    "write_lexicon",
    "write_symbol_table",
]
