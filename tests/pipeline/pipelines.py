"""Tiny pipelines with a shared BERT encoder and listening ner/textcat components."""
from typing import Dict, List, Optional

import spacy
from spacy.language import Language
from spacy.training import Example

TINY_ENCODER = {
    "@architectures": "spacy-bertfam.BertEncoder.v1",
    "n_pieces": 120, "hidden_width": 32, "n_layers": 3, "n_heads": 4,
    "intermediate_width": 64, "n_positions": 64, "window": 64, "stride": 48,
}

TRAIN = [
    ("the cat sat on the mat", {"entities": [(4, 7, "ANIMAL")], "cats": {"PET": 1.0, "PLACE": 0.0}}),
    ("hello river bank", {"entities": [(6, 11, "PLACE")], "cats": {"PET": 0.0, "PLACE": 1.0}}),
    ("the dog ran to the river", {"entities": [(4, 7, "ANIMAL"), (19, 24, "PLACE")], "cats": {"PET": 1.0, "PLACE": 0.0}}),
    ("world bank on the mat", {"entities": [(0, 10, "PLACE")], "cats": {"PET": 0.0, "PLACE": 1.0}}),
]


def listener(width: int = 32, **settings) -> Dict:
    return {"@architectures": "spacy-bertfam.EncoderListener.v1", "width": width, **settings}


def build(checkpoint, *, ner: Optional[Dict] = None, textcat: Optional[Dict] = None,
          encoder: Optional[Dict] = None, textcat_first: bool = False) -> Language:
    """bert_encoder + ner (+ textcat, after ner unless `textcat_first`) with listeners
    configured by `ner`/`textcat`; initialised."""
    nlp = spacy.blank("en")
    nlp.add_pipe("bert_encoder", config={"model": TINY_ENCODER, **(encoder or {})})
    nlp.add_pipe("ner", config={"model": {
        "@architectures": "spacy.TransitionBasedParser.v2", "state_type": "ner",
        "extra_state_tokens": False, "hidden_width": 32, "maxout_pieces": 2, "use_upper": True,
        "tok2vec": listener(**(ner or {})),
    }})
    if textcat is not None:
        nlp.add_pipe("textcat", config={"model": {
            "@architectures": "spacy.TextCatReduce.v1", "exclusive_classes": True,
            "use_reduce_first": False, "use_reduce_last": False, "use_reduce_max": False,
            "use_reduce_mean": True, "tok2vec": listener(**textcat),
        }}, before="ner" if textcat_first else None)
    nlp.config["initialize"]["components"]["bert_encoder"] = {
        "encoder_loader": {"@misc": "spacy-bertfam.CheckpointLoader.v1", "path": str(checkpoint)}
    }
    nlp.initialize(lambda: examples(nlp))
    return nlp


def examples(nlp: Language) -> List[Example]:
    return [Example.from_dict(nlp.make_doc(text), ann) for text, ann in TRAIN]


def predictions(nlp: Language):
    """Entities and category scores for the training texts."""
    docs = list(nlp.pipe([text for text, _ in TRAIN]))
    return [([(e.start_char, e.end_char, e.label_) for e in d.ents], dict(d.cats)) for d in docs]
