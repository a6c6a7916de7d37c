"""Files and snapshots of a table of the local stack, read without Spark: PyIceberg for Iceberg,
delta-rs for Delta. Prints one JSON object.
Usage: table_stats.py iceberg <lake-home> <namespace> <table>
       table_stats.py delta <path>
Tables on the object store are read through pyarrow's and delta-rs' S3 clients, from
LAKEHOUSE_S3_ENDPOINT with the key in AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY."""
import json
import os
import sys

endpoint = os.environ.get("LAKEHOUSE_S3_ENDPOINT")
key = (os.environ.get("AWS_ACCESS_KEY_ID"), os.environ.get("AWS_SECRET_ACCESS_KEY"))

if sys.argv[1] == "iceberg":
    from pyiceberg.catalog.sql import SqlCatalog

    lake_home, namespace, table = sys.argv[2:5]
    s3 = {"s3.endpoint": endpoint, "s3.access-key-id": key[0], "s3.secret-access-key": key[1], "s3.region": "us-east-1"} if endpoint else {}
    catalog = SqlCatalog("lake", uri=f"sqlite:///{lake_home}/iceberg_catalog.db", warehouse=f"file://{lake_home}/warehouse", **s3)
    loaded = catalog.load_table((namespace, table))
    files = [task.file.file_path for task in loaded.scan().plan_files()]
    snapshots = [str(s.snapshot_id) for s in loaded.snapshots()]
    current = loaded.current_snapshot()
    print(json.dumps({"files": len(files), "paths": sorted(files), "snapshots": snapshots, "current": str(current.snapshot_id) if current else None}))
else:
    from deltalake import DeltaTable

    path, options = sys.argv[2], {}
    if path.startswith(("s3a://", "s3://")):
        path = "s3://" + path.split("://", 1)[1]
        options = {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": key[0], "AWS_SECRET_ACCESS_KEY": key[1], "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true"}
    table = DeltaTable(path, storage_options=options)
    files = table.file_uris() if hasattr(table, "file_uris") else table.files()
    print(json.dumps({"files": len(files), "paths": sorted(files), "version": table.version()}))
