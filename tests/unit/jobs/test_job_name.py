"""A job's default name says what ran: the script, the module, or the start of the code given to -c."""

from __future__ import annotations

from desktop.jobs.job import _default_name


def test_a_script_a_module_and_a_program_are_named_as_before() -> None:
    assert _default_name(["python", "train.py", "--lr", "3e-4"]) == "train.py"
    assert _default_name(["python3", "-m", "pkg.train"]) == "pkg.train"
    assert _default_name(["/usr/bin/nvidia-smi"]) == "nvidia-smi"


def test_code_given_to_c_is_named_by_its_start() -> None:
    assert _default_name(["python3", "-c", "print(1)"]) == "python3 -c 'print(1)'"
    long = "import torch; x = torch.randn(8192, 8192, device='cuda'); [x @ x for _ in range(1000)]"
    name = _default_name(["python3", "-c", long])
    assert name.startswith("python3 -c 'import torch; x = torch.randn") and name.endswith("…'")
    assert len(name) <= 60
    assert _default_name(["python3", "-c", "a\nb"]) == "python3 -c 'a b'"  # one line in the list
    assert _default_name(["python3", "-c"]) == "python3 -c"
