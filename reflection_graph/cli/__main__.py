"""``python -m reflection_graph.cli``."""

from reflection_graph.cli import main

main()
