"""The peer of bench/validate.ts: pyspark-client validates no configs, so the fair peer is the same
work in Python: parse each HOCON file with pyhocon and validate it against the project's generated
JSON Schema (schemas/cdc-silver-merge.v1.schema.json) with jsonschema, collecting every error.

    python peer_validate.py --schema SCHEMA DIR     all *.conf in DIR, one JSON line with the totals
    python peer_validate.py --schema SCHEMA FILE    one config; exit 0 valid, 78 invalid (like the CLI)

`${LAKEHOUSE_LAKE_HOME}` resolves from the environment (pyhocon falls back to it), as ours does.
"""
import json
import os
import resource
import sys
import time

from jsonschema.validators import validator_for
from pyhocon import ConfigFactory


def main() -> None:
    args = sys.argv[1:]
    if len(args) != 3 or args[0] != "--schema":
        raise SystemExit(__doc__)
    schema_file, target = args[1], args[2]
    with open(schema_file, encoding="utf-8") as f:
        schema = json.load(f)
    cls = validator_for(schema)
    cls.check_schema(schema)
    validator = cls(schema)

    def problems(path: str) -> list[str]:
        try:
            tree = ConfigFactory.parse_file(path)
        except Exception as e:  # a config that does not parse is invalid, as in ours
            return [f"parse: {e}"]
        doc = tree.as_plain_ordered_dict()
        return [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(doc)]

    if os.path.isfile(target):
        found = problems(target)
        for p in found:
            print(f"{target}: {p}", file=sys.stderr)
        sys.exit(78 if found else 0)

    files = sorted(os.path.join(target, n) for n in os.listdir(target) if n.endswith(".conf"))
    t0 = time.perf_counter()
    invalid = [os.path.basename(p) for p in files if problems(p)]
    ms = (time.perf_counter() - t0) * 1000
    print(json.dumps({
        "files": len(files),
        "valid": len(files) - len(invalid),
        "invalid": len(invalid),
        "invalidFiles": invalid,
        "ms": ms,
        "maxRssKb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
    }))


if __name__ == "__main__":
    main()
