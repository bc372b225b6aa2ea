"""`spacy-bertfam.EncoderListener.v1`: a downstream component's view of a shared encoder.

During `nlp.update` the encoder component hands each listener the batch's outputs and
a callback that accumulates gradients (`receive`); otherwise the listener reads what
the encoder stored on the Docs. Either way the same pooler computes the token
vectors, so training, prediction and frozen/annotating encoders agree.
"""
from typing import Callable, List, Optional, Tuple

from spacy.attrs import ORTH
from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import Model
from thinc.types import Floats2d

from ..encoders.contract import DocEncoding, EncoderContract
from ..errors import ConfigError
from ..pooling import build_pooler, link_pooler, pooler_input_width, pooler_layers

DOC_EXTENSION = "bertfam"


class EncoderListener(Model):
    """Receives an upstream encoder's outputs and pools/mixes them into token vectors."""

    name = "encoder_listener"

    def __init__(self, upstream_name: str, pooler: Model, grad_factor: float):
        super().__init__(
            self.name,
            _forward,
            layers=[pooler],
            dims={"nO": pooler.get_dim("nO")},
            attrs={"grad_factor": grad_factor, "upstream": None, "drop_upstream_outputs": False},
        )
        self.upstream_name = upstream_name
        self._batch_id: Optional[int] = None
        self._outputs: Optional[List[DocEncoding]] = None
        self._backprop: Optional[Callable] = None
        # True from `initialize` until spaCy relinks the pipeline's listeners at the
        # end of nlp.initialize, or until the first encoder outputs are read (a component
        # initialised on its own is not relinked): spaCy initialises a listening
        # component by predicting on docs the encoder has not seen, so only then zeros
        # stand in.
        self._initializing = False

    def initialize(self, X=None, Y=None) -> "EncoderListener":
        """Initialise the pooler; until the listener is linked again, Docs without encoder outputs get
        zero placeholders (spaCy initialises listening components on Docs the encoder never saw)."""
        self._initializing = True
        return super().initialize(X, Y)

    @property
    def pooler(self) -> Model:
        """The layer that pools and mixes DocEncodings into token vectors."""
        return self.layers[0]

    def link(self, upstream: str, contract: EncoderContract, *, where: str) -> None:
        """Attach to the encoder component `upstream`: resolve layers, pooling and width."""
        link_pooler(self.pooler, contract, where=where)
        self.attrs["upstream"] = upstream
        self._initializing = False  # spaCy relinks after initialising every component

    @property
    def linked_encoder(self) -> Optional[str]:
        """The name of the encoder component it is linked to (None before linking)."""
        return self.attrs["upstream"]

    def layers_read(self) -> List[int]:
        """The normalised encoder layers this listener pools from (once linked)."""
        return pooler_layers(self.pooler)

    def drop_outputs_after_reading(self, drop: bool) -> None:
        """Whether reading a Doc's stored outputs marks them read by this listener, and deletes
        them when no other linked listener is left to read them."""
        self.attrs["drop_upstream_outputs"] = drop

    @classmethod
    def get_batch_id(cls, inputs: List[Doc]) -> int:
        """Identify a batch by its tokens, as spaCy's Tok2VecListener does (vectorised)."""
        return sum(int(doc.to_array(ORTH).sum()) for doc in inputs)

    def receive(self, batch_id: int, outputs: List[DocEncoding], backprop: Callable) -> None:
        """Take the encoder's outputs for a training batch and the callback that hands this listener's
        gradient back to it (called by `EncoderComponent.update`)."""
        self._batch_id = batch_id
        self._outputs = outputs
        self._backprop = backprop
        self._initializing = False

    def verify_inputs(self, inputs: List[Doc]) -> None:
        """A ValueError unless `inputs` are the Docs of the batch last received from the encoder."""
        if self.get_batch_id(inputs) != self._batch_id:
            raise ValueError(
                f"The encoder listener got a different batch than its encoder "
                f"({self.get_batch_id(inputs)} vs {self._batch_id}): the encoder and its "
                "listeners must be updated on the same docs"
            )


def _stored(model: EncoderListener, docs: List[Doc]) -> List[DocEncoding]:
    upstream = model.attrs["upstream"]
    if upstream is None:
        raise ConfigError(
            f"This listener (upstream '{model.upstream_name}') is not linked to any encoder "
            "component: add an encoder before the listening component"
        )
    out = []
    for doc in docs:
        store = doc._.get(DOC_EXTENSION) or {}
        if upstream not in store and model._initializing:
            out.append(_placeholder(model, doc))
            continue
        if upstream not in store:
            dropped = ("; or it ran, and with drop_outputs = true its outputs were deleted once every "
                       "listener had read them: run the encoder on the Doc again first, or set drop_outputs = "
                       f"false on '{upstream}' to keep them") if model.attrs["drop_upstream_outputs"] else ""
            raise ConfigError(
                f"Doc has no outputs of the encoder '{upstream}': the encoder component must run on a Doc "
                "before the components that listen to it. If the encoder is frozen during training, list it "
                "in [training] annotating_components too. (`spacy debug model` runs a component without its "
                f"upstream encoder, which it does only for spaCy's own tok2vec and transformer listeners.){dropped}"
            )
        enc = store[upstream]
        out.append(enc)
        model._initializing = False
        if model.attrs["drop_upstream_outputs"] and enc.unread_by is not None:
            enc.unread_by.discard(id(model))
            if not enc.unread_by:
                del store[upstream]
    return out


def _placeholder(model: EncoderListener, doc: Doc) -> DocEncoding:
    """Zero outputs of the right shape, for shape inference at initialisation only."""
    n = len(doc)
    zeros = model.ops.alloc2f(max(n, 1), pooler_input_width(model.pooler))
    return DocEncoding(
        layers={layer: zeros for layer in model.layers_read()},
        token_lengths=model.ops.xp.ones(n, dtype="int64"),
        token_pieces=model.ops.xp.arange(n, dtype="int64"),
    )


def _forward(model: EncoderListener, docs: List[Doc], is_train: bool) -> Tuple[List[Floats2d], Callable]:
    pooler = model.pooler
    if is_train and model._batch_id is not None:
        model.verify_inputs(docs)
        vectors, backprop_pooler = pooler(model._outputs, is_train)
        upstream_backprop = model._backprop
        # Read once: the batch is not kept past its step (a later frozen-encoder update
        # reads stored outputs, and the encoder's graph is not held alive by the listener).
        model._batch_id = model._outputs = model._backprop = None
        grad_factor = model.attrs["grad_factor"]

        def backprop(d_vectors: List[Floats2d]) -> List[Doc]:
            d_encodings = backprop_pooler(d_vectors)  # also fills the pooler's own gradients
            if grad_factor != 0.0:
                if grad_factor != 1.0:
                    d_encodings = [{k: v * grad_factor for k, v in d.items()} for d in d_encodings]
                upstream_backprop(d_encodings)
            else:
                upstream_backprop(None)  # no contribution, but the encoder still counts us
            return docs

        return vectors, backprop
    # Prediction, or training with a frozen encoder that annotated the docs.
    vectors, backprop_pooler = pooler(_stored(model, docs), is_train)

    def backprop_frozen(d_vectors: List[Floats2d]) -> List[Doc]:
        backprop_pooler(d_vectors)  # the listener's own weights (s, γ) still learn
        return docs

    return vectors, backprop_frozen


@registry.architectures("spacy-bertfam.EncoderListener.v1")
def encoder_listener_v1(
    width: int,
    upstream: str = "*",
    pooling: Optional[str] = None,
    layers: List[int] = [-1],
    combine: str = "scalar_mix",
    grad_factor: float = 1.0,
) -> Model[List[Doc], List[Floats2d]]:
    """Token vectors from a shared encoder component (bert_encoder, elmo_features, gpt_lm).

    width (int): output width: the encoder's width, × len(layers) for "concat", × 2 for "first_last".
    upstream (str): name of the encoder component, or "*" for any.
    pooling (Optional[str]): "mean" | "first" | "last" piece of each token, or "first_last" (both
        side by side: width × 2); null uses the encoder family's default (mean for BERT, last
        piece for GPT).
    layers (List[int]): layer outputs to use; 0 = embeddings, -1 = top.
        [-4, -3, -2, -1] with combine "concat" is BERT's feature-based setup.
    combine (str): "scalar_mix" (ELMo's learned γ·Σ softmax(s)_k h_k), "concat" or
        "mean"; irrelevant with one layer.
    grad_factor (float): scales the gradient sent to the encoder; 0 keeps it fixed.
    """
    return EncoderListener(
        upstream, build_pooler(width=width, pooling=pooling, layers=layers, combine=combine), grad_factor
    )
