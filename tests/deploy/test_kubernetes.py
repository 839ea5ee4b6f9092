"""deploy/kubernetes rendered as ``kubectl apply -k`` would (issue #18): its resources and
``images`` read with pyyaml, each object validated offline against the Kubernetes API
schema (``kubernetes-validate``, which bundles the schemas; strict: no unknown fields), and
the pieces that must agree checked: the checkpoint path, the probes, the shared volume."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"
# The oldest Kubernetes the manifests target: grpc probes are GA from 1.27.
KUBERNETES = ("1.27.0", "1.30.0")


def render() -> list[dict]:
    """The kustomization's objects, its ``images`` applied to every container."""
    kustomization = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    objects = [doc for name in kustomization["resources"]
               for doc in yaml.safe_load_all((DEPLOY / name).read_text()) if doc]
    images = {i["name"]: f"{i.get('newName', i['name'])}:{i['newTag']}"
              for i in kustomization.get("images", [])}
    for obj in objects:
        for container in _pod(obj).get("containers", []):
            name = container["image"].split(":")[0]
            container["image"] = images.get(name, container["image"])
    return objects


def _pod(obj: dict) -> dict:
    return obj.get("spec", {}).get("template", {}).get("spec", {})


def _workloads(objects):
    return [o for o in objects if o["kind"] in ("Deployment", "DaemonSet")]


def _scheduler_config(objects) -> dict:
    (config,) = [o for o in objects if o["kind"] == "ConfigMap"
                 and o["metadata"]["name"] == "gavelsched-scheduler"]
    return yaml.safe_load(config["data"]["cluster.yaml"])


@pytest.mark.parametrize("version", KUBERNETES)
def test_every_object_is_valid_against_the_kubernetes_schema(version):
    kubernetes_validate = pytest.importorskip(
        "kubernetes_validate", reason="the schema check needs kubernetes-validate (the "
                                      "test extra); the structural checks below still run")
    for obj in render():
        kubernetes_validate.validate(obj, version, strict=True)


def test_the_images_apply_to_every_container():
    for workload in _workloads(render()):
        for container in _pod(workload)["containers"]:
            assert container["image"] == "gavelsched:0.1.0"


def test_scheduler_and_workers_mount_the_checkpoints_at_checkpoint_dir():
    objects = render()
    checkpoint_dir = _scheduler_config(objects)["checkpoint_dir"]
    for workload in _workloads(objects):
        pod = _pod(workload)
        volumes = {v["name"] for v in pod["volumes"]
                   if v.get("persistentVolumeClaim", {}).get("claimName") == "gavelsched-checkpoints"}
        mounts = [m["mountPath"] for c in pod["containers"] for m in c["volumeMounts"]
                  if m["name"] in volumes]
        assert mounts == [checkpoint_dir], workload["metadata"]["name"]


def test_the_checkpoint_claim_is_shared_and_names_a_storage_class():
    (claim,) = [o for o in render() if o["kind"] == "PersistentVolumeClaim"
                and o["metadata"]["name"] == "gavelsched-checkpoints"]
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    assert claim["spec"]["storageClassName"]


def test_the_scheduler_is_probed_on_its_health_port_and_every_pod_is_alive_checked():
    objects = render()
    health_port = int(_scheduler_config(objects)["health_listen"].rpartition(":")[2])
    for workload in _workloads(objects):
        for container in _pod(workload)["containers"]:
            assert "livenessProbe" in container, workload["metadata"]["name"]
            if workload["kind"] == "Deployment":
                assert container["livenessProbe"]["grpc"]["port"] == health_port
                assert container["readinessProbe"]["grpc"]["port"] == health_port
                assert health_port in {p["containerPort"] for p in container["ports"]}
