"""Run a workflow command with its profile's budget: `python scripts/budget.py PROFILE STEP -- CMD ...`.

spaCy project commands cannot choose overrides by a variable, so each budgeted command goes
through here: CMD gets `--key value` for every setting of STEP in `configs/profiles.yml`
(the `default` profile, then the named profile's changes on top), is printed, and is run.
"""
import shlex
import subprocess
import sys
from pathlib import Path

import srsly

PROFILES = Path(__file__).resolve().parents[1] / "configs" / "profiles.yml"


def overrides(profile: str, step: str) -> list:
    """The `--key value` arguments of `step` under `profile`."""
    profiles = srsly.read_yaml(PROFILES)
    if profile not in profiles:
        sys.exit(f"Unknown profile {profile!r}: {PROFILES} has {sorted(profiles)}; pass --vars.profile NAME")
    if step not in profiles["default"]:
        sys.exit(f"Step {step!r} has no budget in the default profile of {PROFILES}: add it there")
    settings = {**profiles["default"][step], **(profiles[profile] or {}).get(step, {})}
    return [arg for key, value in settings.items() for arg in (f"--{key}", str(value))]


def main(argv: list) -> int:
    if len(argv) < 4 or argv[2] != "--":
        sys.exit(__doc__)
    command = argv[3:] + overrides(argv[0], argv[1])
    if command[0] in ("python", "python3"):  # the interpreter spaCy runs the project with
        command[0] = sys.executable
    print("$ " + shlex.join(command), flush=True)
    return subprocess.run(command).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
