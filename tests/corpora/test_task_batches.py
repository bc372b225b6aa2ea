"""batch_by_task: one task per batch, every example once, batch_by_words' sizes."""
import random

import spacy
from spacy.tokens import Doc, Span
from spacy.training import Example
from spacy.util import registry

from spacy_bertfam.corpora.task_batches import batch_by_task, example_task
from spacy_bertfam.tokenization.words import FIRST_SEGMENT


def mixed_examples(n=60, seed=0):
    nlp = spacy.blank("en")
    rng = random.Random(seed)
    examples = []
    for i in range(n):
        words = [f"w{i}_{k}" for k in range(rng.randint(3, 30))]
        kind = ("ents", "cats", "qa")[i % 3]
        reference = Doc(nlp.vocab, words=words)
        predicted = Doc(nlp.vocab, words=words)
        if kind == "ents":
            reference.ents = [Span(reference, 0, 1, label="PER")]
        elif kind == "cats":
            reference.cats = {"A": 1.0, "B": 0.0}
        else:
            for doc in (reference, predicted):
                doc.spans[FIRST_SEGMENT] = [doc[:2]]
        examples.append(Example(predicted, reference))
    rng.shuffle(examples)
    return examples


def test_each_batch_is_one_task_and_every_example_comes_once():
    examples = mixed_examples()
    batches = list(batch_by_task(examples, size=60, tolerance=0.2))
    assert sorted(id(eg) for b in batches for eg in b) == sorted(id(eg) for eg in examples)
    assert all(len({example_task(eg) for eg in b}) == 1 for b in batches)
    assert {example_task(eg) for eg in examples} == {"ents", "cats", "qa"}
    for task in ("ents", "cats", "qa"):
        mine = [b for b in batches if example_task(b[0]) == task]
        # within a task the stream's order is kept
        assert [eg for b in mine for eg in b] == [eg for eg in examples if example_task(eg) == task]
        sizes = [sum(len(eg) for eg in b) for b in mine]
        assert all(s <= 72 for s in sizes)
        # a batch closes below 60 words only when the next example (<= 30 words) would pass 72
        assert all(s > 72 - 30 for s in sizes[:-1])


def test_long_examples_get_a_batch_of_their_own_or_are_dropped():
    examples = mixed_examples(12)
    long = max(examples, key=len)
    size = len(long) - 10
    alone = list(batch_by_task(examples, size=size, tolerance=0.0))
    assert [long] in alone
    dropped = list(batch_by_task(examples, size=size, tolerance=0.0, discard_oversize=True))
    assert long not in [eg for b in dropped for eg in b]


def test_registered_batcher_matches_the_function():
    examples = mixed_examples()
    batcher = registry.resolve({"b": {"@batchers": "spacy-bertfam.batch_by_task.v1", "size": 60}})["b"]
    assert list(batcher(examples)) == list(batch_by_task(examples, size=60))
