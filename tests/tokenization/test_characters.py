"""ELMo character ids as bilm-tf makes them: bytes + 1 between word markers, markers for <S>/</S>."""
import warnings

import numpy as np
import pytest

from spacy_bertfam.tokenization import characters
from spacy_bertfam.tokenization.characters import batch_char_ids, word_table

BOW, EOW, PAD = 259, 260, 261  # begin/end of word and padding, shifted by one


def _row(*ids: int, width: int = 50) -> list:
    return [BOW, *ids, EOW] + [PAD] * (width - 2 - len(ids))


def test_words_bytes_truncation_and_markers(monkeypatch):
    monkeypatch.setattr(characters, "_said_cut", False)  # as in a fresh process
    with pytest.warns(UserWarning, match="ELMo reads at most 48 bytes of a token"):  # cut as bilm-tf does, but said
        table = word_table(["a", "ü", "x" * 60, "<S>", "</S>", ""], 50)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once per process, not for every batch of URLs
        assert word_table(["y" * 60], 50)[0].tolist() == [BOW] + [ord("y") + 1] * 48 + [EOW]
    assert table[0].tolist() == _row(ord("a") + 1)
    assert table[1].tolist() == _row(0xC3 + 1, 0xBC + 1)
    assert table[2].tolist() == [BOW] + [ord("x") + 1] * 48 + [EOW]  # 48 bytes kept
    assert table[3].tolist() == _row(257)
    assert table[4].tolist() == _row(258)
    assert table[5].tolist() == _row()


def test_batch_pads_with_zero_tokens_and_wraps_sentences():
    ids = batch_char_ids([["hi"], []], 10)
    assert ids.shape == (2, 3, 10)
    assert ids[0, 0].tolist() == _row(257, width=10) and ids[0, 2].tolist() == _row(258, width=10)
    assert ids[0, 1].tolist() == _row(ord("h") + 1, ord("i") + 1, width=10)
    assert ids[1, 1].tolist() == _row(258, width=10) and not ids[1, 2].any()
    assert np.array_equal(batch_char_ids([["hi"]], 10, boundaries=False)[0, 0], ids[0, 1])
