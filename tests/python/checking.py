"""What the check scripts share: `check` stops at the first failed check
with its message; `user` is a conversation of one user message."""

import sys


def check(cond, message):
    if not cond:
        print(f"FAILED: {message}", file=sys.stderr)
        sys.exit(1)


def user(text):
    return [{"role": "user", "content": text}]
