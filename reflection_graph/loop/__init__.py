"""The loop: one run of draft -> critique -> revise, whichever host runs it. The graph factory
(reflection_graph/graph.py), the agent middleware (reflection_graph/middleware.py), the gleaning graph, the CLI and
the runners import what they need from here, and only from here.

The graph's nodes:
- `_node`: `Node`, the one wrapper that runs a node's sync or async function with this run's settings and roles
  (`Step`, in `_step`) inside the step's budget; `Setup`, what a graph was built with; `make_nodes`, `setup_of`;
- `_generate`, `_critique_node`, `_finalize`: the nodes `generate` (draft, revise or glean), `critique` and
  `finalize`, each a pair of plain sync/async functions over shared steps;
- `_sample`: one sample slot of `generate`: its attempts by tactic until one makes a new candidate, each call made
  directly or awaited.

What the `focus` setting changes in `generate`:
- `_messages`: the messages of a draft or a revision for each focus, and how a reply becomes a candidate;
- `_code`: the code focus: a function stub completed rather than restated (for base models);
- `_stub_tests`: the tests that judge a code task: given, or the stub's docstring examples as tests, and the tests
  file of the CLI and Studio;
- `_examples`: examples written as prose in a docstring (`f(3) ==> 9`), read as (call, expected value) pairs.

What every host of a run shares:
- `_input`: the input checks, before any model call;
- `_overrides`: this run's settings and models (a `Context` or a mapping applied to what was built);
- `_defaults`: what a setup defaults to: the critic a model judges with when none is named, and the settings a
  verifier critic brings (fresh drafts, the verifier picking);
- `_judge`: one critique, measured: the critic's reply checked into a `Critique`, with its calls and tokens;
- `_rules`: the stop and selection rules, pure functions.

The modules import each other directly; this file exports the names the hosts use. Under the loop sit the
critics, the strategies, `models` and the two lower rooms `_runtime` (every model call) and `_text` (reading text),
none of which imports the loop.
"""

from reflection_graph.loop._critique_node import diff
from reflection_graph.loop._defaults import setup_defaults
from reflection_graph.loop._input import validate_input
from reflection_graph.loop._judge import Judged, ajudge, critique_history, judge
from reflection_graph.loop._node import Setup, make_nodes, setup_of
from reflection_graph.loop._overrides import ModelLike, Overrides, Roles, as_critic, critic_help, resolve
from reflection_graph.loop._rules import accepts, best_index, select_round, stop_reason
from reflection_graph.loop._stub_tests import resolve_tests

__all__ = [
    "Judged",
    "ModelLike",
    "Overrides",
    "Roles",
    "Setup",
    "accepts",
    "ajudge",
    "as_critic",
    "best_index",
    "critic_help",
    "critique_history",
    "diff",
    "judge",
    "make_nodes",
    "resolve",
    "resolve_tests",
    "select_round",
    "setup_defaults",
    "setup_of",
    "stop_reason",
    "validate_input",
]
