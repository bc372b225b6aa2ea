"""Long fuzz run: the suite's awkward-text strategies, >= 10,000 examples per component.

Run from the repository root: `python bench/fuzz.py [--examples 10000] [--only span_qa]`.
Prints, per pipeline: examples, Docs, crashes, failed checks (non-finite vectors, spans
outside the Doc, exclusive categories not summing to 1), seconds; writes the figures
as JSON to bench/results/fuzz.json.
"""
import argparse
import json
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hypothesis import HealthCheck, given, settings  # noqa: E402

from tests.fuzz.checks import check_doc  # noqa: E402
from tests.fuzz.pipelines import PIPELINES  # noqa: E402
from tests.fuzz.strategies import batches  # noqa: E402
from tests.fuzz.test_fuzz import _docs  # noqa: E402


def fuzz(name: str, n_examples: int, tmp: Path) -> dict:
    nlp = PIPELINES[name](tmp)
    counts = {"pipeline": name, "examples": 0, "docs": 0, "crashes": 0, "failed_checks": 0}
    first_errors = []

    @settings(max_examples=n_examples, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(batch=batches)
    def run(batch):
        counts["examples"] += 1
        try:
            docs = list(nlp.pipe(_docs(name, nlp, batch)))
        except Exception:  # counted, not raised: the run goes on
            counts["crashes"] += 1
            first_errors.append(traceback.format_exc(limit=3))
            return
        for doc in docs:
            counts["docs"] += 1
            try:
                check_doc(doc, nlp)
            except AssertionError as e:
                counts["failed_checks"] += 1
                first_errors.append(f"{name}: {e!r} on {doc.text[:80]!r}")

    start = time.perf_counter()
    run()
    counts["seconds"] = round(time.perf_counter() - start, 1)
    counts["first_errors"] = first_errors[:3]
    return counts


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--examples", type=int, default=10_000)
    parser.add_argument("--only", nargs="*", default=sorted(PIPELINES))
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.only:
            r = fuzz(name, args.examples, Path(tmp) / name)
            results.append(r)
            print(f"{name:18s} examples {r['examples']:6d}  docs {r['docs']:6d}  crashes {r['crashes']}  "
                  f"failed checks {r['failed_checks']}  {r['seconds']} s", flush=True)
            for error in r["first_errors"]:
                print("   ", error.strip().replace("\n", "\n    "))
    out = ROOT / "bench" / "results" / "fuzz.json"
    out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf8")


if __name__ == "__main__":
    main()
