"""Child process for tests/test_durability.py: runs a reflection graph or a batch so the parent can SIGKILL it.

Graph mode (`start` / `resume`): a 3-round loop with a checkpointer (SQLite file or Postgres DSN). Every model call
appends one line `"<pid> <role> <n>"` to `MARKERS/calls.log` (fsync-ed) *before* answering, so the parent knows
exactly which calls ran in which process. With `--sleep-at critique:2` the second critic call sleeps, so the
parent can kill the process there: after round 1 and the round-2 draft were checkpointed, mid round-2 critique.
`resume` continues the thread with `graph.invoke(None, config)` and prints the result as JSON.

Batch mode (`batch`): runs `reflection_graph.runners.batch.run_batch` over `--in` into `--out` with a real reflection graph
and fake models; records whose id is listed in `--fail-ids` fail (the generator raises a permanent error).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from reflection_graph import create_reflection_graph  # noqa: E402
from tests.fakes import FakeCriticModel, RecordingChatModel, critique  # noqa: E402


def _mark(markers: Path, role: str) -> int:
    """Append `pid role n` to the call log (n = this role's call number across processes) and return n."""
    log = markers / "calls.log"
    with open(log, "a+", encoding="utf-8") as fh:
        fh.seek(0)
        n = sum(1 for line in fh if line.split()[1:2] == [role]) + 1
        fh.write(f"{os.getpid()} {role} {n}\n")
        fh.flush()
        os.fsync(fh.fileno())
    return n


def _graph(markers: Path, sleep_at: tuple[str, int] | None, checkpointer: Any) -> Any:
    def gen_reply(_: Any) -> str:
        n = _mark(markers, "generate")
        if sleep_at == ("generate", n):
            time.sleep(60)
        return f"candidate {n}"

    def crit_reply(_: Any) -> dict[str, Any]:
        n = _mark(markers, "critique")
        if sleep_at == ("critique", n):
            time.sleep(60)
        return critique(float(n), issues=[f"issue {n}"])  # never acceptable, a new issue each round

    gen = RecordingChatModel(replies=[gen_reply])
    crit = FakeCriticModel(critiques=[crit_reply])
    return create_reflection_graph(
        gen, critic=crit, max_iterations=3, patience=None, checkpointer=checkpointer
    )


def _run_graph(args: argparse.Namespace) -> None:
    markers = Path(args.markers)
    sleep_at = None
    if args.sleep_at:
        role, n = args.sleep_at.split(":")
        sleep_at = (role, int(n))
    config = {"configurable": {"thread_id": args.thread}}
    if args.backend == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver

        saver_cm: Any = SqliteSaver.from_conn_string(args.conn)
    else:
        from langgraph.checkpoint.postgres import PostgresSaver

        saver_cm = PostgresSaver.from_conn_string(args.conn)
    with saver_cm as saver:
        if args.backend == "postgres":
            saver.setup()
        graph = _graph(markers, sleep_at, saver)
        if args.mode == "start":
            result = graph.invoke({"task": "Write a polite email declining a job offer"}, config)
        else:
            result = graph.invoke(None, config)
    print(json.dumps(result, default=str))


def _run_batch(args: argparse.Namespace) -> None:
    from reflection_graph.runners.batch import run_batch

    fail_ids = set(json.loads(Path(args.fail_ids).read_text())) if args.fail_ids else set()

    def gen_reply(messages: Any) -> Any:
        prompt = str(messages[-1].content)
        for rid in fail_ids:
            if f"[{rid}]" in prompt:
                return RuntimeError(f"injected failure for {rid}")
        time.sleep(args.delay)
        return "draft for " + prompt[-40:]

    def factory() -> Any:
        gen = RecordingChatModel(replies=[gen_reply])
        crit = FakeCriticModel(critiques=[critique(8.0, ok=True, issues=[])])
        return create_reflection_graph(gen, critic=crit, max_iterations=1, retries=0)

    summary = run_batch(factory, args.inp, args.out, concurrency=args.concurrency, progress=False)
    print(json.dumps(summary.to_dict()))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["start", "resume", "batch"])
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--conn", help="SQLite file path or Postgres DSN")
    parser.add_argument("--thread", default="durability")
    parser.add_argument("--markers", help="directory for calls.log")
    parser.add_argument("--sleep-at", help="ROLE:N, e.g. critique:2")
    parser.add_argument("--in", dest="inp")
    parser.add_argument("--out")
    parser.add_argument("--fail-ids", help="JSON file with the list of record ids that fail")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--delay", type=float, default=0.0)
    args = parser.parse_args()
    if args.mode == "batch":
        _run_batch(args)
    else:
        _run_graph(args)


if __name__ == "__main__":
    main()
