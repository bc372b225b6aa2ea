"""The encoder component shared by every family (bert_encoder, elmo_features, gpt_lm).

What it does with its encoder Model (see `encoders.contract` for the Model's side):
- One forward pass of the encoder per batch of Docs. Listeners in later components
  receive the batch's outputs during `update`; their gradients are accumulated and
  applied to the encoder once, when the last listener has backpropagated.
- Each Doc gets `doc._.bertfam[<component name>]`, a `DocEncoding`: piece-level
  outputs of the union of the layers its listeners (and doc.tensor) use, worked
  out when listeners are linked (`store_all_layers` keeps every layer), plus the
  piece<->token alignment. Listeners pool from there in prediction, so training,
  prediction and a frozen, annotating encoder compute the same thing.
  `drop_outputs` deletes the entry once every linked listener has read it.
- `doc.tensor` gets one vector per token (`tensor_pooling` of the token's pieces
  in `tensor_layer`) unless `set_doc_tensor` is false; `user_hooks` routes
  `.vector` and `.similarity` of docs, spans and tokens through it.
"""
import weakref
from typing import Callable, Dict, FrozenSet, Iterable, Iterator, List, Optional

from spacy.language import Language
from spacy.pipeline import TrainablePipe
from spacy.tokens import Doc
from spacy.training import Example, validate_examples
from spacy.vocab import Vocab
from thinc.api import Model

from ..encoders import DocEncoding, EncodedBatch, EncoderContract, contract_of
from ..errors import ConfigError
from ..pooling import check_pooling, pool_pieces, pooled_width
from ..processes import trim_freed_memory
from .hooks import install_vector_hooks
from .listener import DOC_EXTENSION, EncoderListener
from .pooled_encoder import replace_listener, replace_listener_cfg

# nlp.pipe's read-ahead buffer holds at most this many encoder calls' worth of tokens
# (2 × 4,096 by default), and glibc is asked to give freed pages back once per
# TRIM_EVERY_CALLS calls' worth. Trimming every call rather than every 4 (100k shuffled
# tokens, 3 alternating runs each): peak RSS 916 against 1,018 MiB, wall time +2.9%.
# (1-call buffers ran at 2,783 words/s against 3,477 with 4-call ones: sorting pays.)
READ_AHEAD_CALLS = 2
TRIM_EVERY_CALLS = 1

DEFAULT_COMPONENT_CONFIG = {
    "set_doc_tensor": True,
    "tensor_layer": -1,
    "tensor_pooling": None,
    "user_hooks": True,
    "store_all_layers": False,
    "drop_outputs": False,
    "sort_batches": 64,
    "precision": "fp32",
    "torch_compile": False,
    "trim_memory": True,
}


class _PipelineRef:
    """A weak reference to the pipeline that pickles as an empty one (spaCy's n_process
    pickles components where processes are spawned; drop_outputs then waits for every
    linked listener)."""

    def __init__(self, nlp: Optional[Language]):
        self._ref = weakref.ref(nlp) if nlp is not None else None

    def __call__(self) -> Optional[Language]:
        return self._ref() if self._ref is not None else None

    def __getstate__(self) -> dict:
        return {"_ref": None}


def _ensure_extension() -> None:
    if not Doc.has_extension(DOC_EXTENSION):
        Doc.set_extension(DOC_EXTENSION, default=None)


def _two_encoders_error(component_name: str, encoders: List[str]) -> ConfigError:
    return ConfigError(
        f"The listener of '{component_name}' has upstream '*' and follows {len(encoders)} encoders, "
        f"{' and '.join(repr(e) for e in encoders)}: set its upstream to the one it should read, e.g. "
        f"[components.{component_name}.model.tok2vec] upstream = \"{encoders[0]}\" (the block that holds "
        "the listener)"
    )


class EncoderComponent(TrainablePipe):
    """Runs a piece encoder over Docs, feeds its listeners and stores its outputs.

    vocab (Vocab): the pipeline's vocab.
    model (Model[List[Doc], EncodedBatch]): an encoder architecture.
    name (str): the component name; outputs are stored under it.
    set_doc_tensor (bool): write one vector per token to `doc.tensor`.
    tensor_layer (int): the layer doc.tensor is pooled from (-1 = top).
    tensor_pooling (Optional[str]): "mean" | "first" | "last" | "first_last" (2 × width); null =
        family default.
    user_hooks (bool): make `.vector`/`.similarity` use doc.tensor.
    store_all_layers (bool): store every layer on the Doc, not only those in use.
    drop_outputs (bool): delete the stored outputs once every linked listener of a component
        the pipeline runs has read them (components disabled with `nlp.select_pipes` or
        `nlp.disable_pipe` are not waited for; `nlp(text, disable=...)` is not seen).
    sort_batches (int): in `nlp.pipe`, read up to this many batches ahead (and at most
        `READ_AHEAD_CALLS` × the encoder's `batch_pieces` tokens) and encode them sorted
        by length (less padding); 1 sorts within each batch only.
    precision (str): "fp32" (default), "bf16" (bfloat16 on CPU or GPU: training under
        autocast; prediction with a bfloat16 copy of the weights, or autocast for ELMo), "fp16" (autocast to float16 with gradient scaling,
        GPU only) or "int8" (prediction on a CPU with int8 linear layers,
        activations quantized per token). Stored with the pipeline; a setting given at load time wins.
    torch_compile (bool): predict with the encoder compiled by `torch.compile` (BERT and
        GPT; needs a C++ compiler on a CPU, and compiles once per process, 15-30 s here).
        Training stays eager. Stored with the pipeline; a setting given at load time wins.
    trim_memory (bool): in prediction, have glibc give freed pages back to the system
        after each chunk of windows of a call of several (BERT, GPT) and every encoder
        call's worth of tokens in `nlp.pipe` (all families), so a long stream's RSS stays
        flat; it costs 4-16% of the words/s (bench/results/stream_memory.md). False where
        memory is plentiful and speed counts.
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
        sort_batches: int = 64,
        precision: str = "fp32",
        torch_compile: bool = False,
        trim_memory: bool = True,
        nlp: Optional[Language] = None,
    ):
        """nlp: the pipeline the component belongs to (the factories pass it); with it,
        `drop_outputs` waits only for the listeners of the components that run."""
        _ensure_extension()
        self._nlp = _PipelineRef(nlp)
        self.vocab = vocab
        self.model = model
        self.name = name
        self.listener_map: Dict[str, List[EncoderListener]] = {}
        self._deferred_sgd = None
        # The step's backprop while its last listener has not handed its gradient back:
        # see finish_update and _flush_backprop.
        self._pending_backprop: Optional[Callable[[None], None]] = None
        self.contract.layer_index(tensor_layer)
        if tensor_pooling is not None:
            check_pooling(tensor_pooling)
        if sort_batches < 1:
            raise ConfigError(f"{name}: sort_batches must be >= 1, got {sort_batches}")
        self.cfg = {
            "set_doc_tensor": set_doc_tensor,
            "tensor_layer": tensor_layer,
            "tensor_pooling": tensor_pooling,
            "user_hooks": user_hooks,
            "store_all_layers": store_all_layers,
            "drop_outputs": drop_outputs,
            "sort_batches": sort_batches,
            "precision": precision,
            "torch_compile": torch_compile,
            "trim_memory": trim_memory,
        }
        self.contract.request_precision(precision)
        self.contract.request_compile(torch_compile)
        self.contract.trim_memory = bool(trim_memory)
        # Read by nlp.replace_listeners (not serialised: functions are skipped).
        model.attrs["replace_listener"] = replace_listener
        model.attrs["replace_listener_cfg"] = replace_listener_cfg

    @property
    def contract(self) -> EncoderContract:
        """What the encoder Model offers (family, layers, width, tokenizer, ...)."""
        return contract_of(self.model)

    # -- listeners (spaCy's ListenedToComponent protocol) --------------------------
    @property
    def listeners(self) -> List[EncoderListener]:
        """Every linked listener, component by component; the last one triggers the encoder's backprop."""
        return [m for c in self.listening_components for m in self.listener_map[c]]

    @property
    def listening_components(self) -> List[str]:
        """Names of the components whose listeners are linked."""
        return list(self.listener_map.keys())

    def add_listener(self, listener: EncoderListener, component_name: str) -> None:
        """Link `listener` (in `component_name`): its layers, pooling and width are resolved against
        the contract. A listener with upstream "*" after two encoders that does not fit this one is
        refused with the advice to name its upstream, not with this encoder's width or layers."""
        try:
            listener.link(self.name, self.contract, where=f"the listener of '{component_name}' on '{self.name}'")
        except ConfigError:
            encoders = self._encoders_before(component_name) if listener.upstream_name == "*" else []
            if len(encoders) > 1:
                raise _two_encoders_error(component_name, encoders) from None
            raise
        self.listener_map.setdefault(component_name, [])
        if listener not in self.listener_map[component_name]:
            self.listener_map[component_name].append(listener)

    def remove_listener(self, listener: EncoderListener, component_name: str) -> bool:
        """Unlink `listener` from `component_name`; whether it was linked."""
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
        """Ask the model for exactly the layers in use; tell the listeners whether to drop outputs."""
        self._check_listeners_are_mine()
        contract = self.contract
        if self.cfg["store_all_layers"]:
            contract.request_layers(None)
        else:
            wanted = self._layers_read_here()
            for listener in self.listeners:
                wanted.update(listener.layers_read())
            contract.request_layers(sorted(wanted) or [-1])
        for listener in self.listeners:
            listener.drop_outputs_after_reading(self.cfg["drop_outputs"])

    def _check_listeners_are_mine(self) -> None:
        """A ConfigError if a listener this encoder feeds was linked to another encoder since: a
        listener with upstream "*" that fits two encoders is linked by both but reads one, so the
        other would train and store outputs for nothing. Checked at first use, not when spaCy links
        it, because spaCy links every component before it disables any."""
        for component_name, listeners in self.listener_map.items():
            for listener in listeners:
                if listener.linked_encoder not in (None, self.name):
                    raise _two_encoders_error(component_name, [self.name, listener.linked_encoder])

    def _encoders_before(self, component_name: str) -> List[str]:
        """The encoder components that precede `component_name` in the pipeline (spaCy links a
        listener to each of them), or this one alone where the pipeline is unknown."""
        nlp = self._nlp()  # a sourced component's may be the pipeline it came from
        if nlp is None or component_name not in nlp.pipe_names or not any(p is self for _, p in nlp.pipeline):
            return [self.name]
        names = nlp.pipe_names
        return [n for n in names[: names.index(component_name)] if isinstance(nlp.get_pipe(n), EncoderComponent)]

    def _layers_read_here(self) -> set:
        """The layers this component reads itself when annotating (doc.tensor's)."""
        return {self.cfg["tensor_layer"]} if self.cfg["set_doc_tensor"] else set()

    # -- prediction ---------------------------------------------------------------
    def predict(self, docs: Iterable[Doc]) -> EncodedBatch:
        """Encode `docs`, computing only the layers in use."""
        self._flush_backprop()
        self._sync()
        return self.model.predict(list(docs))

    def set_annotations(self, docs: Iterable[Doc], encodings: EncodedBatch) -> None:
        """Store each DocEncoding in doc._.bertfam[name]; set doc.tensor (and the vector hooks) if
        configured."""
        readers = self._readers() if self.cfg["drop_outputs"] else None
        for doc, enc in zip(docs, encodings):
            store = doc._.get(DOC_EXTENSION)
            if store is None:
                store = {}
                doc._.set(DOC_EXTENSION, store)
            store[self.name] = enc
            if readers is not None:
                enc.unread_by = set(readers)
            if self.cfg["set_doc_tensor"]:
                doc.tensor = self.token_vectors(enc)
                if self.cfg["user_hooks"]:
                    install_vector_hooks(doc)

    def _readers(self) -> FrozenSet[int]:
        """The linked listeners (by id) that will read this batch: those of the components the
        pipeline runs, so that a disabled one does not keep every Doc's outputs alive."""
        nlp = self._nlp()
        running = set(nlp.pipe_names) if nlp is not None else set(self.listener_map)
        return frozenset(id(listener) for component, listeners in self.listener_map.items()
                         if component in running for listener in listeners)

    def token_vectors(self, enc: DocEncoding):
        """(n_tokens, width) vectors for doc.tensor (twice the width with "first_last" pooling)."""
        layer = self.contract.layer_index(self.cfg["tensor_layer"])
        pooling = self.cfg["tensor_pooling"] or self.contract.default_pooling
        pieces = enc.layers[layer]
        if not len(enc.token_lengths):
            return self.model.ops.alloc2f(0, pooled_width(pooling, pieces.shape[1]))
        ops = self.model.ops
        vectors, _ = pool_pieces(ops, pieces, ops.asarray1i(enc.token_pieces), ops.asarray1i(enc.token_lengths), pooling)
        return vectors

    def pipe(self, stream: Iterable[Doc], *, batch_size: int = 128) -> Iterator[Doc]:
        """Encode docs sorted by length within a read-ahead buffer; yield in input order.

        The buffer holds up to `batch_size × sort_batches` docs, encoded in groups of
        about the model's `batch_pieces` tokens (and at most its `max_docs` Docs, where
        the encoder sets it: ELMo), so small batches of short texts do not each pay a
        separate encoder call. It also holds at most `READ_AHEAD_CALLS ×
        batch_pieces` tokens (a longer doc alone): every buffered Doc holds its outputs
        until the buffer is yielded, so without a token bound memory grew with the
        texts' length. Every `TRIM_EVERY_CALLS × batch_pieces` tokens, glibc gives freed
        pages back (`processes.trim_freed_memory`), as the encoder does after each chunk of
        windows in a call of several. Measured on 1M tokens (bench/stream_memory.py,
        drop_outputs): peak RSS 2.18 GB with 1,024-Doc buffers; 1.40 GB with a 4-call
        bound that a doc could overshoot and a trim after each buffer; 1.04-1.12 GB with
        the token bound (tweets and paragraphs shuffled, 2 runs); 758 MB with the trims
        after chunks too.
        """
        error_handler = self.get_error_handler()
        budget = self.contract.batch_pieces
        since_trim = 0
        for buffer in _read_ahead(stream, batch_size * self.cfg["sort_batches"], budget * READ_AHEAD_CALLS):
            if self.contract.trim_memory and since_trim >= budget * TRIM_EVERY_CALLS:  # a pipe over a few texts never pays for it
                trim_freed_memory()
                since_trim = 0
            since_trim += sum(len(doc) for doc in buffer)
            for docs in _groups_by_tokens(sorted(buffer, key=len), budget, self.contract.max_docs):
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
        loss column of this component then shows that LM loss. `drop` (spaCy's
        [training] dropout) does not reach the torch encoder: it applies the dropout
        of its own config (e.g. BERT's hidden_dropout) whenever it is trained.
        """
        if losses is None:
            losses = {}
        self._flush_backprop()
        validate_examples(examples, "EncoderComponent.update")
        losses.setdefault(self.name, 0.0)
        listeners = self.listeners
        if not listeners and not self.contract.lm_weight:
            return losses
        self._sync()
        docs = [eg.predicted for eg in examples]
        encodings, backprop_encoder = self.model.begin_update(docs)
        with_lm = encodings.lm_loss is not None
        if with_lm:
            losses[self.name] += encodings.lm_loss
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
            self._pending_backprop = None
            if with_lm or any(d_encodings):
                backprop_encoder(d_encodings)
                optimizer = sgd if sgd is not None else self._deferred_sgd
                if optimizer is not None:
                    self.model.finish_update(optimizer)
            self._deferred_sgd = None

        if not listeners:
            backprop(None)
            return losses
        self._pending_backprop = backprop
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
        if self._pending_backprop is not None:
            self._deferred_sgd = sgd
            return
        self.model.finish_update(sgd)

    def _flush_backprop(self) -> None:
        """Backpropagate the last training step if its last linked listener never handed its
        gradient back, with what the listeners that ran did hand back: that listener's
        component skipped its update (spaCy's ner skips a batch without entity annotation,
        e.g. a textcat batch of `batch_by_task`), or it was disabled or frozen. Called before
        the encoder is next used: a training step, a prediction or saving."""
        if self._pending_backprop is not None:
            self._pending_backprop(None)

    def to_bytes(self, *, exclude=tuple()) -> bytes:
        self._flush_backprop()
        return super().to_bytes(exclude=exclude)

    def to_disk(self, path, *, exclude=tuple()) -> None:
        self._flush_backprop()
        super().to_disk(path, exclude=exclude)

    def from_bytes(self, bytes_data: bytes, *, exclude=tuple()) -> "EncoderComponent":
        settings = dict(self.cfg)
        super().from_bytes(bytes_data, exclude=exclude)
        return self._keep_settings(settings)

    def from_disk(self, path, *, exclude=tuple()) -> "EncoderComponent":
        settings = dict(self.cfg)
        super().from_disk(path, exclude=exclude)
        return self._keep_settings(settings)

    def _keep_settings(self, settings: Dict) -> "EncoderComponent":
        """After loading, the settings the component was built with win over the saved
        cfg and contract: they are the saved config's unless the loader overrode them,
        e.g. spacy.load(path, config={"components": {name: {"precision": "int8"}}})."""
        self.cfg.update(settings)
        self.contract.request_precision(settings["precision"])
        self.contract.request_compile(settings["torch_compile"])
        self.contract.trim_memory = bool(settings["trim_memory"])
        return self

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
        self.model.shims[0].check_device(self.contract.precision)
        if encoder_loader is not None:
            encoder_loader(self.model)
        else:
            self.contract.check_initialised()
        self.model.initialize()
        self._sync()


def _read_ahead(stream: Iterable[Doc], max_docs: int, max_tokens: int) -> Iterator[List[Doc]]:
    """Consecutive docs of the stream in buffers of up to `max_docs` docs and `max_tokens`
    tokens (a longer doc alone): a doc that would overflow a buffer starts the next one,
    so every buffer stays within the bound."""
    buffer: List[Doc] = []
    tokens = 0
    for doc in stream:
        if buffer and tokens + len(doc) > max_tokens:
            yield buffer
            buffer, tokens = [], 0
        buffer.append(doc)
        tokens += len(doc)
        if len(buffer) == max_docs:
            yield buffer
            buffer, tokens = [], 0
    if buffer:
        yield buffer


def _groups_by_tokens(docs: List[Doc], budget: int, max_docs: Optional[int] = None) -> Iterator[List[Doc]]:
    group: List[Doc] = []
    tokens = 0
    for doc in docs:
        if group and (tokens + len(doc) > budget or len(group) == max_docs):
            yield group
            group, tokens = [], 0
        group.append(doc)
        tokens += len(doc)
    if group:
        yield group


def register_encoder_factory(name: str, default_model: Dict, doc: str):
    """Register a spaCy factory `name` making an EncoderComponent with the shared settings."""

    def make(nlp: Language, name: str, model: Model, set_doc_tensor: bool, tensor_layer: int,
             tensor_pooling: Optional[str], user_hooks: bool, store_all_layers: bool,
             drop_outputs: bool, sort_batches: int, precision: str, torch_compile: bool,
             trim_memory: bool) -> EncoderComponent:
        return EncoderComponent(
            nlp.vocab, model, name, set_doc_tensor=set_doc_tensor, tensor_layer=tensor_layer,
            tensor_pooling=tensor_pooling, user_hooks=user_hooks, store_all_layers=store_all_layers,
            drop_outputs=drop_outputs, sort_batches=sort_batches, precision=precision,
            torch_compile=torch_compile, trim_memory=trim_memory, nlp=nlp,
        )

    make.__doc__ = doc
    return Language.factory(name, default_config={"model": default_model, **DEFAULT_COMPONENT_CONFIG})(make)
