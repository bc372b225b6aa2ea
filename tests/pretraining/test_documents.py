"""Streaming documents: splits, held-out selection, resumable positions, shuffle-buffer state."""
import json

import pytest

from spacy_bertfam.pretraining.documents import DocumentReader, corpus_files
from spacy_bertfam.pretraining.shuffle import ShuffleBuffer

from ..conftest import ASSETS, TEST_DATA

RAW = ASSETS / "raw_text"
KJV = TEST_DATA / "raw_text" / "kjv_bible.genesis-exodus11.txt"  # the first 61 chapters


def texts(reader, repeat=False, n=None):
    out = []
    for key, text in reader.documents(repeat=repeat):
        out.append((key, text))
        if n is not None and len(out) == n:
            break
    return out


def test_chapters_of_the_books_are_documents(tmp_path):
    austen = texts(DocumentReader([RAW / "janeausten_6novels.txt"], part="all"))
    moby = texts(DocumentReader([RAW / "mobydick.txt"], part="all"))
    bible = texts(DocumentReader([KJV], part="all"))
    # 269 chapters + the first title page (later title pages end the previous novel's last chapter).
    assert len(austen) == 269 + 1, len(austen)
    # Front matter + 135 chapters + the Cetology chapter's "BOOK I. (Folio)" sections and the like.
    assert 136 <= len(moby) <= 155, len(moby)
    assert moby[1][1].startswith("Call me Ishmael.")
    # Genesis 1-50 and Exodus 1-11, each chapter a document (the heading "Genesis 1" is not text).
    assert len(bible) == 50 + 11, len(bible)
    assert bible[0][1].startswith("1 In the beginning God created the heaven and the earth.")
    assert bible[50][1].startswith("1 Now these are the names of the children of Israel")
    assert bible[-1][1].endswith("out of his land.")
    assert not any(t.startswith(("Genesis", "Exodus")) for _, t in bible)  # headings are not text
    # Book names with a number or "of", as the rest of the KJV has them (its 1,189 chapters all split).
    (tmp_path / "kjv.txt").write_text("\n1 Samuel 3\n\n  1 And the child Samuel ministered.\n\n"
                                      "Song of Solomon 2\n\n  1 I am the rose of Sharon.\n\n"
                                      "3 John 1\n\n  1 The elder unto the wellbeloved Gaius.\n", encoding="utf8")
    assert [t for _, t in texts(DocumentReader([tmp_path / "kjv.txt"], part="all"))] == [
        "1 And the child Samuel ministered.", "1 I am the rose of Sharon.", "1 The elder unto the wellbeloved Gaius."]
    assert austen[1][1].startswith("The family of Dashwood had long been settled in Sussex.")
    assert not any(t.startswith("CHAPTER") for _, t in austen)  # headings are not text
    assert "*** START OF" not in moby[0][1] and "End of Project Gutenberg" not in moby[-1][1]


def test_passages_lines_and_jsonl(tmp_path):
    (tmp_path / "a.txt").write_text("One. Two.\nThree.\n\n\nFour.\n\nFive", encoding="utf8")
    assert [t for _, t in texts(DocumentReader([tmp_path / "a.txt"], split="passages", part="all"))] == \
        ["One. Two.\nThree.", "Four.", "Five"]
    assert len(texts(DocumentReader([tmp_path / "a.txt"], split="lines", part="all"))) == 4
    (tmp_path / "b.jsonl").write_text(json.dumps({"text": "A doc."}) + "\n\n" + json.dumps({"text": "B."}) + "\n")
    assert [t for _, t in texts(DocumentReader(corpus_files(tmp_path / "b.jsonl"), part="all"))] == ["A doc.", "B."]
    (tmp_path / "c.jsonl").write_text(json.dumps({"body": "x"}) + "\n")
    with pytest.raises(ValueError, match="'text'"):
        texts(DocumentReader([tmp_path / "c.jsonl"], part="all"))
    with pytest.raises(ValueError, match="not found"):
        corpus_files(tmp_path / "missing.txt")


def test_heldout_and_train_documents_are_disjoint_and_complete():
    files = [RAW / "mobydick.txt"]
    train = texts(DocumentReader(files, part="train", heldout_every=10))
    held = texts(DocumentReader(files, part="heldout", heldout_every=10))
    everything = texts(DocumentReader(files, part="all"))
    assert len(held) == len(everything) // 10
    assert sorted(k for k, _ in train + held) == [k for k, _ in everything]


def test_a_restored_reader_goes_on_where_it_stopped():
    files = [RAW / "mobydick.txt", RAW / "janeausten_6novels.txt"]
    full = texts(DocumentReader(files), repeat=True, n=500)  # crosses files and an epoch
    reader = DocumentReader(files)
    first = texts(reader, repeat=True, n=123)
    resumed = DocumentReader(files)
    resumed.load_state_dict(reader.state_dict())
    assert first + texts(resumed, repeat=True, n=500 - 123) == full
    assert full[-1][0][0] == 1  # the second epoch


@pytest.mark.parametrize("heldout_every", [0, 4])
def test_a_reader_saved_after_its_epochs_last_train_document_resumes(tmp_path, heldout_every):
    """Saved after the epoch's last train document (or with only held-out ones left), the
    reader goes on with the next epoch; it raised "has no train documents"."""
    (tmp_path / "c.txt").write_text("one a\n\ntwo b\n\nthree c\n\nfour d\n")
    n_train = 4 if heldout_every == 0 else 3
    full = texts(DocumentReader([tmp_path / "c.txt"], split="passages", heldout_every=heldout_every),
                 repeat=True, n=n_train + 2)
    reader = DocumentReader([tmp_path / "c.txt"], split="passages", heldout_every=heldout_every)
    first = texts(reader, repeat=True, n=n_train)
    resumed = DocumentReader([tmp_path / "c.txt"], split="passages", heldout_every=heldout_every)
    resumed.load_state_dict(reader.state_dict())
    assert first + texts(resumed, repeat=True, n=2) == full
    assert full[n_train][0] == (1, 0)


@pytest.mark.parametrize("split", ["passages", "lines", "chapters"])
def test_a_gutenberg_header_is_not_a_document(tmp_path, split):
    (tmp_path / "g.txt").write_text(
        "The Project Gutenberg eBook of Emma\n\nThis eBook is for the use of anyone anywhere.\n\n"
        "*** START OF THE PROJECT GUTENBERG EBOOK EMMA ***\n\nEmma Woodhouse, handsome.\n\n"
        "She was the youngest.\n\n*** END OF THE PROJECT GUTENBERG EBOOK EMMA ***\n\nLicense text.\n")
    docs = [t for _, t in texts(DocumentReader([tmp_path / "g.txt"], split=split, part="all"))]
    assert " ".join(docs).split() == "Emma Woodhouse, handsome. She was the youngest.".split()


def test_shuffle_buffer_is_bounded_deterministic_and_resumable():
    buffer = ShuffleBuffer(50, seed=3)
    out = list(buffer.shuffle(range(1000)))
    assert sorted(out) == list(range(1000)) and out != list(range(1000))
    assert all(o <= i + 50 for i, o in enumerate(out))  # the i-th item out was among the first i + 51 in
    assert out == list(ShuffleBuffer(50, seed=3).shuffle(range(1000)))
    source = iter(range(1000))
    first = ShuffleBuffer(50, seed=3)
    taken = []
    for item in first.shuffle(source):
        taken.append(item)
        if len(taken) == 300:
            break
    second = ShuffleBuffer(50, seed=99)
    second.load_state_dict(first.state_dict())
    assert taken + list(second.shuffle(source)) == out


def test_stream_batches_by_sequences_or_pieces_and_resumes():
    from spacy_bertfam.pretraining.stream import ExampleMaker, ExampleStream

    class Words(ExampleMaker):
        def make(self, key, text):
            return [w for w in text.split() if w]

    def stream():
        return ExampleStream(DocumentReader([RAW / "mobydick.txt"]), Words(), buffer_size=100, seed=0)

    assert [n for n, _ in stream().batch(7)] == list(range(7))
    s = stream()
    batches = [s.batch(0, max_pieces=30) for _ in range(50)]
    assert all(sum(map(len, (w for _, w in b))) <= 30 or len(b) == 1 for b in batches)
    flat = [w for b in batches for _, w in b]
    t = stream()
    assert flat == [w for _, w in t.batch(len(flat))]  # the same order, however batched
    # Restored mid-stream (an example held over for the next batch included), it goes on identically.
    u = stream()
    first = [u.batch(0, max_pieces=30) for _ in range(20)]
    v = stream()
    v.load_state_dict(u.state_dict())
    assert first + [v.batch(0, max_pieces=30) for _ in range(30)] == batches
