"""Process-level behaviour: forked workers, and memory given back to the system.

`nlp.pipe(texts, n_process=N)`: spaCy forks worker processes on Linux.
A child forked after the parent has run torch on several threads deadlocks in its first
multi-threaded torch call (the OpenMP thread pool does not survive a fork), so every
forked child runs torch on one thread: with N workers that is also the right share of
the cores. The workers send Docs back as bytes, so the stored encoder outputs
(`doc._.bertfam`) must serialise: `DocEncoding` has a msgpack form (encoders/contract.py).
"""
import ctypes
import ctypes.util
import logging
import os

import torch

_M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter
logger = logging.getLogger("spacy_bertfam")
_returning = False


def _libc():
    """glibc, or None where it is absent (its allocator's knobs are then no-ops)."""
    name = ctypes.util.find_library("c")
    libc = ctypes.CDLL(name) if name else None
    return libc if libc is not None and hasattr(libc, "malloc_trim") else None


_LIBC = _libc()


_TOKENIZERS_PARALLELISM = "TOKENIZERS_PARALLELISM"
_set_for_fork = False


def _tokenizers_serial_across_fork() -> None:
    """The `tokenizers` library turns its own thread pool off in a child forked after it ran,
    printing a warning in every worker; with its setting given (as "false" for the fork, where
    the user gave none) it does the same silently."""
    global _set_for_fork
    _set_for_fork = _TOKENIZERS_PARALLELISM not in os.environ
    if _set_for_fork:
        os.environ[_TOKENIZERS_PARALLELISM] = "false"


def _restore_tokenizers_setting() -> None:
    if _set_for_fork:
        os.environ.pop(_TOKENIZERS_PARALLELISM, None)


def _one_torch_thread() -> None:
    torch.set_num_threads(1)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_tokenizers_serial_across_fork, after_in_parent=_restore_tokenizers_setting,
                        after_in_child=_one_torch_thread)


def return_freed_memory() -> None:
    """Have glibc give blocks of 1 MiB or more back to the system when freed.

    Called once the encoder meets a training batch so large that it recomputes
    activations chunk by chunk: by default glibc raises its mmap threshold as blocks are
    freed and then serves such blocks from a heap it rarely shrinks, so the process kept
    growing (measured: 4.1-6.8 GB peak RSS for a 50,000-piece Doc whose live memory
    peaks near 2.3 GB). A no-op after the first call, and where glibc is absent.
    """
    global _returning
    if _returning:
        return
    _returning = True
    if _LIBC is not None and _LIBC.mallopt(_M_MMAP_THRESHOLD, 1 << 20):
        logger.info("Very long training batch: freed blocks of 1 MiB or more now go back to the system")


def trim_freed_memory() -> None:
    """Give the free pages of glibc's heap back to the system (`malloc_trim`).

    Called by `nlp.pipe` between read-ahead buffers and, in prediction, by the encoder
    after each chunk of windows of a call of several: a stream of texts of new lengths
    allocates arrays of new sizes, and glibc kept the pages of the freed ones. Unlike
    `return_freed_memory` it changes no allocator setting. A no-op where glibc is absent.
    """
    if _LIBC is not None:
        _LIBC.malloc_trim(0)
