"""Seconds from the start of a draft's model call to its first streamed text, in Python, in the CLI and on a
`langgraph dev` client, on the embedded model, for the README's job (bench_embedded.py's task, `--rounds` 3).

The first piece with text (the embedded model streams whole sentences or lines), for the draft and each revision:
- **python**: `graph.stream(..., stream_mode="messages")` here, the model loaded first ("model load"); from the
  `generate` step's `on_chat_model_start` to its first piece.
- **cli**: `python -m reflection_graph.cli run TASK --model SPEC --max-iterations R --min-iterations R` on a
  pseudo-terminal; from the live view's "drafting (round 1)" (drawn as the step starts, once "loading the model"
  is done: "model load") to the draft's panel, drawn with its first piece; and from the launch to that panel.
- **server**: `langgraph dev` on 127.0.0.1 (`REFLECTION_GRAPH_MODEL=SPEC`, graph `reflection`, context
  `max_iterations=R`: no minimum, a run may stop earlier), a `langgraph_sdk` client streaming `messages-tuple`
  and `tasks`; from the `generate` step's `tasks` event to its first piece, as received. The server's first run
  loads the model inside its draft: a row of its own.
`--threads` is the Python path's (the others run the model's default). One JSON line a run goes to
bench/results/first-token-<model>.jsonl, with the load average before and after, the commit, the GGUF's SHA-256.

    python bench/bench_first_token.py                      # 3 runs of each path, 3 rounds each
    python bench/bench_first_token.py --paths cli,server --runs 5 --rounds 1
"""

from __future__ import annotations

import argparse
import asyncio
import codecs
import io
import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ROOT, print_table  # noqa: E402
from _raw import commit, embedded_model, file_sha256, load_average  # noqa: E402
from bench_embedded import TASK  # noqa: E402

PATHS = ("python", "cli", "server")
Event = tuple[float, str, str]
"""(seconds, "start" or "token", text): a call's start, or a piece of its reply."""
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


def first_token_delays(events: Iterable[Event]) -> list[float | None]:
    """For each start in `events` (any order), the seconds to the first piece with text after it and before the
    next start; None where no text came."""
    delays: list[float | None] = []
    start = 0.0
    for at, kind, text in sorted(events, key=lambda e: (e[0], e[1] != "start")):
        if kind == "start":
            start = at
            delays.append(None)
        elif text and delays and delays[-1] is None:
            delays[-1] = at - start
    return delays


def marker_times(reads: Iterable[tuple[float, str]], markers: Sequence[str]) -> dict[str, float]:
    """The time of the read at which each marker first shows in a terminal's output (`reads`: (seconds, text) as
    read), escape sequences taken out, a marker split across reads included."""
    found: dict[str, float] = {}
    tail = ""
    for at, text in reads:
        window = tail + text
        plain = _ANSI.sub("", window)
        for marker in markers:
            if marker not in found and marker in plain:
                found[marker] = at
        tail = window[-400:]
    return found


def cli_markers(rounds: int) -> tuple[str, list[tuple[str, str]]]:
    """The live view's "loading the model" and, per round, its status as `generate` starts and the title of the
    reply's panel (drawn with its first piece), as `reflection-graph run` words them."""
    from rich.console import Console
    from rich.text import Text

    from reflection_graph.cli._render import LOADING, _LiveRenderer

    view = _LiveRenderer(Console(file=io.StringIO()))
    pairs = []
    for done in range(rounds):
        view.round = done
        pairs.append((Text.from_markup(view.status_for("generate")).plain, view.writing_title()))
    return LOADING, pairs


def cli_events(found: dict[str, float], pairs: Sequence[tuple[str, str]]) -> list[Event]:
    """The starts and first pieces of the CLI's rounds, from when their markers showed."""
    events: list[Event] = []
    for start, token in pairs:
        if start in found:
            events.append((found[start], "start", ""))
        if token in found:
            events.append((found[token], "token", token))
    return events


def python_run(graph: Any, task: str) -> list[Event]:
    """One run of `graph` streamed as `messages`: each `generate` step's first model call start and its pieces."""
    from langchain_core.callbacks import BaseCallbackHandler

    events: list[Event] = []
    steps: set[Any] = set()

    class CallStarts(BaseCallbackHandler):
        def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
            meta = kwargs.get("metadata") or {}
            if meta.get("langgraph_node") == "generate" and meta.get("langgraph_step") not in steps:
                steps.add(meta.get("langgraph_step"))  # a step's first call (an empty reply is asked again)
                events.append((time.perf_counter(), "start", ""))

    config = {"callbacks": [CallStarts()]}
    for message, meta in graph.stream({"task": task}, config, stream_mode="messages"):
        if meta.get("langgraph_node") == "generate":
            events.append((time.perf_counter(), "token", message.text))
    return events


def cli_run(command: list[str], size: tuple[int, int] = (50, 160)) -> tuple[list[tuple[float, str]], int]:
    """`command` (`reflection-graph run ...`) on a pseudo-terminal of `size` (rows, columns), this checkout on
    its path: what it wrote, (seconds since launch, text) per read, and its exit code."""
    import fcntl
    import pty
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", *size, 0, 0))
    env = {**os.environ, "TERM": "xterm-256color", "LINES": str(size[0]), "COLUMNS": str(size[1])}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    start = time.perf_counter()
    process = subprocess.Popen(command, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=ROOT)
    os.close(slave)
    decoder, reads = codecs.getincrementaldecoder("utf-8")(errors="replace"), []
    while True:
        try:
            data = os.read(master, 1 << 16)
        except OSError:  # EIO: the command closed the terminal
            break
        if not data:
            break
        reads.append((time.perf_counter() - start, decoder.decode(data)))
    os.close(master)
    return reads, process.wait()


async def server_run(client: Any, task: str, rounds: int) -> list[Event]:
    """One run of the `reflection` graph on the server: each `generate` step's start and its message pieces."""
    thread = await client.threads.create()
    events: list[Event] = []
    async for part in client.runs.stream(
        thread["thread_id"],
        "reflection",
        input={"task": task},
        context={"max_iterations": rounds},
        stream_mode=["messages-tuple", "tasks"],
    ):
        at = time.perf_counter()
        if part.event == "error":
            raise RuntimeError(f"the server's run failed: {part.data}")
        if part.event == "tasks" and part.data.get("name") == "generate" and "result" not in part.data:
            events.append((at, "start", ""))
        elif part.event == "messages" and part.data[1].get("langgraph_node") == "generate":
            content = part.data[0].get("content")
            events.append((at, "token", content if isinstance(content, str) else ""))
    return events


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="embedded:qwen2.5-coder-1.5b", help="an embedded or local: spec")
    parser.add_argument("--runs", type=int, default=3, help="runs of each path")
    parser.add_argument("--rounds", type=int, default=3, help="rounds a run makes (the README's: 3)")
    parser.add_argument("--threads", type=int, default=None, help="llama.cpp threads, Python path only")
    parser.add_argument("--paths", default=",".join(PATHS), help="which of python,cli,server to run")
    args = parser.parse_args(argv)
    paths = [p.strip() for p in args.paths.split(",") if p.strip()]
    if not paths or set(paths) - set(PATHS):
        parser.error(f"--paths takes some of {','.join(PATHS)}, got {args.paths!r}")
    if args.runs < 1 or args.rounds < 1:
        parser.error("--runs and --rounds take 1 or more")
    found = embedded_model(args.model, n_threads=args.threads)
    if found is None:
        return 2
    model, gguf = found
    identity = {"model": args.model, "gguf_sha256": file_sha256(gguf), "commit": commit()}
    identity["rounds"] = args.rounds
    slug = re.sub(r"[^\w.-]+", "-", args.model)
    out = ROOT / "bench" / "results" / f"first-token-{slug}.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    records: list[dict[str, Any]] = []

    def record(path: str, run: int, before: float, delays: Sequence[float | None], **extra: Any) -> None:
        entry = {**identity, "path": path, "run": run, "load_before": before, "load_after": load_average()}
        entry.update(first_token_s=[None if d is None else round(d, 3) for d in delays], **extra)
        records.append(entry)
        with out.open("a") as sink:
            sink.write(json.dumps(entry) + "\n")
        print(json.dumps(entry), flush=True)

    if "python" in paths:
        from reflection_graph import Settings, create_reflection_graph

        start = time.perf_counter()
        model.invoke("Say hello.", max_tokens=4)  # load + warm up, before any timing
        loaded = round(time.perf_counter() - start, 2)
        settings = Settings(max_iterations=args.rounds, min_iterations=args.rounds)
        graph = create_reflection_graph(model, settings=settings)  # what build_graph makes of `--model SPEC`
        for run in range(1, args.runs + 1):
            before = load_average()
            delays = first_token_delays(python_run(graph, TASK))
            record("python", run, before, delays, model_load_s=loaded, threads=args.threads)
    if "cli" in paths:
        loading, pairs = cli_markers(args.rounds)
        command = [sys.executable, "-m", "reflection_graph.cli", "run", TASK, "--model", args.model]
        command += ["--max-iterations", str(args.rounds), "--min-iterations", str(args.rounds)]
        for run in range(1, args.runs + 1):
            before = load_average()
            reads, code = cli_run(command)
            seen = marker_times(reads, [loading, *(m for pair in pairs for m in pair)])
            if code != 0 or pairs[0][1] not in seen:
                tail = _ANSI.sub("", "".join(text for _, text in reads))[-1500:]
                print(f"cli run {run}: exit code {code}; the end of its output:\n{tail}", file=sys.stderr)
            drafting = seen.get(pairs[0][0])
            load = drafting - seen[loading] if drafting is not None and loading in seen else None
            launch = seen.get(pairs[0][1])
            delays = first_token_delays(cli_events(seen, pairs))
            record("cli", run, before, delays, model_load_s=load, launch_to_first_token_s=launch, exit=code)
    if "server" in paths:
        asyncio.run(_server(args, record))
    _table(records, identity)
    print(f"results: {out}")
    return 0


async def _server(args: argparse.Namespace, record: Any) -> None:
    from langgraph_sdk import get_client

    from tests.test_studio import langgraph_dev

    with langgraph_dev(env={"REFLECTION_GRAPH_MODEL": args.model}, timeout=300) as (url, _):
        client = get_client(url=url)
        for run in range(args.runs + 1):  # run 0: the server's first, the model loaded inside its draft
            before = load_average()
            delays = first_token_delays(await server_run(client, TASK, args.rounds if run else 1))
            record("server, first run (model load inside)" if run == 0 else "server", run, before, delays)


def _table(records: list[dict[str, Any]], identity: dict[str, Any]) -> None:
    def spread(values: list[float | None]) -> str:
        got = [v for v in values if v is not None]
        missing = f", {len(values) - len(got)} none" if len(got) < len(values) else ""
        return f"{statistics.median(got):.2f} / {max(got):.2f}{missing}" if got else "-"  # "-": none measured

    rows = []
    for path in dict.fromkeys(r["path"] for r in records):
        mine = [r for r in records if r["path"] == path]
        draft = [(r["first_token_s"] or [None])[0] for r in mine]
        rows.append(
            [path, len(mine), spread(draft), spread([d for r in mine for d in r["first_token_s"][1:]])]
        )
        rows[-1] += [spread([r.get(k) for r in mine]) for k in ("model_load_s", "launch_to_first_token_s")]
        rows[-1].append(f"{mine[0]['load_before']} -> {mine[-1]['load_after']}")
    print(
        f"\nfirst streamed piece, seconds from the call's start: {identity['model']} (GGUF sha256 "
        f"{identity['gguf_sha256']}), commit {identity['commit']}, {identity['rounds']} round(s) a run"
    )
    headers = ["path", "runs", "draft: median / max", "revisions: median / max", "model load s"]
    print_table([*headers, "launch to draft's first piece", "load 1-min"], rows)


if __name__ == "__main__":
    raise SystemExit(main())
