"""Reads a Delta table with delta-rs (a second engine, no Spark).
Usage: read_delta.py <table-path>          rows as JSON lines
       read_delta.py <table-path> history  the latest commit's info as JSON
       read_delta.py --many <path> <path>...  one JSON object: each table's rows by path (one start for many)
       read_delta.py --shape <path> <path>... each table's partition columns and configuration by path
       read_delta.py --log <path>            one JSON object: every commit of its log (version, operation) and its rows
A table on the object store (s3a:// or s3://) is read through delta-rs' own S3 client, from
LAKEHOUSE_S3_ENDPOINT with the key in AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY."""
import json
import os
import sys

from deltalake import DeltaTable


def open_table(path):
    options = {}
    if path.startswith(("s3a://", "s3://")):
        path = "s3://" + path.split("://", 1)[1]
        options = {
            "AWS_ENDPOINT_URL": os.environ["LAKEHOUSE_S3_ENDPOINT"],
            "AWS_ACCESS_KEY_ID": os.environ["AWS_ACCESS_KEY_ID"],
            "AWS_SECRET_ACCESS_KEY": os.environ["AWS_SECRET_ACCESS_KEY"],
            "AWS_REGION": "us-east-1",
            "AWS_ALLOW_HTTP": "true",
        }
    return DeltaTable(path, storage_options=options)


if sys.argv[1] == "--shape":
    out = {}
    for p in sys.argv[2:]:
        m = open_table(p).metadata()
        out[p] = {"partitionColumns": list(m.partition_columns), "configuration": dict(m.configuration)}
    print(json.dumps(out, sort_keys=True))
    sys.stdout.flush()
    os._exit(0)
if sys.argv[1] == "--log":
    t = open_table(sys.argv[2])
    commits = sorted(({"version": c["version"], "operation": c.get("operation")} for c in t.history()), key=lambda c: c["version"])
    print(json.dumps({"commits": commits, "rows": t.to_pyarrow_table().to_pylist()}, default=str, sort_keys=True))
    sys.stdout.flush()
    os._exit(0)
if sys.argv[1] == "--many":
    rows = {p: open_table(p).to_pyarrow_table().to_pylist() for p in sys.argv[2:]}
    print(json.dumps(rows, default=str, sort_keys=True))
    sys.stdout.flush()
    os._exit(0)
table = open_table(sys.argv[1])
if len(sys.argv) > 2 and sys.argv[2] == "history":
    print(json.dumps(table.history(1)[0], default=str))
else:
    for row in table.to_pyarrow_table().to_pylist():
        print(json.dumps(row, default=str, sort_keys=True))
sys.stdout.flush()
# delta-rs' runtime threads can abort the interpreter at shutdown; the output is complete here.
os._exit(0)
