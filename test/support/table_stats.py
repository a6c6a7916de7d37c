"""Files and snapshots of a table of the local stack, read without Spark: PyIceberg for Iceberg,
delta-rs for Delta. Prints one JSON object.
Usage: table_stats.py iceberg <lake-home> <namespace> <table>
       table_stats.py delta <path>"""
import json
import sys

if sys.argv[1] == "iceberg":
    from pyiceberg.catalog.sql import SqlCatalog

    lake_home, namespace, table = sys.argv[2:5]
    catalog = SqlCatalog("lake", uri=f"sqlite:///{lake_home}/iceberg_catalog.db", warehouse=f"file://{lake_home}/warehouse")
    loaded = catalog.load_table((namespace, table))
    files = [task.file.file_path for task in loaded.scan().plan_files()]
    snapshots = [str(s.snapshot_id) for s in loaded.snapshots()]
    current = loaded.current_snapshot()
    print(json.dumps({"files": len(files), "paths": sorted(files), "snapshots": snapshots, "current": str(current.snapshot_id) if current else None}))
else:
    from deltalake import DeltaTable

    table = DeltaTable(sys.argv[2])
    files = table.file_uris() if hasattr(table, "file_uris") else table.files()
    print(json.dumps({"files": len(files), "paths": sorted(files), "version": table.version()}))
