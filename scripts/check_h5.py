#!/usr/bin/env python3
"""Check that the reference Python reader (scope-profiler 0.7.5) accepts a profile file.

Run it with the venv made by scripts/py-reader-env.sh:

    "$(scripts/py-reader-env.sh | tail -n1)/bin/python" scripts/check_h5.py FILE \
        [--expect-json '{"region name": num_calls, ...}']

Loads FILE with ``scope_profiler.read_h5`` (the full reader: every event column, the call tree
inputs) and, with --expect-json, asserts that each named region exists and has exactly that many
calls (summed over ranks). Prints ``ok N regions`` and exits 0 on success; prints the reason to
stderr and exits 1 otherwise.
"""

import argparse
import json
import sys


def fail(message: str) -> "None":
    print(f"check_h5: {message}", file=sys.stderr)
    sys.exit(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", help="HDF5 profile to read")
    parser.add_argument(
        "--expect-json",
        metavar="JSON",
        help='JSON object {"region name": num_calls}; each must match exactly',
    )
    args = parser.parse_args()

    expected = None
    if args.expect_json is not None:
        try:
            expected = json.loads(args.expect_json)
        except json.JSONDecodeError as exc:
            fail(f"--expect-json is not valid JSON: {exc}")
        if not isinstance(expected, dict) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in expected.values()
        ):
            fail("--expect-json must be a JSON object of region name -> integer call count")

    try:
        import scope_profiler
    except ImportError as exc:
        fail(f"cannot import scope_profiler (run inside scripts/py-reader-env.sh's venv): {exc}")

    try:
        results = scope_profiler.read_h5(args.file)
    except Exception as exc:  # the reader's own errors are what we are checking for
        fail(f"read_h5({args.file!r}) failed: {type(exc).__name__}: {exc}")

    names = list(results.region_names)
    counts = {name: int(results.get_region(name).num_calls) for name in names}

    if expected is not None:
        problems = []
        for name, want in expected.items():
            if name not in counts:
                problems.append(f"region {name!r} missing (file has {names!r})")
            elif counts[name] != want:
                problems.append(f"region {name!r}: {counts[name]} calls, expected {want}")
        if problems:
            fail(f"{args.file}: " + "; ".join(problems))

    print(f"ok {len(names)} regions")


if __name__ == "__main__":
    main()
