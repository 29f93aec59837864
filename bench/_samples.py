"""The raw samples of HumanEval/40-163 on the embedded model, drawn once and cached (bench/.cache, gitignored).

For each problem: one greedy completion (temperature 0) and `SAMPLES` completions at `TEMPERATURE` with seeds
1..SAMPLES, by llama.cpp alone (no reflection_graph code in the generation), with the sampling settings and stop
sequences the loop's embedded model uses (`EmbeddedChatModel`'s defaults plus the code stops), so that the loop's
drafts are the very same calls: the loop's first draft is the greedy completion, its i-th draft sample i.

    python bench/_samples.py            # fills the cache, problem by problem (resumable)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common  # noqa: E402,F401  (puts the repository on sys.path)

CACHE = Path(__file__).resolve().parent / ".cache" / "humaneval-samples.jsonl"
SAMPLES = 32
TEMPERATURE = 0.7
"""The temperature the loop samples its drafts at (reflection_graph._nodes.SAMPLE_TEMPERATURE): best-of-N and the
loop's drafts are then the same samples. Chosen before any run, nothing tuned on the problems."""
MAX_TOKENS = 128


def sampling(temperature: float, seed: int) -> dict[str, Any]:
    """llama.cpp completion settings: `EmbeddedChatModel`'s defaults and stop sequences plus the code stops."""
    from reflection_graph._code import CODE_STOP
    from reflection_graph.models.embedded import EmbeddedChatModel

    model = EmbeddedChatModel(temperature=temperature, seed=seed, max_tokens=MAX_TOKENS, stop=list(CODE_STOP))
    return model._sampling(None, {}, model._loaded())  # with the model's own stops


def load_llama(threads: int = 1) -> Any:
    """The bundled GGUF in llama.cpp, loaded as the embedded model loads it."""
    from reflection_graph.models.embedded import _load, default_model_path

    return _load(default_model_path(), 2048, threads).llama


def complete(llama: Any, prompt: str, temperature: float, seed: int) -> dict[str, Any]:
    out = llama.create_completion(prompt, **sampling(temperature, seed))
    choice = out["choices"][0]
    return {
        "seed": seed,
        "text": choice["text"],
        "finish": choice.get("finish_reason"),
        "completion_tokens": int(out["usage"]["completion_tokens"]),
        "prompt_tokens": int(out["usage"]["prompt_tokens"]),
    }


def read_cache(path: Path = CACHE) -> dict[str, dict[str, Any]]:
    if not path.exists():
        return {}
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {row["task_id"]: row for row in rows}


def fill(numbers: list[int] | None, threads: int, path: Path = CACHE) -> None:
    from reflection_graph.runners.humaneval import problems

    path.parent.mkdir(parents=True, exist_ok=True)
    done = read_cache(path)
    llama = load_llama(threads)
    for problem in problems(numbers):
        if problem["task_id"] in done:
            continue
        start = time.monotonic()
        prompt = problem["prompt"]
        row = {
            "task_id": problem["task_id"],
            "temperature": TEMPERATURE,
            "greedy": complete(llama, prompt, 0.0, 0),
            "samples": [complete(llama, prompt, TEMPERATURE, seed) for seed in range(1, SAMPLES + 1)],
        }
        with path.open("a") as out:
            out.write(json.dumps(row) + "\n")
        print(f"{problem['task_id']} {time.monotonic() - start:.0f}s", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ids", type=str, default=None, help="Problem numbers, e.g. 40-79 (default 40-163).")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    numbers = None
    if args.ids:
        low, _, high = args.ids.partition("-")
        numbers = list(range(int(low), int(high or low) + 1))
    fill(numbers, args.threads)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
