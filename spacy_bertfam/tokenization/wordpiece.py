"""WordPiece vocabularies for BERT, built and trained with the `tokenizers` library."""
import json
from pathlib import Path
from typing import Iterable, List, Optional, Union

from tokenizers import Tokenizer
from tokenizers.implementations import BertWordPieceTokenizer
from tokenizers.models import WordPiece
from tokenizers.processors import BertProcessing

from ..errors import ConfigError
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


def load_wordpiece(directory: Union[str, Path], *, lowercase: Optional[bool] = None) -> PieceTokenizer:
    """Load a checkpoint directory's WordPiece tokenizer.

    `tokenizer.json` wins when present; otherwise `vocab.txt` with the casing settings
    of `tokenizer_config.json` (`do_lower_case`, `strip_accents`, `tokenize_chinese_chars`).
    lowercase: None follows the files (uncased where they say nothing); a value given is
        used where they say nothing and must agree with them where they do.
    """
    directory = Path(directory)
    if (directory / "tokenizer.json").is_file():
        return _load_json(directory / "tokenizer.json", lowercase)
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
        lowercase=_agreed_casing(lowercase, settings.get("do_lower_case"), cfg_path),
        strip_accents=settings.get("strip_accents"),
        handle_chinese_chars=settings.get("tokenize_chinese_chars", True),
    )


def _load_json(path: Path, lowercase: Optional[bool]) -> PieceTokenizer:
    normalizer = json.loads(path.read_text(encoding="utf8")).get("normalizer") or {}
    if lowercase is not None and normalizer.get("type") == "BertNormalizer":
        _agreed_casing(lowercase, normalizer.get("lowercase"), path)
    return PieceTokenizer.from_file(str(path))


def _agreed_casing(given: Optional[bool], stated: Optional[bool], source: Path) -> bool:
    """The casing a vocabulary is used with: what its files state, else what was given, else uncased."""
    if given is not None and stated is not None and bool(given) != bool(stated):
        raise ConfigError(
            f"lowercase = {given} disagrees with {source}, which says the vocabulary is "
            f"{'uncased' if stated else 'cased'}; leave lowercase unset (null) to follow the file"
        )
    if stated is not None:
        return bool(stated)
    return True if given is None else bool(given)


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

    The special pieces come first, so [PAD] gets id 0 as in BERT's vocabularies; the other
    pieces follow in sorted order. The trainer numbers pieces of equal count in hash-map
    order, which changes from process to process, so the same corpus and seed gave another
    embedding row to some pieces each run; WordPiece splits words by longest match, so the
    order of the ids changes nothing else. (A tie at the cut-off can still swap one piece for
    another between runs; the trainer has no seed. Pass a vocabulary to fix it.)
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
    trained = json.loads(bwp.to_str())
    vocab = trained["model"]["vocab"]
    others = sorted(piece for piece in vocab if piece not in special_pieces)
    trained["model"]["vocab"] = {piece: i for i, piece in enumerate([*special_pieces, *others])}
    tok = Tokenizer.from_str(json.dumps(trained))
    # Training leaves no post-processor: add [CLS] A [SEP] (B [SEP]) as BERT expects.
    tok.post_processor = BertProcessing(
        ("[SEP]", tok.token_to_id("[SEP]")), ("[CLS]", tok.token_to_id("[CLS]"))
    )
    return PieceTokenizer(tok)


def load_tokenizer(path: Union[str, Path], *, lowercase: Optional[bool] = None) -> PieceTokenizer:
    """A tokenizer from a `tokenizer.json`, a WordPiece `vocab.txt`, or a directory of either.

    lowercase: None follows the files (a bare `vocab.txt`: uncased); a value given must
        agree with what a `tokenizer.json` or `tokenizer_config.json` says.
    """
    path = Path(path)
    if path.is_dir():
        return load_wordpiece(path, lowercase=lowercase)
    if path.suffix == ".json":
        return _load_json(path, lowercase)
    return wordpiece_from_vocab(path, lowercase=_agreed_casing(lowercase, None, path))
