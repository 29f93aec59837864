"""The Studio graphs: unit tests with fake models, and every graph served by `langgraph dev` on loopback.

The server test starts `langgraph dev --no-browser --no-reload` from the repo root (offline: analytics and tracing
off), waits for `/ok`, then through `langgraph_sdk.get_client` lists the assistants, fetches each graph's drawing
and context schema, and runs every graph once on the embedded model with `max_iterations=1` in the run's context.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph.state import CompiledStateGraph

from reflection_graph import Context
from tests._servers import free_port, wait_http

ROOT = Path(__file__).resolve().parent.parent
CONFIG = json.loads((ROOT / "langgraph.json").read_text())
GRAPHS: dict[str, str] = CONFIG["graphs"]

# what one run of each graph sends (tiny limits come from the run's context)
RUN_INPUTS: dict[str, dict[str, Any]] = {
    "reflection": {"task": "Write one sentence about rain."},
    "tree": {"task": "Write one sentence about rain."},
    "email": {"role": "Data Engineer", "company": "Acme"},
    "code": {  # the user's own function stub, tests and entry point (the shipped task is the default)
        "task": 'def clamp(x, low, high):\n    """Return x limited to [low, high].\n\n    >>> clamp(5, 0, 3)\n    3\n    """\n',
        "tests": "def test_inside():\n    assert clamp(2, 0, 3) == 2\n",
        "entry_point": "clamp",
    },
    "documents": {
        "documents": [
            "The river flooded the town after three days of rain.",
            {"id": "d2", "text": "The bakery on Main Street now opens at six."},
        ],
        "prompt": "Summarize in one sentence: {document}",
    },
    "agent": {"messages": [{"role": "user", "content": "Write one sentence about rain."}]},
    "instructions": {
        "documents": [
            "A red kettle with a wooden handle.",
            {"id": "r2", "text": "A blue umbrella that folds."},
        ],
        "prompt": "Describe this product in one short sentence without commas: {document}",
    },
}


# -- the config and the modules -----------------------------------------------------------------------------------
def test_langgraph_json_lists_every_graph_module() -> None:
    modules = {p.stem for p in (ROOT / "graphs").glob("*.py") if not p.name.startswith("_")}
    listed = {spec.split(":")[0].removeprefix("./graphs/").removesuffix(".py") for spec in GRAPHS.values()}
    assert listed == modules
    assert set(GRAPHS) == set(RUN_INPUTS)
    assert CONFIG["dependencies"] == ["."] and CONFIG["python_version"] == "3.11"


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_each_module_exposes_a_compiled_graph_with_the_context_schema(name: str) -> None:
    path, variable = GRAPHS[name].split(":")
    module = importlib.import_module(path.removeprefix("./").removesuffix(".py").replace("/", "."))
    graph = getattr(module, variable)
    assert isinstance(graph, CompiledStateGraph)
    assert graph.checkpointer is None  # the server supplies persistence
    assert graph.builder.context_schema is Context
    assert "max_iterations" in json.dumps(graph.get_context_jsonschema())


# -- the wrapper graphs with fake models --------------------------------------------------------------------------
class ScriptedModel:
    """A callable model (`fn(prompt) -> str`): critic prompts get scripted JSON verdicts, others a draft."""

    def __init__(self, verdicts: list[dict[str, Any]], drafts: list[str]) -> None:
        self.verdicts = verdicts
        self.drafts = drafts
        self.prompts: list[str] = []

    def __call__(self, prompt: str) -> str:
        self.prompts.append(prompt)
        if "JSON" in prompt:
            verdict = self.verdicts[min(self.critic_calls, len(self.verdicts)) - 1]
            return json.dumps(verdict)
        return self.drafts[min(len(self.prompts) - self.critic_calls, len(self.drafts)) - 1]

    @property
    def critic_calls(self) -> int:
        return sum("JSON" in p for p in self.prompts)


def _verdict(score: float, needs_improvement: bool, feedback: str) -> dict[str, Any]:
    issues = [feedback] if needs_improvement else []
    return {"feedback": feedback, "needs_improvement": needs_improvement, "score": score, "issues": issues}


def test_email_graph_reports_feedback_and_needs_improvement_per_round() -> None:
    from graphs.email import create_email_graph

    model = ScriptedModel(
        [_verdict(4, True, "Thank them for the offer."), _verdict(9, False, "Polite and clear.")],
        [
            "I will not take the job.",
            "Thank you for the offer; I must decline the Data Engineer role. Best, Ana",
        ],
    )
    graph = create_email_graph(model)
    out = graph.invoke({"role": "Data Engineer", "company": "Acme"})
    assert set(out) == {"email", "rounds", "stop_reason", "iterations", "error", "usage"}
    assert out["stop_reason"] == "accepted" and out["iterations"] == 2
    assert out["email"].startswith("Thank you for the offer")
    assert [(r["round"], r["needs_improvement"], r["feedback"]) for r in out["rounds"]] == [
        (1, True, "Thank them for the offer."),
        (2, False, "Polite and clear."),
    ]
    assert "Data Engineer role at Acme" in model.prompts[0]  # the brief built the task from role and company
    assert "Thank them for the offer." in model.prompts[2]  # the reviser saw the feedback


def test_email_graph_context_reaches_the_subgraph_and_threads_do_not_accumulate() -> None:
    from graphs.email import create_email_graph

    model = ScriptedModel([_verdict(3, True, "Too blunt.")], ["No thanks."])
    graph = create_email_graph(model).copy(update={"checkpointer": InMemorySaver()})
    config: Any = {"configurable": {"thread_id": "t"}}
    first = graph.invoke({"role": "Analyst"}, config, context=Context(max_iterations=1))
    second = graph.invoke({"role": "Analyst"}, config, context=Context(max_iterations=1))
    for out in (first, second):
        assert out["iterations"] == 1 and out["stop_reason"] == "max_iterations" and len(out["rounds"]) == 1
    assert second["usage"]["total"]["calls"] == first["usage"]["total"]["calls"] == 2
    # the second run drafted anew instead of gleaning the first run's email
    assert sum("JSON" not in p for p in model.prompts) == 2


def test_email_graph_rejects_a_missing_role() -> None:
    from graphs.email import create_email_graph

    graph = create_email_graph(ScriptedModel([_verdict(9, False, "ok")], ["x"]))
    with pytest.raises(ValueError, match="'role' must be a non-empty string"):
        graph.invoke({"role": "  "})


def test_code_graph_runs_the_shipped_tests() -> None:
    from graphs.code import CODE_TASK, create_code_graph

    replies = iter(
        [
            "```python\ndef add(a, b):\n    return a - b\n```",
            "```python\ndef add(a, b):\n    return a + b\n```",
        ]
    )
    prompts: list[str] = []

    def model(prompt: str) -> str:
        prompts.append(prompt)
        return next(replies)

    out = create_code_graph(model).invoke({})
    assert out["passed"] is True and out["stop_reason"] == "accepted" and out["iterations"] == 2
    assert out["code"] == "def add(a, b):\n    return a + b\n"
    first = out["trajectory"][0]["critique"]
    assert first["score"] < 10 and any("`add(2, 3)` returned -1, expected 5" in i for i in first["issues"])
    assert (
        CODE_TASK in prompts[0] and "`add(2, 3)` returned -1, expected 5" in prompts[1]
    )  # the reviser saw the failing test


CLAMP = 'def clamp(x, low, high):\n    """Return x limited to [low, high].\n\n    >>> clamp(5, 0, 3)\n    3\n    """\n'


def test_code_graph_takes_the_users_task_tests_and_entry_point() -> None:
    from graphs.code import create_code_graph

    prompts: list[str] = []

    def model(prompt: str) -> str:
        prompts.append(prompt)
        return ["return x", "return max(low, min(x, high))"][len(prompts) - 1]

    graph = create_code_graph(model)
    tests = "def test_inside():\n    assert clamp(2, 0, 3) == 2\n\n\ndef test_above():\n    assert clamp(9, 0, 3) == 3\n"
    out = graph.invoke({"task": CLAMP, "tests": tests, "entry_point": "clamp"})
    assert out["passed"] is True and out["iterations"] == 2
    assert out["code"] == CLAMP + "    return max(low, min(x, high))\n"  # the stub, completed
    first = out["trajectory"][0]["critique"]
    assert first["issues"] == [
        "test_above failed: `clamp(9, 0, 3)` returned 9, expected 3"
    ]  # judged by the user's tests, with the import of the entry point added
    assert prompts[0].rstrip().endswith(CLAMP.rstrip()) and "`clamp(9, 0, 3)` returned 9" in prompts[1]
    # without tests, the docstring's examples are the tests
    prompts.clear()
    out = graph.invoke({"task": CLAMP})
    assert out["trajectory"][0]["critique"]["issues"] == [
        "test_example_1 failed: `clamp(5, 0, 3)` returned 5, expected 3"
    ]


def test_code_graph_input_schema_defaults_to_the_shipped_task() -> None:
    from graphs.code import CODE_TASK, graph

    schema = graph.get_input_jsonschema()
    assert schema["properties"]["task"]["default"] == CODE_TASK
    assert set(schema["properties"]) == {"task", "tests", "entry_point"} and not schema.get("required")


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"task": CLAMP, "tests": "x = 1\n"}, "tests define no top-level test function"),
        ({"task": CLAMP, "tests": "def test_x(:\n"}, "tests do not parse"),
        ({"task": CLAMP, "tests": "  "}, "'tests' is empty"),
        (
            {"task": "Write add(a, b).", "tests": "def test_a():\n    assert add(1, 2) == 3\n"},
            "pass 'entry_point'",
        ),
        ({"task": CLAMP, "entry_point": "not a name"}, "'entry_point' must be a Python function name"),
    ],
)
def test_code_graph_rejects_bad_tests_before_any_model_call(given: dict[str, Any], message: str) -> None:
    from graphs.code import create_code_graph

    calls: list[str] = []
    graph = create_code_graph(lambda prompt: calls.append(prompt) or "return x")
    with pytest.raises(ValueError, match=message):
        graph.invoke(given)
    assert calls == []


# -- the dev server -----------------------------------------------------------------------------------------------
def _server_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "LANGGRAPH_CLI_NO_ANALYTICS": "1",
            "LANGSMITH_TRACING": "false",
            "LANGSMITH_TRACING_V2": "false",
            "LANGCHAIN_TRACING_V2": "false",
            "LANGCHAIN_TRACING": "false",
            "PYTHONUNBUFFERED": "1",
        }
    )
    for key in ("LANGSMITH_API_KEY", "LANGCHAIN_API_KEY", "REFLECTION_GRAPH_MODEL"):
        env.pop(key, None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


@contextlib.contextmanager
def langgraph_dev(
    cwd: Path = ROOT, *, timeout: float = 120.0, env: dict[str, str] | None = None, args: tuple[str, ...] = ()
) -> Iterator[tuple[str, float]]:
    """Run `langgraph dev` on a free loopback port; yield its URL and the seconds it took to answer `/ok`.

    `env` adds to (or overrides) the server's environment, e.g. `REFLECTION_GRAPH_MODEL` for its models; `args`
    are extra `langgraph dev` options, e.g. `("--n-jobs-per-worker", "16")`.
    """
    pytest.importorskip("langgraph_api", reason='needs pip install "reflection-graph[studio]"')
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "langgraph_cli",
        "dev",
        "--no-browser",
        "--no-reload",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        *args,
    ]
    log = Path(tempfile.mkstemp(prefix="langgraph-dev-", suffix=".log")[1])
    state_dir = cwd / ".langgraph_api"  # the in-memory server's pickled threads; removed if this run made it
    made_state_dir = not state_dir.exists()
    start = time.monotonic()
    with log.open("wb") as sink:
        process = subprocess.Popen(
            command,
            cwd=cwd,
            env={**_server_env(), **(env or {})},
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        try:
            wait_http(f"{url}/ok", timeout=timeout, process=process)
        except (RuntimeError, TimeoutError) as exc:
            tail = log.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"langgraph dev did not start: {exc}\n--- server log ---\n{tail}") from exc
        yield url, time.monotonic() - start
    except BaseException:
        sys.stderr.write("--- langgraph dev log ---\n" + log.read_text(errors="replace")[-4000:] + "\n")
        raise
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
        log.unlink(missing_ok=True)
        if made_state_dir:
            shutil.rmtree(state_dir, ignore_errors=True)


def _check_output(name: str, out: dict[str, Any]) -> None:
    stop_reasons = {"accepted", "max_iterations", "plateau", "not_triggered"}
    if name in ("documents", "instructions"):
        results = out["results"]
        assert [r["index"] for r in results] == [0, 1] and results[1]["id"] == (
            "d2" if name == "documents" else "r2"
        )
        for result in results:
            assert result["stop_reason"] in stop_reasons, result
            assert isinstance(result["output"], str) and result["output"].strip()
            # the instruction checkers are no model: a draft is the only call a record must make there
            assert result["iterations"] == 1 and result["usage"]["total"]["calls"] >= (
                2 if name == "documents" else 1
            )
            if name == "instructions":  # 10 x the share of the two instructions followed
                assert result["score"] in (0.0, 5.0, 10.0), result
        assert out["usage"]["total"]["calls"] == sum(r["usage"]["total"]["calls"] for r in results)
        return
    if name == "agent":  # create_agent + ReflectionMiddleware: the answer is the last message
        answer, report = out["messages"][-1], out["reflection"]
        assert answer["type"] == "ai" and answer["content"].strip() and not answer.get("tool_calls")
        assert report["iterations"] == 1 and report["stop_reason"] in stop_reasons, report
        assert report["candidate"] == answer["content"] and 0 <= report["critique"]["score"] <= 10
        assert report["usage"]["critique"]["calls"] >= 1 and report["usage"]["critique"]["output_tokens"] > 0
        return
    assert out["stop_reason"] in stop_reasons, out
    assert out["iterations"] == 1
    model_calls = 1 if name == "code" else 2  # the code graph's critic runs tests, not a model
    assert out["usage"]["total"]["calls"] >= model_calls and out["usage"]["total"]["output_tokens"] > 0
    if name == "email":
        assert out["email"].strip() and len(out["rounds"]) == 1
        assert set(out["rounds"][0]) == {"round", "draft", "feedback", "needs_improvement", "score"}
        assert isinstance(out["rounds"][0]["needs_improvement"], bool)
    else:
        assert out["candidate"].strip() and len(out["trajectory"]) == 1
        assert 0 <= out["critique"]["score"] <= 10
    if name == "code":
        assert isinstance(out["code"], str) and isinstance(out["passed"], bool)
        assert out["critique"]["score"] == 10.0 or out["critique"]["issues"]  # tests ran and reported
        # the stub was completed: the candidate is the user's function, judged by the user's test
        assert out["candidate"].startswith("def clamp(x, low, high):"), out["candidate"]
        assert out["passed"] or any("test_inside" in issue for issue in out["critique"]["issues"]), out


EXPECTED_NODES = {
    "reflection": {"generate", "critique", "finalize"},
    "tree": {"generate", "critique", "select", "finalize"},
    "email": {"brief", "reflection:generate", "reflection:critique", "reflection:finalize", "report"},
    "code": {"brief", "reflection:generate", "reflection:critique", "reflection:finalize", "report"},
    "documents": {"plan", "glean", "collect"},
    "instructions": {"plan", "glean", "collect"},
    "agent": {"model", "ReflectionMiddleware.before_agent", "ReflectionMiddleware.after_agent"},
}


@pytest.mark.server
@pytest.mark.embedded
async def test_langgraph_dev_serves_and_runs_every_graph() -> None:
    pytest.importorskip("llama_cpp", reason='needs pip install "reflection-graph[local]"')
    from langgraph_sdk import get_client

    timings: dict[str, float] = {}
    with langgraph_dev() as (url, started):
        timings["server_start"] = started
        client = get_client(url=url)
        assistants = await client.assistants.search(limit=50)
        by_graph = {a["graph_id"]: a["assistant_id"] for a in assistants}
        assert set(GRAPHS) <= set(by_graph), (
            f"served graphs {sorted(by_graph)}, langgraph.json {sorted(GRAPHS)}"
        )
        for name in GRAPHS:
            assistant_id = by_graph[name]
            drawing = await client.assistants.get_graph(assistant_id, xray=True)
            nodes = {node["id"] for node in drawing["nodes"]}
            assert EXPECTED_NODES[name] <= nodes, f"{name}: {sorted(nodes)}"
            schemas = await client.assistants.get_schemas(assistant_id)
            context_schema = schemas.get("context_schema") or schemas.get("config_schema") or {}
            assert "max_iterations" in json.dumps(context_schema), f"{name}: {context_schema}"
            thread = await client.threads.create()
            start = time.monotonic()
            out = await client.runs.wait(
                thread["thread_id"], assistant_id, input=RUN_INPUTS[name], context={"max_iterations": 1}
            )
            timings[name] = time.monotonic() - start
            assert isinstance(out, dict) and "__error__" not in out, f"{name}: {out}"
            _check_output(name, out)
    sys.stderr.write(
        "langgraph dev timings (s): " + json.dumps({k: round(v, 1) for k, v in timings.items()}) + "\n"
    )
