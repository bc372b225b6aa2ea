"""Corpus converters: counts on the real files, and the format rules on small ones."""
import re
import subprocess
import sys

import pytest
import spacy
from spacy.tokens import DocBin

from spacy_bertfam.corpora import read_conll_ner, read_textcat_csv, split_heldout

from ..conftest import ASSETS

WNUT = ASSETS / "wnut17"


def test_wnut17_sentence_and_entity_counts():
    vocab = spacy.blank("en").vocab
    train = read_conll_ner(WNUT / "wnut17train.conll", vocab)
    dev = read_conll_ner(WNUT / "emerging.dev.conll", vocab)
    assert (len(train), sum(len(d.ents) for d in train)) == (3394, 1975)
    assert (len(dev), sum(len(d.ents) for d in dev)) == (1009, 836)
    assert {e.label_ for d in train for e in d.ents} == {
        "person", "location", "group", "corporation", "product", "creative-work"}


def test_tab_only_lines_break_sentences(tmp_path):
    path = tmp_path / "x.conll"
    path.write_text("Empire\tB-location\nState\tI-location\n\t\nhello\tO\n \nworld\tO\n", encoding="utf8")
    docs = read_conll_ner(path, spacy.blank("en").vocab)
    assert [d.text for d in docs] == ["Empire State", "hello", "world"]
    assert [(e.text, e.label_) for e in docs[0].ents] == [("Empire State", "location")]


def test_iob1_and_docstart(tmp_path):
    path = tmp_path / "x.conll"
    path.write_text("-DOCSTART- O\n\nJohn I-PER\nSmith I-PER\nin O\nParis I-LOC\nI-LOC B-LOC\n", encoding="utf8")
    (doc,) = read_conll_ner(path, spacy.blank("en").vocab)
    assert [(e.text, e.label_) for e in doc.ents] == [("John Smith", "PER"), ("Paris", "LOC"), ("I-LOC", "LOC")]
    # The converter says how many entities an I- opened (John Smith, Paris), not only how many there are.
    out = subprocess.run([sys.executable, "-m", "spacy_bertfam", "convert-ner", str(path), str(tmp_path / "x.spacy")],
                         capture_output=True, text=True, check=True).stdout
    assert "1 sentences, 3 entities" in out and "2 of the entities began with an I- tag" in out, out


def test_bad_lines_are_named(tmp_path):
    path = tmp_path / "x.conll"
    path.write_text("ok O\nlonely\n", encoding="utf8")
    with pytest.raises(ValueError, match=r"x.conll:2: expected 'token tag', found 'lonely'"):
        read_conll_ner(path, spacy.blank("en").vocab)
    path.write_text("ok X-PER\n", encoding="utf8")
    with pytest.raises(ValueError, match=r"x.conll:1: tag 'X-PER' is not O, B-TYPE or I-TYPE"):
        read_conll_ner(path, spacy.blank("en").vocab)


def test_banking77_split():
    nlp = spacy.blank("en")
    docs = read_textcat_csv(ASSETS / "banking77" / "train.csv", nlp)
    assert len(docs) == 10003 and len(docs[0].cats) == 77
    assert all(sum(d.cats.values()) == 1.0 for d in docs)
    train, dev = split_heldout(docs, 0.1, seed=0)
    assert (len(train), len(dev)) == (9003, 1000)
    again, _ = split_heldout(docs, 0.1, seed=0)
    assert [d.text for d in again] == [d.text for d in train]
    assert not {d.text for d in dev} <= {d.text for d in train}


def test_convert_command_writes_docbins(tmp_path):
    out = tmp_path / "dev.spacy"
    subprocess.run([sys.executable, "-m", "spacy_bertfam", "convert-ner",
                    str(WNUT / "emerging.dev.conll"), str(out)], check=True, capture_output=True)
    docs = list(DocBin().from_disk(out).get_docs(spacy.blank("en").vocab))
    assert len(docs) == 1009


def test_convert_textcat_writes_named_train_and_dev_files(tmp_path):
    csv = tmp_path / "intents.csv"
    csv.write_text("text,category\n" + "".join(f"text number {i},{'ab'[i % 2]}\n" for i in range(20)),
                   encoding="utf8")
    train, dev = tmp_path / "train" / "textcat.spacy", tmp_path / "dev" / "textcat.spacy"
    cmd = [sys.executable, "-m", "spacy_bertfam", "convert-textcat", str(csv), "--heldout", "0.25",
           "--train-output", str(train), "--dev-output", str(dev)]
    subprocess.run(cmd, check=True, capture_output=True)
    vocab = spacy.blank("en").vocab
    sizes = [len(list(DocBin().from_disk(p).get_docs(vocab))) for p in (train, dev)]
    assert sizes == [15, 5]
    missing = subprocess.run(cmd[:5], capture_output=True, text=True)
    assert missing.returncode == 2 and "needs OUTPUT_DIR, or --train-output and --dev-output" in missing.stderr
    whole = tmp_path / "test.spacy"  # --heldout 0: a file converted whole, e.g. a separate test set
    done = subprocess.run(cmd[:5] + ["--heldout", "0", "--train-output", str(whole)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert len(list(DocBin().from_disk(whole).get_docs(vocab))) == 20
    unused = subprocess.run(cmd[:5] + ["--heldout", "0", "--train-output", str(whole), "--dev-output", str(dev)],
                            capture_output=True, text=True)
    assert unused.returncode == 2 and "--heldout 0 holds nothing out" in unused.stderr


@pytest.mark.parametrize("row, message", [
    ("I lost my card, please help,lost_card", r"rows.csv:3: more fields than the header's; a text holding a comma must be quoted"),
    ("just a text", r"rows.csv:3: the row has no category"),
    ("  ,lost_card", r"rows.csv:3: the row's text is empty"),
])
def test_a_textcat_row_that_would_lose_part_of_itself_is_refused(tmp_path, row, message):
    """An unquoted comma gave the text up to it and a new label ' please help': the category was
    dropped without a word. The command shows the error as its message, without a traceback."""
    csv = tmp_path / "rows.csv"
    csv.write_text(f"text,category\nmy card is lost,lost_card\n{row}\n", encoding="utf8")
    with pytest.raises(ValueError, match=message):
        read_textcat_csv(csv, spacy.blank("en"))
    done = subprocess.run([sys.executable, "-m", "spacy_bertfam", "convert-textcat", str(csv), str(tmp_path / "out")],
                          capture_output=True, text=True)
    assert done.returncode == 1 and re.search(message, done.stderr) and "Traceback" not in done.stderr, done.stderr
    assert not (tmp_path / "out").exists()


def test_textcat_columns_beyond_text_and_category_are_read_past(tmp_path):
    """Spreadsheets add columns and write empty trailing fields: nothing in them is text or a
    category, so nothing is lost by reading past them."""
    csv = tmp_path / "rows.csv"
    csv.write_text("id,text,category,source\n1,my card is lost,lost_card,app\n2,\"where, and when?\",delivery\n"
                   "3,top up failed,top_up,web,,\n", encoding="utf8")
    docs = read_textcat_csv(csv, spacy.blank("en"))
    assert [(d.text, max(d.cats, key=d.cats.get)) for d in docs] == [
        ("my card is lost", "lost_card"), ("where, and when?", "delivery"), ("top up failed", "top_up")]


@pytest.mark.parametrize("command", ["convert-ner", "convert-squad"])
def test_a_missing_input_file_is_one_message(tmp_path, command):
    done = subprocess.run([sys.executable, "-m", "spacy_bertfam", command, str(tmp_path / "nope.txt"),
                           str(tmp_path / "out.spacy")], capture_output=True, text=True)
    assert done.returncode == 1 and "nope.txt: no such file" in done.stderr and "Traceback" not in done.stderr


def test_textcat_csv_from_a_spreadsheet_and_its_errors(tmp_path):
    """A byte-order mark (Excel's UTF-8 CSV) was read as part of the first column's name; a row's
    line number counted rows, not lines; an empty category became a label ""; a held-out fraction
    could leave a side empty."""
    nlp = spacy.blank("en")
    csv = tmp_path / "intents.csv"
    csv.write_text("\ufefftext,category\n\"two\nlines\",a\nthree,b\n", encoding="utf8")
    assert [d.cats for d in read_textcat_csv(csv, nlp)] == [{"a": 1.0, "b": 0.0}, {"a": 0.0, "b": 1.0}]
    csv.write_text("text,category\n\"two\nlines\",a\nthree,\n", encoding="utf8")
    with pytest.raises(ValueError, match=r"intents.csv:4: the row has no category"):
        read_textcat_csv(csv, nlp)
    csv.write_text("text,category\n", encoding="utf8")
    with pytest.raises(ValueError, match="no rows"):
        read_textcat_csv(csv, nlp)
    docs = [nlp.make_doc(t) for t in "abcd"]
    for fraction in (0.1, 0.9):
        with pytest.raises(ValueError, match="leaves one side empty"):
            split_heldout(docs, fraction, seed=0)


@pytest.mark.parametrize("articles, message", [
    ("38", "--articles takes START:END"), ("0-1", "--articles takes START:END"),
    ("500:600", "no question in .* for --articles 500:600; nothing written"),
])
def test_convert_squad_refuses_bad_article_slices(tmp_path, articles, message):
    from ..conftest import TEST_DATA

    out = tmp_path / "qa.spacy"
    done = subprocess.run([sys.executable, "-m", "spacy_bertfam", "convert-squad",
                           str(TEST_DATA / "squad" / "squad-v1.1-dev-3-articles.json"), str(out),
                           "--articles", articles], capture_output=True, text=True)
    assert done.returncode == 1 and not out.exists()
    assert re.search(message, done.stderr), done.stderr


def test_a_squad_question_that_cannot_be_read_is_named(tmp_path):
    import json

    from spacy_bertfam.corpora.squad import read_squad

    data = {"data": [{"title": "Rhine", "paragraphs": [{"context": "The Rhine flows.", "qas": [
        {"id": "q7", "question": "  ", "answers": [{"text": "Rhine", "answer_start": 4}]}]}]}]}
    (tmp_path / "s.json").write_text(json.dumps(data))
    with pytest.raises(ValueError, match=r"Question q7 of article 'Rhine': .*non-empty"):
        read_squad(tmp_path / "s.json", spacy.blank("en"))
