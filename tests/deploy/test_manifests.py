"""deploy/kubernetes: every command and flag the manifests run exists in the CLI, and the
pieces refer to each other (issue #8, Deployment)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from gavelsched.cli import build_parser

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"


def _documents():
    for path in sorted(DEPLOY.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                yield path.name, doc


def _containers():
    for name, doc in _documents():
        spec = doc.get("spec", {}).get("template", {}).get("spec", {})
        for container in spec.get("containers", []):
            yield name, doc, container


def test_manifests_hold_the_scheduler_and_one_daemonset_per_pool():
    kinds = [(doc["kind"], doc["metadata"]["name"]) for _, doc in _documents()]
    assert ("Deployment", "gavelsched-scheduler") in kinds
    assert ("Service", "gavelsched-scheduler") in kinds
    pools = {doc["spec"]["template"]["spec"]["nodeSelector"]["gavelsched.io/gpu-type"]
             for _, doc in _documents() if doc["kind"] == "DaemonSet"}
    assert pools == {"v100", "p100", "k80"}


def test_kustomization_lists_every_manifest():
    listed = set(yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())["resources"])
    assert listed == {p.name for p in DEPLOY.glob("*.yaml")} - {"kustomization.yaml"}


def test_claims_that_pods_mount_are_defined():
    defined = {(doc["kind"], doc["metadata"]["name"]) for _, doc in _documents()}
    for name, doc, _ in _containers():
        for volume in doc["spec"]["template"]["spec"].get("volumes", []):
            claim = volume.get("persistentVolumeClaim", {}).get("claimName")
            if claim:
                assert ("PersistentVolumeClaim", claim) in defined, (name, claim)


@pytest.mark.parametrize("where,argv", [
    (f"{name}:{container['name']}", container["command"] + container.get("args", []))
    for name, _, container in _containers()])
def test_every_command_and_flag_exists_in_the_cli(where, argv):
    assert argv[0] == "gavelsched", where
    # Kubernetes expands $(VAR) from the container's environment.
    args = [re.sub(r"\$\((\w+)\)", "10.0.0.7", str(a)) for a in argv[1:]]
    try:
        parsed = build_parser().parse_args(args)
    except SystemExit as exit_:
        pytest.fail(f"{where}: `gavelsched {' '.join(args)}` is not a valid command "
                    f"(argparse exit {exit_.code})")
    assert parsed.command == args[0]


def test_scheduler_config_map_is_a_valid_cluster_config(tmp_path):
    from gavelsched.daemon import config as daemon_config

    docs = [doc for _, doc in _documents() if doc["kind"] == "ConfigMap"
            and doc["metadata"]["name"] == "gavelsched-scheduler"]
    text = docs[0]["data"]["cluster.yaml"]
    data = yaml.safe_load(text)
    # The files it names live in the pod; point them at local stand-ins.
    for key in ("auth_token_file",):
        (tmp_path / key).write_text("token\n")
        data[key] = str(tmp_path / key)
    for key in ("cert", "key"):
        (tmp_path / key).write_text("pem")
        data["tls"][key] = str(tmp_path / key)
    data["state_dir"] = str(tmp_path / "state")
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(data))
    daemon_config.load_config(path)
