"""The notebooks in notebooks/ execute top to bottom (small n: each well under a minute)
and are committed with their outputs stripped."""

from __future__ import annotations

import glob
import importlib.util
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NOTEBOOKS = sorted(glob.glob(os.path.join(ROOT, "notebooks", "*.ipynb")))
# what each notebook needs from httpbench besides the results layer
NEEDS = {
    "01-compare-clients.ipynb": ["compare"],
    "02-load-test-a-server.ipynb": ["bench", "Server"],
    "03-explore-saved-results.ipynb": ["bench", "Server"],
    "04-versions.ipynb": ["compare"],
    "05-history.ipynb": ["history", "measure"],
}

nbformat = pytest.importorskip("nbformat", reason="pip install nbformat nbclient ipykernel")


def test_notebooks_are_present():
    assert sorted(os.path.basename(p) for p in NOTEBOOKS) == sorted(NEEDS)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=os.path.basename)
def test_notebook_outputs_are_stripped(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, cell.source[:60]


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=os.path.basename)
def test_notebook_executes(path, tmp_path, monkeypatch):
    nbclient = pytest.importorskip("nbclient", reason="pip install nbclient ipykernel")
    if importlib.util.find_spec("ipykernel") is None:
        pytest.skip("ipykernel is not installed (pip install ipykernel)")
    import httpbench

    missing = [n for n in NEEDS[os.path.basename(path)] if not hasattr(httpbench, n)]
    if missing:
        pytest.skip(f"httpbench.{', httpbench.'.join(missing)} not available in this build")
    # The kernel imports the installed httpbench; keep the source tree off its path.
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setenv("HTTPBENCH_NO_PROGRESS", "1")
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=180, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs
              if o.output_type == "error"]
    assert not errors
    # every figure cell displayed an image
    images = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs
              if "image/png" in o.get("data", {}) or "image/svg+xml" in o.get("data", {})]
    assert images, "no figure was displayed"
