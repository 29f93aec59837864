"""The README picture (docs/graph.png) and its Mermaid text (docs/graph.mmd) match the current reflection graph.

Regenerate both with `python -m reflection_graph.draw docs/graph.png` when the graph's shape changes.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path
from typing import Any

from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from reflection_graph.draw import main, png_mermaid_text, reflection_drawable, render_png

ROOT = Path(__file__).resolve().parent.parent
PNG = ROOT / "docs" / "graph.png"
MMD = ROOT / "docs" / "graph.mmd"
FIX = "regenerate with: python -m reflection_graph.draw docs/graph.png"


def decode(data: bytes) -> tuple[int, int, bytes]:
    """Width, height and raw scanlines of a PNG (enough for the files render_png writes)."""
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    offset, idat, size = 8, b"", (0, 0)
    while offset < len(data):
        (length,) = struct.unpack(">I", data[offset : offset + 4])
        kind, body = data[offset + 4 : offset + 8], data[offset + 8 : offset + 8 + length]
        (crc,) = struct.unpack(">I", data[offset + 8 + length : offset + 12 + length])
        assert crc == zlib.crc32(kind + body) & 0xFFFFFFFF, f"bad CRC in {kind!r}"
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
            assert (depth, color) == (8, 2)  # 8-bit RGB
            size = (width, height)
        elif kind == b"IDAT":
            idat += body
        offset += 12 + length
    raw = zlib.decompress(idat)
    assert len(raw) == size[1] * (1 + 3 * size[0])
    return size[0], size[1], raw


def test_mermaid_file_matches_the_current_graph() -> None:
    assert MMD.read_text(encoding="utf-8") == reflection_drawable().draw_mermaid(), FIX


def test_png_was_drawn_from_the_same_graph() -> None:
    data = PNG.read_bytes()
    assert png_mermaid_text(data) == MMD.read_text(encoding="utf-8"), FIX
    drawable = reflection_drawable()
    expected = render_png(drawable, title="reflection graph", mermaid=drawable.draw_mermaid())
    assert decode(data) == decode(expected), FIX  # same pixels as a fresh rendering


def test_picture_shows_nodes_and_both_edge_styles() -> None:
    width, height, raw = decode(PNG.read_bytes())
    assert 300 <= width <= 1200 and 300 <= height <= 1200
    mermaid = MMD.read_text(encoding="utf-8")
    for node in ("generate", "critique", "finalize"):
        assert f"\t{node}({node})" in mermaid
    assert "critique -.-> generate;" in mermaid  # the loop back is conditional
    stride = 1 + 3 * width
    rows = [raw[y * stride + 1 : (y + 1) * stride] for y in range(height)]  # drop each row's filter byte
    ink = sum(1 for row in rows for i in range(0, len(row), 3) if row[i : i + 3] == bytes((40, 36, 64)))
    assert ink > 2000  # the labels are drawn


def test_cli_writes_png_and_mermaid(tmp_path: Path) -> None:
    out = tmp_path / "pics" / "review.png"
    assert main([str(out), "--human-review"]) == 0
    mermaid = out.with_suffix(".mmd").read_text(encoding="utf-8")
    assert "review" in mermaid and png_mermaid_text(out.read_bytes()) == mermaid
    assert decode(out.read_bytes())[1] > decode(PNG.read_bytes())[1]  # one more row of nodes


class _S(TypedDict, total=False):
    x: int


def _node(state: _S) -> dict[str, Any]:
    return {}


def test_renderer_handles_branches_and_labels() -> None:
    builder = StateGraph(_S)
    for name in ("a", "b", "c", "d"):
        builder.add_node(name, _node)
    builder.add_edge(START, "a")
    builder.add_conditional_edges("a", lambda s: "b", {"left": "b", "right": "c"})
    builder.add_edge("b", "d")
    builder.add_edge("c", "d")
    builder.add_edge("d", END)
    drawable = builder.compile().get_graph()
    data = render_png(drawable)
    width, height, _ = decode(data)
    assert png_mermaid_text(data) == drawable.draw_mermaid()
    assert width > 2 * 24 and height > 4 * 40  # four layers, b and c side by side
