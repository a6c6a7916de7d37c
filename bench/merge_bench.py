"""Driver of bench/merge (run by it, in the scripts/py-tools venv): data setup, interleaved rounds of
A (our CLI), B1 (pyspark-client, same requests), B2 (pyspark-client, bare MERGE) and B3 (pyspark-client,
the floor of the guarantees: bench/merge_peer.py), restore of the
silver and tombstone tables to their pre-merge snapshots between runs (not timed), verification of
the result after every run (not timed), medians and ratios.

Everything lives under --workdir (bronze parquet, silver and tombstone tables, configs, logs); the
Iceberg tables are lake.<tenant>_silver.items and lake.<tenant>_silver.items__cdc_tombstones.
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import threading
import time

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

HERE = os.path.dirname(os.path.abspath(__file__))


def log(msg: str) -> None:
    print(f"bench/merge: {msg}", file=sys.stderr, flush=True)


def session(remote: str) -> SparkSession:
    # A new server-side session each time: a fresh Iceberg catalog cache, so what we read or restore
    # is the table as the contender left it.
    return SparkSession.builder.remote(remote).create()


def bronze(spark: SparkSession, path: str, parts: list[tuple[int, int, str, str]], ingest: str) -> None:
    """parts: (first id, count, op, version tag). One event per key; ts grows with the version."""
    dfs = []
    for first, count, op, tag in parts:
        base = 1767225600 if tag == "v1" else 1769904000  # 2026-01-01 / 2026-02-01
        df = spark.range(first, first + count).select(
            F.col("id"),
            F.concat(F.lit("item-"), F.col("id").cast("string"), F.lit("-" + tag)).alias("name"),
            (F.col("id") * F.lit(0.01 if tag == "v1" else 0.011)).alias("amount"),
            ((F.col("id") % 100) + (0 if tag == "v1" else 1)).cast("int").alias("qty"),
            F.lit({"c": "new", "u": "updated", "d": "deleted"}[op]).alias("status"),
            F.timestamp_seconds(F.lit(base) + F.col("id") % 86400).alias("ts"),
            F.lit(op).alias("op"),
            F.lit("bench").alias("_lake_tenant"),
            F.lit("events").alias("_lake_source"),
            F.lit(ingest).cast("timestamp").alias("_lake_ingested_at"),
            F.lit(ingest[:10]).alias("_snapshot_date"),
        )
        dfs.append(df)
    out = dfs[0]
    for d in dfs[1:]:
        out = out.unionByName(d)
    # Round-robin into 4 files: arrival order, keys of all kinds mixed in every file.
    out.repartition(4).write.mode("overwrite").parquet(path)


# The small batch (--batch N < --rows): keys of silver are visited in the order k * PRIME mod rows,
# so the batch's keys are spread over the whole key range (and over every data file of silver) as a
# day's changes to a large table are. PRIME is prime and larger than any --rows used: k * PRIME mod
# rows is then a permutation of the keys for every rows it does not divide.
PRIME = 999_983


def small_batch(spark: SparkSession, path: str, n: int, batch: int, ingest: str) -> dict:
    """About `batch` CDC events against the n-row silver that bronze(..., "v1") created. The mix, in
    shares of `batch` (the counts are returned and recorded):
      updates     43 %  existing keys, one event each, newer than silver's row
      replays      2 %  exact copies of some of those updates (same sequence, same payload: one event)
      deletes     10 %  existing keys
      late         5 %  existing keys, a sequence older than silver's row (changes nothing)
      duplicates  10 %  5 % of existing keys with two events each (delete then re-insert an hour later:
                        the re-insert wins, an update)
      inserts     25 %  new keys
      flickers     5 %  new keys inserted and deleted in the batch (nothing reaches silver; a tombstone)
    No event in this batch is older than a key's tombstone: the bare MERGE (B2) applies it correctly
    without the tombstone table, so its silver must equal ours (checked after every run)."""
    share = lambda pct: max(batch * pct // 100, 1)  # noqa: E731
    ups, rep, dels, late, dups, ins, flick = share(43), share(2), share(10), share(5), share(5), share(25), max(share(5) // 2, 1)
    base1, base2 = 1767225600, 1769904000  # silver's rows (v1) / this batch (v2), as bronze() dates them

    def events(k0: int, count: int, op: str, when: str, offset: int = 0, existing: bool = True):
        ids = (F.col("id") * F.lit(PRIME)) % F.lit(n) if existing else F.lit(2 * n + 1_000_000) + F.col("id")
        ts_base = {"v2": base2, "late": base1 - 86400}[when]
        tag = "late" if when == "late" else "v2"
        return spark.range(k0, k0 + count).select(ids.alias("id")).select(
            F.col("id"),
            F.concat(F.lit("item-"), F.col("id").cast("string"), F.lit(f"-{tag}-{op}")).alias("name"),
            (F.col("id") * F.lit(0.013)).alias("amount"),
            ((F.col("id") % 100) + 2).cast("int").alias("qty"),
            F.lit({"c": "new", "u": "updated", "d": "deleted"}[op]).alias("status"),
            F.timestamp_seconds(F.lit(ts_base + offset) + F.col("id") % 86400).alias("ts"),
            F.lit(op).alias("op"),
            F.lit("bench").alias("_lake_tenant"),
            F.lit("events").alias("_lake_source"),
            F.lit(ingest).cast("timestamp").alias("_lake_ingested_at"),
            F.lit(ingest[:10]).alias("_snapshot_date"),
        )

    k = 0
    parts = []
    parts.append(events(k, ups, "u", "v2"))
    parts.append(events(k, rep, "u", "v2"))  # the first `rep` updates again, byte for byte
    k += ups
    parts.append(events(k, dels, "d", "v2"))
    k += dels
    parts.append(events(k, late, "u", "late"))
    k += late
    parts.append(events(k, dups, "d", "v2"))
    parts.append(events(k, dups, "u", "v2", offset=3600))
    k += dups
    parts.append(events(0, ins, "c", "v2", existing=False))
    parts.append(events(ins, flick, "c", "v2", existing=False))
    parts.append(events(ins, flick, "d", "v2", offset=60, existing=False))
    out = parts[0]
    for d in parts[1:]:
        out = out.unionByName(d)
    # One file, as a small batch lands.
    out.coalesce(1).write.mode("overwrite").parquet(path)
    mix = {"updates": ups, "replays": rep, "deletes": dels, "late": late, "duplicateKeys": dups, "inserts": ins, "flickers": flick}
    mix["events"] = ups + rep + dels + late + 2 * dups + ins + 2 * flick
    return mix


def current_snapshot(spark: SparkSession, table: str) -> int:
    return spark.sql(f"SELECT snapshot_id FROM {table}.refs WHERE name = 'main'").collect()[0][0]


def checksum(spark: SparkSession, table: str, tombs: str) -> dict:
    r = spark.sql(
        f"SELECT count(*) AS n, sum(cast(xxhash64(id, name, amount, qty, status, ts) AS decimal(38,0))) AS h FROM {table}"
    ).collect()[0]
    t = spark.sql(f"SELECT count(*) AS n, sum(cast(xxhash64(id, ts) AS decimal(38,0))) AS h FROM {tombs}").collect()[0]
    return {"rows": r["n"], "checksum": str(r["h"]), "tombstones": t["n"], "tombstoneChecksum": str(t["h"])}


def restore(remote: str, table: str, tombs: str, s0: int, t0: int) -> None:
    spark = session(remote)
    for t, s in ((table, s0), (tombs, t0)):
        ns_t = t.split(".", 1)[1]
        if current_snapshot(spark, t) != s:
            spark.sql(f"CALL lake.system.set_current_snapshot(table => '{ns_t}', snapshot_id => {s})").collect()
        spark.sql(f"REFRESH TABLE {t}")
        assert current_snapshot(spark, t) == s, f"{t} not restored"
    spark.stop()


def session_processes(sid: int):
    """(pid, stat fields after the command name) of every live process of a session: the Spark
    server's launcher and its JVM. Processes that end while being read are skipped."""
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            if int(fields[3]) == sid:  # field 6 of stat: the session id
                yield d, fields
        except (OSError, ValueError, IndexError):
            continue


def session_rss_kb(sid: int) -> int:
    """Resident memory (KB) of every process of a session."""
    total = 0
    for pid, _ in session_processes(sid):
        try:
            with open(f"/proc/{pid}/status") as f:
                total += next((int(line.split()[1]) for line in f if line.startswith("VmRSS:")), 0)
        except (OSError, ValueError, IndexError):
            continue
    return total


def session_cpu_s(sid: int) -> float:
    """CPU time (user + system, seconds) of every live process of a session. The difference over a
    run is the server's work for it; unlike wall time it hardly depends on what else the machine
    runs (other processes take cores, not this CPU time)."""
    # fields 14 and 15 of stat: utime, stime
    ticks = sum(int(fields[11]) + int(fields[12]) for _, fields in session_processes(sid))
    return ticks / os.sysconf("SC_CLK_TCK")


LOAD_START: tuple = ()
MEMORY: dict[str, int] = {}
SERVER_CPU: dict[str, float] = {}


def run(cmd: list[str], log_path: str, server_sid: int = 0) -> tuple[float, str, str]:
    """Run a contender; its peak RSS (GNU time, into a file: stderr stays the contender's) and the
    Spark server's peak RSS while it ran (sampled every 0.2 s) land in MEMORY (KB)."""
    rss_file = log_path + ".maxrss"
    timed = ["/usr/bin/time", "-o", rss_file, "-f", "%M", *cmd] if os.path.exists("/usr/bin/time") else cmd
    peak = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], session_rss_kb(server_sid))
            done.wait(0.2)

    sampler = threading.Thread(target=sample, daemon=True) if server_sid else None
    if sampler:
        sampler.start()
    cpu0 = session_cpu_s(server_sid) if server_sid else 0.0
    t = time.perf_counter()
    p = subprocess.run(timed, capture_output=True, text=True)
    wall = time.perf_counter() - t
    SERVER_CPU["s"] = (session_cpu_s(server_sid) - cpu0) if server_sid else 0.0
    done.set()
    if sampler:
        sampler.join()
    MEMORY.clear()
    MEMORY["server"] = peak[0]
    try:
        with open(rss_file) as f:
            MEMORY["client"] = int(f.read().strip().splitlines()[-1])
    except (OSError, ValueError, IndexError):
        MEMORY["client"] = 0
    with open(log_path, "w") as f:
        f.write(p.stdout + "\n--- stderr ---\n" + p.stderr)
    if p.returncode != 0:
        raise SystemExit(f"{cmd[:3]} failed ({p.returncode}); see {log_path}\n{p.stderr[-3000:]}")
    return wall, p.stdout, p.stderr


def our_steps(stderr: str) -> dict:
    steps = {}
    for line in stderr.splitlines():
        try:
            o = json.loads(line)
        except ValueError:
            continue
        if isinstance(o, dict) and "durationMs" in o and "step" in o:
            steps[o["step"]] = o["durationMs"]
    return steps


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--remote", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--cli", required=True, help="path of the CLI as shipped (dist/cli.mjs)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--rows", type=int, default=1_000_000, help="silver rows (and events in the batch, unless --batch)")
    ap.add_argument("--batch", type=int, default=0, help="a small batch of about this many events (the mix: small_batch) instead of --rows events")
    ap.add_argument("--baseline-cli", default="", help="another build of our CLI (e.g. of main): contender A0, same config as A")
    ap.add_argument("--contenders", default="A,B1,B2", help="which contenders run, e.g. A,B2 for a large size")
    ap.add_argument("--tenant", default="mergebench")
    ap.add_argument("--server-sid", type=int, default=0, help="session id of the Spark server's processes: their peak RSS is recorded")
    a = ap.parse_args()
    global LOAD_START
    LOAD_START = os.getloadavg()

    wd = os.path.abspath(a.workdir)
    root = f"file://{wd}/root"
    ns = f"{a.tenant}_silver"
    table, tombs = f"lake.{ns}.items", f"lake.{ns}.items__cdc_tombstones"
    n = a.rows
    os.makedirs(f"{wd}/logs", exist_ok=True)

    def write_configs() -> None:
        with open(f"{wd}/platform.conf", "w") as f:
            f.write(
                f'spark {{ remote = "{a.remote}" }}\n'
                "catalogs { lake { format = iceberg, default = true } }\n"
                f'tenants {{ {a.tenant} {{ storage-roots = ["{root}"] }} }}\n'
            )
        for name, src in (("job-init", "events_init"), ("job", "events")):
            with open(f"{wd}/{name}.conf", "w") as f:
                f.write(
                    f'job    {{ template = "cdc-silver-merge", schema-version = 1, name = "bench-merge" }}\n'
                    f'tenant {{ id = "{a.tenant}", storage-root = "{root}" }}\n'
                    f'source {{ table = "{src}" }}\n'
                    'cdc    { primary-key = ["id"], sequence-by = "ts", op-column = "op", delete-values = ["d"] }\n'
                    'target { table = "items", catalog = "lake" }\n'
                )

    ours = lambda conf, status, cli=a.cli: [  # noqa: E731
        "node", cli, "--job", "cdc-silver-merge", "--config", f"{wd}/{conf}.conf", "--env", f"{wd}/platform.conf",
        "--remote", a.remote, "--status-file", status,
    ]
    peer = lambda mode: [  # noqa: E731
        sys.executable, os.path.join(HERE, "merge_peer.py"), mode, "--remote", a.remote, "--bronze", f"{root}/bronze/events", "--table", table,
    ]

    # --- setup (not measured) --------------------------------------------------------------------
    t_setup = time.perf_counter()
    spark = session(a.remote)
    server_version = spark.version
    try:
        for t in (table, tombs):
            spark.sql(f"DROP TABLE IF EXISTS {t}")
    except Exception as e:  # a leftover whose files are gone (an interrupted earlier run)
        a.tenant = f"{a.tenant}{os.getpid()}"
        log(f"cannot drop the old tables ({type(e).__name__}); using tenant {a.tenant}")
        ns = f"{a.tenant}_silver"
        table, tombs = f"lake.{ns}.items", f"lake.{ns}.items__cdc_tombstones"
    write_configs()
    hot, new, dele = n // 2, n * 4 // 10, n // 10
    old_tombs = max(n // 100, 1)
    log(f"bronze: initial batch of {n} inserts + {old_tombs} deletes of never-seen keys")
    bronze(spark, f"{wd}/root/bronze/events_init", [(0, n, "c", "v1"), (2 * n, old_tombs, "d", "v1")], "2026-01-31 23:00:00")
    if a.batch:
        mix = small_batch(spark, f"{wd}/root/bronze/events", n, a.batch, "2026-02-28 23:00:00")
        log(f"bronze: measured small batch {mix}")
    else:
        mix = {"updates": hot, "inserts": new, "deletes": dele, "oldTombstones": old_tombs}
        log(f"bronze: measured batch of {hot} updates, {new} inserts, {dele} deletes")
        bronze(spark, f"{wd}/root/bronze/events", [(0, hot, "u", "v2"), (n, new, "c", "v2"), (hot, dele, "d", "v2")], "2026-02-28 23:00:00")
    spark.stop()
    log("silver: our job on the initial batch (creates the table, tombstones, and the first snapshot)")
    t_init = time.perf_counter()
    run(ours("job-init", f"{wd}/status-init.json"), f"{wd}/logs/init.log", a.server_sid)
    log(f"silver: created in {time.perf_counter() - t_init:.1f} s, peak RSS: client {MEMORY['client'] // 1024} MB, server {MEMORY['server'] // 1024} MB")
    spark = session(a.remote)
    s0, t0 = current_snapshot(spark, table), current_snapshot(spark, tombs)
    base = checksum(spark, table, tombs)
    files = spark.sql(f"SELECT count(*) FROM {table}.files").collect()[0][0]
    spark.stop()
    log(f"silver base: {base} in {files} files; snapshots {s0} / {t0}; setup {time.perf_counter() - t_setup:.0f} s")
    assert base["rows"] == n

    contenders = {
        "A": lambda i: ours("job", f"{wd}/status-{i}.json"),
        "B1": lambda i: peer("b1"),
        "B2": lambda i: peer("b2"),
        "B3": lambda i: peer("b3"),
    }
    if a.baseline_cli:
        contenders["A0"] = lambda i: ours("job", f"{wd}/status-A0-{i}.json", a.baseline_cli)
    contenders = {k: v for k, v in contenders.items() if k in a.contenders.split(",") or k == "A0"}
    order = list(contenders)
    samples: dict[str, list[float]] = {k: [] for k in order}
    memory: dict[str, list[dict]] = {k: [] for k in order}
    server_cpu: dict[str, list[float]] = {k: [] for k in order}
    a_steps: list[dict] = []
    a0_steps: list[dict] = []
    peer_steps: dict[str, list[dict]] = {"B1": [], "B3": []}
    results: dict[str, set] = {k: set() for k in order}
    total_rounds = a.warmup + a.rounds
    for r in range(total_rounds):
        warm = r < a.warmup
        rot = order[r % len(order):] + order[: r % len(order)]  # rotate who goes first
        for k in rot:
            restore(a.remote, table, tombs, s0, t0)
            wall, out, err = run(contenders[k](r), f"{wd}/logs/{k}-{r}.log", a.server_sid)
            spark = session(a.remote)
            c = checksum(spark, table, tombs)
            spark.stop()
            # B2 writes no tombstones: compare silver only for it.
            results[k].add(json.dumps(c if k != "B2" else {"rows": c["rows"], "checksum": c["checksum"]}, sort_keys=True))
            log(
                f"round {r}{' (warm-up)' if warm else ''} {k}: {wall:.2f} s  silver {c['rows']} rows, tombstones {c['tombstones']}"
                f"  peak RSS: client {MEMORY['client'] // 1024} MB, server {MEMORY['server'] // 1024} MB, server CPU {SERVER_CPU['s']:.1f} s"
            )
            if warm:
                continue
            samples[k].append(wall)
            memory[k].append({"clientMaxRssMB": round(MEMORY["client"] / 1024), "serverMaxRssMB": round(MEMORY["server"] / 1024)})
            server_cpu[k].append(round(SERVER_CPU["s"], 2))
            if k == "A":
                a_steps.append(our_steps(err))
            elif k == "A0":
                a0_steps.append(our_steps(err))
            elif k in peer_steps:
                peer_steps[k].append(json.loads(out.strip().splitlines()[-1])["steps"])
    spark = session(a.remote)
    for t in (table, tombs):  # the work dir goes away: no catalog entry may outlive it
        spark.sql(f"DROP TABLE IF EXISTS {t}")
    spark.sql(f"DROP NAMESPACE IF EXISTS lake.{ns}")
    spark.stop()

    med = {k: statistics.median(v) for k, v in samples.items()}
    cpu_med = {k: statistics.median(v) for k, v in server_cpu.items() if v}
    silver_of = lambda k: {x for x in (json.loads(s) for s in results[k])}  # noqa: E731
    same_ab1 = results.get("A") == results.get("B1") and len(results.get("A", ())) == 1
    same_silver = len({(json.loads(s)["rows"], json.loads(s)["checksum"]) for k in order for s in results[k]}) == 1
    step_ids = list(a_steps[0]) if a_steps else []
    out = {
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "sparkServer": server_version,
        "rows": n,
        "batch": mix,
        "load": {"start": LOAD_START, "end": os.getloadavg()},
        "silverFiles": files,
        "rounds": a.rounds,
        "warmup": a.warmup,
        "samples": samples,
        "memory": memory,
        # Server CPU seconds per run (0 without --server-sid): less sensitive to the machine's load than wall time.
        "serverCpuS": server_cpu,
        "medianServerCpuS": cpu_med,
        "median": med,
        "ratio": {
            **{f"A/{k}": med["A"] / med[k] for k in ("A0", "B1", "B2", "B3") if "A" in med and k in med},
            # What the guarantees cost at least, whoever sends them: the floor against the bare MERGE.
            **({"B3/B2": med["B3"] / med["B2"]} if "B3" in med and "B2" in med else {}),
        },
        "serverCpuRatio": {
            **{f"A/{k}": cpu_med["A"] / cpu_med[k] for k in ("A0", "B1", "B2", "B3") if "A" in cpu_med and cpu_med.get(k)},
            **({"B3/B2": cpu_med["B3"] / cpu_med["B2"]} if cpu_med.get("B3") and cpu_med.get("B2") else {}),
        },
        "base": base,
        "results": {k: [json.loads(s) for s in v] for k, v in results.items()},
        "identicalA_B1": same_ab1,
        **({"identicalA_B3": results["A"] == results["B3"] and len(results["A"]) == 1} if "B3" in results and "A" in results else {}),
        **({"identicalA_A0": results["A"] == results["A0"] and len(results["A"]) == 1} if "A0" in results and "A" in results else {}),
        "identicalSilverAll": same_silver,
        "stepsA": {s: statistics.median([d.get(s, 0) for d in a_steps]) for s in step_ids},
        "stepsA0": {s: statistics.median([d.get(s, 0) for d in a0_steps]) for s in (a0_steps[0] if a0_steps else {})},
        **{f"steps{k}": {s: statistics.median([d.get(s, 0) for d in v]) for s in v[0]} for k, v in peer_steps.items() if v},
    }
    with open(f"{wd}/merge-results.json", "w") as f:
        json.dump(out, f, indent=2)
    print(json.dumps(out, indent=2))
    log(f"ratios, wall: {json.dumps({k: round(v, 2) for k, v in out['ratio'].items()})}; server CPU: {json.dumps({k: round(v, 2) for k, v in out['serverCpuRatio'].items()})}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
