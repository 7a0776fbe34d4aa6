"""Builds windowsketch's jars from scala/ before packaging (see scala/build_jar.py).

By default the jar of the pyspark installed beside the package (the newest supported
line when there is none); WINDOWSKETCH_SPARK_LINES=all builds every line, as a release
wheel holds, or a list such as 3.5,4.1.
"""
import os
import sys

from setuptools import setup
from setuptools.command.build_py import build_py

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "scala"))

import build_jar  # noqa: E402


class BuildPyWithJars(build_py):
    """Compiles the jars into the source tree, so wheels and editable installs both carry them."""

    def run(self):
        build_jar.build_for_install()
        super().run()


setup(cmdclass={"build_py": BuildPyWithJars})
