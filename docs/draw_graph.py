"""Draw the README picture with LangGraph's own drawing: `python docs/draw_graph.py`.

Writes docs/graph.png (`get_graph().draw_png()`, Graphviz through pygraphviz from the `draw` extra),
docs/graph.dot (the DOT source LangGraph's `PngDrawer` hands to Graphviz) and docs/graph.mmd (`draw_mermaid()`).
tests/test_graph_picture.py compares the two text forms with the current graph: they are the same on every machine,
while the PNG's bytes depend on the Graphviz build and its fonts. So that the picture is tied to the graph it shows,
the PNG carries the DOT source it was drawn from in a text chunk (`DOT_CHUNK`, written with Pillow).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from reflection_graph import create_reflection_graph

DOCS = Path(__file__).resolve().parent
DOT_CHUNK = "reflection-graph:dot"
"""The PNG text chunk that holds the DOT source the picture was laid out from."""


def drawable(**options: Any) -> Any:
    """The reflection graph's drawing (a stand-in model: drawing calls no model)."""
    return create_reflection_graph(lambda prompt: "", **options).get_graph()


def dot_source(graph: Any) -> str:
    """The DOT text that `draw_png` lays out: LangGraph's own `PngDrawer` steps, without running Graphviz."""
    import pygraphviz as pgv
    from langchain_core.runnables.graph_png import PngDrawer

    drawer = PngDrawer()
    viz = pgv.AGraph(directed=True, nodesep=0.9, ranksep=1.0)
    drawer.add_nodes(viz, graph)
    drawer.add_edges(viz, graph)
    drawer.add_subgraph(viz, [node.split(":") for node in graph.nodes])
    drawer.update_styles(viz, graph)
    try:
        return str(viz.string())
    finally:
        viz.close()


def main(out: Path = DOCS / "graph.png") -> None:
    from PIL import Image, PngImagePlugin

    graph = drawable()
    dot = dot_source(graph)
    out.with_suffix(".mmd").write_text(graph.draw_mermaid(), encoding="utf-8")
    out.with_suffix(".dot").write_text(dot, encoding="utf-8")
    graph.draw_png(str(out))
    info = PngImagePlugin.PngInfo()
    info.add_text(DOT_CHUNK, dot)
    with Image.open(out) as picture:
        picture.load()
        picture.save(out, pnginfo=info)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else DOCS / "graph.png")
