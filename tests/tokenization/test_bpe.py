"""Byte-level BPE (GPT-2) and GPT-1 BPE equal Hugging Face's fast tokenizers."""
import pytest

from spacy_bertfam.tokenization import byte_bpe_from_files, gpt1_bpe_from_files, load_bpe, train_byte_bpe

from ..conftest import TEST_DATA, make_hf_gpt
from ..helpers import varied_strings

GPT2 = TEST_DATA / "gpt2_bpe"
STRINGS = varied_strings()


@pytest.fixture(scope="module")
def gpt2_reference():
    from transformers import GPT2TokenizerFast

    ref = GPT2TokenizerFast(vocab_file=str(GPT2 / "encoder.json"), merges_file=str(GPT2 / "vocab.bpe"))
    assert ref("Hello world")["input_ids"] == [15496, 995]  # the reference really loaded
    return ref


def test_gpt2_ids_and_offsets_match_reference(gpt2_reference):
    ours = byte_bpe_from_files(GPT2 / "encoder.json", GPT2 / "vocab.bpe")
    assert ours.encode("Hello world").ids.tolist() == [15496, 995]
    assert ours.n_pieces == 50257
    assert len(STRINGS) >= 200
    total = 0
    for text in STRINGS + ["a<|endoftext|>b", " leading", "trailing\n"]:
        ref = gpt2_reference(text, return_offsets_mapping=True)
        enc = ours.encode(text)
        assert enc.ids.tolist() == ref["input_ids"], text
        assert [tuple(o) for o in enc.offsets.tolist()] == [tuple(o) for o in ref["offset_mapping"]], text
        total += len(enc.ids)
    assert total > 5000
    assert ours.decode(ours.encode("Héllo wörld 🙂").ids) == "Héllo wörld 🙂"


def test_gpt1_bpe_matches_reference(tmp_path):
    from transformers import OpenAIGPTTokenizerFast

    directory = make_hf_gpt(tmp_path / "gpt1", gpt1=True)
    ours = load_bpe(directory, gpt1=True)
    ref = OpenAIGPTTokenizerFast(vocab_file=str(directory / "vocab.json"), merges_file=str(directory / "merges.txt"))
    assert len(ref("the quick brown fox")["input_ids"]) > 0
    for text in STRINGS:
        assert ours.encode(text).ids.tolist() == ref(text)["input_ids"], text
    assert ours.encode("The Quick").ids.tolist() == ours.encode("the quick").ids.tolist()  # lower-cased
    assert gpt1_bpe_from_files(directory / "vocab.json", directory / "merges.txt").n_pieces == ours.n_pieces


def test_train_byte_bpe():
    texts = ["the cat sat on the mat", "the dog ran to the river bank"] * 100
    tok = train_byte_bpe(texts, vocab_size=300, min_frequency=2)
    assert 256 < tok.n_pieces <= 300 and tok.piece_id("<|endoftext|>") == 0
    assert len(tok.encode("the cat").ids) < len("the cat")  # merges learned
    assert tok.decode(tok.encode("unseen wörds 🙂").ids) == "unseen wörds 🙂"  # bytes cover all


def test_a_word_that_spells_end_of_text_is_text():
    """In a Doc, "<|endoftext|>" is characters, not GPT-2's document separator."""
    ours = byte_bpe_from_files(GPT2 / "encoder.json", GPT2 / "vocab.bpe")
    eot = ours.piece_id("<|endoftext|>")
    per_word = ours.encode_words([["foo<|endoftext|>bar", " <|endoftext|>"]])[0]
    assert all(pieces and eot not in pieces for pieces in per_word), per_word
    assert ours.decode([p for pieces in per_word for p in pieces]) == "foo<|endoftext|>bar <|endoftext|>"


def test_doc_words_give_gpt2_running_text_pieces_around_whitespace():
    """Double spaces, paragraph breaks and tabs between words: a Doc's words encode to the
    pieces GPT-2 gives the running text (before, "Hello  world" lost the space of " world"
    and "\\n\\n" became one piece where running text has two)."""
    import random

    import spacy

    from spacy_bertfam.tokenization.words import token_words

    ours = byte_bpe_from_files(GPT2 / "encoder.json", GPT2 / "vocab.bpe")
    nlp = spacy.blank("en")
    rng = random.Random(0)
    gaps = [" ", "  ", "   ", "\n", "\n\n", " \n", "\n ", "\t", " \t ", "\n\n\n", "\r\n"]
    words = ["Hello", "world", "the", "Paris", "42", "cafés", "naïve", "x"]
    texts = ["Hello  world", "Hello\n\nworld", "a\tb"] + [
        "".join(rng.choice(words) + rng.choice(gaps) for _ in range(rng.randint(1, 8))) + rng.choice(words)
        for _ in range(300)]
    for text in texts:
        doc = nlp(text)
        pieces = [p for word in ours.encode_words([token_words(doc, "space_before")])[0] for p in word]
        assert pieces == ours.tokenizer.encode(text, add_special_tokens=False).ids, repr(text)
