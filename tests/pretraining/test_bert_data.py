"""BERT's pretraining data: masking statistics and next-sentence pairs, on real text."""
from itertools import islice

import numpy as np
import pytest

from spacy_bertfam.pretraining.bert import InstanceMaker, SentenceSplitter
from spacy_bertfam.pretraining.documents import DocumentReader, first_texts
from spacy_bertfam.pretraining.masking import MaskingScheme
from spacy_bertfam.pretraining.nsp import Sentence
from spacy_bertfam.tokenization import train_wordpiece

from ..conftest import ASSETS

AUSTEN = ASSETS / "raw_text" / "janeausten_6novels.txt"


@pytest.fixture(scope="module")
def tokenizer():
    return train_wordpiece(first_texts(DocumentReader([AUSTEN], part="all").documents(False), 60), vocab_size=3000)


@pytest.fixture(scope="module")
def austen_sentences(tokenizer):
    """Every Austen chapter as sentences of pieces (real lengths, real word boundaries)."""
    split = SentenceSplitter(tokenizer)
    return [split(text) for _, text in DocumentReader([AUSTEN], part="all").documents(False)]


def maker(splitter, max_length=128, seed=0):
    ids = {"cls_id": 1, "sep_id": 2}
    return InstanceMaker(splitter, seed=seed, pool_size=50, max_length=max_length, short_seq_prob=0.1, **ids)


def test_masking_statistics_over_real_instances(tokenizer, austen_sentences):
    docs = iter(austen_sentences)
    instances = list(islice(maker(lambda _: next(docs), 128).examples(((0, i), "") for i in range(len(austen_sentences))), 3000))
    specials = tokenizer.special_ids()
    scheme = MaskingScheme(tokenizer.piece_id("[MASK]"), specials, tokenizer.n_pieces)
    n_candidates = n_selected = n_masked = n_kept = n_random = 0
    for number, inst in enumerate(instances):
        ids = inst.ids.copy()
        ids[0], ids[inst.n_first - 1], ids[-1] = tokenizer.piece_id("[CLS]"), tokenizer.piece_id("[SEP]"), tokenizer.piece_id("[SEP]")
        corrupted, selected = scheme(ids, inst.word_start, np.random.default_rng([0, 2, number]))
        special = np.isin(ids, specials)
        assert not (selected & special).any(), "a special piece was selected"
        assert (corrupted[~selected] == ids[~selected]).all(), "an unselected piece changed"
        replaced = selected & (corrupted != ids) & (corrupted != scheme.mask_id)
        assert not np.isin(corrupted[replaced], specials).any(), "a random replacement is a special piece"
        n_candidates += int((~special).sum())
        n_selected += int(selected.sum())
        n_masked += int((corrupted[selected] == scheme.mask_id).sum())
        n_kept += int((corrupted[selected] == ids[selected]).sum())
        n_random += int(replaced.sum())
    rates = dict(selected=n_selected / n_candidates, masked=n_masked / n_selected,
                 random=n_random / n_selected, kept=n_kept / n_selected)
    message = f"{n_candidates} candidate pieces: {rates}"
    print(message)
    assert n_candidates >= 100_000, message
    assert abs(rates["selected"] - 0.15) <= 0.005, message
    assert abs(rates["masked"] - 0.8) <= 0.01 and abs(rates["random"] - 0.1) <= 0.01, message
    assert abs(rates["kept"] - 0.1) <= 0.01, message


def test_whole_word_masking_takes_every_piece_of_a_word(tokenizer):
    text = "Unsubstantiated extraordinarily incomprehensibilities notwithstanding, Elinor deliberated. " * 40
    ids, starts = tokenizer.encode_plain([text])[0]
    ids = np.concatenate([[tokenizer.piece_id("[CLS]")], ids, [tokenizer.piece_id("[SEP]")]])
    starts = np.concatenate([[True], starts, [True]])
    scheme = MaskingScheme(tokenizer.piece_id("[MASK]"), tokenizer.special_ids(), tokenizer.n_pieces, whole_word=True)
    word = np.cumsum(starts)  # the word each piece belongs to
    total = 0
    for seed in range(50):
        _, selected = scheme(ids, starts, np.random.default_rng(seed))
        for w in np.unique(word[selected]):
            assert selected[word == w].all(), "a word was masked only in part"
        total += selected.sum()
    assert (starts[1:-1] == False).sum() > 100  # the text really has multi-piece words  # noqa: E712
    assert 0.13 <= total / (50 * (len(ids) - 2)) <= 0.16


def synthetic_documents(austen_sentences, offset=10):
    """Austen's document/sentence lengths with unique piece ids, so each piece's
    document and position can be looked up."""
    docs, where = [], {}
    next_id = offset
    for d, doc in enumerate(austen_sentences):
        sentences = []
        for s in doc:
            ids = np.arange(next_id, next_id + len(s))
            for position, i in enumerate(ids):
                where[i] = (d, next_id - offset + position)
            sentences.append(Sentence(ids, np.ones(len(s), dtype=bool)))
            next_id += len(s)
        docs.append(sentences)
    return docs, where


def test_next_sentence_pairs(austen_sentences):
    docs, where = synthetic_documents(austen_sentences)
    max_length = 64
    instances = []
    for epoch in range(3):
        queue = iter(docs)
        keyed = (((epoch, d), "") for d in range(len(docs)))
        instances += [(epoch, inst) for inst in maker(lambda _, queue=queue: next(queue), max_length, seed=epoch).examples(keyed)]
    assert len(instances) >= 40_000, len(instances)
    is_next = np.mean([inst.is_next for _, inst in instances])
    print(f"IsNext share {is_next:.4f} over {len(instances)} instances")
    assert abs(is_next - 0.5) <= 0.01, f"IsNext share {is_next:.4f} over {len(instances)} instances"
    for _, inst in instances:
        assert len(inst) <= max_length
        assert inst.ids[0] == 1 and inst.ids[inst.n_first - 1] == 2 and inst.ids[-1] == 2
        a = [where[i] for i in inst.ids[1 : inst.n_first - 1]]
        b = [where[i] for i in inst.ids[inst.n_first : -1]]
        assert a and b
        assert len({d for d, _ in a}) == 1 and len({d for d, _ in b}) == 1
        positions_a, positions_b = [p for _, p in a], [p for _, p in b]
        assert positions_a == list(range(positions_a[0], positions_a[0] + len(a)))  # contiguous text
        if inst.is_next:
            assert a[0][0] == b[0][0], "IsNext B from another document"
            assert positions_b == list(range(positions_b[0], positions_b[0] + len(b)))
            assert positions_b[0] > positions_a[-1], "IsNext B does not follow A"
        else:
            assert a[0][0] != b[0][0], "NotNext B from the same document"


def test_one_sentence_chunks_are_not_forced_to_notnext():
    # Every sentence alone exceeds the target length: the reference would make
    # every instance NotNext; here the coin decides, and IsNext pairs neighbours.
    rng = np.random.default_rng(0)
    docs = [[Sentence(rng.integers(10, 500, 80), np.ones(80, dtype=bool)) for _ in range(3)] for _ in range(2000)]
    queue = iter(docs)
    instances = list(maker(lambda _: next(queue), 64).examples(((0, d), "") for d in range(len(docs))))
    assert abs(np.mean([i.is_next for i in instances]) - 0.5) < 0.03
    # A document of one sentence gives no instance at all.
    one = iter([[Sentence(np.arange(10, 20), np.ones(10, dtype=bool))]] * 5)
    assert list(maker(lambda _: next(one), 64).examples(((0, d), "") for d in range(5))) == []


def test_notnext_never_comes_from_the_document_itself_across_epochs():
    """The pool outlives an epoch: with fewer documents than its size it held this document's
    own earlier copy, and NotNext segments were drawn from it (30 of 157 here)."""
    def split(text):
        d = int(text)
        return [Sentence(np.full(5, 1000 * d + k + 10), np.ones(5, dtype=bool)) for k in range(60)]

    m = InstanceMaker(split, seed=0, pool_size=50, max_length=32, short_seq_prob=0.0, cls_id=1, sep_id=2)
    notnext = [inst for epoch in range(6) for d in range(4) for inst in m.make((epoch, d), str(d))
               if not inst.is_next]
    assert len(notnext) > 100
    assert all(inst.ids[1] // 1000 != inst.ids[inst.n_first] // 1000 for inst in notnext)
    single = InstanceMaker(split, seed=0, pool_size=50, max_length=32, short_seq_prob=0.0, cls_id=1, sep_id=2)
    assert single.make((0, 0), "0") == []  # waits for a second document
    with pytest.raises(ValueError, match="one document only"):
        single.make((1, 0), "0")
