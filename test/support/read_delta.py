"""Reads a Delta table with delta-rs (a second engine, no Spark) and prints its rows as JSON lines.
Usage: read_delta.py <table-path>"""
import json
import os
import sys

from deltalake import DeltaTable

for row in DeltaTable(sys.argv[1]).to_pyarrow_table().to_pylist():
    print(json.dumps(row, default=str, sort_keys=True))
sys.stdout.flush()
# delta-rs' runtime threads can abort the interpreter at shutdown; the output is complete here.
os._exit(0)
