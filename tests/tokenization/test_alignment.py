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
