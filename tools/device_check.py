"""`make device-check`: record what Rigscope sees on a real NVIDIA GPU, in under 8 minutes, as replayable fixtures.

It runs under the GPU machine's own ``python3`` (``python3 tools/device_check.py``, or ``make
device-check``): no virtual environment is created and nothing is downloaded. The machine needs
numpy, psutil and nvidia-ml-py (and a CUDA build of torch for the stress runs); the few pure-Python
packages it may lack (platformdirs) are unpacked beforehand into ``.device-deps/`` by
``tools/fetch_wheels.py`` on a machine with network, and carried over with the checkout. A check of
those imports runs first and says what is missing.

On a machine with an NVIDIA GPU and driver it runs ``rigscope doctor --json``, ``nvidia-smi -q``
(when present), 30 s of ``rigscope sample --json`` and a short stress test of each workload on
``cuda:0`` while sampling the GPU once a second in this process, and writes, under
``<out>/<gpu-name-slug>/`` (at most 8 files, each at most 16 MiB):

- ``doctor.json``: GPUs, driver/CUDA/NVML versions, limits, thresholds, supported metrics;
- ``samples.jsonl``: one ``rigscope sample --json`` line per second at idle (process users blanked);
- ``samples-load.jsonl``: the same lines taken during each stress run, each with its ``phase``
  (``stress-gemm`` ...): reason bits, throttle counters and GPM under load;
- ``stress.json``: each stress command's JSON result by workload (verdict, throughput, cause);
- ``nvidia-smi-q.txt``: the driver's own view, like ``../shared/realdata/nvidia-smi-q/``;
- ``run.json``: every command, its exit code, duration and stderr, what was skipped and why.

``tests/fakes/personalities.py``'s ``Personality.from_recording(doctor, samples, load=...)`` replays a
recording under the driver-level NVML stand-in (tests/unit/telemetry/test_device_recordings.py),
the under-load reason bits and counters included.
A global deadline (default 450 s) bounds the whole run; a step that would not fit is skipped and
named. Exit 0: everything recorded; 1: something failed or was skipped; 2: no NVIDIA GPU or
driver here (nothing written), a missing module, or a bad option. ``--simulate`` runs the same
recording on the simulated GPU, into a folder you name, to check this script without a GPU.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

REPO_ROOT = Path(__file__).resolve().parent.parent
REAL_FIXTURES = REPO_ROOT / "tests" / "fixtures" / "real"
#: Pure-Python packages tools/fetch_wheels.py unpacks for a machine without network (never installed).
DEPS_DIR = REPO_ROOT / ".device-deps"
#: What `rigscope doctor|sample|stress` import on the GPU machine; torch is probed on its own.
REQUIRED_MODULES = ("numpy", "psutil", "pynvml", "platformdirs")
WORKLOADS = ("gemm", "bandwidth", "train", "infer")
SCHEMA_VERSION = 2
MAX_FILES = 8
MAX_FILE_BYTES = 16 * 1024 * 1024
LOAD_SAMPLE_INTERVAL_S = 1.0
# 8 minutes less the grace a command killed at the deadline gets (15 s) and room to write files.
DEFAULT_DEADLINE_S = 450.0
DEFAULT_SAMPLE_S = 30
# Four 1-minute runs plus their start-up (torch import, CUDA init, warm-up, verdict: ~15-40 s
# each) fit the deadline after doctor and 30 s of samples. The GUI's Quick preset is 2 min:
# four of those alone would take the whole 8 minutes.
DEFAULT_STRESS_MINUTES = 1.0
# A stress run is started only with its duration plus this much left before the deadline.
STRESS_STARTUP_ALLOWANCE_S = 30.0
STDERR_KEPT_CHARS = 4000
RECORDED_FILES = ("doctor.json", "samples.jsonl", "samples-load.jsonl", "nvidia-smi-q.txt", "stress.json", "run.json")
#: Files of the schema-1 layout, removed from a folder that is recorded again.
_OLD_FILES = tuple(f"stress-{w}.json" for w in WORKLOADS)
assert len(RECORDED_FILES) <= MAX_FILES


@dataclass
class Outcome:
    """How one command ended."""

    exit_code: int | None  # None: killed at its time limit
    stdout: str
    stderr: str
    duration_s: float

    @property
    def timed_out(self) -> bool:
        return self.exit_code is None


Runner = Callable[[Sequence[str], float], Outcome]


class NoGpu(Exception):
    """No NVIDIA GPU or driver answers: there is nothing real to record (exit 2)."""


def _tail(text: str) -> str:
    return text[-STDERR_KEPT_CHARS:]


def run_command(argv: Sequence[str], timeout_s: float, env: dict[str, str] | None = None) -> Outcome:
    """Run ``argv``; at ``timeout_s`` interrupt it (SIGINT, as Ctrl+C: stress cleans up its child), then kill."""
    start = time.monotonic()
    proc = subprocess.Popen(list(argv), cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=max(timeout_s, 1.0))
        code: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
        code = None
    return Outcome(code, out, err, time.monotonic() - start)


def import_path() -> list[str]:
    """Where this checkout's code and its carried pure-Python packages are found (no install, no venv)."""
    return [str(REPO_ROOT), *([str(DEPS_DIR)] if DEPS_DIR.is_dir() else [])]


def child_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of every command: this checkout and ``.device-deps`` first on PYTHONPATH."""
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = os.pathsep.join([*import_path(), *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
    env["PIP_NO_INDEX"] = "1"  # nothing here may reach a package index
    return env


def missing_modules(modules: Sequence[str] = REQUIRED_MODULES) -> list[str]:
    """The required modules this interpreter cannot import with ``import_path()`` first (looked up, not imported)."""
    from importlib.machinery import PathFinder

    search = [*import_path(), *sys.path]
    return [name for name in modules if name not in sys.modules and PathFinder.find_spec(name, search) is None]


def use_import_path() -> None:
    """Put the checkout and ``.device-deps`` first on this process's path (the script run, for in-process sampling)."""
    sys.path[:0] = [entry for entry in import_path() if entry not in sys.path]


def rigscope_runner(workdir: Path) -> Runner:
    """Runs `rigscope ARGS` from this checkout, with private settings so defaults apply."""
    env = child_env()
    env["RIGSCOPE_CONFIG_DIR"] = str(workdir / "config")
    env["RIGSCOPE_DATA_DIR"] = str(workdir / "data")
    env.setdefault("QT_QPA_PLATFORM", "offscreen")

    def run(args: Sequence[str], timeout_s: float) -> Outcome:
        if args and args[0] == "nvidia-smi":
            return run_command(args, timeout_s, env)
        if args and args[0] == "python":
            return run_command([sys.executable, *args[1:]], timeout_s, env)
        return run_command([sys.executable, "-m", "desktop", *args], timeout_s, env)

    return run


def slug(name: str, count: int = 1) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'nvidia-h100-80gb-hbm3'; several GPUs add '-x8'."""
    text = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "gpu"
    return f"{text}-x{count}" if count > 1 else text


def check_gpu(doctor: dict[str, Any]) -> None:
    """Raise NoGpu unless doctor read at least one GPU through the NVIDIA driver."""
    source = doctor.get("source") or {}
    if source.get("kind") != "nvml" or not doctor.get("gpus"):
        reason = (doctor.get("fallback") or {}).get("reason") or source.get("detail") or "doctor listed no GPU"
        raise NoGpu(f"no NVIDIA GPU or driver here: {str(reason).rstrip('.')}")


def scrub_sample(line: dict[str, Any]) -> dict[str, Any]:
    """A sample line with process owners blanked: the fixtures get committed."""
    for proc in line.get("processes") or []:
        if proc.get("user"):
            proc["user"] = "user"
    return line


# The CUDA build of PyTorch is what the stress test needs; the CPU one is the Makefile's default.
_TORCH_PROBE = (
    "import json, torch\n"
    "ok = torch.cuda.is_available()\n"
    "print(json.dumps({'version': torch.__version__, 'cuda': torch.version.cuda, 'cuda_available': ok,"
    " 'device_count': torch.cuda.device_count() if ok else 0,"
    " 'device_name': torch.cuda.get_device_name(0) if ok else None,"
    " 'capability': list(torch.cuda.get_device_capability(0)) if ok else None}))\n"
)


class TickSource(Protocol):
    """What samples the GPU in this process: desktop.telemetry.sampler.Sampler (or a test's stand-in)."""

    def tick(self) -> Any: ...

    def close(self) -> None: ...


def default_load_sampler(simulate: str | None) -> Callable[[], TickSource]:
    def make() -> TickSource:
        from desktop.telemetry.sampler import Sampler, open_gpu_backend, open_host_backend

        return Sampler(open_gpu_backend(simulate), open_host_backend())

    return make


class LoadSampler:
    """Samples the GPU while one stress command runs: a line at the start, one a second, one at the end.

    The two synchronous lines make sure every workload has samples under load however fast the
    machine; the thread adds the seconds in between.
    """

    def __init__(self, source: TickSource, phase: str, lines: list[dict[str, Any]],
                 interval_s: float = LOAD_SAMPLE_INTERVAL_S) -> None:
        self.source, self.phase, self.lines, self.interval_s = source, phase, lines, interval_s
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name=f"load-sampler-{phase}", daemon=True)

    def take(self) -> None:
        from desktop.telemetry.live import snapshot_json

        with self._lock:
            line = scrub_sample(snapshot_json(self.source.tick()))
            line["phase"] = self.phase
            self.lines.append(line)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.take()

    def __enter__(self) -> LoadSampler:
        self.take()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.take()


def fit_lines(lines: list[str], max_bytes: int) -> tuple[list[str], int]:
    """Evenly spaced lines whose total fits ``max_bytes`` (each ends in a newline); and how many were dropped."""
    total = sum(len(line.encode()) for line in lines)
    if total <= max_bytes or not lines:
        return lines, 0
    keep = max(1, int(len(lines) * max_bytes / total))
    while keep > 1:
        step = len(lines) / keep
        kept = [lines[int(i * step)] for i in range(keep)]
        if sum(len(line.encode()) for line in kept) <= max_bytes:
            return kept, len(lines) - keep
        keep -= 1
    return [], len(lines)


@dataclass
class Recording:
    """One device check: its steps as they ran, and where the files go."""

    out: Path
    simulate: str | None
    deadline_s: float
    sample_s: int
    stress_minutes: float
    workloads: tuple[str, ...]
    run: Runner
    monotonic: Callable[[], float] = time.monotonic
    now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC)
    say: Callable[[str], None] = lambda text: print(f"device-check: {text}", file=sys.stderr)  # noqa: T201
    steps: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    torch: dict[str, Any] | None = None
    folder: Path | None = None
    #: Opens what samples the GPU in this process during the stress runs (None: no samples under load).
    load_sampler: Callable[[], TickSource] | None = None
    load_lines: list[dict[str, Any]] = field(default_factory=list)
    stress_results: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._start = self.monotonic()

    def left_s(self) -> float:
        return self.deadline_s - (self.monotonic() - self._start)

    def skip(self, name: str, reason: str) -> None:
        self.skipped.append({"name": name, "reason": reason})
        self.say(f"skipped {name}: {reason}")

    def step(self, name: str, args: list[str], timeout_s: float, file: str | None) -> Outcome:
        timeout_s = min(timeout_s, max(self.left_s(), 1.0))
        self.say(f"{name}: rigscope {' '.join(args)}" if args[0] not in ("nvidia-smi", "python") else name)
        outcome = self.run(args, timeout_s)
        self.steps.append({
            "name": name, "command": args, "exit_code": outcome.exit_code, "timed_out": outcome.timed_out,
            "duration_s": round(outcome.duration_s, 3), "stderr": _tail(outcome.stderr), "file": file,
        })
        state = "timed out" if outcome.timed_out else f"exit {outcome.exit_code}"
        self.say(f"{name}: {state} after {outcome.duration_s:.1f} s")
        return outcome

    def write(self, name: str, text: str) -> None:
        """Write one recorded file, within ``MAX_FILE_BYTES`` (a JSON-lines file keeps evenly spaced lines)."""
        assert self.folder is not None and name in RECORDED_FILES
        if len(text.encode()) > MAX_FILE_BYTES:
            if not name.endswith(".jsonl"):
                self.notes.append(f"{name}: {len(text.encode())} bytes is over {MAX_FILE_BYTES}: not written")
                return
            kept, dropped = fit_lines(text.splitlines(keepends=True), MAX_FILE_BYTES)
            self.notes.append(f"{name}: {dropped} of {dropped + len(kept)} lines dropped to stay under "
                              f"{MAX_FILE_BYTES} bytes")
            text = "".join(kept)
        (self.folder / name).write_text(text, encoding="utf-8")

    def write_jsonl(self, name: str, lines: list[dict[str, Any]]) -> None:
        self.write(name, "".join(json.dumps(line) + "\n" for line in lines))

    def simulate_args(self) -> list[str]:
        return [] if self.simulate is None else [f"--simulate={self.simulate}"]

    # --- the steps -------------------------------------------------------------------------------

    def record(self) -> int:
        doctor = self.doctor()
        self.nvidia_smi()
        self.samples()
        self.stress_all()
        complete = not self.skipped and all(s["ok"] for s in self.steps)
        self.write("run.json", json.dumps(self.summary(complete), indent=2) + "\n")
        gpu = doctor["gpus"][0]["name"]
        self.say(f"{'recorded' if complete else 'INCOMPLETE recording'} of {gpu} in {self.folder} "
                 f"({self.deadline_s - self.left_s():.0f} s)")
        for item in self.skipped:
            self.say(f"  skipped {item['name']}: {item['reason']}")
        for s in self.steps:
            if not s["ok"]:
                self.say(f"  failed {s['name']} ({'timed out' if s['timed_out'] else 'exit ' + str(s['exit_code'])}): "
                         f"{s['stderr'].strip().splitlines()[-1] if s['stderr'].strip() else 'no message'}")
        return 0 if complete else 1

    def doctor(self) -> dict[str, Any]:
        outcome = self.step("doctor", ["doctor", "--json", *self.simulate_args()], 60.0, "doctor.json")
        self.steps[-1]["ok"] = outcome.exit_code == 0
        try:
            report: dict[str, Any] = json.loads(outcome.stdout)
        except json.JSONDecodeError as exc:
            raise RuntimeError(f"rigscope doctor --json printed no JSON (exit {outcome.exit_code}): "
                               f"{_tail(outcome.stderr).strip() or exc}") from exc
        if self.simulate is None:
            check_gpu(report)
        gpus = report.get("gpus") or []
        if not gpus:
            raise RuntimeError("rigscope doctor listed no GPU")
        self.folder = self.out / slug(str(gpus[0].get("name") or "gpu"), len(gpus))
        self.folder.mkdir(parents=True, exist_ok=True)
        for stale in (*RECORDED_FILES, *_OLD_FILES):  # an earlier recording's file for a skipped step would mislead
            (self.folder / stale).unlink(missing_ok=True)
        self.write("doctor.json", json.dumps(report, indent=2) + "\n")
        return report

    def nvidia_smi(self) -> None:
        if self.simulate is not None:
            return
        if shutil.which("nvidia-smi") is None:  # optional: the driver's own view, when it is installed
            self.notes.append("nvidia-smi is not on PATH: no nvidia-smi-q.txt")
            return
        outcome = self.step("nvidia-smi -q", ["nvidia-smi", "-q"], 30.0, "nvidia-smi-q.txt")
        self.steps[-1]["ok"] = outcome.exit_code == 0
        if outcome.stdout:
            self.write("nvidia-smi-q.txt", outcome.stdout)

    def samples(self) -> None:
        if self.left_s() < self.sample_s + 10:
            self.skip("sample", f"{self.left_s():.0f} s left before the deadline")
            return
        # One sample a second; a synthetic recording takes as many, 0.2 s apart (no real seconds needed).
        interval_s = 1.0 if self.simulate is None else 0.2
        count = self.sample_s
        args = ["sample", "--json", "--interval", str(interval_s), "--count", str(count), *self.simulate_args()]
        outcome = self.step("sample", args, count * interval_s + 30.0, "samples.jsonl")
        lines = []
        for text in outcome.stdout.splitlines():
            try:
                lines.append(scrub_sample(json.loads(text)))
            except json.JSONDecodeError:
                continue
        self.steps[-1]["ok"] = outcome.exit_code == 0 and len(lines) == count
        self.steps[-1]["samples"] = len(lines)
        self.write_jsonl("samples.jsonl", lines)

    def probe_torch(self) -> bool:
        outcome = self.step("torch", ["python", "-c", _TORCH_PROBE], 120.0, None)
        try:
            self.torch = json.loads(outcome.stdout.strip().splitlines()[-1])
        except (json.JSONDecodeError, IndexError):
            self.torch = None
        self.steps[-1]["ok"] = self.torch is not None
        if self.torch is None or not self.torch.get("cuda_available"):
            build = f"torch {self.torch['version']}" if self.torch else "no PyTorch"
            for workload in self.workloads:
                self.skip(f"stress-{workload}", f"{build} here cannot use CUDA: run this with a python3 that has "
                                                f"a CUDA build of PyTorch (pip install torch; TORCH_SPEC=torch for "
                                                f"the venv)")
            return False
        return True

    def stress_all(self) -> None:
        device = "sim" if self.simulate is not None else "cuda:0"
        if self.simulate is None and not self.probe_torch():
            return
        source: TickSource | None = None
        if self.load_sampler is not None:
            try:
                source = self.load_sampler()
            except Exception as exc:  # a recording without samples under load still has its verdicts
                self.notes.append(f"no samples under load: {type(exc).__name__}: {exc}")
        try:
            self._stress_each(device, source)
        finally:
            if source is not None:
                source.close()
        if self.stress_results:
            self.write("stress.json", json.dumps(self.stress_results, indent=2) + "\n")
        if self.load_lines:
            self.write_jsonl("samples-load.jsonl", self.load_lines)

    def _stress_each(self, device: str, source: TickSource | None) -> None:
        run_s = self.stress_minutes * 60.0
        for workload in self.workloads:
            name = f"stress-{workload}"
            needed_s = run_s + STRESS_STARTUP_ALLOWANCE_S
            if self.left_s() < needed_s:
                self.skip(name, f"{self.left_s():.0f} s left before the {self.deadline_s:.0f} s deadline, "
                                f"a {self.stress_minutes:g} min run needs about {needed_s:.0f}")
                continue
            args = ["stress", "--workload", workload, "--minutes", f"{self.stress_minutes:g}", "--device", device,
                    "--json", "--db", str(self.out_db())]
            if source is not None:
                before = len(self.load_lines)
                with LoadSampler(source, name, self.load_lines):
                    outcome = self.step(name, args, run_s + 120.0, "stress.json")
                self.steps[-1]["load_samples"] = len(self.load_lines) - before
            else:
                outcome = self.step(name, args, run_s + 120.0, "stress.json")
            try:
                result = json.loads(outcome.stdout)
            except json.JSONDecodeError:
                result = None
            # Exit 1 (throttled), 3 (errors) and 4 (guard) are verdicts: what the GPU did is the data.
            self.steps[-1]["ok"] = isinstance(result, dict) and not outcome.timed_out
            if isinstance(result, dict):
                self.stress_results[workload] = result

    def out_db(self) -> Path:
        return Path(tempfile.gettempdir()) / f"rigscope-device-check-{os.getpid()}.sqlite"

    def summary(self, complete: bool) -> dict[str, Any]:
        version = re.search(r'__version__ = "([^"]+)"', (REPO_ROOT / "desktop" / "__init__.py").read_text())
        return {
            "schema": SCHEMA_VERSION,
            "recorded_at": self.now().isoformat(timespec="seconds"),
            "simulated": self.simulate is not None,
            "complete": complete,
            "rigscope_version": version.group(1) if version else None,
            "python": platform.python_version(),
            "platform": f"{platform.system()} {platform.release()}",
            "deadline_s": self.deadline_s,
            "elapsed_s": round(self.deadline_s - self.left_s(), 1),
            "sample_s": self.sample_s,
            "stress_minutes": self.stress_minutes,
            "workloads": list(self.workloads),
            "torch": self.torch,
            "steps": self.steps,
            "skipped": self.skipped,
            "notes": self.notes,
        }


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="device_check", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, default=None, metavar="DIR",
                        help=f"where the <gpu> folder goes (default {REAL_FIXTURES.relative_to(REPO_ROOT)})")
    parser.add_argument("--simulate", nargs="?", const="", default=None, metavar="PROFILES",
                        help="record the simulated GPU instead (needs --out, not the real fixtures folder)")
    parser.add_argument("--deadline-s", type=float, default=DEFAULT_DEADLINE_S, metavar="S",
                        help=f"stop starting steps that would end after S seconds (default {DEFAULT_DEADLINE_S:g})")
    parser.add_argument("--sample-s", type=int, default=DEFAULT_SAMPLE_S, metavar="S",
                        help=f"seconds of `rigscope sample` (default {DEFAULT_SAMPLE_S})")
    parser.add_argument("--stress-minutes", type=float, default=DEFAULT_STRESS_MINUTES, metavar="M",
                        help=f"minutes per workload (default {DEFAULT_STRESS_MINUTES:g})")
    parser.add_argument("--workloads", default=None, metavar="LIST",
                        help=f"comma-separated, of {', '.join(WORKLOADS)} (default all; with --simulate gemm, "
                             "the only one the simulated GPU models)")
    return parser


def main(argv: Sequence[str] | None = None, *, runner: Runner | None = None,
         monotonic: Callable[[], float] = time.monotonic,
         now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
         load_sampler: Callable[[], TickSource] | None = None,
         required_modules: Sequence[str] = REQUIRED_MODULES) -> int:
    args = build_parser().parse_args(argv)

    def refuse(message: str) -> int:
        print(f"device-check: {message}", file=sys.stderr)  # noqa: T201
        return 2

    default_workloads = "gemm" if args.simulate is not None else ",".join(WORKLOADS)
    chosen = args.workloads if args.workloads is not None else default_workloads
    workloads = tuple(w.strip() for w in chosen.split(",") if w.strip())
    if not workloads or set(workloads) - set(WORKLOADS):
        return refuse(f"--workloads takes {', '.join(WORKLOADS)} (got {chosen!r})")
    if args.deadline_s <= 0 or args.sample_s <= 0 or not args.stress_minutes > 0:
        return refuse("--deadline-s, --sample-s and --stress-minutes must be positive")
    if args.simulate is not None and (args.out is None or args.out.resolve() == REAL_FIXTURES.resolve()):
        return refuse(f"--simulate makes a synthetic recording: give --out DIR, not {REAL_FIXTURES}")
    missing = missing_modules(required_modules)
    if missing:
        return refuse(f"{sys.executable} cannot import {', '.join(missing)}. On a machine with network run "
                      f"`python3 tools/fetch_wheels.py` (pure-Python wheels unpacked into {DEPS_DIR.name}/, "
                      "nothing installed) and bring that folder along; numpy, psutil, nvidia-ml-py and torch "
                      "come with the GPU machine's own Python")
    out: Path = args.out if args.out is not None else REAL_FIXTURES
    with tempfile.TemporaryDirectory(prefix="rigscope-device-check-") as work:
        recording = Recording(out=out, simulate=args.simulate, deadline_s=args.deadline_s, sample_s=args.sample_s,
                              stress_minutes=args.stress_minutes, workloads=workloads,
                              run=runner or rigscope_runner(Path(work)), monotonic=monotonic, now=now,
                              load_sampler=load_sampler if load_sampler is not None
                              else default_load_sampler(args.simulate))
        try:
            return recording.record()
        except NoGpu as exc:
            return refuse(f"{exc}. Nothing was written: run it on a machine with an NVIDIA GPU and its driver.")
        except RuntimeError as exc:
            print(f"device-check: {exc}", file=sys.stderr)  # noqa: T201
            return 1
        finally:
            recording.out_db().unlink(missing_ok=True)
            for suffix in ("-wal", "-shm"):
                Path(f"{recording.out_db()}{suffix}").unlink(missing_ok=True)


if __name__ == "__main__":
    use_import_path()
    sys.exit(main())
