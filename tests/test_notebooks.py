"""Execute the notebooks with nbclient (kernel `python3`, cwd = the repository root, no network).

`subgraph.ipynb` and `agent.ipynb` use fake models defined in the notebook; `gleaning.ipynb` and `gain.ipynb` (the
eval's gain report) run the embedded model (marked `embedded`). Each cell has a time limit. The notebooks are
stored WITH their executed outputs, so that a reader on GitHub sees the results; they import the installed package (no `sys.path` edits). Re-store one after
editing it with `python tests/test_notebooks.py NAME.ipynb`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat", reason='needs pip install "reflection-graph[dev]"')
nbclient = pytest.importorskip("nbclient", reason='needs pip install "reflection-graph[dev]"')

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
CELL_TIMEOUT_S = 240


def execute(name: str, timeout: int = CELL_TIMEOUT_S) -> nbformat.NotebookNode:
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    client = nbclient.NotebookClient(
        notebook,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(ROOT)}},
    )
    client.execute()
    return notebook


def outputs_text(notebook: nbformat.NotebookNode) -> str:
    parts = []
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            parts.append(output.get("text", "") or str(output.get("data", {}).get("text/plain", "")))
    return "\n".join(parts)


@pytest.mark.parametrize("path", sorted(NOTEBOOKS.glob("*.ipynb")), ids=lambda p: p.name)
def test_notebooks_are_stored_executed_and_import_the_installed_package(path: Path) -> None:
    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code, f"{path.name}: no code cells"
    counts = [cell.execution_count for cell in code]
    assert counts == list(range(1, len(code) + 1)), (
        f"{path.name}: store it executed top to bottom (python tests/test_notebooks.py {path.name}); "
        f"execution counts are {counts}"
    )
    assert any(cell.outputs for cell in code), f"{path.name}: stored without outputs"
    assert not any("sys.path" in cell.source for cell in code), f"{path.name}: import the installed package"


def test_subgraph_notebook_runs() -> None:
    notebook = execute("subgraph.ipynb")
    text = outputs_text(notebook)
    assert "(refined in 2 round(s), stop reason: accepted" in text
    assert "reflect" in text and "Hi! Ask me to write something" in text


@pytest.mark.embedded
def test_gleaning_notebook_runs_on_the_embedded_model() -> None:
    pytest.importorskip("llama_cpp", reason='needs pip install "reflection-graph[local]"')
    notebook = execute("gleaning.ipynb")
    text = outputs_text(notebook)
    assert "Round 1: needs_improvement=" in text and "feedback:" in text
    assert "stop reason:" in text and "----- draft -----" in text


@pytest.mark.embedded
def test_gain_notebook_runs_the_eval_on_the_embedded_model() -> None:
    pytest.importorskip("llama_cpp", reason='needs pip install "reflection-graph[local]"')
    notebook = execute("gain.ipynb")
    text = outputs_text(notebook)
    assert "round" in text and "mean score" in text and "capital-france" in text
    assert "max_iterations" in text and '"right_to_wrong"' in text
    images = [o for c in notebook.cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    assert len(images) == 1  # the gain plot, embedded in the notebook


# Re-store notebooks with fresh outputs: python tests/test_notebooks.py NAME.ipynb ...
if __name__ == "__main__":
    import sys

    for name in sys.argv[1:]:  # a loaded machine may need longer than the test's cell limit
        nbformat.write(execute(name, timeout=3600), NOTEBOOKS / name)
