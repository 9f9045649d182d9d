"""``python -m bot.cli``: the same as the ``rankzero`` script."""

from bot.cli import main

main()
