"""The documentation site builds strictly, its references are the code's, README is a landing page."""
from __future__ import annotations

import importlib
import os
import pkgutil
import re
import subprocess
import sys
import tomllib

import yaml

from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "scripts"))
import docs_reference  # noqa: E402
import gallery  # noqa: E402

sys.path.pop(0)

DOCS = os.path.join(ROOT, "docs")


def read(*path: str) -> str:
    with open(os.path.join(ROOT, *path)) as f:
        return f.read()


def test_the_sql_reference_is_what_the_registered_functions_say(spark):
    assert read("docs", "reference", "sql.md") == docs_reference.sql_reference(spark), (
        "docs/reference/sql.md is stale: run python scripts/docs_reference.py")


def test_the_scala_reference_is_what_the_sources_say():
    page = docs_reference.scala_reference()
    assert read("docs", "reference", "scala.md") == page, (
        "docs/reference/scala.md is stale: run python scripts/docs_reference.py")
    # Every public method of the user-facing objects is listed, each with its doc.
    for name in ("approx_window_percentile", "window_top_k_sketch_estimate", "topK",
                 "alertAbove", "register"):
        assert f"def {name}(" in page or f"def {name}:" in page
    undocumented = re.findall(r"```scala\n([^`]*)```\n(?:\n(?:```|#)|$)", page)
    assert not undocumented, f"Scala methods without a doc: {undocumented}"


def test_the_scala_reader_keeps_overloads_defaults_and_docs():
    source = """object functions {
  /** Counts.
   * @param v the events
   */
  def count(v: Column, eps: Double = 0.01): Column =
    call(v)

  def count(v: String): Column = count(col(v))

  private def hidden(x: Int): Int = x

  def fromPython(x: Int): Int = x
}
object Other {
  def notListed(x: Int): Int = x
}""".splitlines()
    members, docs = docs_reference.scala_members(source, ("functions",))
    assert [(name, signature) for name, _, signature in members["functions"]] == [
        ("count", "def count(v: Column, eps: Double = 0.01): Column"),
        ("count", "def count(v: String): Column")]
    assert members["functions"][0][1] == "Counts.\n\n- `v`: the events"
    assert members["functions"][1][1] == ""


def test_the_site_builds_with_no_warning(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert result.returncode == 0, result.stderr[-5000:]
    python_api = (tmp_path / "reference" / "python" / "index.html").read_text()
    for module in python_modules():
        for name in public_functions(module):
            if name == "__version__":
                continue
            assert f'id="{module}.{name}"' in python_api, f"{module}.{name} is not in the site"


def nav_pages(entries) -> list[str]:
    pages = []
    for entry in entries:
        value = entry if isinstance(entry, str) else next(iter(entry.values()))
        pages.extend(nav_pages(value) if isinstance(value, list) else [value])
    return pages


def mkdocs_config() -> dict:
    class Loader(yaml.SafeLoader):
        pass

    # mkdocs.yml may hold !ENV and !relative tags; the nav holds neither.
    Loader.add_multi_constructor("!", lambda loader, suffix, node: None)
    with open(os.path.join(ROOT, "mkdocs.yml")) as f:
        return yaml.load(f, Loader=Loader)


def test_every_page_is_in_the_navigation():
    pages = set()
    for folder, _, files in os.walk(DOCS):
        pages.update(os.path.relpath(os.path.join(folder, f), DOCS)
                     for f in files if f.endswith(".md"))
    assert set(nav_pages(mkdocs_config()["nav"])) == pages


def python_modules() -> list[str]:
    """The package's public modules: those the Python reference documents."""
    import windowsketch

    found = ["windowsketch"]
    for module in pkgutil.walk_packages(windowsketch.__path__, "windowsketch."):
        if not any(part.startswith("_") for part in module.name.split(".")):
            found.append(module.name)
    # Commands, not an API: `windowsketch demo`, `windowsketch sql`.
    return [m for m in found if m not in ("windowsketch.cli", "windowsketch.demo")
            and not m.startswith("windowsketch.sketch.")]


def public_functions(module_name: str) -> list[str]:
    module = importlib.import_module(module_name)
    names = getattr(module, "__all__", None) or [
        n for n, v in vars(module).items() if not n.startswith("_") and callable(v)
        and getattr(v, "__module__", None) == module_name]
    return sorted(names)


def test_the_python_reference_names_every_public_module():
    page = read("docs", "reference", "python.md")
    assert sorted(re.findall(r"^::: (\S+)", page, re.M)) == sorted(python_modules())
    members = re.search(r"members: \[(.*)\]", page).group(1).split(", ")
    import windowsketch

    assert sorted(members) == sorted(n for n in windowsketch.__all__ if n != "__version__")


def test_the_gallery_is_what_its_script_draws():
    drawn = sorted(f for f in os.listdir(os.path.join(DOCS, "gallery")) if f.endswith(".png"))
    assert drawn == sorted(gallery.FIGURES)
    shown = read("docs", "gallery.md")
    assert all(f"(gallery/{figure})" in shown for figure in gallery.FIGURES)


def test_readme_is_a_landing_page_whose_links_resolve():
    readme = read("README.md")
    assert len(readme.splitlines()) < 200
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme)
    assert len(links) > 20
    for link in links:
        if not link.startswith("http"):
            assert os.path.exists(os.path.join(ROOT, link)), link


def test_the_test_extra_installs_the_docs_tools():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        extras = tomllib.load(f)["project"]["optional-dependencies"]
    assert set(extras["docs"]) <= set(extras["test"])
