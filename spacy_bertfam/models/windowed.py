"""Run an encoder over a batch of windows and gather the outputs per document piece."""
from typing import List, Optional, Sequence, Tuple

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint


class WindowedEncoder(nn.Module):
    """Wraps an encoder so that windowing's scatter/average stays inside autograd.

    The wrapped encoder is called as `encoder(ids, mask)` and returns an
    `EncoderOutput`; this module returns, for each requested layer, a
    (n_out, width) tensor of weighted sums of window positions (see
    `tokenization.windows.WindowPlan`), so gradients are split between
    overlapping windows exactly as the forward pass combined them.

    Memory: with `recompute`, only each chunk's chosen layer outputs are kept and the
    chunk's activations are recomputed in the backward pass (activation checkpointing),
    so a training batch's memory is bounded by one chunk rather than the whole batch.
    """

    def __init__(self, encoder: nn.Module):
        super().__init__()
        self.encoder = encoder

    def forward(
        self,
        ids: torch.Tensor,
        mask: torch.Tensor,
        chunks: Sequence[Tuple[torch.Tensor, int]],
        source: torch.Tensor,
        target: torch.Tensor,
        weight: torch.Tensor,
        n_out: int,
        layers: Optional[Sequence[int]] = None,
        lm_rows: Optional[torch.Tensor] = None,
        lm_targets: Optional[torch.Tensor] = None,
        type_ids: Optional[torch.Tensor] = None,
        recompute: bool = False,
        autocast: Optional[torch.dtype] = None,
    ) -> List[torch.Tensor]:
        """ids, mask: (n_windows, T); source, target, weight: (n,) -> [(n_out, W)].

        chunks: (window indices, length) per encoder call; `source` indexes the
        chunks' outputs flattened to (positions, W) and concatenated in order.
        lm_rows, lm_targets: for a causal encoder with a `logits` method, output rows
            of the top layer (which must be among `layers`) and the pieces they
            predict; the mean cross-entropy is appended to the returned list.
        type_ids: (n_windows, T) segment ids of sentence pairs, passed to the encoder
            as its third argument; None for single sequences.
        recompute: checkpoint each chunk (see the class docstring).
        autocast: run the encoder under torch autocast to this dtype (bfloat16, or
            float16 on a GPU); the returned layers are float32 whatever it is.
        """
        if ids.shape[0] == 0:
            # No doc in the batch has a piece: every requested layer is empty.
            count = self.encoder.config.n_layers + 1 if layers is None else len(layers)
            param = next(self.encoder.parameters())
            return [param.new_zeros((n_out, self.encoder.config.hidden_width))] * count
        recompute = recompute and torch.is_grad_enabled()
        per_chunk = []
        with torch.autocast(ids.device.type, dtype=autocast or torch.float32, enabled=autocast is not None):
            for windows, length in chunks:
                inputs = (ids[windows, :length], mask[windows, :length],
                          None if type_ids is None else type_ids[windows, :length])
                if recompute:
                    per_chunk.append(checkpoint(self._chunk_layers, *inputs, layers, use_reentrant=False))
                else:
                    per_chunk.append(self._chunk_layers(*inputs, layers))
        result = []
        for parts in zip(*per_chunk):
            flat = torch.cat(parts) if len(parts) > 1 else parts[0]
            picked = flat[source] * weight[:, None].to(flat.dtype)
            result.append(picked.new_zeros((n_out, picked.shape[-1])).index_add(0, target, picked))
        if lm_rows is not None:
            with torch.autocast(ids.device.type, dtype=autocast or torch.float32, enabled=autocast is not None):
                logits = self.encoder.logits(result[-1][lm_rows])
            result.append(torch.nn.functional.cross_entropy(logits.float(), lm_targets))
        return result

    def _chunk_layers(self, ids: torch.Tensor, mask: torch.Tensor, type_ids: Optional[torch.Tensor],
                      layers: Optional[Sequence[int]]) -> List[torch.Tensor]:
        """The chosen layers of one chunk of windows, each flattened to (positions, W)."""
        out = self.encoder(ids, mask) if type_ids is None else self.encoder(ids, mask, type_ids)
        chosen = out.layers if layers is None else [out.layers[i] for i in layers]
        return [layer.reshape(-1, layer.shape[-1]).float() for layer in chosen]
