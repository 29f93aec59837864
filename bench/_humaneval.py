"""HumanEval/40-163 in bench_code.py: judging in the sandbox, the ceiling figures, and the loop and tree runs.

Every candidate is judged twice, in the package's sandbox (`CodeTestCritic`): on the **visible** tests (the
`>>>` examples of the problem's docstring, `docstring_tests`: all the loop ever sees) and on HumanEval's own
**hidden** tests (its `check(candidate)`, run by a `test_check` function). Verdicts are cached by the hash of the
tests and the code (bench/.cache/verdicts.jsonl), so a figure can be recomputed without running anything again.

The ceiling (from the raw samples of bench/_samples.py: candidate 0 is the greedy completion, candidate i >= 1 the
sample with seed i at `_samples.TEMPERATURE`):
- **pass@N**: the unbiased estimator of the HumanEval paper (Chen et al. 2021) over the 32 temperature samples,
  `1 - C(n-c, N) / C(n, N)`, summed over the problems (an expected count of problems solved);
- **any of N**: problems where one of the first N candidates (the greedy one and N-1 samples) passes;
- **best-of-N by visible**: the first of those N candidates that passes the most visible tests, judged on the
  hidden tests (what a verifier reaches without revision).
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

CACHE_DIR = Path(__file__).resolve().parent / ".cache"
VERDICTS = CACHE_DIR / "verdicts.jsonl"
NS = (1, 4, 8, 16, 32)


def hidden_tests(problem: dict[str, Any]) -> str:
    """HumanEval's own `check(candidate)`, for `CodeTestCritic(..., entry_point=...)`: it calls `check` on the
    candidate's function in a process that never runs candidate code, so the verdict cannot be forged from inside."""
    return str(problem["test"])


def visible_tests(problem: dict[str, Any]) -> str | None:
    """The docstring's `>>>` examples as tests (None when the docstring has none the package can read)."""
    from reflection_graph._code import docstring_tests

    try:
        return docstring_tests(problem["prompt"], problem["entry_point"])
    except ValueError:
        return None


def visible_critic(problem: dict[str, Any]) -> Any:
    """The critic the loop gets: a `CodeTestCritic` on the visible tests (isolation as `Judge` uses)."""
    from reflection_graph.critics.tool import CodeTestCritic

    tests = visible_tests(problem)
    return None if tests is None else CodeTestCritic(tests, timeout_s=10, isolation=Judge.isolation)


def _key(tests: str, code: str) -> str:
    return hashlib.sha256(tests.encode()).hexdigest()[:16] + hashlib.sha256(code.encode()).hexdigest()[:32]


class Judge:
    """Runs tests on code in the sandbox (`CodeTestCritic`), with a verdict cache on disk.

    `isolation="off"`: the sandbox's subprocess, time and memory limits, without its namespaces (on this machine
    the isolation probe itself takes minutes under load); the verdict is read outside the candidate's process all
    the same.
    """

    isolation = "off"

    def __init__(self, path: Path = VERDICTS) -> None:
        self.path = path
        self.lock = threading.Lock()
        self.cache: dict[str, float] = {}
        if path.exists():
            for line in path.read_text().splitlines():
                if line.strip():
                    row = json.loads(line)
                    self.cache[row["key"]] = row["score"]

    def score(self, tests: str | None, code: str, entry_point: str | None = None) -> float:
        """The share of `tests` that `code` passes, 0 to 1 (0 when there are no tests or no code that parses);
        `entry_point` names the function a `check(candidate)` test is called on."""
        from reflection_graph._extract import extract_code, is_python

        if tests is None:
            return 0.0
        key = _key(tests if entry_point is None else f"{entry_point}\n{tests}", code)
        with self.lock:
            if key in self.cache:
                return self.cache[key]
        extracted = extract_code(code)
        if not extracted.strip() or not is_python(extracted):
            value = 0.0
        else:
            from reflection_graph.critics.base import CritiqueRequest
            from reflection_graph.critics.tool import CodeTestCritic

            critic = CodeTestCritic(tests, timeout_s=10, isolation=self.isolation, entry_point=entry_point)
            verdict = critic.critique(CritiqueRequest(task="", candidate=code))
            value = 1.0 if verdict.is_acceptable else min(float(verdict.score) / 10, 0.99)
        with self.lock:
            self.cache[key] = value
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a") as out:
                out.write(json.dumps({"key": key, "score": value}) + "\n")
        return value

    def solves(self, problem: dict[str, Any], code: str) -> bool:
        """Whether `code` passes HumanEval's own (hidden) tests."""
        return self.score(hidden_tests(problem), code, entry_point=problem["entry_point"]) == 1.0


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k estimator of Chen et al. (2021): 1 - C(n-c, k) / C(n, k)."""
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def raw_candidates(problem: dict[str, Any], row: dict[str, Any]) -> list[str]:
    """The raw candidates of a problem as HumanEval runs them: the prompt followed by the completion."""
    return [problem["prompt"] + s["text"] for s in [row["greedy"], *row["samples"]]]


def ceiling(
    problems: Sequence[dict[str, Any]], rows: dict[str, dict[str, Any]], judge: Judge
) -> dict[str, Any]:
    """Raw greedy, pass@N, any-of-N and best-of-N-by-visible for N in `NS`, and tokens per problem."""
    out: dict[str, Any] = {
        "greedy": 0,
        "pass": dict.fromkeys(NS, 0.0),
        "any": dict.fromkeys(NS, 0),
        "best": dict.fromkeys(NS, 0),
        "tokens": dict.fromkeys(NS, 0),
        "per_problem": {},
    }
    for problem in problems:
        row = rows[problem["task_id"]]
        codes = raw_candidates(problem, row)
        hidden = [judge.solves(problem, code) for code in codes]
        visible = [judge.score(visible_tests(problem), code) for code in codes]
        calls = [row["greedy"], *row["samples"]]
        out["greedy"] += hidden[0]
        correct = sum(hidden[1:])
        for n in NS:
            out["pass"][n] += pass_at_k(len(hidden) - 1, correct, n)
            out["any"][n] += any(hidden[:n])
            best = max(range(n), key=lambda i: (visible[i], -i))
            out["best"][n] += hidden[best]
            out["tokens"][n] += sum(c["prompt_tokens"] + c["completion_tokens"] for c in calls[:n])
        out["per_problem"][problem["task_id"]] = {"hidden": hidden, "visible": visible}
    count = max(len(problems), 1)
    out["tokens"] = {n: round(t / count) for n, t in out["tokens"].items()}
    return out


COMPLETIONS = CACHE_DIR / "completions.jsonl"


def _call_key(prompt: str, params: dict[str, Any]) -> str:
    fields = {k: params[k] for k in ("temperature", "seed", "max_tokens", "top_p", "top_k", "min_p")}
    fields["repeat_penalty"] = params["repeat_penalty"]
    fields["stop"] = sorted(params["stop"])
    return hashlib.sha256((prompt + json.dumps(fields, sort_keys=True)).encode()).hexdigest()


class Replay:
    """llama.cpp calls already made, by prompt and settings: the raw samples (a loop's drafts are the same calls)
    and every completion made by an earlier run of this bench (bench/.cache/completions.jsonl)."""

    def __init__(self, problems: Sequence[dict[str, Any]], rows: dict[str, dict[str, Any]]) -> None:
        import _samples

        self.lock = threading.Lock()
        self.calls: dict[str, dict[str, Any]] = {}
        self.hits = self.misses = 0
        for problem in problems:
            row = rows.get(problem["task_id"])
            for call in [row["greedy"], *row["samples"]] if row else []:
                temperature = 0.0 if call is row["greedy"] else row["temperature"]
                params = _samples.sampling(temperature, call["seed"])
                self.calls[_call_key(problem["prompt"], params)] = call
        if COMPLETIONS.exists():
            for line in COMPLETIONS.read_text().splitlines():
                if line.strip():
                    entry = json.loads(line)
                    self.calls[entry["key"]] = entry["call"]

    def get(self, prompt: str, params: dict[str, Any]) -> dict[str, Any] | None:
        with self.lock:
            call = self.calls.get(_call_key(prompt, params))
            self.hits += call is not None
            self.misses += call is None
            return call

    def put(self, prompt: str, params: dict[str, Any], call: dict[str, Any]) -> None:
        key = _call_key(prompt, params)
        with self.lock:
            self.calls[key] = call
            COMPLETIONS.parent.mkdir(parents=True, exist_ok=True)
            with COMPLETIONS.open("a") as out:
                out.write(json.dumps({"key": key, "call": call}) + "\n")


def replay_model(replay: Replay, threads: int = 1) -> Any:
    """The embedded model (temperature 0, the bench's token budget and code stops) whose llama.cpp calls are
    served from `replay` when the very same call (prompt and settings) was made before."""
    import _samples

    from reflection_graph._code import CODE_STOP
    from reflection_graph.models.embedded import EmbeddedChatModel

    class ReplayModel(EmbeddedChatModel):
        def _complete(
            self, loaded: Any, prompt: str, params: dict[str, Any], grammar: Any = None
        ) -> dict[str, Any]:
            call = replay.get(prompt, params) if grammar is None else None
            if call is None:
                result = super()._complete(loaded, prompt, params, grammar)
                choice = result["choices"][0]
                call = {
                    "seed": params["seed"],
                    "text": choice["text"],
                    "finish": choice.get("finish_reason"),
                    "completion_tokens": int(result["usage"]["completion_tokens"]),
                    "prompt_tokens": int(result["usage"]["prompt_tokens"]),
                }
                if grammar is None:
                    replay.put(prompt, params, call)
            usage = {
                "prompt_tokens": call["prompt_tokens"],
                "completion_tokens": call["completion_tokens"],
                "total_tokens": call["prompt_tokens"] + call["completion_tokens"],
            }
            return {"choices": [{"text": call["text"], "finish_reason": call["finish"]}], "usage": usage}

    return ReplayModel(
        temperature=0.0, seed=0, max_tokens=_samples.MAX_TOKENS, stop=list(CODE_STOP), n_threads=threads
    )


def run_graph(
    problems: Sequence[dict[str, Any]], model: Any, judge: Judge, label: str, **settings: Any
) -> dict[str, Any]:
    """One reflection graph per problem (focus code, judged by the visible tests), the answer judged on the hidden
    tests. Problems whose docstring has no example the package can read get a single greedy draft."""
    import sys

    from reflection_graph import create_reflection_graph

    out: dict[str, Any] = {"solved": 0, "first": 0, "tokens": 0, "per_problem": {}}
    for problem in problems:
        critic = visible_critic(problem)
        options = dict(settings) if critic is not None else {"n_drafts": 1, "max_iterations": 1}
        graph = create_reflection_graph(model, critic=critic, focus="code", **options)
        result = graph.invoke({"task": problem["prompt"]})
        first_round = result["trajectory"][0]
        first = (first_round.get("samples") or [first_round])[0]["candidate"]
        solved, first_ok = judge.solves(problem, result["candidate"]), judge.solves(problem, first)
        out["solved"] += solved
        out["first"] += first_ok
        out["tokens"] += int(result["usage"]["total"]["total_tokens"])
        out["per_problem"][problem["task_id"]] = {
            "solved": solved,
            "first": first_ok,
            "rounds": result["iterations"],
            "stop": result["stop_reason"],
        }
        print(
            f"{label:>10} {problem['task_id']:<14} {'solved' if solved else 'failed'}",
            file=sys.stderr,
            flush=True,
        )
    out["tokens"] = round(out["tokens"] / max(len(problems), 1))
    return out
