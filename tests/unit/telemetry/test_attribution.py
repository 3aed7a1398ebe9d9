"""Attribution: commands shortened for people, containers and pods from /proc/PID/cgroup fixtures."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from desktop.telemetry.attribution import (
    ELLIPSIS,
    MAX_COMMAND_CHARS,
    Container,
    RuntimeStateFiles,
    container_from_cgroup,
    short_command,
)
from desktop.telemetry.host import PsutilHost, read_attribution
from desktop.telemetry.model import GpuProcess

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


def test_names_come_from_the_runtimes_state_files(tmp_path: Path) -> None:
    state = RuntimeStateFiles(docker_roots=(STATE / "var-lib-docker",), podman_roots=(),
                              home_of=lambda uid: STATE / "home" if uid == 1000 else None)
    docker = container_from_cgroup(_cgroup("docker_v2_systemd.txt"), state)
    assert docker is not None and docker.name == "trainer"  # config.v2.json "Name": "/trainer"
    podman = container_from_cgroup(_cgroup("podman_rootless_v2.txt"), state)
    assert podman is not None and podman.label == "podman:llm-finetune (9b8c7d6e5f4a)"
    # rootful podman: no owner in the path, and /var/lib/containers is not in this lookup's roots
    rootful = container_from_cgroup(_cgroup("podman_rootful_v2.txt"), state)
    assert rootful is not None and rootful.name is None and rootful.label == "podman:9b8c7d6e5f4a"


def test_podman_config_json_annotation_names_a_container(tmp_path: Path) -> None:
    userdata = tmp_path / "overlay-containers" / PODMAN_ID / "userdata"
    userdata.mkdir(parents=True)
    (userdata / "config.json").write_text(
        '{"ociVersion": "1.0.2-dev", "annotations": {"io.container.manager": "libpod", '
        '"io.kubernetes.cri-o.ContainerName": "k8s_trainer_job-7_default"}}', encoding="utf-8")
    state = RuntimeStateFiles(docker_roots=(), podman_roots=(tmp_path,))
    found = container_from_cgroup(_cgroup("podman_rootful_v2.txt"), state)
    assert found is not None and found.name == "k8s_trainer_job-7_default"


def test_unreadable_or_broken_state_files_give_the_id_alone(tmp_path: Path) -> None:
    root = tmp_path / "docker"
    shutil.copytree(STATE / "var-lib-docker", root)
    config = root / "containers" / DOCKER_ID / "config.v2.json"
    config.write_text("{not json", encoding="utf-8")
    state = RuntimeStateFiles(docker_roots=(root, tmp_path / "missing"), podman_roots=())
    found = container_from_cgroup(_cgroup("docker_v2_systemd.txt"), state)
    assert found is not None and found.label == "docker:3f2a9c1b4e5d"
    config.unlink()
    config.mkdir()  # a folder where the file should be: an OSError like EACCES on root's files
    assert container_from_cgroup(_cgroup("docker_v2_systemd.txt"), state) == found


# --- the host backend reads them for real processes ------------------------------------------


@pytest.fixture()
def child_script(tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    script = tmp_path / "train.py"
    script.write_text("import time\ntime.sleep(60)\n", encoding="utf-8")
    child = subprocess.Popen([sys.executable, "-u", str(script), "--cfg", "a.yaml"])
    try:
        yield child
    finally:
        child.kill()
        child.wait()


def test_host_attributes_a_real_process_once_per_pid_and_start(tmp_path: Path,
                                                               child_script: subprocess.Popen[bytes]) -> None:
    pid = child_script.pid
    proc_root = tmp_path / "proc"
    (proc_root / str(pid)).mkdir(parents=True)
    cgroup = proc_root / str(pid) / "cgroup"
    shutil.copy(FIXTURES / "docker_v2_systemd.txt", cgroup)
    lookups: list[str] = []
    state = RuntimeStateFiles(docker_roots=(STATE / "var-lib-docker",), podman_roots=())

    def lookup(runtime: str, container_id: str, owner_uid: int | None) -> str | None:
        lookups.append(container_id)
        return state(runtime, container_id, owner_uid)

    host = PsutilHost(proc_root=proc_root, state_lookup=lookup)
    gpu_proc = GpuProcess(pid=pid, gpu_index=0, name="python3", vram_mib=2048.0)
    first = host.describe([gpu_proc, dataclasses.replace(gpu_proc, gpu_index=1)])
    assert [p.command for p in first] == ["python train.py --cfg a.yaml"] * 2
    assert [p.container for p in first] == ["docker:trainer (3f2a9c1b4e5d)"] * 2
    cgroup.write_text("0::/user.slice/user-1000.slice/session-2.scope\n", encoding="utf-8")
    again = host.describe([gpu_proc])
    assert again[0].container == "docker:trainer (3f2a9c1b4e5d)"  # cached: nothing is read per tick
    assert lookups == [DOCKER_ID]


def test_host_attribution_without_proc_or_state_is_the_command_alone(child_script: subprocess.Popen[bytes]) -> None:
    host = PsutilHost(proc_root=None, state_lookup=None)
    described = host.describe([GpuProcess(pid=child_script.pid, gpu_index=0, name="python3")])
    assert described[0].command == "python train.py --cfg a.yaml"
    assert described[0].container is None


def test_unreadable_command_line_falls_back_to_the_image_name() -> None:
    class Denied:
        pid = 4242

        def cmdline(self) -> list[str]:
            raise psutil.AccessDenied(4242)  # Windows, another user's process

        def name(self) -> str:
            return "blender.exe"

    who = read_attribution(Denied(), None, None)
    assert who.command == "blender" and who.container is None


def test_a_cgroup_file_that_cannot_be_read_gives_no_container(tmp_path: Path,
                                                              child_script: subprocess.Popen[bytes]) -> None:
    host = PsutilHost(proc_root=tmp_path, state_lookup=None)  # no <pid>/cgroup there: the process left, or hidepid
    described = host.describe([GpuProcess(pid=child_script.pid, gpu_index=0, name="python3")])
    assert described[0].container is None and described[0].command is not None
