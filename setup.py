"""Builds the windowsketch jar from scala/ before packaging (see scala/build_jar.py)."""
import glob
import os
import re
import sys

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "scala"))

import build_jar  # noqa: E402


def version() -> str:
    with open(os.path.join(HERE, "python", "windowsketch", "__init__.py")) as f:
        return re.search(r'^__version__ = "([^"]+)"', f.read(), re.M).group(1)


class BuildPyWithJar(build_py):
    """Compiles the jar into the source tree, so wheels and editable installs both carry it."""

    def run(self):
        jars_dir = os.path.join(HERE, "python", "windowsketch", "jars")
        jar = os.path.join(jars_dir, f"windowsketch-{version()}.jar")
        for stale in glob.glob(os.path.join(jars_dir, "*.jar")):
            if stale != jar:
                os.remove(stale)
        if not build_jar.is_up_to_date(jar):
            build_jar.build(jar, version())
        super().run()


setup(cmdclass={"build_py": BuildPyWithJar})
