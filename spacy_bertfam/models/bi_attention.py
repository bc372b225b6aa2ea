"""BiDAF's attention flow, modelling layer and answer pointers (Seo et al. 2017), over the
contextual vectors of a question and a context that were encoded as separate sequences.

This is the head the ELMo paper put its vectors into for SQuAD: it needs no separator, so
any encoder family (ELMo, GPT, a frozen BERT) can answer questions through it.
"""
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from .layers.dropout import Dropout


class BiAttentionQA(nn.Module):
    """Question/context vectors -> start/end scores per context token and a "no answer" row.

    width: the vectors' width d; hidden: each direction's LSTM width h.
    """

    def __init__(self, width: int, hidden: int = 128, dropout: float = 0.1):
        super().__init__()
        self.similarity = nn.Linear(3 * width, 1)  # w^T [c; q; c * q] (trilinear)
        self.modelling = nn.LSTM(4 * width, hidden, batch_first=True, bidirectional=True)
        self.end_lstm = nn.LSTM(2 * hidden, hidden, batch_first=True, bidirectional=True)
        self.start = nn.Linear(4 * width + 2 * hidden, 1)
        self.end = nn.Linear(4 * width + 2 * hidden, 1)
        self.null = nn.Linear(2 * hidden, 2)
        self.dropout = Dropout(dropout)

    def forward(self, question: torch.Tensor, q_mask: torch.Tensor, context: torch.Tensor,
                c_mask: torch.Tensor) -> torch.Tensor:
        """question (B, J, d), context (B, T, d), masks (B, J) / (B, T) bool, every row with at
        least one True. Returns (B, 1 + T, 2): row 0 "no answer", then each context token's
        start and end score (padding rows are -inf)."""
        d = context.shape[-1]
        w = self.similarity.weight[0]
        # S_tj = w_c.c_t + w_q.q_j + (c_t * w_cq).q_j, without building the (B, T, J, 3d) tensor.
        S = ((context @ w[:d])[:, :, None] + (question @ w[d : 2 * d])[:, None, :]
             + (context * w[2 * d :]) @ question.transpose(1, 2) + self.similarity.bias)
        S = S.masked_fill(~q_mask[:, None, :], float("-inf"))
        c2q = torch.softmax(S, dim=2) @ question  # each context token's attended question
        best = S.max(dim=2).values.masked_fill(~c_mask, float("-inf"))
        q2c = torch.softmax(best, dim=1)[:, None, :] @ context  # the context tokens most relevant to the question
        G = torch.cat([context, c2q, context * c2q, context * q2c], dim=-1)
        lengths = c_mask.sum(dim=1).cpu()
        M = self._lstm(self.modelling, self.dropout(G), lengths)
        M2 = self._lstm(self.end_lstm, self.dropout(M), lengths)
        start = self.start(torch.cat([G, M], dim=-1)).squeeze(-1)
        end = self.end(torch.cat([G, M2], dim=-1)).squeeze(-1)
        scores = torch.stack([start, end], dim=-1).masked_fill(~c_mask[:, :, None], float("-inf"))
        pooled = (M * c_mask[:, :, None]).sum(dim=1) / lengths.to(M.device)[:, None].to(M.dtype)
        return torch.cat([self.null(pooled)[:, None, :], scores], dim=1)

    @staticmethod
    def _lstm(lstm: nn.LSTM, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """A bidirectional LSTM over each row's real length only, so padding (and so the
        batch a question is in) does not change its outputs."""
        packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        out, _ = lstm(packed)
        return pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])[0]
