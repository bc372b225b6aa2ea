"""Batches that each hold one task's examples, for training one pipeline on several tasks.

A corpus that interleaves tasks (each example annotated for one task, missing for the
others) batched by words gives every task its share of each batch. A task whose examples
are few and long then learns from a handful per step: measured on en_bertfam, QA got
about 5 questions in each 2,000-word batch and reached 13 F1 after 100 steps, exactly
what a QA-only run with 5-question batches reaches (13.4), against 41 with the
12 questions a QA-only 2,000-word batch holds. So, as MT-DNN (Liu et al., 2019) trains
BERT on several tasks, each batch here comes from one task, of the same words as a
single-task run's batch; the shuffled stream interleaves the tasks' batches, so every
task is seen throughout training, in proportion to its words.
"""
import itertools
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Tuple

from spacy.training import Example
from spacy.util import registry

from ..tokenization.words import first_segment_end


def example_task(eg: Example) -> str:
    """The annotation an example is for: "qa" (a QA Doc), "cats", "ents", several of them
    joined by "+", or "" when the reference has none of these."""
    kinds = []
    if first_segment_end(eg.predicted):
        kinds.append("qa")
    if eg.reference.cats:
        kinds.append("cats")
    if eg.reference.has_annotation("ENT_IOB"):
        kinds.append("ents")
    return "+".join(kinds)


def batch_by_task(examples: Iterable[Example], size, tolerance: float = 0.2, discard_oversize: bool = False,
                  get_length: Callable = len) -> Iterator[List[Example]]:
    """Batches of about `size` words, each of one task's examples (see `example_task`).

    A task's batch is yielded once it holds `size` words, or before an example would
    take it past `size * (1 + tolerance)`; an example longer than that is a batch of its
    own (or dropped with `discard_oversize`), as spaCy's batch_by_words does. At the end
    of the stream each task's last, smaller batch is yielded.
    """
    sizes = itertools.repeat(size) if isinstance(size, int) else iter(size)
    pending: Dict[str, Tuple[List[Example], int, int]] = {}  # task -> (batch, words, target)
    for eg in examples:
        n_words = get_length(eg)
        task = example_task(eg)
        batch, words, target = pending.get(task) or ([], 0, next(sizes))
        if n_words > target * (1 + tolerance):
            if not discard_oversize:
                yield [eg]
            pending[task] = (batch, words, target)
            continue
        if batch and words + n_words > target * (1 + tolerance):
            yield batch
            batch, words, target = [], 0, next(sizes)
        batch.append(eg)
        words += n_words
        if words >= target:
            yield batch
            pending.pop(task, None)
        else:
            pending[task] = (batch, words, target)
    for batch, _, _ in pending.values():
        if batch:
            yield batch


@registry.batchers("spacy-bertfam.batch_by_task.v1")
def configure_batch_by_task(size, tolerance: float = 0.2, discard_oversize: bool = False,
                            get_length: Optional[Callable] = None) -> Callable[[Iterable[Example]], Iterable[List[Example]]]:
    """`spacy-bertfam.batch_by_task.v1`: spaCy's batch_by_words, with each batch from one task.

    size (int or a schedule): words per batch, as batch_by_words.
    tolerance (float): how far past `size` a batch may go.
    discard_oversize (bool): drop an example longer than size * (1 + tolerance) instead of
        giving it a batch of its own.
    get_length: the length of an example (default: its words).
    """
    length = get_length or len

    def batcher(examples: Iterable[Example]) -> Iterable[List[Example]]:
        return batch_by_task(examples, size, tolerance, discard_oversize, length)

    return batcher
