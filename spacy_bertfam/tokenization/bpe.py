"""Byte-pair encodings for GPT, built and trained with the `tokenizers` library.

GPT-2: byte-level BPE (`encoder.json`/`vocab.json` + `vocab.bpe`/`merges.txt`), no
lower-casing, `<|endoftext|>` as its one special piece. GPT-1: character BPE with a
`</w>` end-of-word suffix over BERT-style lower-cased, punctuation-split words, as
Hugging Face's fast OpenAIGPT tokenizer builds it.
"""
from pathlib import Path
from typing import Iterable, Tuple, Union

from tokenizers import AddedToken, Tokenizer, decoders, normalizers, pre_tokenizers
from tokenizers.implementations import ByteLevelBPETokenizer
from tokenizers.models import BPE

from .pieces import PieceTokenizer

END_OF_TEXT = "<|endoftext|>"
GPT1_UNKNOWN = "<unk>"


def _files(directory: Path) -> Tuple[Path, Path]:
    for vocab, merges in (("vocab.json", "merges.txt"), ("encoder.json", "vocab.bpe")):
        if (directory / vocab).is_file() and (directory / merges).is_file():
            return directory / vocab, directory / merges
    raise FileNotFoundError(
        f"No BPE vocabulary in {directory}: expected tokenizer.json, vocab.json + merges.txt, "
        "or encoder.json + vocab.bpe"
    )


def byte_bpe_from_files(vocab: Union[str, Path], merges: Union[str, Path]) -> PieceTokenizer:
    """GPT-2's byte-level BPE from its vocabulary and merges files."""
    pieces, merge_list = BPE.read_file(str(vocab), str(merges))
    bpe = ByteLevelBPETokenizer(pieces, merge_list, add_prefix_space=False, trim_offsets=False)
    tok = Tokenizer.from_str(bpe.to_str())
    if tok.token_to_id(END_OF_TEXT) is not None:
        tok.add_special_tokens([AddedToken(END_OF_TEXT, special=True, normalized=False)])
    return PieceTokenizer(tok)


def gpt1_bpe_from_files(vocab: Union[str, Path], merges: Union[str, Path]) -> PieceTokenizer:
    """GPT-1's lower-cased character BPE with `</w>` word endings."""
    model = BPE.from_file(str(vocab), str(merges), unk_token=GPT1_UNKNOWN, end_of_word_suffix="</w>")
    tok = Tokenizer(model)
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.BPEDecoder(suffix="</w>")
    if tok.token_to_id(GPT1_UNKNOWN) is not None:
        tok.add_special_tokens([GPT1_UNKNOWN])
    return PieceTokenizer(tok)


def load_bpe(directory: Union[str, Path], *, gpt1: bool = False) -> PieceTokenizer:
    """A checkpoint directory's BPE tokenizer: `tokenizer.json` first, else the vocab files."""
    directory = Path(directory)
    if (directory / "tokenizer.json").is_file():
        return PieceTokenizer.from_file(str(directory / "tokenizer.json"))
    vocab, merges = _files(directory)
    return (gpt1_bpe_from_files if gpt1 else byte_bpe_from_files)(vocab, merges)


def train_byte_bpe(
    texts: Iterable[str], *, vocab_size: int = 50257, min_frequency: int = 2
) -> PieceTokenizer:
    """Train a new byte-level BPE on texts; `<|endoftext|>` is piece 0."""
    bpe = ByteLevelBPETokenizer(add_prefix_space=False, trim_offsets=False)
    bpe.train_from_iterator(
        texts, vocab_size=vocab_size, min_frequency=min_frequency, show_progress=False,
        special_tokens=[END_OF_TEXT],
    )
    tok = Tokenizer.from_str(bpe.to_str())
    tok.add_special_tokens([AddedToken(END_OF_TEXT, special=True, normalized=False)])
    return PieceTokenizer(tok)
