"""Registered names stay registered, and resolve through entry points alone."""
import subprocess
import sys

REGISTERED = {
    "architectures": [
        "spacy-bertfam.BertEncoder.v1",
        "spacy-bertfam.GptDecoder.v1",
        "spacy-bertfam.ElmoBiLM.v1",
        "spacy-bertfam.EncoderListener.v1",
        "spacy-bertfam.PooledEncoder.v1",
        "spacy-bertfam.SpanQA.v1",
    ],
    "misc": ["spacy-bertfam.CheckpointLoader.v1", "spacy-bertfam.PretrainedLoader.v1",
             "spacy-bertfam.RandomInit.v1", "spacy-bertfam.TextCorpus.v1", "spacy-bertfam.BertPretraining.v1",
             "spacy-bertfam.GptPretraining.v1", "spacy-bertfam.ElmoPretraining.v1"],
    "factories": ["bert_encoder", "gpt_lm", "elmo_features", "span_qa"],
    "readers": ["spacy-bertfam.QACorpus.v1"],
    "scorers": ["spacy-bertfam.span_qa_scorer.v1"],
}


def test_names_resolve_without_importing_the_package():
    lines = ["from spacy.util import registry", "import sys"]
    for reg, names in REGISTERED.items():
        for name in names:
            lines.append(f"registry.{reg}.get({name!r})")
    subprocess.run([sys.executable, "-c", "\n".join(lines)], check=True)
