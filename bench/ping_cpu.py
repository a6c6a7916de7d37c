"""CPU of `ping` (cold start -> first RPC) for one or more bundles, interleaved: the user + system
time of each CLI process from wait4, which the load of a shared machine disturbs far less than wall
time (bench/startup.ts measures wall time and peak RSS). Every round runs each bundle once, the order
rotates every round, warm-up rounds are thrown away.

    python3 bench/ping_cpu.py --remote sc://127.0.0.1:15002 [--rounds 30] [--warmup 2] DIST[=FLAGS] ...
    python3 bench/ping_cpu.py --validate [--rounds 30] [--warmup 2] DIST[=FLAGS] ...

DIST is a directory holding a bundle's cli.mjs (dist/, or `node scripts/build.mjs --outdir DIR` in a
checkout of another commit), run with the CLI's node flags of this checkout (scripts/build/node-flags:
its V8 code caches were trained under them) or with FLAGS (space-separated; those of the commit the
bundle was built from: V8 rejects its caches under other V8 flags). --validate runs `validate` of the
example cdc-silver-merge config instead of `ping`. Prints the load average before and after, then per
bundle the median and mean CPU and the median wall time, in ms. Any exit other than 0 stops the run.
"""
import argparse
import os
import statistics
import time


def run(cmd: list[str]) -> tuple[float, float]:
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.dup2(null, 2)
        try:
            os.execvp(cmd[0], cmd)
        finally:
            os._exit(127)
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - t0
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise SystemExit(f"{' '.join(cmd)}: exit {code}")
    return (usage.ru_utime + usage.ru_stime) * 1000, wall * 1000


def cli_node_flags() -> list[str]:
    """scripts/build/node-flags: one flag a line, # lines are comments."""
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts", "build", "node-flags")) as f:
        return [line.strip() for line in f if line.strip() and not line.strip().startswith("#")]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--remote")
    p.add_argument("--validate", action="store_true")
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("dists", nargs="+")
    a = p.parse_args()
    if not a.validate and not a.remote:
        p.error("--remote is required for ping")
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    examples = os.path.join(root, "configs", "examples")
    command = (
        ["validate", "--job", "cdc-silver-merge", "--config", os.path.join(examples, "cdc-silver-merge.v1.conf")]
        + ["--env", os.path.join(examples, "platform-local.conf"), "--termination-log", os.devnull]
        if a.validate
        else ["ping", "--remote", a.remote]
    )
    os.environ.setdefault("LAKEHOUSE_LAKE_HOME", "/bench/lake")
    flags = {d: d.partition("=")[2].split() if "=" in d else cli_node_flags() for d in a.dists}
    load0 = os.getloadavg()[0]
    samples: dict[str, list[tuple[float, float]]] = {d: [] for d in a.dists}
    for r in range(a.warmup + a.rounds):
        for k in range(len(a.dists)):
            d = a.dists[(k + r) % len(a.dists)]
            s = run(["node", *flags[d], os.path.join(d.partition("=")[0], "cli.mjs"), *command])
            if r >= a.warmup:
                samples[d].append(s)
    print(f"{command[0]}: load {load0:.1f} -> {os.getloadavg()[0]:.1f}; {a.rounds} rounds + {a.warmup} warm-up")
    print("| bundle | CPU median | CPU mean | wall median |")
    print("| --- | ---: | ---: | ---: |")
    for d, s in samples.items():
        cpu = [c for c, _ in s]
        print(f"| {d.partition('=')[0]} {' '.join(flags[d])} | {statistics.median(cpu):.1f} ms | {statistics.mean(cpu):.1f} ms | {statistics.median(w for _, w in s):.0f} ms |")


if __name__ == "__main__":
    main()
