"""Prediction writes the LSTM's gates into memory it reuses across chunks and steps
(`lstm._Scratch`); with gradients on, every product allocates its own. Both must agree."""
import torch

from spacy_bertfam.models.elmo import ElmoBiLM
from spacy_bertfam.models.elmo.config import ElmoConfig
from spacy_bertfam.models.elmo.lstm import INPUT_CHUNK_ROWS


def test_prediction_with_reused_gate_memory_equals_the_pass_with_gradients():
    torch.manual_seed(0)
    bilm = ElmoBiLM(ElmoConfig(filters=[(1, 4), (2, 8)], cell_width=16, projection_width=8)).eval()
    # 80 rows of 1-40 tokens in no order: chunks of several sizes (80 rows x 12 steps is
    # the most under INPUT_CHUNK_ROWS), and rows ending at many steps.
    lengths = torch.randint(1, 41, (80,))
    lengths[0] = 40
    assert 80 * 40 > 2 * INPUT_CHUNK_ROWS
    mask = torch.arange(40)[None, :] < lengths[:, None]
    char_ids = torch.randint(1, 262, (80, 40, 50)) * mask[..., None]
    with torch.no_grad():
        predicted, predicted_state = bilm(char_ids, mask)
    with torch.enable_grad():
        trained, trained_state = bilm(char_ids, mask)
    for a, b in zip(predicted.layers, trained.layers):
        torch.testing.assert_close(a, b.detach(), rtol=1e-6, atol=1e-7)
    for direction in range(2):
        for (h, c), (h2, c2) in zip(predicted_state[direction], trained_state[direction]):
            torch.testing.assert_close(h, h2.detach(), rtol=1e-6, atol=1e-7)
            torch.testing.assert_close(c, c2.detach(), rtol=1e-6, atol=1e-7)
