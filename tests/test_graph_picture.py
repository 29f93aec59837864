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
DOT = ROOT / "docs" / "graph.dot"
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


def png_dot(path: Path) -> str:
    """The DOT source a PNG from docs/draw_graph.py was drawn from (its text chunk); '' when it has none."""
    from PIL import Image

    with Image.open(path) as picture:
        return str(getattr(picture, "text", {}).get(draw_module().DOT_CHUNK, ""))


def dot_shape(dot: str) -> tuple[set[tuple[str, str]], set[tuple[str, str, str]]]:
    """Nodes (name, fill) and edges (tail, head, style) of a DOT text, read by Graphviz: the layout's input, not how
    one Graphviz version prints it."""
    import pygraphviz as pgv

    viz = pgv.AGraph(string=dot)
    try:
        nodes = {(str(n), str(n.attr["fillcolor"])) for n in viz.nodes()}
        edges = {(str(e[0]), str(e[1]), str(e.attr["style"])) for e in viz.edges()}
        return nodes, edges
    finally:
        viz.close()


def test_mermaid_file_matches_the_current_graph() -> None:
    mermaid = draw_module().drawable().draw_mermaid()
    assert MMD.read_text(encoding="utf-8") == mermaid, FIX
    for node in ("generate", "critique", "finalize"):
        assert f"\t{node}({node})" in mermaid
    assert "critique -.-> generate;" in mermaid  # the loop back is conditional


def test_png_is_drawn_from_the_current_graph(tmp_path: Path) -> None:
    # Graphviz writes other PNG bytes on another machine (its version, its fonts), so the picture is checked through
    # the DOT source it is laid out from, which is the same everywhere, and the PNG for being a real picture of it.
    module = draw_module()
    module.main(tmp_path / "graph.png")
    fresh = dot_shape((tmp_path / "graph.dot").read_text(encoding="utf-8"))
    assert fresh == dot_shape(DOT.read_text(encoding="utf-8")), FIX
    assert (tmp_path / "graph.mmd").read_text(encoding="utf-8") == MMD.read_text(encoding="utf-8"), FIX
    nodes, edges = fresh
    assert {name for name, _ in nodes} == {"__start__", "generate", "critique", "finalize", "__end__"}
    assert ("critique", "generate", "dotted") in edges  # the conditional loop back
    assert ("finalize", "__end__", "solid") in edges
    # The committed picture was drawn from this graph: it carries the DOT source it was laid out from (its size
    # alone would let a picture of another graph with as many rows pass).
    drawn_from = png_dot(PNG)
    assert drawn_from, f"{PNG.name} carries no DOT source: {FIX}"
    assert fresh == dot_shape(drawn_from), FIX
    assert dot_shape(png_dot(tmp_path / "graph.png")) == fresh
    fresh_w, fresh_h = png_size((tmp_path / "graph.png").read_bytes())
    committed_w, committed_h = png_size(PNG.read_bytes())
    # The same layout within what fonts change: a picture of another graph has other rows and columns.
    assert (
        abs(fresh_h - committed_h) <= 0.25 * committed_h and abs(fresh_w - committed_w) <= 0.5 * committed_w
    )


def test_review_node_changes_the_picture(tmp_path: Path) -> None:
    drawing = draw_module().drawable(human_review=True)
    out = tmp_path / "review.png"
    drawing.draw_png(str(out))
    assert "review" in drawing.draw_mermaid()
    assert png_size(out.read_bytes())[1] > png_size(PNG.read_bytes())[1]  # one more row of nodes
