"""Draw the README picture with LangGraph's own drawing: `python docs/draw_graph.py`.

Writes docs/graph.png (`get_graph().draw_png()`, Graphviz through pygraphviz from the `draw` extra) and
docs/graph.mmd (`draw_mermaid()`). tests/test_graph_picture.py redraws both and fails when they no longer match the
graph.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from reflection_graph import create_reflection_graph

DOCS = Path(__file__).resolve().parent


def drawable(**options: Any) -> Any:
    """The reflection graph's drawing (a stand-in model: drawing calls no model)."""
    return create_reflection_graph(lambda prompt: "", **options).get_graph()


def main(out: Path = DOCS / "graph.png") -> None:
    graph = drawable()
    out.with_suffix(".mmd").write_text(graph.draw_mermaid(), encoding="utf-8")
    graph.draw_png(str(out))


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else DOCS / "graph.png")
