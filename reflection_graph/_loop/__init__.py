"""One run of the loop, whichever host runs it: what the graph's nodes (reflection_graph/_nodes/), the agent
middleware (reflection_graph/middleware.py) and the runners share.

- `_input`: the input checks, before any model call;
- `_overrides`: this run's settings and models (a `Context` or a mapping applied to what was built);
- `_defaults`: what a setup defaults to: the critic a model judges with when none is named, and the settings a
  verifier critic brings (fresh drafts, the verifier picking);
- `_judge`: one critique, measured: the critic's reply checked into a `Critique`, with its calls and tokens;
- `_rules`: the stop and selection rules, pure functions;

The names the hosts use are exported here: import them from `reflection_graph._loop`, not from its modules.
"""

from reflection_graph._loop._defaults import setup_defaults
from reflection_graph._loop._input import validate_input
from reflection_graph._loop._judge import Judged, ajudge, critique_history, judge
from reflection_graph._loop._overrides import ModelLike, Overrides, Roles, as_critic, critic_help, resolve
from reflection_graph._loop._rules import accepts, best_index, select_round, stop_reason

__all__ = [
    "Judged",
    "ModelLike",
    "Overrides",
    "Roles",
    "accepts",
    "ajudge",
    "as_critic",
    "best_index",
    "critic_help",
    "critique_history",
    "judge",
    "resolve",
    "select_round",
    "setup_defaults",
    "stop_reason",
    "validate_input",
]
