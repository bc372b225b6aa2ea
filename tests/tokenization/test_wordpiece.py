"""Our WordPiece tokenization equals Hugging Face's BertTokenizerFast, ids and offsets."""
import pytest

from spacy_bertfam.tokenization import load_wordpiece, train_wordpiece, wordpiece_from_vocab
from spacy_bertfam.tokenization.wordpiece import SPECIAL_PIECES

from ..helpers import varied_strings

STRINGS = varied_strings()


@pytest.fixture(scope="module")
def reference(minilm_dir):
    from transformers import BertTokenizerFast

    ref = BertTokenizerFast(vocab_file=str(minilm_dir / "vocab.txt"), do_lower_case=True)
    # A misconfigured reference could come back empty: check a known encoding first.
    assert ref("hello world")["input_ids"] == [101, 7592, 2088, 102]
    return ref


@pytest.mark.parametrize("source", ["vocab.txt", "tokenizer.json"])
def test_wordpiece_matches_bert_tokenizer_fast(minilm_dir, reference, source):
    ours = (
        wordpiece_from_vocab(minilm_dir / "vocab.txt", lowercase=True)
        if source == "vocab.txt"
        else load_wordpiece(minilm_dir)
    )
    assert len(STRINGS) >= 200
    n_pieces = 0
    for text in STRINGS:
        ref = reference(text, return_offsets_mapping=True)
        enc = ours.encode(text)
        assert enc.ids.tolist() == ref["input_ids"], text
        assert [tuple(o) for o in enc.offsets.tolist()] == [tuple(o) for o in ref["offset_mapping"]], text
        n_pieces += len(enc.ids)
    assert n_pieces > 3000  # the strings really produced pieces


def test_wordpiece_pairs_match_reference(minilm_dir, reference):
    ours = load_wordpiece(minilm_dir)
    for a, b in zip(STRINGS[:60], STRINGS[60:120]):
        ref = reference(a, b, return_offsets_mapping=True)
        enc = ours.encode(a, b)
        assert enc.ids.tolist() == ref["input_ids"]
        assert enc.type_ids.tolist() == ref["token_type_ids"]


def test_wordpiece_never_truncates(minilm_dir):
    # MiniLM's tokenizer.json carries truncation at 128 pieces; we switch it off.
    ours = load_wordpiece(minilm_dir)
    assert len(ours.encode("word " * 1000).ids) == 1002


def test_train_wordpiece_learns_vocabulary():
    texts = ["the cat sat on the mat", "the dog ran to the river bank", "cats and dogs"] * 50
    tok = train_wordpiece(texts, vocab_size=80, min_frequency=2)
    assert tok.special_ids() == [0, 1, 2, 3, 4]
    assert tok.piece_id("[PAD]") == 0
    enc = tok.encode("the cat", "the dog")
    assert enc.ids[0] == tok.piece_id("[CLS]") and enc.ids[-1] == tok.piece_id("[SEP]")
    assert enc.type_ids.tolist().count(1) == 3  # "the dog [SEP]"
    assert tok.tokenizer.token_to_id("the") is not None  # a frequent word is one piece
    assert tok.n_pieces <= 80
    # Pieces after the special ones are numbered in sorted order, not in the trainer's hash-map
    # order (which changed from process to process, and with it each piece's embedding row).
    vocab = tok.tokenizer.get_vocab()
    others = sorted((i, p) for p, i in vocab.items() if i >= len(SPECIAL_PIECES))
    assert [p for _, p in others] == sorted(p for _, p in others)


def test_unknown_piece_is_named(minilm_dir):
    with pytest.raises(ValueError, match="no piece '<nope>'"):
        load_wordpiece(minilm_dir).piece_id("<nope>")


def test_casing_given_for_a_folder_is_used_and_checked(tmp_path):
    """A cased vocab.txt in a folder with nothing saying its casing is read with the lowercase
    given (it was lower-cased whatever was given); a tokenizer_config.json that says otherwise
    is an error, not silently preferred."""
    from spacy_bertfam.errors import ConfigError
    from spacy_bertfam.tokenization import load_tokenizer

    (tmp_path / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "Hello", "hello"]))
    assert load_tokenizer(tmp_path, lowercase=False).encode_words([["Hello"]]) == [[[5]]]
    assert load_tokenizer(tmp_path).encode_words([["Hello"]]) == [[[6]]]  # unset: uncased
    (tmp_path / "tokenizer_config.json").write_text('{"do_lower_case": true}')
    assert load_tokenizer(tmp_path).encode_words([["Hello"]]) == [[[6]]]
    with pytest.raises(ConfigError, match="lowercase = False disagrees with .*tokenizer_config.json.*uncased"):
        load_tokenizer(tmp_path, lowercase=False)


def test_a_word_that_spells_a_special_piece_is_text(minilm_dir):
    """A Doc saying "[SEP]" or "x[MASK]y" gets the pieces of those characters: only the
    encoder's layout places [CLS]/[SEP], so user text cannot inject them."""
    tok = load_wordpiece(minilm_dir)
    special = set(tok.special_ids())
    words = ["[SEP]", "x[MASK]y", "[CLS]", "hello"]
    per_word = tok.encode_words([words])[0]
    assert all(pieces and not special & set(pieces) for pieces in per_word), per_word
    assert per_word[0] == [tok.piece_id("["), tok.piece_id("sep"), tok.piece_id("]")]
    # Raw text keeps Hugging Face's reading (a pretraining corpus, a prompt): "[SEP]" is the piece.
    assert tok.piece_id("[SEP]") in tok.encode("a [SEP] b").ids.tolist()[1:-1]
