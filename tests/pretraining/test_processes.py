"""Summing gradients over processes when a parameter has none in some of them."""
import os
import socket

import torch
import torch.multiprocessing as mp
from torch import nn


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _work(rank: int, port: int, out_dir: str) -> None:
    os.environ.update(WORLD_SIZE="2", RANK=str(rank), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    from spacy_bertfam.pretraining.trainer import Processes

    torch.manual_seed(0)  # the same weights in both processes
    softmax = nn.AdaptiveLogSoftmaxWithLoss(8, 12000, cutoffs=[2000, 10000], div_value=4.0)
    unused = nn.Linear(2, 2)  # no process computes a gradient for it
    model = nn.ModuleDict({"softmax": softmax, "unused": unused})
    torch.manual_seed(1 + rank)
    # Only rank 0's share has a rare word (id >= 10000): the last cluster's gradient is None in rank 1.
    targets = torch.tensor([3, 11000]) if rank == 0 else torch.tensor([3, 1500])
    softmax(torch.randn(2, 8), targets).loss.backward()
    own = {n: None if p.grad is None else p.grad.clone() for n, p in model.named_parameters()}
    procs = Processes(torch.device("cpu"))
    procs.sum_gradients(model)
    summed = {n: None if p.grad is None else p.grad.clone() for n, p in model.named_parameters()}
    torch.save({"own": own, "summed": summed}, os.path.join(out_dir, f"rank{rank}.pt"))
    procs.close()


def test_a_gradient_missing_in_one_process_is_summed_as_zeros(tmp_path):
    """Rank 1 has no gradient for the adaptive softmax's last cluster: the flat all-reduce then
    had tensors of different sizes (gloo aborts) or left rank 1 without the sum (replicas drift)."""
    mp.spawn(_work, args=(_free_port(), str(tmp_path)), nprocs=2, join=True)
    r0, r1 = (torch.load(tmp_path / f"rank{r}.pt") for r in (0, 1))
    assert r1["own"]["softmax.tail.1.0.weight"] is None and r0["own"]["softmax.tail.1.0.weight"] is not None
    for name, g0 in r0["own"].items():
        g1 = r1["own"][name]
        if g0 is None and g1 is None:
            assert r0["summed"][name] is None and r1["summed"][name] is None, name
            continue
        expected = sum(g for g in (g0, g1) if g is not None)
        for r in (r0, r1):
            torch.testing.assert_close(r["summed"][name], expected, rtol=0, atol=1e-6)
    assert r0["summed"]["unused.weight"] is None


def test_every_process_gets_a_share_of_the_batch():
    """A rank with no example of the global batch summed statistics of other keys than the rest
    (an all-reduce of different sizes): batches by pieces now hold one example per process at
    least, and a batch_size below the processes is refused with what to change."""
    from types import SimpleNamespace

    import pytest

    from spacy_bertfam.pretraining.documents import DocumentReader
    from spacy_bertfam.pretraining.stream import ExampleMaker, ExampleStream
    from spacy_bertfam.pretraining.trainer import train_step

    from ..conftest import ASSETS

    class Words(ExampleMaker):
        def make(self, key, text):
            return [w for w in text.split() if w]

    stream = ExampleStream(DocumentReader([ASSETS / "raw_text" / "mobydick.txt"]), Words(), buffer_size=100, seed=0)
    assert all(len(stream.batch(0, max_pieces=1, min_examples=3)) == 3 for _ in range(20))
    with pytest.raises(ValueError, match="batch of 1 examples cannot give each of 2 processes.*batch_size"):
        train_step(None, None, None, [(0, "one")], SimpleNamespace(world=2, rank=0), None)
