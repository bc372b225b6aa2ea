"""The ELMo bidirectional language model (Peters et al. 2018, https://arxiv.org/abs/1802.05365).

Token representation from characters (shared by both directions), separate forward
and backward stacks of projected LSTMs, and a softmax shared by both directions.
Layer outputs (what a scalar mix combines): layer 0 is the token representation
duplicated to the biLSTM width, layer l the concatenation [forward_l; backward_l].
"""
from typing import List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from ..layers.dropout import Dropout
from ..output import EncoderOutput
from .char_cnn import CharCNN
from .config import ElmoConfig
from .lstm import Packing, ProjectedLSTMCell, State, run_directions

BiState = Tuple[List[State], List[State]]  # per layer, forward and backward


class ElmoBiLM(nn.Module):
    """ELMo's biLM: character-CNN token vectors, forward and backward stacks of projected LSTMs,
    and, for the LM loss, a softmax shared by both directions.

    config (ElmoConfig): sizes; n_words = 0 builds no softmax (a feature extractor), softmax
        "full" or "adaptive" chooses its kind.
    The forward pass gives n_layers + 1 layer outputs, each (B, T, 2 * projection_width).
    """

    def __init__(self, config: ElmoConfig):
        super().__init__()
        self.config = config
        self.char_cnn = CharCNN(config)
        P = config.projection_width

        def stack() -> nn.ModuleList:
            return nn.ModuleList(
                ProjectedLSTMCell(P, config.cell_width, P, config.cell_clip, config.projection_clip)
                for _ in range(config.n_layers)
            )

        self.forward_layers = stack()
        self.backward_layers = stack()
        self.softmax: Optional[nn.Module] = None
        if config.n_words and config.softmax == "full":
            self.softmax = nn.Linear(P, config.n_words)
        elif config.n_words:
            cutoffs = [c for c in (2000, 10000) if c < config.n_words - 1]
            self.softmax = nn.AdaptiveLogSoftmaxWithLoss(P, config.n_words, cutoffs=cutoffs or [config.n_words // 2], div_value=4.0)
        self.dropout = Dropout(config.dropout)

    def reset_parameters(self) -> None:
        """Fresh random weights: each submodule's own `reset_parameters` (PyTorch's defaults;
        the highway gates' carry bias). A module with its own reset resets its children."""
        done = set()
        for module in self.modules():
            if module is self or id(module) in done or not hasattr(module, "reset_parameters"):
                continue
            module.reset_parameters()
            done.update(id(m) for m in module.modules())

    def initial_state(self, batch_size: int, device: torch.device) -> BiState:
        """Zero LSTM states for both directions: per layer, h (B, projection_width) and c (B, cell_width)."""
        zeros = lambda width: torch.zeros(batch_size, width, device=device)  # noqa: E731
        fresh = [(zeros(self.config.projection_width), zeros(self.config.cell_width))
                 for _ in range(self.config.n_layers)]
        return fresh, list(fresh)

    def forward(
        self, char_ids: torch.Tensor, mask: Optional[torch.Tensor] = None, state: Optional[BiState] = None
    ) -> Tuple[EncoderOutput, BiState]:
        """char_ids: (B, T, max_chars), sentence markers included; mask: (B, T) bool.

        state: LSTM states to start from (the stateful mode: pass the returned state
        of the previous batch); None starts from zeros. Returns the layer outputs
        (padding rows zero) and the final states.
        """
        B, T, _ = char_ids.shape
        if mask is None:
            mask = (char_ids > 0).any(-1)
        if state is None:
            state = self.initial_state(B, char_ids.device)
        lengths = mask.sum(-1)
        if not torch.equal(mask, torch.arange(T, device=mask.device) < lengths[:, None]):
            raise ValueError("ElmoBiLM reads right-padded rows: each row's mask must be its real tokens "
                             "followed by padding")
        # Rows longest first, so that each LSTM step computes only the rows still running.
        order = torch.argsort(lengths, descending=True, stable=True)
        unsort = torch.argsort(order)
        packing = Packing.of(lengths[order], T)
        tokens = self.char_cnn(char_ids) * mask[..., None]
        sorted_tokens = tokens[order]
        layers = [torch.cat([tokens, tokens], dim=-1)]
        fwd_in = bwd_in = sorted_tokens
        new_fwd, new_bwd = [], []
        for i in range(self.config.n_layers):
            fs, bs = ((h[order], c[order]) for h, c in (state[0][i], state[1][i]))
            (fwd, bwd), (fs, bs) = run_directions(self.forward_layers[i], self.backward_layers[i],
                                                  (self.dropout(fwd_in), self.dropout(bwd_in)), packing, (fs, bs))
            if self.config.skip_connections and i > 0:
                fwd, bwd = fwd + fwd_in, bwd + bwd_in
            layers.append(torch.cat([fwd, bwd], dim=-1)[unsort])
            new_fwd.append((fs[0][unsort], fs[1][unsort]))
            new_bwd.append((bs[0][unsort], bs[1][unsort]))
            fwd_in, bwd_in = fwd, bwd
        return EncoderOutput(layers=layers), (new_fwd, new_bwd)

    def lm_loss(self, output: EncoderOutput, word_ids: torch.Tensor, mask: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """Mean next-word NLL of the forward direction and previous-word NLL of the
        backward direction (the LM loss is their sum).

        word_ids: (B, T) ids in the softmax vocabulary, sentence markers included.
        """
        if self.softmax is None:
            raise ValueError("This ELMo model has no softmax (n_words = 0): it cannot compute the LM loss")
        P = self.config.projection_width
        top = output.layers[-1]
        fwd, bwd = top[..., :P], top[..., P:]
        both = mask[:, 1:] & mask[:, :-1]
        return (self._nll(fwd[:, :-1][both], word_ids[:, 1:][both]),
                self._nll(bwd[:, 1:][both], word_ids[:, :-1][both]))

    def _nll(self, hidden: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        if isinstance(self.softmax, nn.AdaptiveLogSoftmaxWithLoss):
            return self.softmax(hidden, targets).loss
        return F.cross_entropy(self.softmax(hidden), targets)
