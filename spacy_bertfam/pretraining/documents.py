"""Documents for pretraining, read lazily from text and JSONL files.

A document is a unit of discourse — a chapter, a blank-line-separated passage, a
JSONL record — because BERT's NotNext pairs draw B from *another document*: with
whole books as documents NotNext would just mean "another book". The reader never
holds more than one document in memory and keeps its position (epoch, file, byte
offset, document count) in a small state dict, so a resumed run goes on where the
killed one stopped. Every `heldout_every`-th document is held out for evaluation.
"""
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Dict, Iterator, List, Sequence, Tuple, Union

from ..errors import ConfigError

# Chapter headings of the public-domain books in assets/ and ../shared/data/raw_text:
# "CHAPTER 1", "CHAPTER XIV", "CHAPTER 2. The Carpet-Bag.", "Genesis 1", "1 Samuel 3",
# "Song of Solomon 2", and WikiText article titles " = Homarus gammarus = ".
DEFAULT_HEADING = (
    r"^\s*(CHAPTER|Chapter|BOOK|Book|VOLUME|Volume)\b"
    r"|^[1-3]? ?[A-Z][a-z]+( of [A-Z][a-z]+)? \d+\s*$"
    r"|^ = [^=].* = \s*$"
)
_GUTENBERG_START = re.compile(r"^\*\*\* ?START OF")
_GUTENBERG_END = re.compile(r"^(\*\*\* ?END OF|End of (the )?Project Gutenberg)")
SPLITS = ("chapters", "passages", "lines")
PARTS = ("train", "heldout", "all")

DocKey = Tuple[int, int]  # (epoch, index of the document within the epoch)


def corpus_files(paths: Union[str, Path, Sequence[Union[str, Path]]]) -> List[Path]:
    """The .txt/.jsonl files named by `paths` (files or directories, searched recursively), sorted."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    files: List[Path] = []
    for path in map(Path, paths):
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.suffix in (".txt", ".jsonl") and p.is_file())
            if not found:
                raise ConfigError(f"No .txt or .jsonl files under {path}")
            files.extend(found)
        elif path.is_file():
            files.append(path)
        else:
            raise ConfigError(f"Pretraining text not found: {path.resolve()}; point "
                              "--paths.train (or the [corpus] block) at .txt/.jsonl files or a folder of them")
    if not files:
        raise ConfigError("No pretraining text given: set --paths.train (or the [corpus] block)")
    return files


@dataclass
class DocumentReader:
    """Streams documents from text files; resumable through `state_dict`.

    files: .txt files (split into documents by `split`) or .jsonl files (one
        document per record, its "text" field).
    split: "chapters" (a line matching `heading` starts a document; the heading
        itself is not text), "passages" (blank lines separate documents) or
        "lines" (one document per line).
    part: "train" (all but the held-out documents), "heldout" or "all".
    heldout_every: every n-th document of each epoch is held out (0: none).
    A Project Gutenberg header/footer inside a file is skipped.
    """

    files: List[Path]
    split: str = "chapters"
    heading: str = DEFAULT_HEADING
    part: str = "train"
    heldout_every: int = 50
    state: Dict[str, int] = field(default_factory=lambda: {"epoch": 0, "file": 0, "offset": 0, "index": 0})

    def __post_init__(self) -> None:
        if self.split not in SPLITS:
            raise ConfigError(f"[corpus] split must be one of {SPLITS}, not {self.split!r}")
        if self.part not in PARTS:
            raise ConfigError(f"part must be one of {PARTS}, not {self.part!r}")
        if self.part == "heldout" and self.heldout_every <= 0:
            raise ConfigError("[corpus] heldout_every must be > 0 to hold documents out")
        self._heading = re.compile(self.heading)

    def state_dict(self) -> Dict[str, int]:
        """The reader's position (epoch, file, byte offset, document index), for resuming."""
        return dict(self.state)

    def load_state_dict(self, state: Dict[str, int]) -> None:
        """Go on from a position that `state_dict` returned."""
        self.state = dict(state)

    def documents(self, repeat: bool) -> Iterator[Tuple[DocKey, str]]:
        """(key, text) of each document of this part; `repeat` loops over epochs forever."""
        while True:
            yielded = False
            # A pass resumed near the end of an epoch may find no document of this part left.
            whole_epoch = self.state["file"] == 0 and self.state["offset"] == 0
            while self.state["file"] < len(self.files):
                path = self.files[self.state["file"]]
                for text, next_offset in self._read(path, self.state["offset"]):
                    index = self.state["index"]
                    self.state.update(offset=next_offset, index=index + 1)
                    if self._wanted(index):
                        yielded = True
                        yield (self.state["epoch"], index), text
                self.state.update(file=self.state["file"] + 1, offset=0)
            if not repeat:
                return
            if not yielded and whole_epoch:
                raise ConfigError(f"The corpus {[str(f) for f in self.files]} has no {self.part} documents")
            self.state = {"epoch": self.state["epoch"] + 1, "file": 0, "offset": 0, "index": 0}

    def _wanted(self, index: int) -> bool:
        if self.part == "all" or self.heldout_every <= 0:
            return self.part != "heldout"
        held = index % self.heldout_every == self.heldout_every - 1
        return held == (self.part == "heldout")

    def _read(self, path: Path, offset: int) -> Iterator[Tuple[str, int]]:
        """Documents of one file from byte `offset`, each with the offset after it."""
        jsonl = path.suffix == ".jsonl"
        lines: List[str] = []
        with path.open("rb") as f:
            f.seek(offset or (0 if jsonl else _body_start(f)))
            while True:
                start = f.tell()
                raw = f.readline()
                if not raw:
                    break
                line = raw.decode("utf8", errors="replace").rstrip("\r\n")
                if jsonl:
                    if line.strip():
                        yield _record_text(line, path), f.tell()
                    continue
                if _GUTENBERG_START.match(line):
                    lines = []
                    continue
                if _GUTENBERG_END.match(line):
                    break
                if self.split == "lines":
                    if line.strip():
                        yield line.strip(), f.tell()
                elif self.split == "passages" and not line.strip():
                    if any(line_.strip() for line_ in lines):
                        yield "\n".join(lines).strip(), f.tell()
                    lines = []
                elif self.split == "chapters" and self._heading.match(line):
                    if any(line_.strip() for line_ in lines):
                        yield "\n".join(lines).strip(), start  # the heading starts the next one
                    lines = []
                else:
                    lines.append(line)
        if any(line_.strip() for line_ in lines):
            yield "\n".join(lines).strip(), path.stat().st_size


def _record_text(line: str, path: Path) -> str:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as e:
        raise ConfigError(f"{path}: a line is not valid JSON ({e})") from None
    if not isinstance(record, dict) or not isinstance(record.get("text"), str):
        raise ConfigError(f"{path}: every JSONL record needs a string field 'text'")
    return record["text"]



def paragraphs(text: str) -> List[str]:
    """The blank-line-separated paragraphs of a document: units that spaCy reads one
    at a time, so no document is too long for it and nothing is cut mid-word."""
    return [p for p in text.split("\n\n") if p.strip()]


def first_texts(documents: Iterator[Tuple[DocKey, str]], n: int) -> Iterator[str]:
    """The texts of the first `n` documents (e.g. to train a vocabulary on)."""
    for _, (_, text) in zip(range(n), documents):
        yield text


def _body_start(f: BinaryIO, max_lines: int = 1000) -> int:
    """The offset after a Project Gutenberg START line among a file's first `max_lines`, or 0:
    the header before it would otherwise be read as documents (as passages or lines)."""
    for _ in range(max_lines):
        raw = f.readline()
        if not raw:
            break
        if _GUTENBERG_START.match(raw.decode("utf8", errors="replace")):
            return f.tell()
    return 0
