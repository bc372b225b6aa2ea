"""The encoder contract: what an encoder Model offers its component and its listeners.

Every family's thinc encoder Model (`spacy-bertfam.BertEncoder.v1`, `GptDecoder.v1`,
`ElmoBiLM.v1`) maps a batch of Docs to an `EncodedBatch` and carries one
`EncoderContract` (read it with `contract_of(model)`). The rest of the library talks to
an encoder only through these two objects:

- `EncoderContract` says what the encoder is (family, number of layer outputs, width,
  default pooling, whether it encodes sentence pairs, its tokenizer, where its weights
  came from) and holds what its component asks of it (which layers to compute, the
  weight of an auxiliary LM loss). The component sets the requests through methods;
  loaders set the weights' source and tokenizer.
- `EncodedBatch` is the forward pass's value: one `DocEncoding` per Doc (piece-level
  outputs of the requested layers and the piece<->token alignment) and, when an LM
  loss was asked for in training, its value.

Layer indices are Python style where a user writes them (-1 = top) and normalised to
0..n_layers-1 (0 = embedding output) everywhere else.
"""
import contextlib
import copy
from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional, Sequence, Set

import srsly
import torch
from thinc.api import Model, PyTorchGradScaler, PyTorchShim
from thinc.model import deserialize_attr, serialize_attr
from thinc.types import Floats2d, Ints1d
from torch import nn

from ..errors import ConfigError
from ..models.quantize import int8_copy
from ..tokenization import PieceTokenizer
from . import adam
from .cpu_support import fast_on_cpu, warn_if_emulated

CONTRACT = "contract"  # the one Model.attrs key an encoder Model is found by
_DOC_ENCODING_TAG = "__spacy_bertfam.DocEncoding__"
PRECISIONS = ("fp32", "bf16", "fp16", "int8")
AUTOCAST_DTYPES = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16, "int8": None}

# Per family: a loader block that works, how to make a checkpoint for it, and the
# override by which the shipped configs point at one.
_LOADER_HINTS = {
    "bert": '@misc = "spacy-bertfam.PretrainedLoader.v1"\nname = "all-MiniLM-L6-v2"',
    "gpt": '@misc = "spacy-bertfam.CheckpointLoader.v1"\npath = "training/gpt_pretrain/final"',
    "elmo": '@misc = "spacy-bertfam.CheckpointLoader.v1"\npath = "training/elmo_pretrain/final"',
}
# The component that runs each family's encoder.
COMPONENTS = {"bert": "bert_encoder", "gpt": "gpt_lm", "elmo": "elmo_features"}
_MAKE_CHECKPOINT = {
    "bert": ("python -m spacy_bertfam download all-MiniLM-L6-v2 (then spacy-bertfam.PretrainedLoader.v1), or "
             "python -m spacy bertfam-pretrain configs/pretrain_bert.cfg training/bert_pretrain", "encoder_checkpoint"),
    "gpt": ("python -m spacy bertfam-pretrain configs/pretrain_gpt.cfg training/gpt_pretrain", "gpt_checkpoint"),
    "elmo": ("python -m spacy bertfam-pretrain configs/pretrain_elmo.cfg training/elmo_pretrain", "elmo_checkpoint"),
}


@dataclass
class DocEncoding:
    """An encoder's output for one Doc, at piece level.

    layers: normalised layer index -> (n_pieces, width) array, for the requested layers.
    token_lengths: (n_tokens,) pieces per spaCy token (each >= 1).
    token_pieces: (sum(token_lengths),) piece indices of each token, token by token.
    """

    layers: Dict[int, Floats2d]
    token_lengths: Ints1d
    token_pieces: Ints1d
    # With the encoder's `drop_outputs`: the linked listeners (by id) that have not read this
    # yet; the one that reads it last deletes it from the Doc, whatever order components run in.
    # None (outputs not set by this process's encoder, e.g. read back from a DocBin): never deleted.
    unread_by: Optional[Set[int]] = field(default=None, compare=False, repr=False)

    @property
    def n_pieces(self) -> int:
        """Pieces in the Doc (0 when no layer is stored)."""
        return 0 if not self.layers else int(next(iter(self.layers.values())).shape[0])


@srsly.msgpack_encoders("spacy_bertfam.DocEncoding")
def encode_doc_encoding(obj, chain=None):
    """msgpack form of a `DocEncoding` (its arrays go through srsly's NumPy encoder)."""
    if isinstance(obj, DocEncoding):
        return {_DOC_ENCODING_TAG: True, "layers": {str(k): _host(v) for k, v in obj.layers.items()},
                "token_lengths": _host(obj.token_lengths), "token_pieces": _host(obj.token_pieces)}
    return obj if chain is None else chain(obj)


def _host(array):
    """A NumPy array (CuPy arrays are copied back to the host)."""
    return array.get() if hasattr(array, "get") else array


@srsly.msgpack_decoders("spacy_bertfam.DocEncoding")
def decode_doc_encoding(obj, chain=None):
    """The inverse of `encode_doc_encoding`."""
    if isinstance(obj, dict) and obj.get(_DOC_ENCODING_TAG):
        return DocEncoding(layers={int(k): v for k, v in obj["layers"].items()},
                           token_lengths=obj["token_lengths"], token_pieces=obj["token_pieces"])
    return obj if chain is None else chain(obj)


@dataclass
class EncodedBatch(Sequence[DocEncoding]):
    """The value of an encoder's forward pass: a sequence of `DocEncoding`s, one per Doc.

    lm_loss: the mean next-piece cross-entropy of the batch when the contract asked for
        an LM loss in training (causal families), else None. Its gradient, scaled by
        the requested weight, is part of the same backward pass.
    """

    docs: List[DocEncoding]
    lm_loss: Optional[float] = None

    def __getitem__(self, index):  # type: ignore[override]
        return self.docs[index]

    def __len__(self) -> int:
        return len(self.docs)

    def __iter__(self) -> Iterator[DocEncoding]:
        return iter(self.docs)


@dataclass
class EncoderContract:
    """What an encoder Model is, and what its component currently asks of it.

    family (str): "bert", "gpt" or "elmo".
    n_layers (int): layer outputs, the embedding output included.
    width (int): width of every layer output.
    default_pooling (str): how a token's pieces are pooled unless a listener says
        otherwise ("mean"; "last" for causal decoders).
    pairs (bool): encodes sentence pairs jointly (a Doc with a first segment, see
        `tokenization.words`, as [CLS] A [SEP] B [SEP]); families without a separator
        encode A and B as two sequences of their own.
    tokenizer (Optional[PieceTokenizer]): the piece vocabulary, empty until a loader
        fills it; None for ELMo, which reads characters.
    batch_pieces (int): the padded positions per encoder call the encoder is built
        for; `nlp.pipe` groups Docs by about this many tokens.
    max_docs (Optional[int]): at most this many Docs per encoder call in `nlp.pipe`
        (ELMo: the rows each LSTM step multiplies); None bounds a call by tokens alone.
    source (str): where the weights came from; "" until a loader ran.
    layers (Optional[List[int]]): requested layers (normalised); None = every layer.
    lm_weight (float): requested weight of the auxiliary LM loss in training (0 = off).
    precision (str): "fp32", "bf16" (training: autocast to bfloat16, CPU or GPU;
        prediction: a bfloat16 copy of the weights for the transformer families, autocast
        for ELMo), "fp16" (autocast to float16 with gradient scaling, GPU only) or "int8"
        (prediction only, on a CPU: int8 linear layers, activations quantized per token)
        for the encoder's forward.
    torch_compile (bool): predict with the encoder compiled by `torch.compile` (the
        transformer families; training stays eager).
    trim_memory (bool): in prediction, give freed pages back to the system after each
        chunk of windows (see the encoder component's setting of that name).
    """

    family: str
    n_layers: int
    width: int
    default_pooling: str
    pairs: bool = False
    tokenizer: Optional[PieceTokenizer] = None
    batch_pieces: int = 4096
    max_docs: Optional[int] = None
    source: str = ""
    layers: Optional[List[int]] = field(default=None)
    lm_weight: float = 0.0
    precision: str = "fp32"
    torch_compile: bool = False
    trim_memory: bool = True

    def layer_index(self, index: int) -> int:
        """Python-style layer index (-1 = top) -> 0..n_layers-1; a ConfigError names the range."""
        if not -self.n_layers <= index < self.n_layers:
            raise ConfigError(
                f"Layer {index} does not exist: this encoder has {self.n_layers} layer outputs "
                f"(0 = embeddings .. {self.n_layers - 1}, or -1 .. -{self.n_layers})"
            )
        return index % self.n_layers

    def request_layers(self, layers: Optional[Sequence[int]]) -> None:
        """Compute only these layers (any index style); None computes every layer."""
        self.layers = None if layers is None else sorted({self.layer_index(i) for i in layers})

    def requested_layers(self) -> List[int]:
        """The normalised layers the forward pass computes outputs for."""
        return list(range(self.n_layers)) if self.layers is None else list(self.layers)

    def request_lm_loss(self, weight: float) -> None:
        """Ask for weight × the LM loss in training (causal families only; 0 = off)."""
        if weight < 0:
            raise ConfigError(f"lm_weight must be >= 0, got {weight}")
        if weight and self.family != "gpt":
            raise ConfigError(f"{self.family} encoders have no causal LM loss; lm_weight must be 0")
        self.lm_weight = float(weight)

    def request_precision(self, precision: str) -> None:
        """Run the forward pass in `precision` (see the class docstring); "int8" is refused
        for ELMo, whose LSTM steps read their weights directly, not through linear layers."""
        if precision not in PRECISIONS:
            raise ConfigError(f"Unknown precision '{precision}'; expected one of {PRECISIONS}")
        if precision == "int8" and self.family == "elmo":
            raise ConfigError('precision "int8" (int8 linear layers) is for bert_encoder and gpt_lm; elmo_features '
                              'runs in "fp32" or "bf16": set precision = "bf16" for reduced precision.')
        self.precision = precision

    def request_compile(self, torch_compile: bool) -> None:
        """Predict with the compiled encoder (or not); the biLSTM (ELMo) is refused: its loop
        over time steps would be compiled again for every sentence length."""
        if torch_compile and self.family == "elmo":
            raise ConfigError("torch_compile is for the transformer encoders (bert_encoder, gpt_lm): ELMo's biLSTM "
                              "steps through time in Python, which torch.compile would compile again for every "
                              "sentence length. Set torch_compile = false for elmo_features.")
        self.torch_compile = bool(torch_compile)

    @property
    def is_initialised(self) -> bool:
        """Whether a loader has set the weights (`source` is set)."""
        return bool(self.source)

    def check_initialised(self) -> None:
        """A clear error, with a loader that works for this family, before any forward pass."""
        if not self.is_initialised:
            raise ConfigError(
                f"The {self.family} encoder was never initialised: there are no weights to initialise "
                f"from. Set an encoder loader, e.g.\n[initialize.components.<name>.encoder_loader]\n"
                f"{_LOADER_HINTS.get(self.family, '')}\n(or spacy-bertfam.RandomInit.v1 for random weights). "
                + self.checkpoint_hint()
            )

    def checkpoint_hint(self) -> str:
        """How to make a checkpoint for this family, and how to point a shipped config at one."""
        command, var = _MAKE_CHECKPOINT.get(self.family, ("", ""))
        return (f"To make one for {self.family}:\n    {command}\nor point the config at an existing one "
                f"(the shipped configs: --paths.{var} PATH)")

    def to_dict(self) -> Dict:
        """A msgpack-able dict, the tokenizer as its tokenizer.json string: how the contract is saved
        with its Model."""
        data = {k: v for k, v in self.__dict__.items() if k != "tokenizer"}
        data["tokenizer"] = None if self.tokenizer is None else self.tokenizer.to_json()
        return data

    @classmethod
    def from_dict(cls, data: Dict) -> "EncoderContract":
        """The contract that `to_dict` wrote."""
        data = dict(data)
        tok = data.pop("tokenizer", None)
        return cls(**data, tokenizer=None if tok is None else PieceTokenizer.from_json(tok))


@serialize_attr.register(EncoderContract)
def _serialize_contract(_: EncoderContract, value: EncoderContract, name: str, model: Model) -> bytes:
    return srsly.msgpack_dumps(value.to_dict())


@deserialize_attr.register(EncoderContract)
def _deserialize_contract(_: EncoderContract, value: bytes, name: str, model: Model) -> EncoderContract:
    return EncoderContract.from_dict(srsly.msgpack_loads(value))


class EncoderShim(PyTorchShim):
    """thinc's PyTorch shim, with the torch encoder it runs as a public attribute and
    the precision it runs in.

    With precision "int8", prediction runs an int8 copy of the module (`models.quantize`; its
    feed-forward output projections in bfloat16 where the CPU has bf16 instructions, else fp32);
    with "bf16" and `bf16_weights` (the transformer families), a bfloat16 copy, whose
    whole forward runs in bfloat16: autocast would convert activations between float32
    and bfloat16 around every layer norm and residual sum, which cost a sixth of the
    encoder's time (prediction on prose: 1.2-1.4× faster without, relative error of the
    outputs 1.4% against autocast's 0.8%). Either copy is made at the first prediction and
    again after the weights change (an update, loading, averaged parameters); training
    refuses int8 and trains bf16 under autocast, with float32 weights.

    With `torch_compile`, prediction runs the wrapper around `torch.compile` of the same
    encoder (shared weights, read at each call, so updates need no recompiling), compiled
    once for any batch shape (`dynamic=True`) at the first prediction.
    """

    _scales_gradients = False
    _copy_dtype: Optional[torch.dtype] = None  # torch.int8 or torch.bfloat16: predict with such a copy
    _copied_model: Optional[nn.Module] = None
    _compiles = False
    _compiled_model: Optional[nn.Module] = None

    def use_precision(self, precision: str, bf16_weights: bool = False) -> Optional[torch.dtype]:
        """The autocast dtype for `precision`; float16 also turns on thinc's gradient
        scaling, which float16 needs and bfloat16 does not. bf16_weights: predict "bf16"
        with a bfloat16 copy (see the class docstring) rather than under autocast."""
        self.check_device(precision)
        if self.device.type == "cpu":
            warn_if_emulated(precision)
        copy_dtype = {"int8": torch.int8, "bf16": torch.bfloat16 if bf16_weights else None}.get(precision)
        if copy_dtype != self._copy_dtype:
            self._copy_dtype, self._copied_model = copy_dtype, None
        if precision == "fp16" and not self._scales_gradients:  # thinc scales and unscales gradients
            self._grad_scaler = PyTorchGradScaler(enabled=True)
            self._grad_scaler.to_(self.device)
            self._scales_gradients = True
        return AUTOCAST_DTYPES[precision]

    def check_device(self, precision: str) -> None:
        """A ConfigError where `precision` cannot run on the encoder's device (checked when
        the component is initialised too, so `spacy train` stops before its first step)."""
        if precision == "fp16" and self.device.type != "cuda":
            raise ConfigError('precision "fp16" needs a GPU (torch autocast to float16 on CUDA); '
                              'use "bf16" on a CPU, or run on a GPU (spacy train --gpu-id 0; in Python, '
                              'spacy.require_gpu() before loading the pipeline)')
        if precision == "int8" and self.device.type != "cpu":
            raise ConfigError('precision "int8" (int8 linear layers) runs on a CPU only; '
                              'use "bf16" or "fp16" on a GPU')

    @property
    def encoder(self) -> nn.Module:
        """The family's torch module (e.g. `BertEncoder`) inside the shim's wrapper."""
        return self._model.encoder

    def copy(self) -> "EncoderShim":
        """A deep copy without the int8, bfloat16 or compiled module: the copy makes its own
        from its own weights when it first predicts."""
        derived = self._copied_model, self._compiled_model
        self._copied_model = self._compiled_model = None
        try:
            return super().copy()
        finally:
            self._copied_model, self._compiled_model = derived

    def use_compile(self, torch_compile: bool) -> None:
        """Predict with the compiled encoder (see the class docstring) or not."""
        if torch_compile and self._copy_dtype == torch.int8:
            raise ConfigError('torch_compile does not apply to precision "int8" (an int8 copy of the encoder '
                              'runs then): use it with "fp32", "bf16" or "fp16", or set torch_compile = false')
        self._compiles = torch_compile

    def predict(self, inputs):
        if self._compiles:
            return self._predict_compiled(inputs)
        if self._copy_dtype is None:
            return super().predict(inputs)
        if self._copied_model is None:
            self._copied_model = (int8_copy(self._model, kept_dtype=torch.bfloat16 if fast_on_cpu("bf16") else torch.float32,
                                            calibrate=getattr(type(self._model), "calibration_pass", None))
                                  if self._copy_dtype == torch.int8
                                  else copy.deepcopy(self._model).eval().to(self._copy_dtype))
        with torch.no_grad():  # the copy is in its precision throughout: no autocast
            return self._copied_model(*inputs.args, **{**inputs.kwargs, "autocast": None})

    def _predict_compiled(self, inputs):
        if self._compiled_model is None:
            # A new wrapper of the same class around the compiled encoder: nothing is copied,
            # and the compiled module is kept out of the wrapper's state_dict. Unpacked: the
            # count of real positions would be one more dynamic size to compile for.
            self._compiled_model = type(self._model)(torch.compile(self._model.encoder, dynamic=True), pack=False)
        self._model.eval()
        try:
            with torch.no_grad():
                return self._compiled_model(*inputs.args, **inputs.kwargs)
        except torch._dynamo.exc.BackendCompilerFailed as e:
            raise RuntimeError(
                "torch_compile = true, but torch.compile could not compile the encoder (on a CPU it needs a C++ "
                "compiler such as gcc; on a GPU, Triton). Install one, or set torch_compile = false on the "
                f"encoder component. torch said: {str(e).splitlines()[0] if str(e) else type(e).__name__}"
            ) from e
        finally:
            self._model.train()

    def begin_update(self, inputs):
        if self._copy_dtype == torch.int8:
            raise ConfigError('precision "int8" is for prediction only: train with "fp32" or "bf16", then set '
                              'precision = "int8" on the encoder component of the trained pipeline, e.g. '
                              'spacy.load(path, config={"components": {"<encoder>": {"precision": "int8"}}})')
        return super().begin_update(inputs)

    def finish_update(self, optimizer) -> None:
        """thinc's Adam, done in place with torch ops on a CPU (`encoders.adam`); anything else
        through thinc, with sparse gradients (the piece table's on a CPU) made dense."""
        if self.device.type == "cpu" and adam.handles(optimizer):
            adam.adam_step(self._model, optimizer, self.id)
        else:
            for param in self._model.parameters():  # thinc reads gradients as dense arrays
                if param.grad is not None and param.grad.is_sparse:
                    param.grad = param.grad.to_dense()
            super().finish_update(optimizer)
        self.forget_copy()

    def forget_copy(self) -> None:
        """Drop the int8/bf16 copy made for prediction: the weights changed in place (a
        training step, a loaded checkpoint), so the next prediction copies them again."""
        self._copied_model = None

    def from_bytes(self, bytes_data):
        self.forget_copy()
        return super().from_bytes(bytes_data)

    @contextlib.contextmanager
    def use_params(self, params):
        self.forget_copy()
        with super().use_params(params):
            yield
        self.forget_copy()


def contract_of(model: Model) -> EncoderContract:
    """The contract of an encoder Model; a clear error for any other Model."""
    contract = model.attrs.get(CONTRACT)
    if not isinstance(contract, EncoderContract):
        raise TypeError(
            f"'{model.name}' is not a spacy-bertfam encoder (BertEncoder.v1, GptDecoder.v1 or ElmoBiLM.v1)"
        )
    return contract


def torch_encoder(model: Model) -> nn.Module:
    """The torch encoder (e.g. `BertEncoder`, `GptDecoder`, `ElmoBiLM`) of an encoder Model."""
    contract_of(model)
    return model.shims[0].encoder
