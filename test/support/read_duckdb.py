"""Runs one query with DuckDB (a second engine, no Spark): rows as JSON lines.
Usage: read_duckdb.py <sql>
DuckDB cannot download extensions here: the wheels' httpfs, avro, iceberg and delta are loaded by
path. With LAKEHOUSE_S3_ENDPOINT (and the key in AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY) an S3
secret points s3:// at the object store, path-style and over plain http."""
import glob
import importlib
import json
import os
import sys
from urllib.parse import urlparse

import duckdb

con = duckdb.connect(config={"autoinstall_known_extensions": "false", "autoload_known_extensions": "false"})
for name in ("httpfs", "avro", "iceberg", "delta"):  # iceberg needs avro
    pkg = os.path.dirname(importlib.import_module(f"duckdb_extension_{name}").__file__)
    con.execute(f"LOAD '{glob.glob(f'{pkg}/extensions/*/{name}.duckdb_extension')[0]}'")
if os.environ.get("LAKEHOUSE_S3_ENDPOINT"):
    endpoint = urlparse(os.environ["LAKEHOUSE_S3_ENDPOINT"])
    con.execute(
        "CREATE SECRET lake (TYPE s3, KEY_ID ?, SECRET ?, ENDPOINT ?, URL_STYLE 'path', USE_SSL ?, REGION 'us-east-1')",
        [os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"], endpoint.netloc, endpoint.scheme == "https"],
    )
cur = con.execute(sys.argv[1])
names = [d[0] for d in cur.description]
for row in cur.fetchall():
    print(json.dumps(dict(zip(names, row)), default=str, sort_keys=True))
