"""``python -m questions [PATH...]``: validate bank files without the bot."""

from __future__ import annotations

import sys

from questions.loader import BankValidationError, default_bank_dir, load_paths


def main(argv: list[str]) -> int:
    """Validate the given paths (default: the shipped bank); print errors; return the exit code."""
    try:
        loaded = load_paths(argv or [default_bank_dir()])
    except BankValidationError as exc:
        for err in exc.errors:
            print(err, file=sys.stderr)
        print(f"{len(exc.errors)} error(s); nothing imported", file=sys.stderr)
        return 1
    print(f"ok: {len(loaded)} questions valid")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
