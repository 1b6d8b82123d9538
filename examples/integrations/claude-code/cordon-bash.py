#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A Claude Code PreToolUse hook that runs the Bash tool's commands in a
cordon sandbox.

Claude Code gives it the hook's input on stdin ({"hook_event_name":
"PreToolUse", "tool_name": "Bash", "tool_input": {"command": ...}, ...}).
For the Bash tool it answers with the command rewritten to

    cordon run [FLAGS] -- bash -c 'COMMAND'

(FLAGS: this script's own arguments, such as --profile FILE), the command
quoted whole so that it reaches bash byte for byte. It runs where the Bash
tool's shell is: from a subdirectory of a git repository, cordon run on the
default profile takes the repository's top as the workspace and starts the
command in that subdirectory, so git works there as outside (--workspace .
as a FLAG keeps the current directory alone). Other tools are left
alone (no output). The decision is "allow" (the command runs sandboxed,
without a prompt), or "ask" with CORDON_HOOK_DECISION=ask.

An input it cannot read blocks the call (exit status 2, the reason on
stderr): a command that cannot be wrapped is not run outside the sandbox.
Standard library only.
"""

import json
import os
import shlex
import sys


def wrap(command, flags):
    """The command line that runs command under cordon run."""
    parts = ["cordon", "run", *flags, "--", "bash", "-c", command]
    return " ".join(shlex.quote(p) for p in parts)


def main():
    try:
        data = json.load(sys.stdin)
    except ValueError as err:
        print(f"cordon hook: the hook input is not JSON: {err}", file=sys.stderr)
        return 2
    if not isinstance(data, dict) or data.get("tool_name") != "Bash":
        return 0
    tool_input = data.get("tool_input")
    command = tool_input.get("command") if isinstance(tool_input, dict) else None
    if not isinstance(command, str):
        print("cordon hook: the Bash tool's input has no command", file=sys.stderr)
        return 2
    decision = os.environ.get("CORDON_HOOK_DECISION", "allow")
    if decision not in ("allow", "ask"):
        print(f"cordon hook: CORDON_HOOK_DECISION: want allow or ask, found {decision!r}", file=sys.stderr)
        return 2
    updated = dict(tool_input)
    updated["command"] = wrap(command, sys.argv[1:])
    json.dump(
        {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": decision,
                "permissionDecisionReason": "runs in a cordon sandbox (cordon run)",
                "updatedInput": updated,
            }
        },
        sys.stdout,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
