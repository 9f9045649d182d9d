"""``rankzero``, the command line: play in the terminal, run the bot, manage the database and the bank.

``main`` is the console script's entry point (pyproject: ``rankzero = "bot.cli:main"``). The root group and
the everyday commands live in root.py; serve.py (``serve``, ``schedule``), dispute.py (``dispute``,
``questions verify|preview|correct|flags``) and family.py (``questions build|stats``) are imported only
when one of their commands runs. _common.py holds what they share; errors.py the database messages.
"""

from bot.cli._common import CONSOLE_CHANNEL
from bot.cli.root import main

__all__ = ["CONSOLE_CHANNEL", "main"]
