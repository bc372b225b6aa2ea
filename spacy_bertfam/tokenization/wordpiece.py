"""WordPiece vocabularies for BERT, built and trained with the `tokenizers` library."""
import json
from pathlib import Path
from typing import Iterable, List, Optional, Union

from tokenizers import Tokenizer
from tokenizers.implementations import BertWordPieceTokenizer
from tokenizers.models import WordPiece
from tokenizers.processors import BertProcessing

from .pieces import PieceTokenizer

SPECIAL_PIECES = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def wordpiece_from_vocab(
    vocab_path: Union[str, Path],
    *,
    lowercase: bool = True,
    strip_accents: Optional[bool] = None,
    handle_chinese_chars: bool = True,
) -> PieceTokenizer:
    """Build BERT's tokenizer from a `vocab.txt` (one piece per line, id = line number).

    lowercase (bool): the checkpoint is uncased.
    strip_accents (Optional[bool]): None follows `lowercase`, as BERT's own tokenizer does.
    handle_chinese_chars (bool): put spaces around CJK ideographs.
    """
    path = Path(vocab_path)
    if not path.is_file():
        raise FileNotFoundError(f"WordPiece vocabulary not found: {path}")
    bwp = BertWordPieceTokenizer(
        WordPiece.read_file(str(path)),
        lowercase=lowercase,
        strip_accents=strip_accents,
        handle_chinese_chars=handle_chinese_chars,
    )
    return PieceTokenizer(Tokenizer.from_str(bwp.to_str()))


def load_wordpiece(directory: Union[str, Path]) -> PieceTokenizer:
    """Load a checkpoint directory's WordPiece tokenizer.

    `tokenizer.json` wins when present; otherwise `vocab.txt` with the casing settings
    of `tokenizer_config.json` (`do_lower_case`, `strip_accents`, `tokenize_chinese_chars`).
    """
    directory = Path(directory)
    if (directory / "tokenizer.json").is_file():
        return PieceTokenizer.from_file(str(directory / "tokenizer.json"))
    vocab = directory / "vocab.txt"
    if not vocab.is_file():
        raise FileNotFoundError(
            f"No tokenizer in {directory}: expected tokenizer.json or vocab.txt"
        )
    settings = {}
    cfg_path = directory / "tokenizer_config.json"
    if cfg_path.is_file():
        settings = json.loads(cfg_path.read_text(encoding="utf8"))
    return wordpiece_from_vocab(
        vocab,
        lowercase=settings.get("do_lower_case", True),
        strip_accents=settings.get("strip_accents"),
        handle_chinese_chars=settings.get("tokenize_chinese_chars", True),
    )


def train_wordpiece(
    texts: Iterable[str],
    *,
    vocab_size: int = 30522,
    min_frequency: int = 2,
    lowercase: bool = True,
    limit_alphabet: int = 1000,
    special_pieces: List[str] = SPECIAL_PIECES,
) -> PieceTokenizer:
    """Train a new WordPiece vocabulary on an iterator of texts (for pretraining from scratch).

    The special pieces come first, so [PAD] gets id 0 as in BERT's vocabularies.
    """
    bwp = BertWordPieceTokenizer(lowercase=lowercase)
    bwp.train_from_iterator(
        texts,
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        limit_alphabet=limit_alphabet,
        special_tokens=special_pieces,
        show_progress=False,
    )
    tok = Tokenizer.from_str(bwp.to_str())
    # Training leaves no post-processor: add [CLS] A [SEP] (B [SEP]) as BERT expects.
    tok.post_processor = BertProcessing(
        ("[SEP]", tok.token_to_id("[SEP]")), ("[CLS]", tok.token_to_id("[CLS]"))
    )
    return PieceTokenizer(tok)


def load_tokenizer(path: Union[str, Path], *, lowercase: bool = True) -> PieceTokenizer:
    """A tokenizer from a `tokenizer.json`, a WordPiece `vocab.txt`, or a directory of either."""
    path = Path(path)
    if path.is_dir():
        return load_wordpiece(path)
    if path.suffix == ".json":
        return PieceTokenizer.from_file(str(path))
    return wordpiece_from_vocab(path, lowercase=lowercase)
