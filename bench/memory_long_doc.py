"""Peak RSS of one training update on a single Doc of URL-like tokens (~50,000 pieces).

spaCy's word-based batcher counts such a Doc as 50 words; the encoder sees hundreds of
windows. Prints the pieces, windows, seconds and peak RSS; run as
`python bench/memory_long_doc.py [--repeat N] [--tokens 50]`.
"""
import argparse
import resource
import time

import spacy
from spacy.training import Example


def build(ner: bool = True) -> spacy.language.Language:
    nlp = spacy.blank("en")
    nlp.add_pipe("bert_encoder")
    listener = {"@architectures": "spacy-bertfam.EncoderListener.v1", "width": 384}
    if ner:
        nlp.add_pipe("ner", config={"model": {"@architectures": "spacy.TransitionBasedParser.v2", "state_type": "ner",
                                              "extra_state_tokens": False, "hidden_width": 64, "maxout_pieces": 2,
                                              "use_upper": True, "tok2vec": listener}})
    nlp.add_pipe("textcat", config={"model": {"@architectures": "spacy.TextCatReduce.v1", "exclusive_classes": True,
                                              "use_reduce_first": False, "use_reduce_last": False,
                                              "use_reduce_max": False, "use_reduce_mean": True, "tok2vec": listener}})
    nlp.config["initialize"]["components"]["bert_encoder"] = {
        "encoder_loader": {"@misc": "spacy-bertfam.PretrainedLoader.v1", "name": "all-MiniLM-L6-v2"}}
    return nlp


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=500, help="'a/' repeats per token")
    parser.add_argument("--no-ner", action="store_true", help="bert_encoder + textcat only")
    args = parser.parse_args()
    nlp = build(ner=not args.no_ner)
    text = " ".join(["https://a.b/" + "a/" * args.repeat] * args.tokens)
    doc = nlp.make_doc(text)
    annotation = {"cats": {"LINK": 1.0, "TEXT": 0.0}, **({} if args.no_ner else {"entities": [(0, 12, "URL")]})}
    example = Example.from_dict(doc, annotation)
    optimizer = nlp.initialize(lambda: [example])
    pieces = sum(len(w) for w in nlp.get_pipe("bert_encoder").contract.tokenizer.encode_words([[t.text for t in doc]])[0])
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    start = time.perf_counter()
    losses = nlp.update([example], sgd=optimizer)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"tokens {len(doc)}  pieces {pieces}  update {seconds:.1f} s  peak RSS {peak:.0f} MB "
          f"(before the update {before:.0f} MB)  losses {losses}")


if __name__ == "__main__":
    main()
