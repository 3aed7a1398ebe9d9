"""Container names from the runtimes' state files, and the host naming a real process's command and
container once per process (advisor.attribution parses the text; desktop.telemetry.container_state reads
the files)."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from advisor.attribution import container_from_cgroup
from desktop.telemetry.container_state import RuntimeStateFiles
from desktop.telemetry.host import PsutilHost, read_attribution
from desktop.telemetry.model import GpuProcess
from tests.unit.advisor.test_attribution import DOCKER_ID, FIXTURES, PODMAN_ID, STATE, _cgroup


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
