"""Command line: `python -m spacy_bertfam {download,demo,init-encoder,init-config,convert-ner,convert-textcat,
convert-squad,evaluate-qa}`.

Pretraining is a spaCy command: `python -m spacy bertfam-pretrain` (pretraining/cli.py).
"""
import argparse
import re
import sys
from pathlib import Path
from typing import List, Optional

from confection import ConfigValidationError

from .errors import InputError


def main(argv: Optional[List[str]] = None) -> int:
    """The `python -m spacy_bertfam` command line (argv: None reads sys.argv); returns the exit status."""
    from .pretrained import PACKAGED

    parser = argparse.ArgumentParser(prog="python -m spacy_bertfam")
    sub = parser.add_subparsers(dest="command", required=True)
    dl = sub.add_parser("download", help="install a packaged pretrained model (explicit, no deps)")
    dl.add_argument("name", choices=sorted(PACKAGED))
    dl.add_argument("--force", action="store_true", help="reinstall even if present")
    demo = sub.add_parser("demo", help="entities, categories and answers of en_bertfam (or MODEL) on a sample text")
    demo.add_argument("model", nargs="?", default="en_bertfam", help="package name or pipeline folder")
    demo.add_argument("--html", type=Path, help="also write displaCy's rendering of the entities and answers here")
    init = sub.add_parser("init-encoder", help="save a pipeline holding an initialised bert_encoder")
    init.add_argument("output")
    source = init.add_mutually_exclusive_group()
    source.add_argument("--pretrained", default="all-MiniLM-L6-v2", help="packaged model name")
    source.add_argument("--checkpoint", help="checkpoint directory (ours or Hugging Face BERT)")
    config = sub.add_parser("init-config", help="a spacy train config whose encoder fits a checkpoint (sizes read from it)")
    config.add_argument("checkpoint", help="checkpoint directory (ours, Hugging Face BERT/GPT, bilm-tf ELMo) or a packaged name")
    config.add_argument("output", help="the .cfg file to write")
    config.add_argument("--pipeline", default="ner", help="comma-separated tasks: ner, textcat, textcat_multilabel")
    ner = sub.add_parser("convert-ner", help="CoNLL token/tag file -> .spacy (tab-only lines break sentences)")
    ner.add_argument("input")
    ner.add_argument("output")
    cat = sub.add_parser("convert-textcat", help="text,category CSV -> train.spacy + dev.spacy")
    cat.add_argument("input")
    cat.add_argument("output_dir", nargs="?", help="writes OUTPUT_DIR/train.spacy and OUTPUT_DIR/dev.spacy")
    cat.add_argument("--train-output", help="the train .spacy file (instead of OUTPUT_DIR/train.spacy)")
    cat.add_argument("--dev-output", help="the held-out .spacy file (instead of OUTPUT_DIR/dev.spacy)")
    cat.add_argument("--heldout", type=float, default=0.1,
                     help="fraction held out as dev; 0 converts the whole file into the train output")
    cat.add_argument("--seed", type=int, default=0)
    squad = sub.add_parser("convert-squad", help="SQuAD v1.1/v2.0 JSON -> .spacy of QA Docs for span_qa")
    squad.add_argument("input")
    squad.add_argument("output")
    squad.add_argument("--articles", help="START:END slice of the file's articles (to split by article)")
    qa_eval = sub.add_parser("evaluate-qa", help="SQuAD exact/F1 of a span_qa pipeline on a .spacy of QA Docs "
                             "(spacy evaluate re-tokenizes and loses the question mark-up)")
    qa_eval.add_argument("model")
    qa_eval.add_argument("data")
    qa_eval.add_argument("--output", help="write the scores to this JSON file")
    qa_eval.add_argument("--tune-threshold", action="store_true",
                         help="choose the no-answer threshold tau on DATA (SQuAD 2.0) and save it into MODEL")
    args = parser.parse_args(argv)
    try:
        if args.command == "download":
            from .pretrained import download

            print(f"Installed {args.name} at {download(args.name, force=args.force)}")
        elif args.command == "demo":
            from .demo import run

            print(run(args.model, html=args.html))
        elif args.command == "init-encoder":
            _init_encoder(args.output, args.pretrained, args.checkpoint)
        elif args.command == "init-config":
            from .init_config import init_config

            config = init_config(args.checkpoint, args.pipeline.split(","))
            Path(args.output).parent.mkdir(parents=True, exist_ok=True)
            config.to_disk(args.output)
            print(f"Wrote {args.output}: train with python -m spacy train {args.output} "
                  "--paths.train TRAIN.spacy --paths.dev DEV.spacy")
        elif args.command == "convert-ner":
            _convert_ner(args.input, args.output)
        elif args.command == "convert-textcat":
            if args.output_dir is None and not (args.train_output and (args.dev_output or args.heldout == 0)):
                parser.error("convert-textcat needs OUTPUT_DIR, or --train-output and --dev-output "
                             "(--train-output alone with --heldout 0)")
            if args.heldout == 0 and args.dev_output:
                parser.error("convert-textcat: --heldout 0 holds nothing out, so there is no --dev-output to "
                             "write; leave it out, or give a fraction to hold out")
            out = Path(args.output_dir or ".")
            _convert_textcat(args.input, Path(args.train_output or out / "train.spacy"),
                             Path(args.dev_output or out / "dev.spacy"), args.heldout, args.seed)
        elif args.command == "convert-squad":
            _convert_squad(args.input, args.output, args.articles)
        elif args.command == "evaluate-qa":
            _evaluate_qa(args.model, args.data, args.output, args.tune_threshold)
    except (ConfigValidationError, InputError) as e:  # what the command was pointed at: the message, no traceback
        parser.exit(1, f"{parser.prog} {args.command}: {str(e).strip()}\n")
    return 0


def _init_encoder(output: str, pretrained: str, checkpoint: Optional[str]) -> None:
    import spacy

    from .loaders import checkpoint_loader, pretrained_loader

    nlp = spacy.blank("en")
    encoder = nlp.add_pipe("bert_encoder")
    loader = checkpoint_loader(checkpoint) if checkpoint else pretrained_loader(pretrained)
    encoder.initialize(lambda: [], nlp=nlp, encoder_loader=loader)
    Path(output).parent.mkdir(parents=True, exist_ok=True)
    nlp.to_disk(output)
    print(f"Saved a pipeline with an initialised bert_encoder to {output}")


def _convert_ner(input_path: str, output_path: str) -> None:
    import spacy
    from spacy.tokens import DocBin

    from .corpora import read_conll

    docs, opened_by_i = read_conll(input_path, spacy.blank("en").vocab)
    Path(output_path).parent.mkdir(parents=True, exist_ok=True)
    DocBin(docs=docs).to_disk(output_path)
    n_ents = sum(len(d.ents) for d in docs)
    print(f"{output_path}: {len(docs)} sentences, {n_ents} entities")
    if opened_by_i:
        print(f"{opened_by_i} of the entities began with an I- tag, not B- (IOB1 tagging, or BIO "
              "with errors) and were read as beginning there")


def _convert_textcat(input_path: str, train_path: Path, dev_path: Path, heldout: float, seed: int) -> None:
    import spacy
    from spacy.tokens import DocBin

    from .corpora import read_textcat_csv, split_heldout

    docs = read_textcat_csv(input_path, spacy.blank("en"))
    train, dev = split_heldout(docs, heldout, seed)
    parts = ((train_path, train), (dev_path, dev)) if heldout else ((train_path, train),)
    for path, part in parts:
        path.parent.mkdir(parents=True, exist_ok=True)
        DocBin(docs=part, store_user_data=False).to_disk(path)
    print("; ".join(f"{path}: {len(part)} docs" for path, part in parts) + f"; {len(docs[0].cats)} labels")


def _convert_squad(input_path: str, output_path: str, articles: Optional[str]) -> None:
    import spacy

    from .corpora.squad import write_squad

    bounds = None
    if articles:
        match = re.fullmatch(r"(\d*):(\d*)", articles)
        if not match or articles == ":":
            raise SystemExit(f"convert-squad: --articles takes START:END (e.g. 0:36, or 38: to the end), "
                             f"got {articles!r}")
        start, end = match.groups()
        bounds = (int(start) if start else 0, int(end) if end else None)
    report = write_squad(input_path, output_path, spacy.blank("en"), articles=bounds)
    if not report.questions:
        Path(output_path).unlink()
        raise SystemExit(f"convert-squad: no question in {input_path}"
                         + (f" for --articles {articles}" if articles else "")
                         + "; nothing written: choose articles the file has")
    print(f"{output_path}: {report.questions} questions ({report.unanswerable} without an answer), "
          f"{report.answers} gold answers, {report.widened} widened to whole tokens")


def _evaluate_qa(model: str, data: str, output: Optional[str], tune: bool = False) -> None:
    import spacy
    import srsly

    from .corpora.squad import answer_texts, qa_corpus

    if tune and not Path(model).is_dir():  # spacy.load prefers an installed package of that name
        raise SystemExit(f"evaluate-qa: --tune-threshold saves the threshold into MODEL, so MODEL must be a "
                         f"pipeline folder, not {model!r}: save the pipeline to a folder (nlp.to_disk) first")
    nlp = spacy.load(model)
    examples = list(qa_corpus(Path(data))(nlp))
    if tune:  # tau on these Docs, saved with the pipeline; the scores below use it
        if all(answer_texts(eg.reference) for eg in examples):
            raise InputError(f"evaluate-qa --tune-threshold: {data} has no unanswerable question, so it cannot tell "
                             "a threshold that withholds wrong answers from one that withholds right ones; tune on "
                             "data with unanswerable questions (SQuAD 2.0)")
        qa = nlp.get_pipe("span_qa")
        docs = list(nlp.pipe([eg.predicted for eg in examples]))
        tuned = qa.tune_null_threshold(docs, [eg.reference for eg in examples])
        nlp.get_pipe_config("span_qa")["null_threshold"] = tuned["null_threshold"]  # config.cfg agrees
        nlp.to_disk(model)
        print(f"null_threshold {tuned['null_threshold']:.4f} (F1 {tuned['qa_f1']:.4f} on {data}) saved in {model}")
    scores = nlp.evaluate(examples)
    scores = {k: v for k, v in scores.items() if k.startswith("qa_") or k == "speed"}
    # spaCy's speed is words/s of the whole QA Docs (question and context)
    scores["questions_per_second"] = scores["speed"] * len(examples) / max(1, sum(len(eg.predicted) for eg in examples))
    print(srsly.json_dumps(scores, indent=2))
    if output:
        srsly.write_json(output, scores)


if __name__ == "__main__":
    sys.exit(main())
