#!/usr/bin/env python3
"""Route cases for `toolrouter eval route --cases` from the Berkeley Function
Calling Leaderboard's data (Apache-2.0), a tool collection toolrouter was
never tuned on: short one-line function descriptions, requests in several
languages, user-contributed ("live") tools.

    pip download --no-deps bfcl-eval==2026.3.23 && unzip -q bfcl_eval-*.whl 'bfcl_eval/data/*'
    scripts/bfcl-route-cases.py bfcl_eval/data OUT_DIR

Writes one JSON-lines file per category (simple_python, multiple,
live_simple, live_multiple: one function needed; parallel_multiple,
live_parallel_multiple: several calls, of 1-5 functions): {"query",
"tools", "relevant"}, the functions
as OpenAI tools (names with `.` written with `_`, BFCL's types mapped to
JSON Schema's as BFCL does for OpenAI models), the relevant ones those of
the category's ground truth; a case whose names are not valid OpenAI
tool names (or repeat) is left out. Standard library only.
"""

import json
import re
import sys
from pathlib import Path

# The names an OpenAI tool may have (and toolrouter accepts).
NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

CATEGORIES = ["simple_python", "multiple", "live_simple", "live_multiple", "parallel_multiple", "live_parallel_multiple"]

# BFCL's own mapping for OpenAI-style models (bfcl_eval/constants, GORILLA_TO_OPENAPI).
TYPES = {
    "integer": "integer", "number": "number", "float": "number", "string": "string",
    "boolean": "boolean", "bool": "boolean", "array": "array", "list": "array",
    "dict": "object", "object": "object", "tuple": "array", "any": "string",
    "byte": "integer", "short": "integer", "long": "integer", "double": "number",
    "char": "string", "ArrayList": "array", "Array": "array", "HashMap": "object",
    "Hashtable": "object", "Queue": "array", "Stack": "array", "Any": "string",
    "String": "string", "Bigint": "integer",
}


def name(function_name):
    return function_name.replace(".", "_")


def schema(value):
    """BFCL's parameter schema as JSON Schema: types mapped, `optional` dropped."""
    if isinstance(value, list):
        return [schema(v) for v in value]
    if not isinstance(value, dict):
        return value
    out = {}
    for key, v in value.items():
        if key == "optional":
            continue
        if key == "type" and isinstance(v, str):
            out[key] = TYPES.get(v, "string")
        elif key == "type" and isinstance(v, list):
            out[key] = [TYPES.get(t, "string") if t != "null" else t for t in v]
        elif key == "properties" and isinstance(v, dict):
            out[key] = {p: schema(s) for p, s in v.items()}
        else:
            out[key] = schema(v)
    return out


def tool(function):
    return {
        "type": "function",
        "function": {
            "name": name(function["name"]),
            "description": function.get("description", ""),
            "parameters": schema(function.get("parameters", {"type": "dict", "properties": {}})),
        },
    }


def cases(data, category):
    questions = [json.loads(l) for l in open(data / f"BFCL_v4_{category}.json")]
    answers = {a["id"]: a for a in map(json.loads, open(data / "possible_answer" / f"BFCL_v4_{category}.json"))}
    for q in questions:
        turn = q["question"][0]
        query = "\n".join(m["content"] for m in turn if m["role"] == "user").strip()
        relevant = sorted({name(f) for call in answers[q["id"]]["ground_truth"] for f in call})
        tools = [tool(f) for f in q["function"]]
        names = [t["function"]["name"] for t in tools]
        valid = all(NAME.match(n) for n in names)
        if not query or not valid or len(set(names)) != len(names) or not set(relevant) <= set(names):
            continue
        yield {"query": query, "tools": tools, "relevant": relevant}


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    data, out = Path(sys.argv[1]), Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    for category in CATEGORIES:
        written = list(cases(data, category))
        with open(out / f"bfcl_{category}.jsonl", "w") as f:
            for case in written:
                f.write(json.dumps(case, ensure_ascii=False) + "\n")
        print(f"{category}: {len(written)} cases", file=sys.stderr)


if __name__ == "__main__":
    main()
