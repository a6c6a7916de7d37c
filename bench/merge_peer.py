"""The peer of bench/merge: a pyspark-client (Spark Connect Python client) process doing the work of
`lakehouse-jobs --job cdc-silver-merge` (schema-version 1, keys [id], sequence ts, op-column op,
delete-values [d], Iceberg catalog) against the same server.

  python bench/merge_peer.py b1 --remote sc://… --bronze file://…/bronze/events --table lake.ns.items
  python bench/merge_peer.py b2 …

b1  the same sequence of requests our job sends (taken from `lakehouse-jobs plan`, translated step by
    step to DataFrame/SQL calls of pyspark-client): NULL-key check, event count, tie check, create
    namespace, two table probes, schema comparison, the measure query, the tombstone MERGE, the
    silver MERGE (same source, same conditions), the tombstone expiry and the snapshot read.
b2  a bare `MERGE INTO … USING (latest event per key) …` and nothing else: no checks, no metrics,
    no tombstones (equal results only because this batch has no late events and no deleted key
    that comes back).
b3  the floor of the guarantees that need work of their own, each in its cheapest form: the latest
    event per key resolved once and kept on the server (localCheckpoint: three steps read it), the
    counts before any write (so that a rerun of an applied batch skips the MERGE: a MERGE that
    changes nothing still rewrites every file it matched and commits), the deleted keys recorded
    as tombstones, and upserts no newer than a key's tombstone ignored. No NULL or tie check, no
    table probes, no schema comparison, no commit-window reads, no tombstone expiry.

Prints one JSON line {mode, steps: {id: ms}, metrics} on stdout.
"""

import argparse
import json
import sys
import time
import uuid

from pyspark.sql import SparkSession, Window
from pyspark.sql import functions as F

METADATA = ["_lake_tenant", "_lake_source", "_lake_ingested_at", "_snapshot_date"]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["b1", "b2", "b3"])
    ap.add_argument("--remote", required=True)
    ap.add_argument("--bronze", required=True)
    ap.add_argument("--table", required=True, help="catalog.namespace.table of silver")
    a = ap.parse_args()

    steps: dict[str, int] = {}

    def timed(step, fn):
        t = time.perf_counter()
        r = fn()
        steps[step] = round((time.perf_counter() - t) * 1000)
        return r

    spark = timed("connect", lambda: SparkSession.builder.remote(a.remote).create())
    catalog, ns, table = a.table.split(".")
    tomb_name = f"{table}__cdc_tombstones"
    tomb_full = f"{catalog}.{ns}.{tomb_name}"
    metrics = {}

    if a.mode == "b2":
        timed(
            "merge",
            lambda: spark.sql(
                f"""
MERGE INTO {a.table} t
USING (
  SELECT id, name, amount, qty, status, ts, op
  FROM (SELECT *, row_number() OVER (PARTITION BY id ORDER BY ts DESC) AS rn FROM parquet.`{a.bronze}`)
  WHERE rn = 1
) s
ON t.id = s.id
WHEN MATCHED AND s.op = 'd' AND s.ts > t.ts THEN DELETE
WHEN MATCHED AND s.ts > t.ts THEN UPDATE SET name = s.name, amount = s.amount, qty = s.qty, status = s.status, ts = s.ts
WHEN NOT MATCHED AND s.op <> 'd' THEN INSERT (id, name, amount, qty, status, ts) VALUES (s.id, s.name, s.amount, s.qty, s.status, s.ts)
"""
            ),
        )
        print(json.dumps({"mode": a.mode, "steps": steps, "metrics": metrics}))
        return 0

    # b1: the plan of cdc-silver-merge v1, relation by relation (b3: its floor, see above).
    keys, seq = ["id"], ["ts"]
    key_seq = keys + seq
    run_id = f"peer__{uuid.uuid4()}"
    events = spark.read.format("parquet").option("mergeSchema", "true").load(a.bronze)
    payload = events.drop(*METADATA)
    latest = (
        payload.withColumns(
            {
                "__lake_rn": F.row_number().over(Window.partitionBy(F.col("id")).orderBy(F.col("ts").desc())),
                "__lake_delete": F.coalesce(F.col("op").isin(F.lit("d")), F.lit(False)),
            }
        )
        .filter(F.col("__lake_rn") == F.lit(1))
        .drop("__lake_rn", "op")
    )
    if a.mode == "b3":
        latest = timed("resolve", lambda: latest.localCheckpoint(eager=True))
    silver_columns = latest.drop("__lake_delete")
    known_tombstones = spark.read.table(tomb_full).select(*key_seq).alias("__tomb")
    source = (
        latest.alias("__resolved")
        .join(known_tombstones, F.col("__resolved.id").eqNullSafe(F.col("__tomb.id")), "left")
        .select(
            F.col("__resolved.*"),
            (F.col("__tomb.id").isNull() | (F.col("__resolved.ts") > F.col("__tomb.ts"))).alias("__lake_after_tombstone"),
        )
    )

    def measure():
        existing = spark.read.table(a.table).select(F.col("id"), F.col("ts"), F.lit(True).alias("__lake_present")).alias("__row")
        joined = source.alias("__source").join(existing, F.col("__source.id").eqNullSafe(F.col("__row.id")), "left")
        matched = F.col("__row.__lake_present").isNotNull()
        newer = F.col("__source.ts") > F.col("__row.ts")
        after = F.col("__source.__lake_after_tombstone")
        dele = F.col("__source.__lake_delete")
        m = timed(
            "measure",
            lambda: joined.agg(
                F.count_if(~matched & ~dele & after).alias("inserted"),
                F.count_if(matched & newer & ~dele & after).alias("updated"),
                F.count_if(matched & newer & dele).alias("deleted"),
                F.count_if((matched & ~newer) | (~dele & ~after) | (~matched & dele & ~after)).alias("late"),
                F.count_if(dele & after).alias("tombstones"),
            ).collect()[0],
        )
        metrics.update(m.asDict())

    def record_tombstones():
        timed(
            "record-tombstones",
            lambda: latest.filter(F.col("__lake_delete"))
            .select(*key_seq, F.current_timestamp().alias("_cdc_deleted_at"), F.lit(run_id).alias("_lake_run_id"))
            .alias("__source")
            .mergeInto(tomb_full, F.col(f"{tomb_name}.id").eqNullSafe(F.col("__source.id")))
            .whenMatched(F.col("__source.ts") > F.col(f"{tomb_name}.ts"))
            .updateAll()
            .whenNotMatched()
            .insertAll()
            .merge(),
        )

    def merge():
        newer_than_row = F.col("__source.ts") > F.col(f"{table}.ts")
        timed(
            "merge",
            lambda: source.alias("__source")
            .mergeInto(a.table, F.col(f"{table}.id").eqNullSafe(F.col("__source.id")))
            .whenMatched(F.col("__source.__lake_delete") & newer_than_row)
            .delete()
            .whenMatched(~F.col("__source.__lake_delete") & newer_than_row & F.col("__source.__lake_after_tombstone"))
            .updateAll()
            .whenNotMatched(~F.col("__source.__lake_delete") & F.col("__source.__lake_after_tombstone"))
            .insertAll()
            .merge(),
        )

    if a.mode == "b3":
        measure()
        if metrics["tombstones"]:
            record_tombstones()
        if metrics["inserted"] + metrics["updated"] + metrics["deleted"]:
            merge()
        print(json.dumps({"mode": a.mode, "steps": steps, "metrics": metrics}))
        return 0

    # check-batch: events, NULL keys or sequences, ambiguous ties in one scan (as our job does).
    as_json = F.to_json(F.struct(F.col("*")))
    per_group = payload.groupBy(*[F.col(c) for c in key_seq]).agg(
        F.count(F.lit(1)).alias("__n"), (F.min(as_json) != F.max(as_json)).alias("__tie")
    )
    nullish = F.col("id").isNull() | F.col("ts").isNull()
    example = lambda cond: F.max(F.when(cond, F.to_json(F.struct(*[F.col(c) for c in key_seq]))))
    checks = timed(
        "check-batch",
        lambda: per_group.agg(
            F.coalesce(F.sum("__n"), F.lit(0)).alias("events"),
            F.count_if(nullish).alias("null_groups"),
            example(nullish).alias("null_example"),
            F.count_if(F.col("__tie")).alias("ties"),
            example(F.col("__tie")).alias("tie_example"),
        ).collect()[0],
    )
    if checks["null_groups"] or checks["ties"]:
        raise SystemExit(f"bad batch: {checks}")
    metrics["rowsRead"] = checks["events"]
    timed("create-namespace", lambda: spark.sql(f"CREATE NAMESPACE IF NOT EXISTS `{catalog}`.`{ns}`"))
    # ensureTable: our runner probes with an AnalyzePlan(schema) of the table (exists: no create).
    timed("create-table", lambda: spark.read.table(a.table).schema)
    timed("create-tombstones", lambda: spark.read.table(tomb_full).schema)

    def check_schema():
        incoming = {f.name.lower() for f in silver_columns.schema.fields}
        have = {f.name.lower() for f in spark.read.table(a.table).schema.fields}
        if incoming != have:
            raise SystemExit(f"schema differs: {sorted(incoming ^ have)}")

    timed("check-schema", check_schema)

    measure()
    # Tombstones first, then silver: the same MergeIntoTableCommand shapes as ours.
    record_tombstones()
    merge()
    timed(
        "expire-tombstones",
        lambda: spark.sql(
            f"DELETE FROM `{catalog}`.`{ns}`.`{tomb_name}` WHERE `_cdc_deleted_at` < current_timestamp() - make_dt_interval(30)"
        ),
    )
    snap = timed(
        "read-snapshot",
        lambda: spark.read.table(f"{a.table}.snapshots")
        .select("snapshot_id", "committed_at")
        .sort(F.col("committed_at").desc())
        .limit(1)
        .collect(),
    )
    metrics["snapshotId"] = str(snap[0]["snapshot_id"]) if snap else None
    print(json.dumps({"mode": a.mode, "steps": steps, "metrics": metrics}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
