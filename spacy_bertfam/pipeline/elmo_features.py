"""The `elmo_features` component: ELMo's biLM layers, mixed by each listener (scalar mix)."""
from .encoder import register_encoder_factory

DEFAULT_ELMO_MODEL = {"@architectures": "spacy-bertfam.ElmoBiLM.v1"}

make_elmo_features = register_encoder_factory(
    "elmo_features", DEFAULT_ELMO_MODEL,
    "ELMo features; listeners mix its layers with a learned scalar mix per task.",
)
