"""``python -m reconciler.cli``: the console script, run by the interpreter."""

from reconciler.cli import main

main()
