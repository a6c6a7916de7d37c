"""The medallion chain for one tenant, run by lakehouse-jobs in Kubernetes pods.

    jdbc-snapshot-ingest  ->  cdc-silver-merge  ->  gold-publish
    (source DB -> bronze)     (bronze -> silver)     (silver -> gold)

Each task is one `lakehouse-jobs` container (KubernetesPodOperator) talking to a Spark Connect
server (see ../kubernetes/spark-connect.yaml). What the DAG relies on is the runner's contract
(README.md, "Exit codes" and "Status document"):

- The status document is written to /airflow/xcom/return.json: with do_xcom_push=True Airflow's
  sidecar turns it into the task's XCom (rows inserted/updated/deleted, snapshot ids).
- Exit 99 means "nothing to do" (an empty CDC batch): skip_on_exit_code=99 marks the task skipped.
- Only 69 (Spark Connect unreachable), 75 (transient) and 130/143 (cancelled, e.g. a node drain)
  are worth retrying; 70 (internal error) may be, once. Everything else (64 usage, 65 data, 66 input
  missing, 77 permission, 78 config) fails at once, without burning retries: see LakehouseJob.cleanup.
- {{ run_id }} and {{ ds }} go to --run-id / --logical-date (status, logs, Spark operation tags) and,
  through --set, into the job's config.

Kubernetes objects this DAG expects in its namespace:
- Secret `lakehouse-spark-connect` with key SPARK_REMOTE = "sc://<service>:15002/;token=<token>"
  (Airflow's ";use_ssl=True" form works too); the runner never prints the token.
- ConfigMap `lakehouse-acme-jobs` with one HOCON file per job: ingest.conf, silver.conf, gold.conf,
  created from the files next to this DAG:
    kubectl -n lakehouse create configmap lakehouse-acme-jobs --from-file=configs/examples/airflow/conf/
The platform config (--env) is the platform's, not the tenant's: the image or the namespace's pod
defaults set LAKEHOUSE_ENV to it (catalogs, tenant storage roots, allowed config variables).

test/integration/examples/airflow.test.ts runs this DAG for real: render_dag.py renders each task as
Airflow would for a logical date and run id, and the test runs the rendered arguments with the local
CLI in place of the image, /conf mapped to conf/, then reads the gold table back with PyIceberg.

gold-publish takes the day from --logical-date ({{ ds }}): it is the transform's :logical_date and,
with target.mode = replace-range, the range it replaces (docs/templates/gold-publish.md). A failed
expectation exits 65 before anything is published, which is not retried.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from kubernetes.client import models as k8s

from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator
from airflow.providers.cncf.kubernetes.secret import Secret

try:  # Airflow 3
    from airflow.sdk import DAG
    from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowSkipException
except ImportError:  # Airflow 2.x
    from airflow import DAG
    from airflow.exceptions import AirflowException, AirflowFailException, AirflowSkipException

IMAGE = "registry.example.com/lakehouse-jobs:0.1.0"
NAMESPACE = "lakehouse"
TENANT = "acme"
CONFIG_MAP = f"lakehouse-{TENANT}-jobs"

# Exit codes worth another attempt (README.md "Exit codes"); 70 is "maybe": retried like the others.
RETRYABLE_EXIT_CODES = frozenset({69, 70, 75, 130, 143})
SKIPPED_EXIT_CODE = 99


def _exit_code(remote_pod: k8s.V1Pod | None, container: str) -> int | None:
    statuses = (remote_pod.status.container_statuses if remote_pod and remote_pod.status else None) or []
    for status in statuses:
        if status.name == container and status.state and status.state.terminated:
            return status.state.terminated.exit_code
    return None


class LakehouseJob(KubernetesPodOperator):
    """A KubernetesPodOperator that retries only the runner's retryable exit codes.

    Airflow retries any failed task while it has retries left; raising AirflowFailException instead
    ends the task at once. The pod's exit code (also in the termination message, a compact status)
    decides which of the two a failure is.
    """

    def cleanup(self, pod, remote_pod, *args, **kwargs):
        try:
            return super().cleanup(pod, remote_pod, *args, **kwargs)
        except AirflowSkipException:
            raise
        except AirflowException as err:
            code = _exit_code(remote_pod, self.base_container_name)
            if code is not None and code not in RETRYABLE_EXIT_CODES:
                raise AirflowFailException(f"lakehouse-jobs exited {code} (not retryable): {err}") from err
            raise


def lakehouse_job(task_id: str, template: str, config: str, overrides: list[str] | None = None) -> LakehouseJob:
    args = [
        "--job", template,
        "--config", f"/conf/{config}",
        "--run-id", "{{ run_id }}",
        "--logical-date", "{{ ds }}",
    ]
    for override in overrides or []:
        args += ["--set", override]
    return LakehouseJob(
        task_id=task_id,
        name=f"lakehouse-{TENANT}-{task_id}",
        namespace=NAMESPACE,
        image=IMAGE,
        # The image's ENTRYPOINT is tini -> the CLI: pass arguments only.
        arguments=args,
        secrets=[Secret("env", "SPARK_REMOTE", "lakehouse-spark-connect", "SPARK_REMOTE")],
        volumes=[k8s.V1Volume(name="conf", config_map=k8s.V1ConfigMapVolumeSource(name=CONFIG_MAP))],
        volume_mounts=[k8s.V1VolumeMount(name="conf", mount_path="/conf", read_only=True)],
        security_context=k8s.V1PodSecurityContext(
            run_as_non_root=True, run_as_user=1000, run_as_group=1000,
            seccomp_profile=k8s.V1SeccompProfile(type="RuntimeDefault"),
        ),
        container_security_context=k8s.V1SecurityContext(
            allow_privilege_escalation=False, read_only_root_filesystem=True,
            capabilities=k8s.V1Capabilities(drop=["ALL"]),
        ),
        container_resources=k8s.V1ResourceRequirements(
            requests={"cpu": "100m", "memory": "128Mi"}, limits={"memory": "512Mi"},
        ),
        # The runner interrupts its Spark operations on SIGTERM and exits within 20 s.
        termination_grace_period=30,
        do_xcom_push=True,
        skip_on_exit_code=SKIPPED_EXIT_CODE,
        retries=3,
        retry_delay=timedelta(minutes=1),
        retry_exponential_backoff=True,
        max_retry_delay=timedelta(minutes=15),
        on_finish_action="delete_succeeded_pod",
        get_logs=True,
    )


with DAG(
    dag_id=f"lakehouse_medallion_{TENANT}",
    description="bronze snapshot ingest -> CDC merge into silver -> gold publish, with lakehouse-jobs",
    schedule="@daily",
    start_date=datetime(2026, 7, 1),
    catchup=False,
    max_active_runs=1,
    tags=["lakehouse", TENANT],
) as dag:
    ingest = lakehouse_job(
        "bronze_ingest", "jdbc-snapshot-ingest", "ingest.conf",
        ["target.snapshot-date={{ ds }}"],
    )
    silver = lakehouse_job(
        "silver_merge", "cdc-silver-merge", "silver.conf",
        ["source.where=\"_snapshot_date = '{{ ds }}'\""],
    )
    # The day comes from --logical-date {{ ds }} (lakehouse_job passes it to every task).
    gold = lakehouse_job("gold_publish", "gold-publish", "gold.conf")

    ingest >> silver >> gold
