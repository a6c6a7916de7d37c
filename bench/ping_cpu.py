"""CPU of `ping` (cold start -> first RPC) for one or more bundles, interleaved: the user + system
time of each CLI process from wait4, which the load of a shared machine disturbs far less than wall
time (bench/startup.ts measures wall time and peak RSS). Every round runs each bundle once, the order
rotates every round, warm-up rounds are thrown away.

    python3 bench/ping_cpu.py --remote sc://127.0.0.1:15002 [--rounds 30] [--warmup 2] DIST [DIST ...]

DIST is a directory holding a bundle's cli.mjs (dist/, or `node scripts/build.mjs --outdir DIR` in a
checkout of another commit). Prints the load average before and after, then per bundle the median and
mean CPU and the median wall time, in ms. Any exit other than 0 stops the run.
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


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--remote", required=True)
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("dists", nargs="+")
    a = p.parse_args()
    load0 = os.getloadavg()[0]
    samples: dict[str, list[tuple[float, float]]] = {d: [] for d in a.dists}
    for r in range(a.warmup + a.rounds):
        for k in range(len(a.dists)):
            d = a.dists[(k + r) % len(a.dists)]
            s = run(["node", os.path.join(d, "cli.mjs"), "ping", "--remote", a.remote])
            if r >= a.warmup:
                samples[d].append(s)
    print(f"load {load0:.1f} -> {os.getloadavg()[0]:.1f}; {a.rounds} rounds + {a.warmup} warm-up")
    print("| bundle | CPU median | CPU mean | wall median |")
    print("| --- | ---: | ---: | ---: |")
    for d, s in samples.items():
        cpu = [c for c, _ in s]
        print(f"| {d} | {statistics.median(cpu):.1f} ms | {statistics.mean(cpu):.1f} ms | {statistics.median(w for _, w in s):.0f} ms |")


if __name__ == "__main__":
    main()
