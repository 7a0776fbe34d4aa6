"""README's set-up and test commands are the ones CI runs."""
from __future__ import annotations

import os

from conftest import ROOT


def ci_commands():
    with open(os.path.join(ROOT, ".ci", "run")) as f:
        lines = [line.strip() for line in f]
    return [line for line in lines
            if line and not line.startswith(("#", "set ", "cd ", "export "))]


def test_ci_runs_exactly_the_commands_readme_gives():
    with open(os.path.join(ROOT, "README.md")) as f:
        readme = f.read()
    commands = ci_commands()
    assert commands == ["pip install -e '.[test]'", "pytest --spark-lines=all"]
    for command in commands:
        assert f"```bash\n{command}\n```" in readme
