"""`spacy project run all` end to end (a few steps each), then the package by name."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHECK = """
import json, sys
import numpy as np
import spacy
packaged = spacy.load("en_bertfam")
trained = spacy.load(sys.argv[1])
text = "Alex moved from Berlin to Chicago to work for Google."
a, b = packaged(text), trained(text)
print(json.dumps({
    "pipes": packaged.pipe_names,
    "name": packaged.meta["name"],
    "from": spacy.util.get_package_path("en_bertfam").as_posix(),
    "tensor_shape": list(a.tensor.shape),
    "same_tensor": bool(np.allclose(a.tensor, b.tensor, atol=1e-5)),
    "same_ents": [(e.start, e.end, e.label_) for e in a.ents] == [(e.start, e.end, e.label_) for e in b.ents],
}))
"""


def test_workflow_builds_an_installable_en_bertfam(tmp_path, minilm_dir):
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(ROOT / "project.yml", project)
    for folder in ("configs", "assets"):
        shutil.copytree(ROOT / folder, project / folder)
    result = subprocess.run(
        [sys.executable, "-m", "spacy", "project", "run", "all", str(project),
         "--vars.pretrain_steps", "2", "--vars.train_steps", "2"],
        capture_output=True, text=True, cwd=project,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert json.loads((project / "training" / "pretrain" / "final" / "config.json").read_text())["spacy_bertfam"]["family"] == "bert"
    assert "ents_f" in json.loads((project / "training" / "ner_metrics.json").read_text())
    sdist = project / "packages" / "en_bertfam-0.1.0" / "dist" / "en_bertfam-0.1.0.tar.gz"
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                    "--target", str(site), str(sdist)], check=True)
    env = dict(os.environ, PYTHONPATH=str(site), HF_HUB_OFFLINE="1")
    check = subprocess.run([sys.executable, "-c", CHECK, str(project / "training" / "ner" / "model-best")],
                           capture_output=True, text=True, env=env, cwd=tmp_path)
    assert check.returncode == 0, check.stderr[-3000:]
    out = json.loads(check.stdout.strip().splitlines()[-1])
    assert out["pipes"] == ["bert_encoder", "ner"] and out["name"] == "bertfam"
    assert out["from"].startswith(site.as_posix())  # the installed package, not a stray copy
    assert out["tensor_shape"] == [11, 384]
    assert out["same_tensor"] and out["same_ents"]  # the package carries the trained weights
