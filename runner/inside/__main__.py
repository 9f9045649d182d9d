"""Entry point of the sandbox: ``python -s .../runner/inside/__main__.py SPEC_JSON`` (or ``--fresh-rank FD``).

Run by path, both inside the sandbox (/opt/rankzero/runner/inside/__main__.py) and without one (the source
tree's file): the folder holding ``runner`` goes first on the module path, in place of this script's own
folder, so that ``runner.inside`` imports as a package and none of its modules shadows a snippet's import.
"""

import os
import sys

if not __package__:  # run by path, not with -m
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from runner.inside.supervisor import main

if __name__ == "__main__":
    sys.exit(main(sys.argv))
