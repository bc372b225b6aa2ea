"""A sentence pair's segments are aligned each on its own: no piece crosses between them."""
from spacy_bertfam.tokenization import load_wordpiece
from spacy_bertfam.tokenization.alignment import align_tokens


def test_a_segment_without_pieces_does_not_borrow_across_the_pair(minilm_dir):
    tok = load_wordpiece(minilm_dir)
    unk = tok.piece_id("[UNK]")
    hello, world = tok.piece_id("hello"), tok.piece_id("world")
    # A question of zero-width spaces only: it gets an [UNK] of its own; before, it borrowed
    # the context's first piece, which then sat in segment A (before [SEP], type id 0).
    (pieces,) = align_tokens(tok, [["\u200b", "\u200b", "hello", "world"]], unk_id=unk, first_segments=[2])
    assert pieces.ids.tolist() == [unk, hello, world]
    assert pieces.token_pieces.tolist() == [0, 0, 1, 2]
    # A context whose first token yields no piece borrows from the context, not from the question.
    (pieces,) = align_tokens(tok, [["hello", "\u200b", "world"]], unk_id=unk, first_segments=[1])
    assert pieces.ids.tolist() == [hello, world]
    assert pieces.token_pieces.tolist() == [0, 1, 1]
    # Not a pair: the nearest piece, as before.
    (pieces,) = align_tokens(tok, [["hello", "\u200b", "world"]], unk_id=unk)
    assert pieces.token_pieces.tolist() == [0, 0, 1]


def test_word_pieces_are_each_words_own_pieces_in_order(minilm_dir):
    """The flat form that alignment reads: the pieces of each word, word after word, and how
    many each word got (0 for a word the normaliser empties), as the `tokenizers` library
    gives each word alone; `encode_words` gives the same per word."""
    tok = load_wordpiece(minilm_dir)
    words_tokenizer = tok._words_tokenizer()  # "[SEP]" in a text is text
    docs = [["Tokenization", "\u200b", "of", "", "unaffable", "[SEP]", "words"], [], ["\u200b"]]
    encoded = tok.encode_word_pieces(docs)
    for words, (ids, lengths), per_word in zip(docs, encoded, tok.encode_words(docs)):
        alone = [words_tokenizer.encode([w], is_pretokenized=True, add_special_tokens=False).ids for w in words]
        assert lengths.tolist() == [len(p) for p in alone]
        assert ids.tolist() == [i for p in alone for i in p]
        assert per_word == alone
    assert encoded[0][1].tolist()[1] == 0 and encoded[0][1].tolist()[0] > 1  # "\u200b" empty, "Tokenization" split
    (pieces,) = align_tokens(tok, [docs[0]], unk_id=tok.piece_id("[UNK]"))
    assert pieces.ids.tolist() == encoded[0][0].tolist() and pieces.token_lengths.min() == 1
