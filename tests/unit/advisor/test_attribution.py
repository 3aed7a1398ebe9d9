"""Attribution: commands shortened for people, containers and pods from /proc/PID/cgroup fixtures (the
state files that name them: tests/unit/telemetry/test_container_state.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor.attribution import ELLIPSIS, MAX_COMMAND_CHARS, Container, container_from_cgroup, short_command

FIXTURES = Path(__file__).parents[2] / "fixtures" / "cgroup"
STATE = FIXTURES / "state"
DOCKER_ID = "3f2a9c1b4e5d7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b"
PODMAN_ID = "9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c"
K8S_ID = "5e1d0c9b8a7f6e5d4c3b2a1f0e9d8c7b6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d"
POD_UID = "0f6c2b1e-8d4a-4e0b-9a51-6c2d7e8f9a10"


@pytest.mark.parametrize(("argv", "shown"), [
    (["/usr/bin/python3", "train.py", "--cfg", "a.yaml"], "python train.py --cfg a.yaml"),
    (["/home/ana/miniconda3/envs/llm/bin/python3.11", "-u", "-X", "faulthandler", "train.py", "--cfg", "a.yaml"],
     "python train.py --cfg a.yaml"),
    (["/home/ana/proj/.venv/bin/python", "/home/ana/proj/scripts/finetune.py", "--lr=3e-4"],
     "python finetune.py --lr=3e-4"),
    (["python", "scripts/train.py"], "python scripts/train.py"),
    (["/usr/bin/python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "/models/llama-3-8b"],
     "python -m vllm.entrypoints.openai.api_server --model llama-3-8b"),
    (["python3", "-mtorch.distributed.run", "--nproc_per_node=2", "train.py"],
     "python -m torch.distributed.run --nproc_per_node=2 train.py"),
    (["/opt/conda/bin/python3.10", "/opt/conda/bin/torchrun", "--nproc_per_node", "8", "train.py"],
     "torchrun --nproc_per_node 8 train.py"),
    (["/home/ana/.venv/bin/python", "/home/ana/.venv/bin/accelerate", "launch", "--multi_gpu", "train.py"],
     "accelerate launch --multi_gpu train.py"),
    (["python", "-c", "import torch; torch.cuda.init()\nwhile True: pass"], f"python -c {ELLIPSIS}"),
    ([r"C:\Users\ana\miniconda3\envs\sd\python.exe", r"C:\Users\ana\sd\launch.py", "--xformers"],
     "python launch.py --xformers"),
    ([r"C:\Program Files\Blender Foundation\Blender 4.2\blender.exe"], "blender"),
    (["/usr/local/bin/ollama", "serve"], "ollama serve"),
    (["./llama-server", "-m", "/models/Meta-Llama-3-8B.Q4_K_M.gguf", "-ngl", "99"],
     "llama-server -m Meta-Llama-3-8B.Q4_K_M.gguf -ngl 99"),
    (["python", "train.py", "--name", "my run"], 'python train.py --name "my run"'),
    (["ray::Worker idle"], "ray::Worker idle"),
])
def test_short_command_drops_interpreter_paths_and_keeps_script_and_arguments(argv: list[str], shown: str) -> None:
    assert short_command(argv) == shown


def test_short_command_of_nothing_is_none() -> None:
    assert short_command([]) is None
    assert short_command(["", ""]) is None


def test_a_long_command_is_cut_at_a_word_with_an_ellipsis() -> None:
    argv = ["python", "train.py", *[f"--option-{i}=value-{i}" for i in range(30)]]
    shown = short_command(argv)
    assert shown is not None
    assert len(shown) <= MAX_COMMAND_CHARS
    assert shown.endswith(ELLIPSIS)
    assert shown.startswith("python train.py --option-0=value-0 ")
    assert shown[:-1].split(" ")[-1].startswith("--option-")  # whole words only: no half option before the ellipsis
    assert shown[:-1] in " ".join(["python", "train.py", *argv[2:]])


def _cgroup(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


@pytest.mark.parametrize(("fixture", "runtime", "container_id", "pod_uid", "owner_uid"), [
    ("docker_v2_systemd.txt", "docker", DOCKER_ID, None, None),
    ("docker_v1_cgroupfs.txt", "docker", DOCKER_ID, None, None),
    ("podman_rootless_v2.txt", "podman", PODMAN_ID, None, 1000),
    ("podman_rootless_conmon.txt", "podman", PODMAN_ID, None, 1000),
    ("podman_rootful_v2.txt", "podman", PODMAN_ID, None, None),
    ("k8s_containerd_systemd_v2.txt", "containerd", K8S_ID, POD_UID, None),
    ("k8s_cgroupfs_v1.txt", "containerd", K8S_ID, POD_UID, None),
    ("k8s_crio_guaranteed_v2.txt", "cri-o", K8S_ID, "7a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d", None),
])
def test_containers_are_found_in_cgroup_files(fixture: str, runtime: str, container_id: str, pod_uid: str | None,
                                              owner_uid: int | None) -> None:
    found = container_from_cgroup(_cgroup(fixture))
    assert found == Container(runtime, container_id, None, pod_uid, owner_uid)


@pytest.mark.parametrize("fixture", ["plain_session_v2.txt", "plain_desktop_app_v2.txt", "plain_v1.txt",
                                     "inside_cgroup_namespace_v2.txt"])
def test_plain_processes_have_no_container(fixture: str) -> None:
    assert container_from_cgroup(_cgroup(fixture)) is None


def test_labels_name_the_runtime_the_name_and_a_short_id_or_the_pod() -> None:
    assert Container("docker", DOCKER_ID, "trainer").label == "docker:trainer (3f2a9c1b4e5d)"
    assert Container("podman", PODMAN_ID).label == "podman:9b8c7d6e5f4a"
    assert container_from_cgroup(_cgroup("k8s_containerd_systemd_v2.txt")).label == f"k8s-pod:{POD_UID}"  # type: ignore[union-attr]
