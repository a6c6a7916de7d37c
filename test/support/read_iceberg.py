"""Reads an Iceberg table of the local stack with PyIceberg (a second engine, no Spark) and prints
its rows as JSON lines. Usage: read_iceberg.py <lake-home> <namespace> <table>"""
import json
import sys

from pyiceberg.catalog.sql import SqlCatalog

lake_home, namespace, table = sys.argv[1:4]
catalog = SqlCatalog("lake", uri=f"sqlite:///{lake_home}/iceberg_catalog.db", warehouse=f"file://{lake_home}/warehouse")
rows = catalog.load_table((namespace, table)).scan().to_arrow().to_pylist()
for row in rows:
    print(json.dumps(row, default=str, sort_keys=True))
