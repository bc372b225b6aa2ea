"""spacy-bertfam: BERT, ELMo and GPT encoders for spaCy, implemented in PyTorch."""
from . import architectures, loaders, processes  # noqa: F401  (registers functions, fork and msgpack hooks)
from .corpora.squad import make_qa_doc  # noqa: F401
from .pipeline.bert_encoder import make_bert_encoder  # noqa: F401
from .pipeline.elmo_features import make_elmo_features  # noqa: F401
from .pipeline.encoder import EncoderComponent  # noqa: F401
from .pipeline.gpt_lm import GptLmComponent, make_gpt_lm  # noqa: F401
from .pipeline.listener import EncoderListener  # noqa: F401
from .pipeline.partial_textcat import PartialTextCategorizer, make_partial_textcat  # noqa: F401
from .pipeline.questions import Answer, ask, ask_all  # noqa: F401
from .pipeline.span_qa import SpanQA, make_span_qa  # noqa: F401

__version__ = "0.1.0"
