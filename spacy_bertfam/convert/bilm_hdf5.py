"""Reading the original bilm-tf ELMo format: `options.json` + an HDF5 weight file.

TensorFlow layouts differ from ours in ways worth spelling out:
- `char_embed` has no row for the padding id 0: we prepend a zero row;
- convolutions are stored (1, width, in, out): we need (out, in, width);
- dense weights are stored (in, out): transposed;
- an LSTM's `W_0` is one (input + projection, 4·cell) matrix over [x; h] with the
  gates in TensorFlow's order (input, candidate, forget, output): split into the
  input and state parts and reordered to (input, forget, candidate, output);
- TensorFlow adds 1.0 to the forget-gate bias at run time: we add it to the bias.
"""
import json
from pathlib import Path
from typing import Callable, Dict, List, Tuple

import numpy as np
import torch

from ..models.elmo import ElmoConfig
from .checkpoint import Checkpoint
from .errors import CheckpointError


def detect(directory: Path) -> bool:
    """Whether `directory` is a bilm-tf ELMo directory: options.json and an HDF5 weight file
    (lm_embeddings*/elmo_token* dumps do not count)."""
    return (directory / "options.json").is_file() and bool(_weight_files(directory))


def _weight_files(directory: Path) -> List[Path]:
    return sorted(p for p in directory.glob("*.hdf5") if not p.name.startswith(("lm_embeddings", "elmo_token")))


def convert_options(options: Dict) -> ElmoConfig:
    """bilm-tf's options.json -> our ElmoConfig, n_words 0 (`read` sets it when the HDF5 file has
    a softmax); a CheckpointError names a missing or malformed field."""
    try:
        lstm, cnn = options["lstm"], options["char_cnn"]
        return ElmoConfig(
            n_characters=cnn["n_characters"],
            char_width=cnn["embedding"]["dim"],
            max_chars=cnn["max_characters_per_token"],
            filters=[tuple(f) for f in cnn["filters"]],
            n_highway=cnn["n_highway"],
            activation=cnn["activation"],
            cell_width=lstm["dim"],
            projection_width=lstm["projection_dim"],
            n_layers=lstm["n_layers"],
            cell_clip=lstm["cell_clip"],
            projection_clip=lstm["proj_clip"],
            skip_connections=lstm.get("use_skip_connections", False),
            n_words=0,
            dropout=options.get("dropout", 0.1),
        )
    except (KeyError, TypeError) as e:
        raise CheckpointError(f"options.json lacks or mangles the field {e}") from None
    except ValueError as e:
        raise CheckpointError(f"options.json: {e}") from None


def _tf_gates_to_ours(matrix: np.ndarray, cell: int) -> np.ndarray:
    """Reorder the 4·cell gate rows from TF's (i, j, f, o) to our (i, f, j, o)."""
    i, j, f, o = (matrix[k * cell : (k + 1) * cell] for k in range(4))
    return np.concatenate([i, f, j, o])


def _lstm(config: ElmoConfig) -> List[Tuple[str, str, Callable]]:
    """Rows (our name, HDF5 path, conversion) for every LSTM cell."""
    C, P = config.cell_width, config.projection_width
    rows = []
    for d, direction in enumerate(("forward_layers", "backward_layers")):
        for k in range(config.n_layers):
            cell = f"RNN_{d}/RNN/MultiRNNCell/Cell{k}/LSTMCell"
            ours = f"{direction}.{k}"
            rows += [
                (f"{ours}.input_linearity.weight", f"{cell}/W_0", lambda w: _tf_gates_to_ours(w.T, C)[:, :P]),
                (f"{ours}.state_linearity.weight", f"{cell}/W_0", lambda w: _tf_gates_to_ours(w.T, C)[:, P:]),
                (f"{ours}.state_linearity.bias", f"{cell}/B",
                 lambda b: _tf_gates_to_ours(b + np.r_[np.zeros(2 * C), np.ones(C), np.zeros(C)], C)),
                (f"{ours}.projection.weight", f"{cell}/W_P_0", lambda w: w.T),
            ]
    return rows


def key_map(config: ElmoConfig) -> List[Tuple[str, str, Callable]]:
    """Our parameter name, the HDF5 dataset, and how to turn one into the other."""
    rows = [("char_cnn.chars.weight", "char_embed", lambda w: np.concatenate([np.zeros((1, w.shape[1])), w]))]
    for i in range(len(config.filters)):
        rows += [
            (f"char_cnn.convolutions.{i}.weight", f"CNN/W_cnn_{i}", lambda w: w[0].transpose(2, 1, 0)),
            (f"char_cnn.convolutions.{i}.bias", f"CNN/b_cnn_{i}", lambda b: b),
        ]
    for k in range(config.n_highway):
        rows += [
            (f"char_cnn.highway.transforms.{k}.weight", f"CNN_high_{k}/W_transform", lambda w: w.T),
            (f"char_cnn.highway.transforms.{k}.bias", f"CNN_high_{k}/b_transform", lambda b: b),
            (f"char_cnn.highway.gates.{k}.weight", f"CNN_high_{k}/W_carry", lambda w: w.T),
            (f"char_cnn.highway.gates.{k}.bias", f"CNN_high_{k}/b_carry", lambda b: b),
        ]
    rows += [
        ("char_cnn.projection.weight", "CNN_proj/W_proj", lambda w: w.T),
        ("char_cnn.projection.bias", "CNN_proj/b_proj", lambda b: b),
    ]
    return rows + _lstm(config)


def read(directory: Path) -> Checkpoint:
    """Read a bilm-tf directory (options.json + one weight .hdf5) into our names."""
    import h5py

    source = str(directory)
    try:
        options = json.loads((directory / "options.json").read_text(encoding="utf8"))
    except json.JSONDecodeError as e:
        raise CheckpointError(f"{directory / 'options.json'} is not valid JSON: {e}") from None
    config = convert_options(options)
    files = _weight_files(directory)
    if len(files) != 1:
        raise CheckpointError(f"{source}: expected one HDF5 weight file, found {[f.name for f in files]}")
    try:
        state = _read_weights(h5py.File(files[0], "r"), files[0], config)
    except OSError as e:  # h5py's error for a truncated or damaged file names neither
        raise CheckpointError(f"{files[0]} cannot be read as HDF5 ({e}): the file is damaged or "
                              "incomplete; download or copy it again") from None
    return Checkpoint("elmo", config, state, None, source)


def _read_weights(weights, path: Path, config: ElmoConfig) -> Dict[str, torch.Tensor]:
    """Our tensors from an open bilm-tf HDF5 file (closed after); `config.n_words` from its softmax."""
    with weights:
        rows = key_map(config)
        has_softmax = "softmax/W" in weights or "softmax/b" in weights
        wanted = [source for _, source, _ in rows] + (["softmax/W", "softmax/b"] if has_softmax else [])
        missing = [source for source in wanted if source not in weights]
        if missing:
            raise CheckpointError(f"{path}: missing dataset(s) {sorted(set(missing))}")
        state = {ours: torch.from_numpy(np.ascontiguousarray(convert(weights[source][...]))).float()
                 for ours, source, convert in rows}
        if has_softmax:
            state["softmax.weight"] = torch.from_numpy(weights["softmax/W"][...]).float()
            state["softmax.bias"] = torch.from_numpy(weights["softmax/b"][...]).float()
            config.n_words = state["softmax.weight"].shape[0]
    return state
