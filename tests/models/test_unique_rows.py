"""unique_rows: torch.unique(rows, dim=0, return_inverse=True), from 1-D uniques."""
import pytest
import torch

from spacy_bertfam.models.elmo.char_cnn import unique_rows


def _words(n_rows: int, width: int, n_words: int, seed: int) -> torch.Tensor:
    """Rows of character ids as a batch has them: words repeat, padding 0 after each word,
    some words share long prefixes (as URLs do)."""
    generator = torch.Generator().manual_seed(seed)
    vocabulary = torch.zeros(n_words, width, dtype=torch.long)
    for i in range(n_words):
        length = int(torch.randint(1, width + 1, (), generator=generator))
        vocabulary[i, :length] = torch.randint(1, 262, (length,), generator=generator)
        if i % 5 == 1:  # a prefix shared with the word before it
            vocabulary[i, : width // 2] = vocabulary[i - 1, : width // 2]
    return vocabulary[torch.randint(0, n_words, (n_rows,), generator=generator)]


@pytest.mark.parametrize("n_rows,width,n_words", [(1, 1, 1), (7, 1, 3), (50, 3, 10), (2000, 50, 300), (500, 17, 499)])
def test_the_same_rows_order_and_inverse_as_torch_unique(n_rows, width, n_words):
    rows = _words(n_rows, width, n_words, seed=n_rows)
    expected, expected_inverse = torch.unique(rows, dim=0, return_inverse=True)
    got, inverse = unique_rows(rows)
    assert torch.equal(got, expected) and torch.equal(inverse, expected_inverse)


def test_edge_rows():
    for rows in (torch.zeros(4, 50, dtype=torch.long), torch.full((3, 9), 261), torch.zeros(0, 50, dtype=torch.long),
                 torch.tensor([[261] * 50, [261] * 49 + [260], [0] * 50, [261] * 50])):
        expected, expected_inverse = torch.unique(rows, dim=0, return_inverse=True)
        got, inverse = unique_rows(rows)
        assert torch.equal(got, expected) and torch.equal(inverse, expected_inverse), rows
