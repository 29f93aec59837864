"""One run of the loop, whichever host runs it: what the graph's nodes (reflection_graph/_nodes/), the agent
middleware (reflection_graph/middleware.py) and the runners share.

- `_input`: the input checks, before any model call;
- `_overrides`: this run's settings and models (a `Context` or a mapping applied to what was built);
- `_defaults`: what a setup defaults to: the critic a model judges with when none is named, and the settings a
  verifier critic brings (fresh drafts, the verifier picking);
- `_judge`: one critique, measured: the critic's reply checked into a `Critique`, with its calls and tokens;
- `_rules`: the stop and selection rules, pure functions;
- `_registry`: the strategies by name, which the `strategy` setting is checked against (the strategies package
  fills it; `settings` reads it without importing the strategies).

This file imports nothing, so importing one of them never loads the others.
"""
