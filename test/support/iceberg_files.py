"""The files an Iceberg table of the local stack references, read with PyIceberg (no Spark).
Usage: iceberg_files.py <lake-home> <namespace> <table>
Prints one JSON object: the current snapshot id and summary, the table's location, the live data
files and the delete files that apply to them (paths, sorted)."""
import json
import sys

from pyiceberg.catalog.sql import SqlCatalog

lake_home, namespace, table = sys.argv[1:4]
catalog = SqlCatalog("lake", uri=f"sqlite:///{lake_home}/iceberg_catalog.db", warehouse=f"file://{lake_home}/warehouse")
loaded = catalog.load_table((namespace, table))
snapshot = loaded.current_snapshot()
tasks = list(loaded.scan().plan_files()) if snapshot else []
print(json.dumps({
    "snapshot_id": str(snapshot.snapshot_id) if snapshot else None,
    "summary": snapshot.summary.additional_properties if snapshot else {},
    "location": loaded.location(),
    "data": sorted(task.file.file_path for task in tasks),
    "deletes": sorted({d.file_path for task in tasks for d in task.delete_files}),
}))
