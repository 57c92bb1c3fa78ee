"""The Kubernetes manifests (deploy/kubernetes/) render, validate, and keep their invariants.

Each overlay is rendered with `kubectl kustomize` and every object validated against the
Kubernetes API schemas shipped in the `kubernetes-validate` package (strict: an unknown or
misspelt field fails, nothing is downloaded). Then what the schemas cannot say: one beat,
every process running cadre.runtime.processes' command line, the stream connectors deployed,
the migration as the schema owner and nobody else, probes and limits on every container,
the workers consuming every queue the product routes tasks to, autoscalers, budgets and
Services pointing at things that exist, one image everywhere, no secret values shipped.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from cadre.celery import task_queues
from cadre.runtime import processes

KUBERNETES = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"
OVERLAYS = ("small", "large")
# The oldest Kubernetes the manifests promise to work on (autoscaling/v2, policy/v1 and
# everything used here are GA well before it).
KUBERNETES_VERSION = "1.30"
SECRET = "cadre-secrets"
APP_DATABASE_KEY = "DATABASE_URL"
OWNER_DATABASE_KEY = "DATABASE_OWNER_URL"
UID = 10001  # the image's user `cadre` (deploy/Dockerfile)

pytestmark = pytest.mark.skipif(
    shutil.which("kubectl") is None,
    reason="kubectl is not installed: `kubectl kustomize` renders the manifests",
)


def _render(overlay: str) -> list[dict]:
    result = subprocess.run(
        ["kubectl", "kustomize", str(KUBERNETES / "overlays" / overlay)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


@pytest.fixture(scope="module", params=OVERLAYS)
def rendered(request) -> list[dict]:
    return _render(request.param)


def _of_kind(objects: list[dict], kind: str) -> dict[str, dict]:
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}


def _pod_specs(objects: list[dict]) -> dict[str, dict]:
    """Every pod template: Deployments' and Jobs', by "Kind/name"."""
    return {
        f"{o['kind']}/{o['metadata']['name']}": o["spec"]["template"]["spec"]
        for o in objects
        if o["kind"] in ("Deployment", "Job")
    }


def _secret_keys(container: dict) -> set[str]:
    keys = set()
    for variable in container.get("env", []):
        ref = variable.get("valueFrom", {}).get("secretKeyRef")
        if ref:
            assert ref["name"] == SECRET, variable
            keys.add(ref["key"])
    return keys


def _env_names(container: dict) -> set[str]:
    return {variable["name"] for variable in container.get("env", [])}


def _queues(container: dict) -> list[str]:
    command = container["command"]
    assert "-Q" in command, f"a worker without -Q consumes every queue: {command}"
    return command[command.index("-Q") + 1].split(",")


def test_every_object_validates_against_the_kubernetes_schemas(rendered):
    import kubernetes_validate

    assert rendered, "the overlay rendered nothing"
    for document in rendered:
        try:
            kubernetes_validate.validate(document, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as error:
            pytest.fail(f"{document['kind']}/{document['metadata']['name']}: {error}")


def test_the_expected_processes_are_deployed(rendered, settings):
    deployments = _of_kind(rendered, "Deployment")
    assert set(deployments) == {f"cadre-{kind}" for kind in processes.KINDS}
    web = deployments["cadre-web"]["spec"]["template"]["spec"]["containers"]
    # The image's default command (uvicorn on 8000, tests/deploy/test_compose.py checks the
    # Dockerfile's CMD): no override.
    assert len(web) == 1 and "command" not in web[0] and "args" not in web[0]
    assert [port["containerPort"] for port in web[0]["ports"]] == [processes.WEB_PORT]
    # Every other process runs the command line of the shared module, nothing else.
    expected = processes.commands(settings)
    for kind in processes.KINDS:
        if kind == processes.WEB:
            continue
        (container,) = deployments[f"cadre-{kind}"]["spec"]["template"]["spec"]["containers"]
        assert container["command"] == expected[kind], kind
        assert "args" not in container, kind


def test_stream_connectors_are_deployed_and_reach_the_platforms(rendered):
    deployments = _of_kind(rendered, "Deployment")
    streams = deployments["cadre-streams"]
    (container,) = streams["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["cadre", "streams"]
    assert streams["spec"]["replicas"] >= 1
    # Nothing connects to them: no port, no Service.
    assert "ports" not in container
    labels = streams["spec"]["template"]["metadata"]["labels"]
    egress = [
        port["port"]
        for policy in _of_kind(rendered, "NetworkPolicy").values()
        if policy["spec"]["podSelector"]["matchLabels"].get("app.kubernetes.io/component")
        == "streams"
        and policy["spec"]["podSelector"]["matchLabels"].items() <= labels.items()
        for rule in policy["spec"].get("egress", [])
        for port in rule.get("ports", [])
    ]
    assert egress == [443]


def test_every_process_is_a_cluster_member_with_object_storage(rendered):
    (config,) = _of_kind(rendered, "ConfigMap").values()
    data = config["data"]
    assert data["CADRE_CLUSTER"] == "true"
    assert data["CADRE_S3_BUCKET"] and data["CADRE_S3_ANCHOR_BUCKET"]
    assert data["CADRE_S3_BUCKET"] != data["CADRE_S3_ANCHOR_BUCKET"]
    # Credentials by reference only, never in the ConfigMap.
    assert not {"CADRE_S3_ACCESS_KEY_ID", "CADRE_S3_SECRET_ACCESS_KEY"} & set(data)
    for where, pod in _pod_specs(rendered).items():
        for container in pod["containers"]:
            sources = [source["configMapRef"]["name"] for source in container["envFrom"]]
            assert sources == [config["metadata"]["name"]], where
            assert {"CADRE_S3_ACCESS_KEY_ID", "CADRE_S3_SECRET_ACCESS_KEY"} <= _secret_keys(
                container
            ), where


def test_stream_replicas_by_overlay():
    replicas = {
        overlay: _of_kind(_render(overlay), "Deployment")["cadre-streams"]["spec"]["replicas"]
        for overlay in OVERLAYS
    }
    assert replicas == {"small": 1, "large": 2}


def test_exactly_one_beat_never_two_at_once(rendered):
    deployments = _of_kind(rendered, "Deployment")
    beats = [
        name
        for name, deployment in deployments.items()
        for container in deployment["spec"]["template"]["spec"]["containers"]
        if container.get("command", [])[:4] == ["celery", "-A", "cadre", "beat"]
    ]
    assert beats == ["cadre-beat"]
    (beat,) = deployments["cadre-beat"]["spec"]["template"]["spec"]["containers"]
    # The schedule and beat's lock are in Redis: a schedule file would be one pod's state.
    assert "--schedule" not in beat["command"]
    spec = deployments["cadre-beat"]["spec"]
    assert spec["replicas"] == 1
    # RollingUpdate would start the new beat before stopping the old one.
    assert spec["strategy"]["type"] == "Recreate"
    scaled = {
        hpa["spec"]["scaleTargetRef"]["name"]
        for hpa in _of_kind(rendered, "HorizontalPodAutoscaler").values()
    }
    assert "cadre-beat" not in scaled


def test_workers_consume_every_queue_exactly_once(rendered):
    deployments = _of_kind(rendered, "Deployment")
    consumed: list[str] = []
    for deployment in deployments.values():
        for container in deployment["spec"]["template"]["spec"]["containers"]:
            if container.get("command", [])[:4] == ["celery", "-A", "cadre", "worker"]:
                consumed += _queues(container)
    assert sorted(consumed) == sorted(task_queues()), (
        "each queue cadre.celery.task_queues() routes to must have exactly one worker pool"
    )
    # Agent runs have a pool of their own; the other worker takes everything else.
    (runs,) = deployments["cadre-worker-runs"]["spec"]["template"]["spec"]["containers"]
    assert _queues(runs) == ["runs"]
    (other,) = deployments["cadre-worker"]["spec"]["template"]["spec"]["containers"]
    assert sorted(_queues(other)) == sorted(q for q in task_queues() if q != "runs")


def test_migration_runs_as_the_owner_and_nothing_else_does(rendered):
    jobs = _of_kind(rendered, "Job")
    assert set(jobs) == {"cadre-migrate"}
    (migrate,) = jobs["cadre-migrate"]["spec"]["template"]["spec"]["containers"]
    assert migrate["command"] == ["cadre", "manage", "migrate", "--noinput"]
    # The owner's URL for the DDL, the application role's to grant it its privileges.
    assert {OWNER_DATABASE_KEY, APP_DATABASE_KEY} <= _secret_keys(migrate)
    owner = next(v for v in migrate["env"] if v["name"] == "DATABASE_OWNER_URL")
    assert owner["valueFrom"]["secretKeyRef"]["key"] == OWNER_DATABASE_KEY
    app = next(v for v in migrate["env"] if v["name"] == "DATABASE_URL")
    assert app["valueFrom"]["secretKeyRef"]["key"] == APP_DATABASE_KEY
    for name, deployment in _of_kind(rendered, "Deployment").items():
        pod = deployment["spec"]["template"]["spec"]
        for container in pod["containers"] + pod.get("initContainers", []):
            where = f"{name}/{container['name']}"
            assert OWNER_DATABASE_KEY not in _secret_keys(container), where
            assert "DATABASE_OWNER_URL" not in _env_names(container), where
            # A whole-Secret envFrom would hand the owner's URL over too.
            for source in container.get("envFrom", []):
                assert "secretRef" not in source, where
            assert APP_DATABASE_KEY in _secret_keys(container), where


def test_secrets_are_referenced_never_shipped(rendered):
    for document in rendered:
        if document["kind"] == "Secret":
            assert not document.get("data") and not document.get("stringData"), (
                f"Secret {document['metadata']['name']} ships values"
            )
    required = {
        "SECRET_KEY",
        "CADRE_ENCRYPTION_KEY",
        "CADRE_SIGNING_KEY",
        APP_DATABASE_KEY,
        "REDIS_URL",
    }
    for where, pod in _pod_specs(rendered).items():
        for container in pod["containers"]:
            # Without them a process generates its own secrets or starts embedded services.
            assert required <= _secret_keys(container), where
    # Nothing secret in the ConfigMap.
    secret = required | {OWNER_DATABASE_KEY, "EMAIL_HOST_PASSWORD"}
    for config in _of_kind(rendered, "ConfigMap").values():
        assert not secret & set(config.get("data", {})), config["metadata"]["name"]


def test_probes_and_limits_on_every_long_running_container(rendered):
    deployments = _of_kind(rendered, "Deployment")
    for name, deployment in deployments.items():
        for container in deployment["spec"]["template"]["spec"]["containers"]:
            where = f"{name}/{container['name']}"
            assert "livenessProbe" in container, where
            limits = container.get("resources", {}).get("limits", {})
            requests = container.get("resources", {}).get("requests", {})
            assert {"cpu", "memory"} <= set(limits) and {"cpu", "memory"} <= set(requests), where
            if name != "cadre-web":
                assert "exec" in container["livenessProbe"], where
    (web,) = deployments["cadre-web"]["spec"]["template"]["spec"]["containers"]
    http = {
        probe: (web[probe]["httpGet"]["path"], web[probe]["httpGet"]["port"])
        for probe in ("startupProbe", "readinessProbe", "livenessProbe")
    }
    assert http == {
        "startupProbe": ("/readyz", "http"),
        "readinessProbe": ("/readyz", "http"),
        "livenessProbe": ("/healthz", "http"),
    }
    assert {port["name"]: port["containerPort"] for port in web["ports"]} == {"http": 8000}
    # The pod's IP is not in ALLOWED_HOSTS: the probes name a host that is.
    allowed = next(iter(_of_kind(rendered, "ConfigMap").values()))["data"]["ALLOWED_HOSTS"]
    for probe in http:
        (host,) = [h["value"] for h in web[probe]["httpGet"]["httpHeaders"] if h["name"] == "Host"]
        assert host in allowed.split(","), probe
    for container in _of_kind(rendered, "Job")["cadre-migrate"]["spec"]["template"]["spec"][
        "containers"
    ]:
        assert {"cpu", "memory"} <= set(container["resources"]["limits"])


def test_pods_run_unprivileged_on_a_read_only_root(rendered):
    for where, pod in _pod_specs(rendered).items():
        context = pod["securityContext"]
        # runAsNonRoot cannot check the image's user by name: it must be given by number.
        assert context["runAsNonRoot"] is True and context["runAsUser"] == UID, where
        volumes = {volume["name"] for volume in pod.get("volumes", [])}
        for container in pod["containers"]:
            security = container["securityContext"]
            assert security["allowPrivilegeEscalation"] is False, where
            assert security["readOnlyRootFilesystem"] is True, where
            mounts = {mount["mountPath"]: mount["name"] for mount in container["volumeMounts"]}
            # Where the processes write: CADRE_DATA_DIR and the temporary directory.
            assert {"/var/lib/cadre", "/tmp"} <= set(mounts), where
            assert set(mounts.values()) <= volumes, where


def test_references_point_at_what_exists(rendered):
    deployments = _of_kind(rendered, "Deployment")
    labels = {name: d["spec"]["template"]["metadata"]["labels"] for name, d in deployments.items()}
    for name, deployment in deployments.items():
        selector = deployment["spec"]["selector"]["matchLabels"]
        assert selector.items() <= labels[name].items(), name

    def matches(selector: dict) -> set[str]:
        return {name for name, pod in labels.items() if selector.items() <= pod.items()}

    hpas = _of_kind(rendered, "HorizontalPodAutoscaler")
    targets = {hpa["spec"]["scaleTargetRef"]["name"] for hpa in hpas.values()}
    assert targets == {"cadre-web", "cadre-worker-runs", "cadre-worker"}
    for name, hpa in hpas.items():
        spec = hpa["spec"]
        assert spec["scaleTargetRef"]["kind"] == "Deployment", name
        assert 1 <= spec["minReplicas"] <= spec["maxReplicas"], name
        # The Deployment starts inside the autoscaler's bounds.
        replicas = deployments[spec["scaleTargetRef"]["name"]]["spec"]["replicas"]
        assert spec["minReplicas"] <= replicas <= spec["maxReplicas"], name

    budgets = {
        name: matches(pdb["spec"]["selector"]["matchLabels"])
        for name, pdb in _of_kind(rendered, "PodDisruptionBudget").items()
    }
    assert sorted(budgets.values(), key=sorted) == [
        {"cadre-streams"},
        {"cadre-web"},
        {"cadre-worker"},
        {"cadre-worker-runs"},
    ]

    (service,) = _of_kind(rendered, "Service").values()
    assert matches(service["spec"]["selector"]) == {"cadre-web"}
    (port,) = service["spec"]["ports"]
    assert port["targetPort"] == "http"
    for ingress in _of_kind(rendered, "Ingress").values():
        for rule in ingress["spec"]["rules"]:
            for path in rule["http"]["paths"]:
                backend = path["backend"]["service"]
                assert backend["name"] == service["metadata"]["name"]
                assert backend["port"]["name"] == port["name"]

    configs = set(_of_kind(rendered, "ConfigMap"))
    for where, pod in _pod_specs(rendered).items():
        for container in pod["containers"]:
            for source in container.get("envFrom", []):
                assert source["configMapRef"]["name"] in configs, where


def test_web_is_reachable_through_the_network_policies(rendered):
    policies = _of_kind(rendered, "NetworkPolicy")
    web_labels = _of_kind(rendered, "Deployment")["cadre-web"]["spec"]["template"]["metadata"][
        "labels"
    ]
    ingress_ports = {
        port["port"]
        for policy in policies.values()
        if policy["spec"]["podSelector"]["matchLabels"].items() <= web_labels.items()
        for rule in policy["spec"].get("ingress", [])
        for port in rule.get("ports", [])
    }
    assert ingress_ports == {8000}
    egress_ports = {
        port["port"]
        for policy in policies.values()
        for rule in policy["spec"].get("egress", [])
        for port in rule.get("ports", [])
    }
    assert {53, 5432, 6379, 443} <= egress_ports


def test_one_image_everywhere(rendered):
    images = {
        container["image"]
        for pod in _pod_specs(rendered).values()
        for container in pod["containers"] + pod.get("initContainers", [])
    }
    assert len(images) == 1, images
    (image,) = images
    assert ":" in image and not image.endswith(":latest"), f"overlays pin a version: {image}"


def test_overlays_differ_in_size():
    small, large = (_render(overlay) for overlay in OVERLAYS)

    def bounds(objects):
        return {
            name: (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"])
            for name, hpa in _of_kind(objects, "HorizontalPodAutoscaler").items()
        }

    small_bounds, large_bounds = bounds(small), bounds(large)
    for name in small_bounds:
        assert large_bounds[name][1] > small_bounds[name][1], name
