"""Renders lakehouse_medallion.py's pod tasks as Airflow would launch them for one DAG run.

    python configs/examples/airflow/render_dag.py <logical date YYYY-MM-DD> <run id>

Needs Airflow and the cncf-kubernetes provider (requirements-check.txt); no Airflow server, database
or cluster. Imports the DAG, renders every task's template fields with Airflow's own Jinja rendering
(BaseOperator.render_template_fields, the step a worker runs before it builds the pod) for a run of
that logical date, and prints one JSON document: the tasks in dependency order, each with what its
container would get: image, command, rendered arguments, environment (plain values and Secret keys),
ConfigMap mounts, XCom and skip settings. Undefined template variables are an error, not an empty
string. test/integration/examples/airflow.test.ts runs the printed pods' arguments with the local
CLI in place of the image's entrypoint.
"""

from __future__ import annotations

import json
import pathlib
import sys
from datetime import datetime, timedelta, timezone

sys.dont_write_bytecode = True  # leave no __pycache__ next to the example

DAG_FILE = pathlib.Path(__file__).resolve().parent / "lakehouse_medallion.py"


def load_dag():
    import importlib.util

    spec = importlib.util.spec_from_file_location("lakehouse_medallion", DAG_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.dag


def run_context(dag, task, logical_date: datetime, run_id: str) -> dict:
    """The template variables of a scheduled run (a subset of Airflow's context: the ones a
    KubernetesPodOperator's fields may name here; anything else fails the rendering)."""
    schedule_end = logical_date + timedelta(days=1)  # @daily: the interval [logical date, +1 day)
    return {
        "dag": dag,
        "task": task,
        "params": dict(dag.params or {}),
        "run_id": run_id,
        "logical_date": logical_date,
        "data_interval_start": logical_date,
        "data_interval_end": schedule_end,
        "ds": logical_date.strftime("%Y-%m-%d"),
        "ds_nodash": logical_date.strftime("%Y%m%d"),
        "ts": logical_date.isoformat(),
        "ts_nodash": logical_date.strftime("%Y%m%dT%H%M%S"),
    }


def topological(dag) -> list:
    done: list = []
    pending = list(dag.tasks)
    while pending:
        ready = [t for t in pending if all(u in {d.task_id for d in done} for u in t.upstream_task_ids)]
        if not ready:
            raise SystemExit(f"the DAG has a cycle among {[t.task_id for t in pending]}")
        done += ready
        pending = [t for t in pending if t not in ready]
    return done


def rendered(task) -> dict:
    env = {}
    for var in task.env_vars or []:
        if var.value_from is not None:
            raise SystemExit(f"{task.task_id}: env {var.name} from {var.value_from}: not supported by this helper")
        env[var.name] = {"value": var.value}
    for secret in task.secrets or []:
        if secret.deploy_type != "env":
            raise SystemExit(f"{task.task_id}: secret {secret.secret} deployed as {secret.deploy_type}: not supported by this helper")
        env[secret.deploy_target] = {"secret": secret.secret, "key": secret.key}
    config_maps = {v.name: v.config_map.name for v in task.volumes or [] if v.config_map is not None}
    mounts = [
        {"path": m.mount_path, "config_map": config_maps[m.name], "read_only": bool(m.read_only)}
        for m in task.volume_mounts or []
        if m.name in config_maps
    ]
    return {
        "task_id": task.task_id,
        "upstream": sorted(task.upstream_task_ids),
        "image": task.image,
        "cmds": list(task.cmds or []),
        "arguments": list(task.arguments or []),
        "env": env,
        "config_map_mounts": mounts,
        "do_xcom_push": bool(task.do_xcom_push),
        "skip_on_exit_code": sorted(task.skip_on_exit_code or []),
    }


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 64
    logical_date = datetime.strptime(sys.argv[1], "%Y-%m-%d").replace(tzinfo=timezone.utc)
    run_id = sys.argv[2]
    import jinja2

    dag = load_dag()
    dag.template_undefined = jinja2.StrictUndefined
    tasks = []
    for task in topological(dag):
        task.render_template_fields(run_context(dag, task, logical_date, run_id))
        out = rendered(task)
        left = [a for a in out["arguments"] if "{{" in a or "{%" in a]
        if left:
            raise SystemExit(f"{task.task_id}: arguments left unrendered: {left}")
        tasks.append(out)
    json.dump({"dag_id": dag.dag_id, "logical_date": sys.argv[1], "run_id": run_id, "tasks": tasks}, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
