"""Checks lakehouse_medallion.py without an Airflow server; run with any Python 3.9+.

    python configs/examples/airflow/check_dag.py [--require-airflow]

1. It compiles, and (AST, nothing imported) every lakehouse_job(...) names a template and a config,
   the operator gets do_xcom_push=True, skip_on_exit_code=99, --run-id {{ run_id }},
   --logical-date {{ ds }}, SPARK_REMOTE from a Secret and /conf from a ConfigMap, whose files
   (conf/, what the ConfigMap is created from) are exactly the configs the tasks name.
2. When Airflow and the cncf-kubernetes provider are importable (requirements-check.txt), it imports
   the DAG and checks the real objects: tasks, order, rendered arguments, and that LakehouseJob turns
   a non-retryable exit code into AirflowFailException and leaves retryable ones to Airflow's retries.
Prints one line per problem and exits 1 if there is any.
"""

from __future__ import annotations

import ast
import pathlib
import sys

sys.dont_write_bytecode = True  # leave no __pycache__ next to the example

DAG_FILE = pathlib.Path(__file__).resolve().parent / "lakehouse_medallion.py"
CONF_DIR = DAG_FILE.parent / "conf"  # the ConfigMap lakehouse-acme-jobs's files
problems: list[str] = []
EXPECTED_CHAIN = [("bronze_ingest", "jdbc-snapshot-ingest"), ("silver_merge", "cdc-silver-merge"), ("gold_publish", "gold-publish")]


def check(ok: bool, text: str) -> None:
    if not ok:
        problems.append(text)


def static_check() -> None:
    source = DAG_FILE.read_text()
    compile(source, str(DAG_FILE), "exec")  # what py_compile checks, without writing a .pyc
    tree = ast.parse(source, filename=str(DAG_FILE))
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "lakehouse_job"]
    found = [(c.args[0].value, c.args[1].value) for c in calls if len(c.args) >= 3 and all(isinstance(a, ast.Constant) for a in c.args[:3])]
    check(found == EXPECTED_CHAIN, f"lakehouse_job calls: {found}, expected {EXPECTED_CHAIN}")
    # The ConfigMap is created from conf/: it holds exactly the files the tasks name.
    named = sorted(c.args[2].value for c in calls if len(c.args) >= 3 and isinstance(c.args[2], ast.Constant))
    held = sorted(p.name for p in CONF_DIR.glob("*.conf"))
    check(named == held, f"the tasks name the config files {named}, conf/ (the ConfigMap's source) holds {held}")
    for call in calls:
        if len(call.args) >= 3 and all(isinstance(a, ast.Constant) for a in call.args[:3]):
            task_id, template, config = (a.value for a in call.args[:3])
            path = CONF_DIR / config
            check(path.exists() and f'template = "{template}"' in path.read_text(), f"conf/{config} ({task_id}) is a {template} config")
    operator = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "LakehouseJob"]
    check(len(operator) == 1, "one LakehouseJob(...) construction expected")
    if operator:
        kw = {k.arg: k.value for k in operator[0].keywords}
        const = lambda name: getattr(kw.get(name), "value", None)  # noqa: E731
        check(const("do_xcom_push") is True, "do_xcom_push=True")
        check(const("skip_on_exit_code") == 99 or getattr(kw.get("skip_on_exit_code"), "id", None) == "SKIPPED_EXIT_CODE", "skip_on_exit_code=99")
        check("secrets" in kw and "image" in kw and "arguments" in kw and "volumes" in kw, "image, arguments, secrets, volumes are set")
    for needle in ('"--run-id", "{{ run_id }}"', '"--logical-date", "{{ ds }}"', "{{ ds }}'", 'Secret("env", "SPARK_REMOTE"',
                   "V1ConfigMapVolumeSource", "SKIPPED_EXIT_CODE = 99", "AirflowFailException"):
        check(needle in source, f"the DAG must contain {needle}")
    bases = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == "LakehouseJob"]
    check(bool(bases) and any(getattr(b, "id", None) == "KubernetesPodOperator" for b in bases[0].bases), "LakehouseJob extends KubernetesPodOperator")


def airflow_check(require: bool) -> None:
    try:
        import airflow  # noqa: F401
        from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator
    except ImportError as err:
        if require:
            problems.append(f"Airflow is not importable (--require-airflow): {err}")
        else:
            print(f"note: Airflow not importable ({err}); static checks only", file=sys.stderr)
        return
    import importlib.util

    from kubernetes.client import models as k8s

    spec = importlib.util.spec_from_file_location("lakehouse_medallion", DAG_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    dag = module.dag
    tasks = {t.task_id: t for t in dag.tasks}
    check(list(tasks) == [t for t, _ in EXPECTED_CHAIN], f"tasks {list(tasks)}")
    check(tasks["silver_merge"].upstream_task_ids == {"bronze_ingest"}, "silver_merge after bronze_ingest")
    check(tasks["gold_publish"].upstream_task_ids == {"silver_merge"}, "gold_publish after silver_merge")
    for task_id, template in EXPECTED_CHAIN:
        t = tasks[task_id]
        args = t.arguments
        check(isinstance(t, KubernetesPodOperator), f"{task_id} is a KubernetesPodOperator")
        check(args[:2] == ["--job", template], f"{task_id}: --job {template}")
        check("--run-id" in args and args[args.index("--run-id") + 1] == "{{ run_id }}", f"{task_id}: --run-id {{{{ run_id }}}}")
        check("--logical-date" in args and args[args.index("--logical-date") + 1] == "{{ ds }}", f"{task_id}: --logical-date {{{{ ds }}}}")
        check("arguments" in t.template_fields, "arguments are templated")
        check(t.do_xcom_push is True, f"{task_id}: do_xcom_push")
        check(list(t.skip_on_exit_code) == [99], f"{task_id}: skip_on_exit_code 99")
        check(t.retries > 0, f"{task_id}: retries")
        check([(s.deploy_type, s.deploy_target, s.secret, s.key) for s in t.secrets] == [("env", "SPARK_REMOTE", "lakehouse-spark-connect", "SPARK_REMOTE")],
              f"{task_id}: SPARK_REMOTE from the Secret")
        check(any(v.config_map is not None for v in t.volumes), f"{task_id}: config from a ConfigMap")
    silver = tasks["silver_merge"].arguments
    check(silver[silver.index("--set") + 1] == "source.where=\"_snapshot_date = '{{ ds }}'\"", f"silver --set: {silver}")

    # Retries only for retryable exit codes: the base operator's failure becomes final for 78, not for 75.
    task = tasks["silver_merge"]

    def pod_exiting(code: int) -> k8s.V1Pod:
        terminated = k8s.V1ContainerStateTerminated(exit_code=code)
        status = k8s.V1ContainerStatus(name=task.base_container_name, state=k8s.V1ContainerState(terminated=terminated),
                                       image="x", image_id="x", ready=False, restart_count=0)
        return k8s.V1Pod(metadata=k8s.V1ObjectMeta(name="p"), status=k8s.V1PodStatus(container_statuses=[status]))

    original = KubernetesPodOperator.cleanup
    try:
        def failing(self, pod, remote_pod, *a, **kw):
            raise module.AirflowException("Pod p returned a failure.")
        KubernetesPodOperator.cleanup = failing
        for code, final in ((78, True), (65, True), (64, True), (75, False), (69, False), (143, False)):
            try:
                task.cleanup(pod_exiting(code), pod_exiting(code))
                problems.append(f"exit {code}: cleanup did not raise")
            except module.AirflowFailException:
                check(final, f"exit {code} must be retried, got AirflowFailException")
            except module.AirflowException:
                check(not final, f"exit {code} must not be retried, got a retryable AirflowException")

        def skipping(self, pod, remote_pod, *a, **kw):
            raise module.AirflowSkipException("exit 99")
        KubernetesPodOperator.cleanup = skipping
        try:
            task.cleanup(pod_exiting(99), pod_exiting(99))
        except module.AirflowSkipException:
            pass
        except Exception as err:  # noqa: BLE001
            problems.append(f"exit 99 must stay a skip, got {type(err).__name__}")
    finally:
        KubernetesPodOperator.cleanup = original
    print(f"airflow: imported the DAG {dag.dag_id} with {len(tasks)} tasks", file=sys.stderr)


def main() -> int:
    static_check()
    airflow_check("--require-airflow" in sys.argv)
    for p in problems:
        print(p)
    if not problems:
        print("ok")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
