"""Driver of bench/incremental (run by it, in the scripts/py-tools venv): issue 25 item 4, the cost of
an incremental cdc-silver-merge follows the new events, not the day's partition.

One day's bronze partition (an Iceberg table, partitioned by _snapshot_date) holds --day-events CDC
events over a silver of --keys rows. Most of the day (all but --runs × --share %) has been merged
already: silver's snapshot records that bronze position. The rest arrives as --runs appends of
--share % of the day each (bronze snapshots written once, in setup). The contenders, interleaved,
each from the same silver (restored to its snapshot before the day's last events, not timed):

  INC    --runs runs of our CLI with source.read = incremental, bronze moved forward one append
         before each (metadata only, not timed): the orchestrator's run every few minutes
  FULL   one run of our CLI over the whole day's partition (source.snapshot-date, no source.read):
         the full-day merge that a run without incremental reads does each time
  DAY    (on request) --runs runs over the day's partition as it stands after each append: what
         an orchestrator running the chain every few minutes pays today

Per contender: wall time and the Spark server's CPU (its process group, from /proc), summed over
its runs, and per step the time the CLI logged. After every contender silver is checksummed: all
must end in the same silver. Medians over the measured rounds, ratios INC/FULL.
"""

import argparse
import json
import os
import platform
import statistics
import sys
import time

from pyspark.sql import functions as F

import merge_bench as mb

DAY0, DAY = "2026-03-01", "2026-03-02"
# Keys of the day's events are visited in the order k * PRIME mod keys: every append touches keys
# all over silver (and every data file of it), as a day's changes to a table do.
PRIME = 999_983


def log(msg: str) -> None:
    print(f"bench/incremental: {msg}", file=sys.stderr, flush=True)


def events(spark, first: int, count: int, keys: int, day: str, base_ts: int):
    """Events first..first+count-1 of a day, in order: 5 % deletes, 5 % inserts of new keys, the
    rest updates of existing keys; the sequence (ts) grows with the event's number."""
    k = F.col("id")
    key = F.when(k % 20 == 1, F.lit(keys) + k).otherwise((k * F.lit(PRIME)) % F.lit(keys))
    op = F.when(k % 20 == 0, F.lit("d")).when(k % 20 == 1, F.lit("c")).otherwise(F.lit("u"))
    return spark.range(first, first + count).select(
        key.alias("id"),
        F.concat(F.lit("item-"), k.cast("string")).alias("name"),
        (k * F.lit(0.01)).alias("amount"),
        (k % 100).cast("int").alias("qty"),
        op.alias("status"),
        F.timestamp_seconds(F.lit(base_ts) + k).alias("ts"),
        op.alias("op"),
        F.lit("bench").alias("_lake_tenant"),
        F.lit("events").alias("_lake_source"),
        F.lit(f"{day} 23:00:00").cast("timestamp").alias("_lake_ingested_at"),
        F.lit(day).cast("date").alias("_snapshot_date"),
    )


def set_main(spark, table: str, snapshot: int) -> None:
    ns_t = table.split(".", 1)[1]
    if mb.current_snapshot(spark, table) != snapshot:
        spark.sql(f"CALL lake.system.set_current_snapshot(table => '{ns_t}', snapshot_id => {snapshot})").collect()
    spark.sql(f"REFRESH TABLE {table}")
    assert mb.current_snapshot(spark, table) == snapshot, f"{table} not at {snapshot}"


def silver_checksum(spark, table: str) -> dict:
    r = spark.sql(f"SELECT count(*) AS n, sum(cast(xxhash64(id, name, amount, qty, status, ts) AS decimal(38,0))) AS h FROM {table}").collect()[0]
    return {"rows": r["n"], "checksum": str(r["h"])}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--remote", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--cli", required=True, help="path of the CLI as shipped (dist/cli.mjs)")
    ap.add_argument("--keys", type=int, default=500_000, help="silver's rows before the day")
    ap.add_argument("--day-events", type=int, default=1_000_000, help="the day's partition: CDC events in it at the end")
    ap.add_argument("--runs", type=int, default=10, help="incremental runs (and appends) at the end of the day")
    ap.add_argument("--share", type=float, default=1.0, help="each append, in percent of the day's events")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--contenders", default="INC,FULL", help="INC, FULL and DAY (today's way: the day so far, each run)")
    ap.add_argument("--silver-properties", default="", help="HOCON of target.table-properties for silver, e.g. write.merge.mode = merge-on-read")
    ap.add_argument("--tenant", default="incbench")
    ap.add_argument("--server-sid", type=int, default=0)
    a = ap.parse_args()
    load_start = os.getloadavg()

    wd = os.path.abspath(a.workdir)
    root = f"file://{wd}/root"
    os.makedirs(f"{wd}/logs", exist_ok=True)
    spark = mb.session(a.remote)
    server_version = spark.version
    try:
        for t in (f"lake.{a.tenant}_silver.items", f"lake.{a.tenant}_silver.items__cdc_tombstones", f"lake.{a.tenant}_bronze.events"):
            spark.sql(f"DROP TABLE IF EXISTS {t}")
    except Exception as e:  # a leftover whose files are gone (an interrupted earlier run)
        a.tenant = f"{a.tenant}{os.getpid()}"
        log(f"cannot drop the old tables ({type(e).__name__}); using tenant {a.tenant}")
    spark.stop()
    bronze, silver = f"lake.{a.tenant}_bronze.events", f"lake.{a.tenant}_silver.items"
    tombs = f"{silver}__cdc_tombstones"
    try:
        return measure(a, wd, root, bronze, silver, tombs, server_version, load_start)
    finally:
        spark = mb.session(a.remote)
        for t in (silver, tombs, bronze):  # the work dir goes away: no catalog entry may outlive it
            spark.sql(f"DROP TABLE IF EXISTS {t}")
        for ns in ("silver", "bronze"):
            spark.sql(f"DROP NAMESPACE IF EXISTS lake.{a.tenant}_{ns}")
        spark.stop()


def measure(a, wd: str, root: str, bronze: str, silver: str, tombs: str, server_version: str, load_start) -> int:
    with open(f"{wd}/platform.conf", "w") as f:
        f.write(f'catalogs {{ lake {{ format = iceberg, default = true }} }}\ntenants {{ {a.tenant} {{ storage-roots = ["{root}"] }} }}\n')
    props = f", table-properties {{ {a.silver_properties} }}" if a.silver_properties else ""
    for name, source in (("inc", "read = incremental"), ("full", f'snapshot-date = "{DAY}"')):
        with open(f"{wd}/{name}.conf", "w") as f:
            f.write(
                f'job    {{ template = "cdc-silver-merge", schema-version = 2, name = "bench-incremental" }}\n'
                f'tenant {{ id = "{a.tenant}", storage-root = "{root}" }}\n'
                f'source {{ table = "events", format = iceberg, catalog = lake, {source} }}\n'
                'cdc    { primary-key = ["id"], sequence-by = "ts", op-column = "op", delete-values = ["d"] }\n'
                f'target {{ table = "items", format = iceberg, catalog = lake {props} }}\n'
            )
    ours = lambda conf, i: [  # noqa: E731
        "node", a.cli, "--config", f"{wd}/{conf}.conf", "--env", f"{wd}/platform.conf", "--remote", a.remote,
        "--status-file", f"{wd}/status-{i}.json", "--log-level", "info",
    ]

    # --- setup (not measured) --------------------------------------------------------------------
    t_setup = time.perf_counter()
    spark = mb.session(a.remote)
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS lake.{a.tenant}_bronze")
    spark.sql(
        f"CREATE TABLE {bronze} (id BIGINT, name STRING, amount DOUBLE, qty INT, status STRING, ts TIMESTAMP, op STRING, "
        "_lake_tenant STRING, _lake_source STRING, _lake_ingested_at TIMESTAMP, _snapshot_date DATE) "
        f"USING iceberg PARTITIONED BY (_snapshot_date) LOCATION '{root}/bronze/events' TBLPROPERTIES ('format-version' = '2')"
    )
    base0, base1 = 1772323200, 1772409600  # DAY0 and DAY at 00:00 UTC
    # The day before: every key inserted once.
    spark.range(0, a.keys).select(
        F.col("id"),
        F.concat(F.lit("item-"), F.col("id").cast("string")).alias("name"),
        (F.col("id") * F.lit(0.01)).alias("amount"),
        (F.col("id") % 100).cast("int").alias("qty"),
        F.lit("c").alias("status"),
        F.timestamp_seconds(F.lit(base0)).alias("ts"),
        F.lit("c").alias("op"),
        F.lit("bench").alias("_lake_tenant"),
        F.lit("events").alias("_lake_source"),
        F.lit(f"{DAY0} 23:00:00").cast("timestamp").alias("_lake_ingested_at"),
        F.lit(DAY0).cast("date").alias("_snapshot_date"),
    ).repartition(4).writeTo(bronze).append()
    each = int(a.day_events * a.share / 100)
    earlier = a.day_events - a.runs * each
    events(spark, 0, earlier, a.keys, DAY, base1).repartition(4).writeTo(bronze).append()
    b0 = mb.current_snapshot(spark, bronze)
    appends = []
    for i in range(a.runs):
        # One commit per append, one file, as a few minutes of a stream land.
        events(spark, earlier + i * each, each, a.keys, DAY, base1).coalesce(1).writeTo(bronze).append()
        appends.append(mb.current_snapshot(spark, bronze))
    set_main(spark, bronze, b0)
    spark.stop()
    log(f"bronze: {a.keys} inserts on {DAY0}; {earlier} events of {DAY} already merged, then {a.runs} appends of {each} ({a.share} % of the day)")
    # Silver as of the day so far, with its position (a first incremental run reads everything).
    mb.run(ours("inc", "init"), f"{wd}/logs/init.log", a.server_sid)
    spark = mb.session(a.remote)
    s0, t0 = mb.current_snapshot(spark, silver), mb.current_snapshot(spark, tombs)
    files = spark.sql(f"SELECT count(*) FROM {silver}.files").collect()[0][0]
    base = silver_checksum(spark, silver)
    spark.stop()
    log(f"silver: {base['rows']} rows in {files} files (snapshot {s0}); setup {time.perf_counter() - t_setup:.0f} s")

    def contender(name: str, r: int) -> dict:
        """Restore, then the contender's runs: their summed wall, server CPU and step times, and the silver it left."""
        spark = mb.session(a.remote)
        set_main(spark, silver, s0)
        set_main(spark, tombs, t0)
        set_main(spark, bronze, b0 if name != "FULL" else appends[-1])
        spark.stop()
        wall = cpu = 0.0
        steps: dict[str, float] = {}
        runs = [("full", appends[-1])] if name == "FULL" else [("inc" if name == "INC" else "full", s) for s in appends]
        for i, (conf, head) in enumerate(runs):
            if name != "FULL":
                spark = mb.session(a.remote)
                set_main(spark, bronze, head)
                spark.stop()
            w, _, err = mb.run(ours(conf, f"{name}-{r}-{i}"), f"{wd}/logs/{name}-{r}-{i}.log", a.server_sid)
            with open(f"{wd}/status-{name}-{r}-{i}.json") as f:
                read = json.load(f)["outputs"][0].get("read", {})
            # An incremental run that read anything but its one append would measure something else.
            if name == "INC" and (read.get("mode") != "incremental" or read.get("to") != str(head)):
                raise SystemExit(f"INC run {i} of round {r} did not read just its append: {read}")
            wall += w
            cpu += mb.SERVER_CPU["s"]
            for s, ms in mb.our_steps(err).items():
                steps[s] = steps.get(s, 0) + ms
        spark = mb.session(a.remote)
        c = silver_checksum(spark, silver)
        spark.stop()
        return {"wall": wall, "cpu": cpu, "steps": steps, "silver": c, "runs": len(runs)}

    order = [c for c in ("INC", "FULL", "DAY") if c in a.contenders.split(",")]
    samples: dict[str, list[dict]] = {k: [] for k in order}
    silvers: dict[str, set] = {k: set() for k in order}
    for r in range(a.warmup + a.rounds):
        warm = r < a.warmup
        for k in order[r % len(order):] + order[: r % len(order)]:
            s = contender(k, r)
            silvers[k].add(json.dumps(s["silver"], sort_keys=True))
            log(f"round {r}{' (warm-up)' if warm else ''} {k}: {s['runs']} run(s), {s['wall']:.2f} s, server CPU {s['cpu']:.1f} s")
            if not warm:
                samples[k].append(s)

    med = {k: statistics.median(s["wall"] for s in v) for k, v in samples.items()}
    cpu = {k: statistics.median(s["cpu"] for s in v) for k, v in samples.items()}
    steps = {k: {s: statistics.median(x["steps"].get(s, 0) for x in v) for s in v[0]["steps"]} for k, v in samples.items()}
    same = len({x for v in silvers.values() for x in v}) == 1
    out = {
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "sparkServer": server_version,
        "keys": a.keys,
        "dayEvents": a.day_events,
        "runs": a.runs,
        "eventsPerRun": each,
        "silverProperties": a.silver_properties,
        "silverFiles": files,
        "load": {"start": load_start, "end": os.getloadavg()},
        "rounds": a.rounds,
        "warmup": a.warmup,
        "wall": {k: [round(s["wall"], 2) for s in v] for k, v in samples.items()},
        "serverCpuS": {k: [round(s["cpu"], 2) for s in v] for k, v in samples.items()},
        "median": med,
        "medianServerCpuS": cpu,
        "ratio": {f"{k}/FULL": med[k] / med["FULL"] for k in med if k != "FULL" and "FULL" in med},
        "serverCpuRatio": {f"{k}/FULL": cpu[k] / cpu["FULL"] for k in cpu if k != "FULL" and cpu.get("FULL")},
        "stepsMs": steps,
        "identicalSilver": same,
        "silver": {k: [json.loads(x) for x in v] for k, v in silvers.items()},
    }
    with open(f"{wd}/incremental-results.json", "w") as f:
        json.dump(out, f, indent=2)
    print(json.dumps(out, indent=2))
    log(f"ratios, wall: {json.dumps({k: round(v, 2) for k, v in out['ratio'].items()})}; server CPU: {json.dumps({k: round(v, 2) for k, v in out['serverCpuRatio'].items()})}; identical silver: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
