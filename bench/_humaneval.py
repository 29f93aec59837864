"""HumanEval/40-163 in bench_code.py: the four variants side by side, judged on HumanEval's own tests, resumable.

Every candidate is judged in the package's sandbox (`CodeTestCritic`) on the **visible** tests (the examples of
the problem's docstring, `docstring_tests`: `>>>` examples, or prose ones such as `f(x) ==> y`; all the loop ever
sees) and on HumanEval's own **hidden** tests (its `check(candidate)`, through `CodeTestCritic`'s `entry_point`
path: the verdict is decided in a process that never runs the candidate's code).

Every variant gets the same task, in a user's own words (`TASK`: "Complete the Python function below. ..." and
the stub in a fence), and each reply becomes the function the same way (`finish_candidate`: the fenced code, with
the stub's imports put back when the reply left them out). For each problem, with one GGUF:
- **raw**: what a user writes without the package: llama-cpp-python's own `Llama(model_path)` and one
  `create_chat_completion` of the task at temperature 0, every other setting llama-cpp-python's default except
  `max_tokens` (the package's reply limit for the model, so both sides can be cut at the same place; cut replies
  are counted) and `n_ctx` (the model profile's);
- **loop**: `create_reflection_graph(model, critic=<visible tests>, focus="code")` on the package's embedded
  model with every default (the code focus's settings unless given), judged on the hidden tests. Its first draft
  is the same greedy call as raw (tests/models/test_embedded.py checks it byte for byte on Qwen): it is made for
  real on every `VERIFY_EVERY`-th problem, and the report counts how often it gives raw's code; on the others
  raw's reply is served as the first draft (half the model time on 2 cores);
- **samples**: for best-of-N, candidates 1..K at `SAMPLE_TEMPERATURE` (seeds 1..K: the loop's own draft
  samples), drawn only where raw fails a visible example (where it passes them all, best-of-N by the visible
  examples picks raw, whatever the samples are);
- **tree**: the same graph with `strategy="tree"`.

The package's model calls go through `CachedModel` (bench/_runs.py, as are the results file and `SERVED`), a call cache keyed by the GGUF, the messages and the sampling
settings: a call made once (the tree's first revisions are the loop's) is replayed, with its token counts, never
made twice. Per-problem results go to a JSON Lines file in bench/results/ (one record per problem and variant,
appended and flushed as soon as it is known, with the 1-minute load average before and after, generated tokens per
second and the commit), keyed by model, settings and problem, so a run can be killed and resumed, and
`--report-only` prints the table from it. `--rerun-loaded` makes again the records measured above `LOAD_LIMIT`
(`run_problem`), their model calls made afresh (`Calls.max_load`).
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import _runs
from _common import equal_tokens
from _raw import RawChat, commit, embedded_model, file_sha256, load_average
from _runs import (
    CUT_REASONS,
    LOAD_LIMIT,
    SERVED,
    VERIFY_EVERY,
    Calls,
    Results,
    cached_model,
    loaded,
    run_key,
    serve_raw,
    to_make,
)

__all__ = [  # the shared pieces are re-exported: bench_code.py reads them from here
    "LOAD_LIMIT",
    "SERVED",
    "VERIFY_EVERY",
    "Calls",
    "RawChat",
    "Results",
    "cached_model",
    "commit",
    "embedded_model",
    "equal_tokens",
    "file_sha256",
    "load_average",
    "loaded",
    "run_key",
]

BENCH = Path(__file__).resolve().parent
CACHE_DIR = BENCH / ".cache"
RESULTS_DIR = BENCH / "results"
VERDICTS = CACHE_DIR / "verdicts.jsonl"
VARIANTS = ("raw", "loop", "samples", "tree")
TASK = (
    "Complete the Python function below. Reply with the whole function, signature included, in one ```python "
    "block, and nothing else.\n\n```python\n{prompt}```"
)
"""The task every variant gets: a user's request, the HumanEval stub in a fence."""


def task_of(problem: dict[str, Any]) -> str:
    return TASK.format(prompt=problem["prompt"])


def hidden_tests(problem: dict[str, Any]) -> str:
    """HumanEval's own `check(candidate)`, for `CodeTestCritic(..., entry_point=...)`: it calls `check` on the
    candidate's function in a process that never runs candidate code, so the verdict cannot be forged from inside."""
    return str(problem["test"])


def visible_tests(problem: dict[str, Any]) -> str | None:
    """The docstring's examples as tests (None when the docstring has none the package can read)."""
    from reflection_graph.loop._stub_tests import docstring_tests

    try:
        return docstring_tests(problem["prompt"], problem["entry_point"])
    except ValueError:
        return None


def visible_critic(problem: dict[str, Any]) -> Any:
    """The critic the loop gets: a `CodeTestCritic` on the visible tests (isolation as `Judge` uses)."""
    from reflection_graph.critics.code_tests import CodeTestCritic

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
                    try:
                        row = json.loads(line)
                    except json.JSONDecodeError:  # a line cut by a kill
                        continue
                    self.cache[row["key"]] = row["score"]

    def score(self, tests: str | None, code: str, entry_point: str | None = None) -> float:
        """The share of `tests` that `code` passes, 0 to 1 (0 when there are no tests or no code that parses);
        `entry_point` names the function a `check(candidate)` test is called on."""
        from reflection_graph._text._extract import extract_code, is_python

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
            from reflection_graph.critics.code_tests import CodeTestCritic

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

    def visible(self, problem: dict[str, Any], code: str) -> float | None:
        """The share of the visible examples `code` passes (None: the docstring has none)."""
        tests = visible_tests(problem)
        return None if tests is None else self.score(tests, code)


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k estimator of Chen et al. (2021): 1 - C(n-c, k) / C(n, k)."""
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def prompt_probe() -> str:
    """A digest of the task and the package's code prompts (a draft and a revision of a fixed stub): records made
    with other prompts are not mixed in."""
    from reflection_graph.loop._code import code_messages

    stub = task_of(
        {"prompt": 'def twice(x: int) -> int:\n    """Twice x.\n\n    >>> twice(2)\n    4\n    """\n'}
    )
    critique = {"issues": ["test_example_1 failed: assert twice(2) == 4 (twice(2) was 3)"]}
    shown = []
    for chat in (False, True):
        draft = code_messages(stub, None, chat=chat) or []
        revise = code_messages(
            stub, None, candidate=stub + "    return x + 1\n", critique=critique, chat=chat
        )
        shown += [[m.type, m.text] for m in [*draft, *(revise or [])]]
    return hashlib.sha256(json.dumps(shown).encode()).hexdigest()[:16]


# ------------------------------------------------------------------------------------------ one problem

COMMIT = commit()


def _usage_tokens(result: dict[str, Any]) -> int:
    return int(((result.get("usage") or {}).get("total") or {}).get("total_tokens") or 0)


def _calls_of(result: dict[str, Any]) -> int:
    return sum(len(r.get("samples") or [r]) for r in result.get("trajectory") or [])


def raw_record(problem: dict[str, Any], raw: RawChat, judge: Judge) -> dict[str, Any]:
    """One plain greedy `create_chat_completion` of the task by llama-cpp-python alone, finished into the function."""
    from reflection_graph.loop._code import finish_candidate

    task = task_of(problem)
    reply = raw.complete(task)
    code = finish_candidate(task, reply["text"].strip()) or reply["text"]
    return {
        "solved": judge.solves(problem, code),
        "visible": judge.visible(problem, code),
        "tokens": reply["prompt_tokens"] + reply["completion_tokens"],
        "calls": 1,
        "reply": reply["text"],
        "usage": [reply["prompt_tokens"], reply["completion_tokens"]],
        "cut": int(reply["finish_reason"] == "length"),
        "tokens_per_s": round(reply["completion_tokens"] / max(reply["seconds"], 1e-9), 1),
        "code": code,
    }


def graph_record(
    problem: dict[str, Any], model: Any, judge: Judge, settings: dict[str, Any], strategy: str | None = None
) -> dict[str, Any]:
    """The reflection graph on the problem (focus code, the visible tests as its critic), judged on the hidden
    tests. Without a visible test there is nothing to check: the record says so and holds raw's answer."""
    from reflection_graph import create_reflection_graph

    critic = visible_critic(problem)
    if critic is None:
        return {"no_visible_tests": True}
    chosen = {
        **settings,
        **({"strategy": strategy} if strategy else {}),
    }  # None: the settings' own (the code focus's)
    graph = create_reflection_graph(model, critic=critic, focus="code", **chosen)
    result = graph.invoke({"task": task_of(problem)})
    first_round = result["trajectory"][0]
    first = (first_round.get("samples") or [first_round])[0]["candidate"]
    code = result["candidate"] or ""
    candidates = [s for r in result["trajectory"] for s in (r.get("samples") or [r])]
    return {
        "cut": sum(bool(c.get("cut")) for c in candidates),
        "solved": judge.solves(problem, code),
        "visible": judge.visible(problem, code),
        "first_solved": judge.solves(problem, first),
        "first": first,
        "tokens": _usage_tokens(result),
        "calls": _calls_of(result),
        "rounds": result["iterations"],
        "stop": result["stop_reason"],
        "code": code,
    }


def samples_record(
    problem: dict[str, Any], model: Any, judge: Judge, raw: dict[str, Any], count: int
) -> dict[str, Any]:
    """Candidates 1..`count` at the loop's sampling temperature (seeds 1..count), where raw fails a visible
    example; none where it passes them all or there are none (best-of-N by the visible examples is raw there)."""
    from langchain_core.messages import HumanMessage

    from reflection_graph._runtime._calls import sampled
    from reflection_graph.loop._code import finish_candidate

    if not needs_samples(raw):
        return {"drawn": False, "candidates": []}
    task = task_of(problem)
    candidates = []
    for index in range(1, count + 1):
        reply = sampled(model, index).invoke([HumanMessage(task)])
        code = finish_candidate(task, reply.text.strip()) or reply.text
        candidates.append(
            {
                "solved": judge.solves(problem, code),
                "visible": judge.visible(problem, code),
                "tokens": int((reply.usage_metadata or {}).get("total_tokens") or 0),
                "cut": int((reply.response_metadata or {}).get("finish_reason") in CUT_REASONS),
            }
        )
    return {"drawn": True, "candidates": candidates}


def needs_samples(raw: dict[str, Any]) -> bool:
    """Whether best-of-N's samples are drawn for this raw record: where it fails a visible example."""
    return raw.get("visible") is not None and raw["visible"] < 1.0


def built_on_other_raw(variant: str, record: dict[str, Any] | None, raw: dict[str, Any] | None) -> bool:
    """`_runs.built_on_other_raw` on a HumanEval raw record: its code, and samples drawn where it fails a visible
    example."""
    return raw is not None and _runs.built_on_other_raw(variant, record, raw.get("code"), needs_samples(raw))


def run_problem(
    problem: dict[str, Any],
    model: Any,
    raw: RawChat,
    judge: Judge,
    results: Results,
    run: str,
    settings: dict[str, Any],
    samples: int,
    variants: Iterable[str] = VARIANTS,
    rerun_loaded: bool = False,
) -> None:
    """Every variant not yet recorded for this problem, each record written as soon as it is known. With
    `rerun_loaded`, also every variant whose record as the report reads it (this run's, or the baseline's) was
    measured above `LOAD_LIMIT`, or was built on a raw reply other than the one raw's record now holds
    (`built_on_other_raw`): made again under `run`, it takes precedence over the baseline's."""
    task_id, wanted = problem["task_id"], set(variants)
    for variant in VARIANTS:
        done = results.get(run, task_id, variant)
        stale = rerun_loaded and built_on_other_raw(variant, done, results.get(run, task_id, "raw"))
        if variant not in wanted or not (to_make(done, rerun_loaded) or stale):
            continue
        start, load_before = time.monotonic(), load_average()
        if variant == "raw":
            record = raw_record(problem, raw, judge)
        elif variant == "samples":
            raw_done = results.get(run, task_id, "raw")
            if raw_done is None:
                continue
            record = samples_record(problem, model, judge, raw_done, samples)
        else:
            raw_done = results.get(run, task_id, "raw") or {}
            real = int(task_id.rsplit("/", 1)[1]) % VERIFY_EVERY == 0 or "reply" not in raw_done
            SERVED.clear()
            if not real:  # raw's reply, unless the package would not write it (cut, or a loop it stops)
                real = not serve_raw(
                    task_of(problem),
                    raw_done["reply"],
                    raw_done["usage"],
                    bool(raw_done.get("cut")),
                    raw.tokenize,
                )
            record = graph_record(problem, model, judge, settings, "tree" if variant == "tree" else None)
            record["first_served"] = not real
        record.update(
            run=run,
            task_id=task_id,
            variant=variant,
            seconds=round(time.monotonic() - start, 1),
            load=[load_before, load_average()],
            commit=COMMIT,
        )
        if variant in ("loop", "tree") and "first" in record and not record.get("first_served"):
            raw_code = (results.get(run, task_id, "raw") or {}).get("code")
            record["first_same_as_raw"] = raw_code is not None and record["first"] == raw_code
        results.put(record)
        shown = "-" if "solved" not in record else ("solved" if record["solved"] else "failed")
        print(
            f"{task_id:<14} {variant:<8} {shown:<7} {record.get('tokens', '')!s:>6} tokens "
            f"{record['seconds']:>6.1f}s load {record['load'][0]:.2f}-{record['load'][1]:.2f}"
            + (" (loaded)" if loaded(record) else "")
            + (f" (made again: run {done['run']}'s record replaced)" if done is not None else ""),
            file=sys.stderr,
            flush=True,
        )


# ------------------------------------------------------------------------------------------ the table


def _row(records: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """One problem's figures per variant, from its records (None while raw, loop or tree is missing)."""
    raw, loop = records.get("raw"), records.get("loop")
    if raw is None or loop is None:
        return None
    out: dict[str, Any] = {"raw": raw, "samples": records.get("samples"), "tree": None, "revising": None}
    for name in ("loop", "tree", "revising"):
        record = records.get(name)
        if record is not None and record.get("no_visible_tests"):  # nothing to check: the greedy first draft
            record = {**raw, "first_solved": raw["solved"], "no_visible_tests": True}
        out[name] = record
    return out


def best_of(row: dict[str, Any], n: int) -> tuple[bool | None, float, bool]:
    """Best-of-`n` by the visible examples on one problem (raw + `n`-1 samples): (solved, tokens, estimated).

    Where raw passes every visible example (or there is none) it is picked whatever the samples are: solved is
    raw's, and the tokens of the `n`-1 samples not drawn are estimated as raw's (`estimated` True). None when
    the samples needed were not drawn."""
    raw, samples = row["raw"], row.get("samples") or {}
    if row.get("samples") is None and raw["visible"] is not None and raw["visible"] < 1.0:
        return None, 0.0, False  # samples are needed here and not drawn yet
    if not samples.get("drawn"):
        return raw["solved"], n * raw["tokens"], n > 1
    candidates = [raw, *samples["candidates"]]
    if len(candidates) < n:
        return None, 0.0, False
    pool = candidates[:n]
    best = max(range(n), key=lambda i: (pool[i]["visible"] or 0.0, -i))
    return pool[best]["solved"], float(sum(c["tokens"] for c in pool)), False


def summary(rows: Sequence[dict[str, Any]], max_n: int) -> dict[str, Any]:
    """Solved counts, mean tokens per problem and per-problem checks over `rows`."""
    count = max(len(rows), 1)
    out: dict[str, Any] = {"problems": len(rows)}
    for name in ("raw", "loop", "tree", "revising"):
        have = [r for r in rows if r.get(name) is not None]
        out[name] = sum(bool(r[name]["solved"]) for r in have)
        out[f"{name}_tokens"] = sum(r[name]["tokens"] for r in have) / max(len(have), 1)
        out[f"{name}_n"] = len(have)
    out["first"] = sum(bool(r["loop"].get("first_solved")) for r in rows)
    made = [r for r in rows if "first" in r["loop"] and not r["loop"].get("first_served")]
    out["first_same"] = sum(r["loop"]["first"] == r["raw"].get("code") for r in made)  # the raw shown here
    out["first_checked"] = len(made)
    out["cut"] = {
        name: sum(int(r[name].get("cut") or 0) for r in rows if r[name] is not None)
        for name in ("raw", "loop", "tree")
    }
    out["cut"]["samples"] = sum(
        int(c.get("cut") or 0) for r in rows for c in (r.get("samples") or {}).get("candidates", [])
    )
    records = [r[name] for r in rows for name in (*VARIANTS, "revising") if r.get(name) is not None]
    out["max_load"] = max((max(x.get("load") or [0.0]) for x in records), default=0.0)
    out["loaded"] = sum(loaded(x) for x in records)
    out["commits"] = sorted({str(x.get("commit")) for x in records if x.get("commit")})
    out["raw_visible"] = sum(r["raw"]["visible"] == 1.0 for r in rows)
    out["no_visible"] = sum(r["raw"]["visible"] is None for r in rows)
    out["best"] = {}
    for n in range(1, max_n + 1):
        picks = [best_of(r, n) for r in rows]
        if any(p[0] is None for p in picks):
            break
        out["best"][n] = {
            "solved": sum(bool(p[0]) for p in picks),
            "tokens": sum(p[1] for p in picks) / count,
            "estimated": sum(p[2] for p in picks),
        }
    # any-of-N where samples were drawn (raw failed a visible example): the most selection could reach
    drawn = [r for r in rows if (r.get("samples") or {}).get("drawn")]
    out["drawn"] = len(drawn)
    out["drawn_any"] = sum(any(c["solved"] for c in [r["raw"], *r["samples"]["candidates"]]) for r in drawn)
    out["drawn_loop"] = sum(bool(r["loop"]["solved"]) for r in drawn)
    out["loop_lost"] = [
        r["raw"]["task_id"]
        for r in rows
        if r["raw"]["visible"] == 1.0 and r["raw"]["solved"] and not r["loop"]["solved"]
    ]
    out["loop_gained"] = [r["raw"]["task_id"] for r in rows if r["loop"]["solved"] and not r["raw"]["solved"]]
    out["tree_gained"] = [
        r["raw"]["task_id"]
        for r in rows
        if r["tree"] is not None and r["tree"]["solved"] and not r["raw"]["solved"]
    ]
    return out


def explain(
    problem: dict[str, Any], model: Any, judge: Judge, results: Results, run: str, settings: dict[str, Any]
) -> str | None:
    """Why the loop did or did not solve a problem where raw fails a visible example: its run replayed from the
    call file (no model call) and every candidate it made judged on the hidden tests. None where raw passes every
    visible example, or the run is not in the call file."""
    from reflection_graph import create_reflection_graph

    raw, loop = results.get(run, problem["task_id"], "raw"), results.get(run, problem["task_id"], "loop")
    if raw is None or loop is None or raw["visible"] is None or raw["visible"] == 1.0:
        return None
    SERVED.clear()
    if loop.get("first_served"):
        SERVED[task_of(problem)] = (raw["reply"], raw["usage"], "length" if raw.get("cut") else "stop")
    graph = create_reflection_graph(model, critic=visible_critic(problem), focus="code", **settings)
    try:
        result = graph.invoke({"task": task_of(problem)})
    except LookupError:
        return None
    made = [s["candidate"] for r in result["trajectory"] for s in (r.get("samples") or [r])]
    solving = sum(judge.solves(problem, code) for code in made)
    samples = (results.get(run, problem["task_id"], "samples") or {}).get("candidates", [])
    sampled = sum(bool(c["solved"]) for c in samples)
    if loop["solved"]:
        why = "solved by the loop"
    elif solving:
        why = f"lost by selection: {solving} of its {len(made)} candidates pass the hidden tests"
    else:
        why = f"never made: none of its {len(made)} candidates passes the hidden tests"
    return f"{why}; best-of-N samples passing: {sampled} of {len(samples)}"
