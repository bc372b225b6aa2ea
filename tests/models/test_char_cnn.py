"""The character CNN convolves each word only up to its length (plus the widest filter) and in
groups of similar length: every vector must be what a Conv1d over all max_chars columns gives."""
import torch

from spacy_bertfam.models.elmo.char_cnn import CharCNN
from spacy_bertfam.models.elmo.config import ElmoConfig
from spacy_bertfam.tokenization.characters import batch_char_ids


def _full_width(cnn: CharCNN, char_ids: torch.Tensor) -> torch.Tensor:
    """bilm-tf's computation, token by token: each filter over all columns, max over windows."""
    x = cnn.chars(char_ids.reshape(-1, char_ids.shape[-1])).transpose(1, 2)  # (N, char_width, max_chars)
    pooled = torch.cat([cnn.activation(conv(x).max(dim=-1).values) for conv in cnn.convolutions], dim=-1)
    return cnn.projection(cnn.highway(pooled)).reshape(*char_ids.shape[:2], -1)


def test_every_word_length_matches_a_full_width_convolution():
    torch.manual_seed(0)
    cnn = CharCNN(ElmoConfig(filters=[(1, 4), (3, 8), (6, 16)], n_highway=2)).double().eval()
    # 1 to 60 bytes (past the 48 a token keeps), multi-byte characters, repeats, and a short
    # row padded with padding tokens.
    words = ["a" * n for n in range(1, 61)] + ["ü" * 7, "中文字", "x", "the", "the", "https://t.co/" + "ab" * 20]
    rows = [words, ["the", "cat", "."]]
    char_ids = torch.from_numpy(batch_char_ids(rows, 50))
    with torch.no_grad():
        ours, expected = cnn(char_ids), _full_width(cnn, char_ids)
    assert ours.shape == expected.shape
    assert float((ours - expected).abs().max()) < 1e-12
