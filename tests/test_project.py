"""`spacy project run all --vars.profile quick` end to end, then the en_bertfam wheel by name."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNS = ["ner_bert", "ner_bert_frozen", "ner_elmo", "ner_gpt", "textcat_bert", "textcat_elmo", "textcat_gpt",
        "qa_bert", "qa_bert_bidaf", "qa_elmo", "qa_gpt", "joint"]

CHECK = """
import json, sys
import numpy as np
import spacy
from spacy_bertfam import ask
from spacy_bertfam.encoders import torch_encoder
packaged = spacy.load("en_bertfam")
trained = spacy.load(sys.argv[1])
calls = []
torch_encoder(packaged.get_pipe("bert_encoder").model).register_forward_hook(lambda *_: calls.append(1))
text = "Alex moved from Berlin to Chicago to work for Google. When will my card arrive?"
a, b = packaged(text), trained(text)
passes = len(calls)
answers = ask(packaged, a, ["Where did Alex move to?"])
print(json.dumps({
    "pipes": packaged.pipe_names,
    "from": spacy.util.get_package_path("en_bertfam").as_posix(),
    "passes": passes,
    "n_cats": len(a.cats),
    "same_tensor": bool(np.allclose(a.tensor, b.tensor, atol=1e-5)),
    "same_ents": [(e.start, e.end, e.label_) for e in a.ents] == [(e.start, e.end, e.label_) for e in b.ents],
    "same_cats": all(abs(a.cats[k] - b.cats[k]) < 1e-5 for k in b.cats),
    "answer_of_doc": answers[0].span is None or answers[0].span.doc is a,
    "performance": sorted(packaged.meta["performance"]),
}))
"""


def test_quick_profile_makes_every_file_and_an_installable_en_bertfam(tmp_path, minilm_dir):
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(ROOT / "project.yml", project)
    for folder in ("configs", "assets", "scripts"):
        shutil.copytree(ROOT / folder, project / folder)
    assets = subprocess.run([sys.executable, "-m", "spacy", "project", "assets", str(project)],
                            capture_output=True, text=True, cwd=project)
    assert assets.returncode == 0 and "matching checksum" in assets.stdout, assets.stdout[-2000:]
    result = subprocess.run([sys.executable, "-m", "spacy", "project", "run", "all", str(project),
                             "--vars.profile", "quick"], capture_output=True, text=True, cwd=project)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "Answers (Spans of the same Doc)" in result.stdout  # the demo step ran on the joint model
    metrics = project / "metrics"
    for run in RUNS:
        data = json.loads((metrics / f"{run}.json").read_text())
        assert data["params"] > 0 and data["pretraining"]["steps"] == 2, run
    assert json.loads((metrics / "joint.json").read_text())["scores"].keys() == {"ner", "textcat", "qa"}
    report = (metrics / "COMPARISON.md").read_text()
    assert "profile `quick`" in report and "en_bertfam: one BERT, three heads" in report
    assert (metrics / "comparison.png").read_bytes()[:4] == b"\x89PNG"
    assert "Where did I move to?" in (metrics / "en_bertfam_displacy.html").read_text()  # answers rendered
    for family in ("bert", "elmo", "gpt"):
        config = json.loads((project / "training" / f"pretrain_{family}" / "final" / "config.json").read_text())
        assert config["spacy_bertfam"]["family"] == family

    wheel = project / "packages" / "en_bertfam-0.1.0" / "dist" / "en_bertfam-0.1.0-py3-none-any.whl"
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(wheel)],
                   check=True)
    card = next(site.glob("en_bertfam/en_bertfam-*/README.md")).read_text()
    assert "CC BY-SA 4.0" in card and "Apache-2.0" in card and "WNUT-17" in card
    env = dict(os.environ, PYTHONPATH=str(site), HF_HUB_OFFLINE="1")
    check = subprocess.run([sys.executable, "-c", CHECK, str(project / "training" / "joint" / "model-last")],
                           capture_output=True, text=True, env=env, cwd=tmp_path)
    assert check.returncode == 0, check.stderr[-3000:]
    out = json.loads(check.stdout.strip().splitlines()[-1])
    assert out["pipes"] == ["bert_encoder", "ner", "textcat", "span_qa"]
    assert out["from"].startswith(site.as_posix())  # the installed package, not a stray copy
    assert out["passes"] == 1 and out["n_cats"] == 77  # entities and categories from one encoder pass
    assert out["same_tensor"] and out["same_ents"] and out["same_cats"]  # the package carries the weights
    assert out["answer_of_doc"]
    assert {"ents_f", "cats_score", "qa_f1"} <= set(out["performance"])  # measured scores in meta.json
