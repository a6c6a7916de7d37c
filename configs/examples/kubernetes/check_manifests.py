"""Checks the Kubernetes examples in this folder; run with any Python that has PyYAML.

    python configs/examples/kubernetes/check_manifests.py [--require-schemas]

- Every document parses, and has apiVersion, kind, metadata.name and metadata.namespace.
- Core kinds (Secret, ConfigMap, Job, and the SparkConnect's pod templates wrapped as PodTemplate)
  are validated strictly against the Kubernetes OpenAPI schemas bundled in the PyPI package
  `kubernetes-validate`, when it is importable (--require-schemas makes its absence an error).
- SparkConnect (sparkoperator.k8s.io/v1alpha1; no schema is bundled for a CRD): its required fields
  and known keys, following the operator's API types (SparkConnectSpec, ServerSpec, ExecutorSpec).
- The wiring: the job reads SPARK_REMOTE from the Secret, the server its token, the job's
  termination message path and non-root security context, the Spark settings shared with the
  local stack (scripts/stack/spark-connect.conf) have the same values.
Prints one line per problem and exits 1 if there is any.
"""

from __future__ import annotations

import pathlib
import sys

import yaml

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[2]
K8S_VERSION = "1.33.0"
problems: list[str] = []


def problem(where: str, text: str) -> None:
    problems.append(f"{where}: {text}")


def get(doc, path: str):
    for key in path.split("."):
        if isinstance(doc, list):
            doc = doc[int(key)] if key.isdigit() and int(key) < len(doc) else None
        elif isinstance(doc, dict):
            doc = doc.get(key)
        else:
            return None
    return doc


def load_all() -> dict[str, list[dict]]:
    docs: dict[str, list[dict]] = {}
    for path in sorted(HERE.glob("*.yaml")):
        loaded = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
        docs[path.name] = loaded
        for i, d in enumerate(loaded):
            where = f"{path.name}#{i}"
            for field in ("apiVersion", "kind", "metadata.name", "metadata.namespace"):
                if not get(d, field):
                    problem(where, f"{field} is required")
    return docs


def schema_check(docs: dict[str, list[dict]], require: bool) -> None:
    try:
        import kubernetes_validate
    except ImportError:
        if require:
            problem("kubernetes-validate", "not installed (--require-schemas)")
        else:
            print("note: kubernetes-validate not installed; core kinds checked for required fields only", file=sys.stderr)
        return
    for name, items in docs.items():
        for i, d in enumerate(items):
            candidates = []
            if d.get("apiVersion", "").startswith("sparkoperator.k8s.io/"):
                for role in ("server", "executor"):
                    template = get(d, f"spec.{role}.template")
                    if template is not None:
                        candidates.append((f"{name}#{i} spec.{role}.template", {
                            "apiVersion": "v1", "kind": "PodTemplate",
                            "metadata": {"name": f"{role}-template"}, "template": template,
                        }))
            else:
                candidates.append((f"{name}#{i} {d.get('kind')}", d))
            for where, obj in candidates:
                try:
                    kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
                except kubernetes_validate.ValidationError as err:
                    problem(where, f"schema ({K8S_VERSION}): {'.'.join(map(str, err.path))}: {err.message}")
                except Exception as err:  # noqa: BLE001 - e.g. no schema for this version/kind
                    problem(where, f"schema ({K8S_VERSION}): {err}")


SPARK_CONNECT_SPEC = {"sparkVersion", "image", "hadoopConf", "sparkConf", "server", "executor", "dynamicAllocation", "restartPolicy"}
POD_SPEC = {"cores", "memory", "template"}


def spark_connect_check(d: dict, where: str) -> None:
    if d.get("apiVersion") != "sparkoperator.k8s.io/v1alpha1":
        problem(where, "apiVersion must be sparkoperator.k8s.io/v1alpha1")
    spec = d.get("spec") or {}
    for field in ("sparkVersion", "server", "executor"):
        if field not in spec:
            problem(where, f"spec.{field} is required")
    for key in set(spec) - SPARK_CONNECT_SPEC:
        problem(where, f"spec.{key} is not a SparkConnect field")
    for key in set(spec.get("server") or {}) - POD_SPEC - {"service"}:
        problem(where, f"spec.server.{key} is not a server field")
    for key in set(spec.get("executor") or {}) - POD_SPEC - {"instances"}:
        problem(where, f"spec.executor.{key} is not an executor field")
    if not str(spec.get("sparkVersion", "")).startswith("4.1."):
        problem(where, "spec.sparkVersion: the stack is Spark 4.1")
    conf = spec.get("sparkConf") or {}
    for k, v in conf.items():
        if not isinstance(v, str):
            problem(where, f"spec.sparkConf.{k}: values are strings (quote numbers)")
    # Settings that mean the same here and in the local stack must have the same values.
    local = local_spark_settings()
    for key in ("spark.sql.extensions", "spark.sql.catalog.spark_catalog", "spark.databricks.delta.snapshotPartitions",
                "spark.sql.catalog.lake", "spark.sql.catalog.lake.type", "spark.sql.catalog.lake.jdbc.schema-version"):
        if conf.get(key) != local.get(key):
            problem(where, f"spec.sparkConf.{key} = {conf.get(key)!r}, the local stack has {local.get(key)!r}")
    versions = stack_versions()
    packages = conf.get("spark.jars.packages", "")
    for coordinate in (
        f"io.delta:delta-spark_4.1_{versions['SCALA_BINARY']}:{versions['DELTA_VERSION']}",
        f"org.apache.iceberg:iceberg-spark-runtime-4.1_{versions['SCALA_BINARY']}:{versions['ICEBERG_VERSION']}",
    ):
        if coordinate not in packages:
            problem(where, f"spec.sparkConf.spark.jars.packages lacks {coordinate} (scripts/stack/versions.env)")
    env = get(spec, "server.template.spec.containers.0.env") or []
    token = next((e for e in env if e.get("name") == "SPARK_CONNECT_AUTHENTICATE_TOKEN"), None)
    if not get(token or {}, "valueFrom.secretKeyRef.name"):
        problem(where, "the server must read SPARK_CONNECT_AUTHENTICATE_TOKEN from a Secret")


def local_spark_settings() -> dict[str, str]:
    settings = {}
    for line in (REPO / "scripts/stack/spark-connect.conf").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition(" ")
            settings[key] = value.strip()
    return settings


def stack_versions() -> dict[str, str]:
    out = {}
    for line in (REPO / "scripts/stack/versions.env").read_text().splitlines():
        if "=" in line and not line.startswith("#") and not line.startswith(" "):
            key, _, value = line.partition("=")
            out[key.strip()] = value.strip().strip('"')
    return out


def job_check(d: dict, where: str, secrets: set[tuple[str, str]]) -> None:
    pod = get(d, "spec.template.spec") or {}
    if pod.get("restartPolicy") != "Never":
        problem(where, "restartPolicy must be Never (the Job's backoff and podFailurePolicy decide retries)")
    if not get(pod, "securityContext.runAsNonRoot"):
        problem(where, "securityContext.runAsNonRoot must be true")
    if (pod.get("terminationGracePeriodSeconds") or 30) < 20:
        problem(where, "terminationGracePeriodSeconds must leave the runner its 20 s to cancel")
    container = (pod.get("containers") or [{}])[0]
    if container.get("terminationMessagePath") != "/dev/termination-log":
        problem(where, "terminationMessagePath must be /dev/termination-log (the runner's default)")
    env = {e.get("name"): e for e in container.get("env") or []}
    ref = get(env.get("SPARK_REMOTE", {}), "valueFrom.secretKeyRef")
    if not ref or (ref.get("name"), ref.get("key")) not in secrets:
        problem(where, "SPARK_REMOTE must come from the Secret in secret.yaml")
    mounts = {m.get("mountPath"): m.get("name") for m in container.get("volumeMounts") or []}
    volumes = {v.get("name"): v for v in pod.get("volumes") or []}
    conf = volumes.get(mounts.get("/conf"), {})
    if not get(conf, "configMap.name"):
        problem(where, "/conf must be a ConfigMap volume")
    rules = get(d, "spec.podFailurePolicy.rules") or []
    counted = [get(r, "onExitCodes.values") for r in rules if r.get("action") == "Count" and r.get("onExitCodes")]
    if counted != [[69, 70, 75, 130, 143]]:
        problem(where, "podFailurePolicy must retry (Count) exactly the retryable exit codes 69, 70, 75, 130, 143")
    args = container.get("args") or []
    if "--config=/conf/tenant.conf" not in args:
        problem(where, "args must pass --config=/conf/tenant.conf")


def main() -> int:
    docs = load_all()
    schema_check(docs, "--require-schemas" in sys.argv)
    secrets = {(get(d, "metadata.name"), key) for items in docs.values() for d in items if d.get("kind") == "Secret"
               for key in (d.get("stringData") or d.get("data") or {})}
    kinds = [d.get("kind") for items in docs.values() for d in items]
    for kind in ("SparkConnect", "Secret", "Job", "ConfigMap"):
        if kind not in kinds:
            problem("kubernetes/", f"no {kind} example")
    for name, items in docs.items():
        for i, d in enumerate(items):
            where = f"{name}#{i}"
            if d.get("kind") == "SparkConnect":
                spark_connect_check(d, where)
            elif d.get("kind") == "Job":
                job_check(d, where, secrets)
    for p in problems:
        print(p)
    if not problems:
        print(f"ok: {sum(len(v) for v in docs.values())} documents in {len(docs)} files")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
