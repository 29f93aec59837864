"""The README picture (docs/graph.png) and its Mermaid text (docs/graph.mmd) match the current reflection graph.

Both are drawn by LangGraph itself (`draw_png` through Graphviz, `draw_mermaid`); regenerate them with
`python docs/draw_graph.py` when the graph's shape changes.
"""

from __future__ import annotations

import importlib.util
import struct
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
PNG = ROOT / "docs" / "graph.png"
MMD = ROOT / "docs" / "graph.mmd"
FIX = "regenerate with: python docs/draw_graph.py"


def draw_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("draw_graph", ROOT / "docs" / "draw_graph.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def png_size(data: bytes) -> tuple[int, int]:
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_mermaid_file_matches_the_current_graph() -> None:
    mermaid = draw_module().drawable().draw_mermaid()
    assert MMD.read_text(encoding="utf-8") == mermaid, FIX
    for node in ("generate", "critique", "finalize"):
        assert f"\t{node}({node})" in mermaid
    assert "critique -.-> generate;" in mermaid  # the loop back is conditional


def test_png_is_what_langgraph_draws_for_the_current_graph(tmp_path: Path) -> None:
    module = draw_module()
    module.main(tmp_path / "graph.png")
    fresh = (tmp_path / "graph.png").read_bytes()
    assert PNG.read_bytes() == fresh, FIX  # Graphviz output is deterministic for one graph and version
    assert (tmp_path / "graph.mmd").read_text(encoding="utf-8") == MMD.read_text(encoding="utf-8")


def test_review_node_changes_the_picture(tmp_path: Path) -> None:
    drawing = draw_module().drawable(human_review=True)
    out = tmp_path / "review.png"
    drawing.draw_png(str(out))
    assert "review" in drawing.draw_mermaid()
    assert png_size(out.read_bytes())[1] > png_size(PNG.read_bytes())[1]  # one more row of nodes
