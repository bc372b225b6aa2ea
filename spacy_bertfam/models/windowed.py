"""Run an encoder over a batch of windows and gather the outputs per document piece."""
from typing import Callable, List, Optional, Sequence, Tuple

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from .layers.linear import padded_rows, products_through_onednn
from .layers.packing import Packing


class WindowedEncoder(nn.Module):
    """Wraps an encoder so that windowing's scatter/average stays inside autograd.

    The wrapped encoder is called as `encoder(ids, mask, piece_vectors=...)` (and
    `type_ids=` for sentence pairs), returns an `EncoderOutput`, and looks up piece
    embeddings with `embed_pieces(ids)`; this module returns, for each requested layer, a
    (n_out, width) tensor of weighted sums of window positions (see
    `tokenization.windows.WindowPlan`), so gradients are split between
    overlapping windows exactly as the forward pass combined them.

    Memory: each chunk's layers are added into the outputs as soon as it has run, so only
    one chunk's layers exist at a time; with `recompute`, the chunk's activations are also
    recomputed in the backward pass (activation checkpointing), so a training batch's
    memory is bounded by one chunk rather than the whole batch.

    Under autograd the piece embeddings of all chunks are looked up at once, and on a CPU
    with a sparse gradient: a dense one is the whole table (30,522 × 384 floats for
    MiniLM), zeroed on fresh pages from the system at every lookup (once per chunk, about
    five per training batch of tweets, before the lookups were joined), zeroed again after
    the update, and read whole by gradient clipping. The CPU Adam step
    (`encoders.adam`) applies a sparse gradient exactly as the dense one it stands for;
    any other optimizer gets it densified.

    Padding: a chunk's windows are padded to its longest, and with `pack` the encoder
    runs its position-wise layers on the real positions only (`layers.packing`) where
    more than 5% of the chunk is padding (`Packing.of`; in prediction on a CPU also where
    that makes the rows one of `layers.linear`'s padded counts). Prediction, side by side:
    WNUT-17 tweets (18% padding) ×1.10-1.14 in fp32 and bf16, prose (10%) ×1.03-1.04,
    2,000-word documents (2%) ×1.01-1.03.
    """

    def __init__(self, encoder: nn.Module, pack: bool = True):
        super().__init__()
        self.encoder = encoder
        self.pack = pack

    def calibration_pass(self, n_sequences: int = 8, length: int = 64, seed: int = 0) -> None:
        """Run the encoder on fixed random pieces, for `quantize.int8_copy` to find each layer's
        outlier channels: no user data, and the same pieces in every process. The first 1,000
        ids of a large vocabulary are left out (BERT's special and unused pieces)."""
        config = self.encoder.config
        low = 1000 if config.n_pieces > 10_000 else 0
        generator = torch.Generator().manual_seed(seed)
        ids = torch.randint(low, config.n_pieces, (n_sequences, min(length, config.n_positions)), generator=generator)
        device = next(self.encoder.parameters()).device
        self.encoder(ids.to(device), torch.ones(ids.shape, dtype=torch.bool, device=device))

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
        after_chunk: Optional[Callable[[], None]] = None,
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
        after_chunk: called once each chunk's layers are in the outputs and its
            activations freed, in a call of several chunks (prediction gives their pages
            back to the system there: see `encoders.piece_encoder`); a call of one chunk,
            such as one short Doc's, keeps its pages for the next call to reuse.
        """
        if ids.shape[0] == 0:
            # No doc in the batch has a piece: every requested layer is empty.
            count = self.encoder.config.n_layers + 1 if layers is None else len(layers)
            param = next(self.encoder.parameters())
            return [param.new_zeros((n_out, self.encoder.config.hidden_width), dtype=torch.float32)] * count
        recompute = recompute and torch.is_grad_enabled()
        result: List[torch.Tensor] = []
        first = 0  # the chunk's first position in `source`'s numbering
        # Prediction on a CPU multiplies through oneDNN in a bounded set of row counts
        # (`layers.linear`): packed chunks come in those counts, so no layer copies its rows.
        rows_to = padded_rows if products_through_onednn(ids.device) else None
        with torch.autocast(ids.device.type, dtype=autocast or torch.float32, enabled=autocast is not None):
            vectors = self.encoder.embed_pieces(ids, sparse=ids.device.type == "cpu") if torch.is_grad_enabled() else None
            for windows, length in chunks:
                chunk_mask = mask[windows, :length]
                packing = Packing.of(chunk_mask, rows_to=rows_to) if self.pack else None
                inputs = (ids[windows, :length], chunk_mask,
                          None if type_ids is None else type_ids[windows, :length],
                          None if vectors is None else vectors[windows, :length])
                if recompute:
                    chosen = checkpoint(self._chunk_layers, *inputs, layers, packing, use_reentrant=False)
                else:
                    chosen = self._chunk_layers(*inputs, layers, packing)
                # Added into the outputs chunk by chunk, so no call holds every chunk's layers at once.
                end = first + len(windows) * length
                rows = ((source >= first) & (source < end)).nonzero().squeeze(1)
                at, scale = source[rows] - first, weight[rows, None]
                if packing is not None:
                    at = packing.index(at)
                if not result:
                    result = [layer.new_zeros((n_out, layer.shape[-1])) for layer in chosen]
                for out, layer in zip(result, chosen):
                    out.index_add_(0, target[rows], layer[at] * scale.to(layer.dtype))
                first = end
                del chosen, layer
                if after_chunk is not None and len(chunks) > 1:
                    after_chunk()
        if lm_rows is not None:
            with torch.autocast(ids.device.type, dtype=autocast or torch.float32, enabled=autocast is not None):
                logits = self.encoder.logits(result[-1][lm_rows])
            result.append(torch.nn.functional.cross_entropy(logits.float(), lm_targets))
        return result

    def _chunk_layers(self, ids: torch.Tensor, mask: torch.Tensor, type_ids: Optional[torch.Tensor],
                      vectors: Optional[torch.Tensor], layers: Optional[Sequence[int]],
                      packing: Optional[Packing]) -> List[torch.Tensor]:
        """The chosen layers of one chunk of windows, each flattened to (positions, W), or
        (real positions, W) with `packing`."""
        extra = {} if type_ids is None else {"type_ids": type_ids}
        if packing is not None:
            extra["packing"] = packing
        out = self.encoder(ids, mask, piece_vectors=vectors, **extra)
        chosen = out.layers if layers is None else [out.layers[i] for i in layers]
        return [layer.reshape(-1, layer.shape[-1]).float() for layer in chosen]
