"""Multi-host: settings from config / environment, a coordinator that does not answer, and a real
2-process jax.distributed run on 127.0.0.1 matching one process with the same 8 devices."""
import json
import os
import pathlib
import socket
import subprocess
import sys

import ml_collections
import pytest

from jaxwrite.common import InputError
from jaxwrite.parallel.distributed import (CoordinatorUnreachable, initialize_distributed, process_local_rows,
                                           resolve_settings)

WORKER = pathlib.Path(__file__).with_name("platform_multihost_worker.py")
REPO = pathlib.Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_no_settings_is_a_single_process():
    settings = resolve_settings(None, environ={}, tpu_vm=False)
    assert settings.mode == "single" and settings.num_processes == 1


def test_environment_gives_an_explicit_cluster():
    env = {"JAXWRITE_COORDINATOR": "10.0.0.2:1234", "JAXWRITE_NUM_PROCESSES": "4", "JAXWRITE_PROCESS_ID": "3",
           "JAXWRITE_LOCAL_DEVICE_IDS": "0,1", "JAXWRITE_INIT_TIMEOUT": "30"}
    s = resolve_settings(None, environ=env, tpu_vm=False)
    assert (s.mode, s.coordinator_address, s.num_processes, s.process_id) == ("explicit", "10.0.0.2:1234", 4, 3)
    assert s.local_device_ids == (0, 1) and s.initialization_timeout == 30


def test_config_wins_over_environment_and_accepts_a_full_recipe():
    recipe = ml_collections.ConfigDict({"distributed": {"coordinator_address": "h:1", "num_processes": 2,
                                                        "process_id": 1, "local_device_ids": None,
                                                        "initialization_timeout": 7}})
    env = {"JAXWRITE_COORDINATOR": "other:2", "JAXWRITE_NUM_PROCESSES": "8", "JAXWRITE_PROCESS_ID": "5"}
    s = resolve_settings(recipe, environ=env, tpu_vm=False)
    assert (s.coordinator_address, s.num_processes, s.process_id, s.initialization_timeout) == ("h:1", 2, 1, 7)


def test_one_process_with_a_coordinator_is_a_no_op():
    env = {"JAXWRITE_COORDINATOR": "h:1", "JAXWRITE_NUM_PROCESSES": "1", "JAXWRITE_PROCESS_ID": "0"}
    assert resolve_settings(None, environ=env, tpu_vm=False).mode == "single"


def test_tpu_vm_without_settings_auto_detects():
    assert resolve_settings(None, environ={}, tpu_vm=True).mode == "tpu_auto"


@pytest.mark.parametrize("env, message", [
    ({"JAXWRITE_COORDINATOR": "h:1", "JAXWRITE_NUM_PROCESSES": "2"}, "needs process_id"),
    ({"JAXWRITE_COORDINATOR": "h:1", "JAXWRITE_NUM_PROCESSES": "2", "JAXWRITE_PROCESS_ID": "2"}, "process_id <"),
    ({"JAXWRITE_COORDINATOR": "nohostport", "JAXWRITE_NUM_PROCESSES": "2", "JAXWRITE_PROCESS_ID": "0"}, "HOST:PORT"),
    ({"JAXWRITE_NUM_PROCESSES": "2"}, "need a coordinator address"),
    ({"JAXWRITE_COORDINATOR": "h:1", "JAXWRITE_NUM_PROCESSES": "two", "JAXWRITE_PROCESS_ID": "0"},
     "$JAXWRITE_NUM_PROCESSES field 'num_processes': expected an integer"),
])
def test_bad_settings_fail_in_one_line(env, message):
    with pytest.raises(InputError) as err:
        resolve_settings(None, environ=env, tpu_vm=False)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_coordinator_that_does_not_answer_says_what_to_check(monkeypatch):
    port = free_port()  # nothing listens here
    monkeypatch.setenv("JAXWRITE_COORDINATOR", f"127.0.0.1:{port}")
    monkeypatch.setenv("JAXWRITE_NUM_PROCESSES", "2")
    monkeypatch.setenv("JAXWRITE_PROCESS_ID", "1")
    monkeypatch.setenv("JAXWRITE_INIT_TIMEOUT", "1")
    with pytest.raises(CoordinatorUnreachable) as err:
        initialize_distributed(None)
    text = str(err.value)
    assert f"127.0.0.1:{port} within 1s" in text and "process 0 is running" in text and "firewall" in text


def test_process_local_rows_single_process():
    assert process_local_rows(8) == slice(0, 8)


def _launch(out: pathlib.Path, devices: int, extra_env: dict) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAXWRITE_")}
    env.update(JAX_PLATFORMS="cpu", XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}",
               PYTHONPATH=os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]), **extra_env)
    out.mkdir(parents=True, exist_ok=True)
    log = open(out / f"log{extra_env.get('JAXWRITE_PROCESS_ID', '')}.txt", "w")
    return subprocess.Popen([sys.executable, str(WORKER), str(out)], env=env, stdout=log, stderr=subprocess.STDOUT)


def test_two_processes_match_one_process_with_the_same_devices(tmp_path):
    cluster = {"JAXWRITE_COORDINATOR": f"127.0.0.1:{free_port()}", "JAXWRITE_NUM_PROCESSES": "2",
               "JAXWRITE_INIT_TIMEOUT": "120"}
    procs = [_launch(tmp_path / "single", 8, {}),
             _launch(tmp_path / "multi", 4, {**cluster, "JAXWRITE_PROCESS_ID": "0"}),
             _launch(tmp_path / "multi", 4, {**cluster, "JAXWRITE_PROCESS_ID": "1"})]
    try:
        codes = [p.wait(timeout=400) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    logs = "\n".join(f.read_text()[-2000:] for f in sorted(tmp_path.glob("*/log*.txt")))
    assert codes == [0, 0, 0], logs
    single = json.loads((tmp_path / "single" / "losses.json").read_text())
    multi = json.loads((tmp_path / "multi" / "losses.json").read_text())
    assert (multi["mode"], multi["processes"], multi["devices"], multi["local_devices"]) == ("explicit", 2, 8, 4)
    assert (single["mode"], single["processes"], single["devices"]) == ("single", 1, 8)
    for key in ("before_save", "after_save", "after_restore"):
        assert multi[key] == pytest.approx(single[key], rel=1e-5, abs=1e-5), key
    # Restoring the checkpoint and repeating the steps reproduces them exactly (resume is exact).
    assert multi["after_restore"] == pytest.approx(multi["after_save"], rel=1e-6)
    assert multi["restored_step"] == 3


def test_recipe_without_a_distributed_group_uses_the_environment():
    recipe = ml_collections.ConfigDict({"seed": 0, "distributed": None})
    assert resolve_settings(recipe, environ={}, tpu_vm=False).mode == "single"
    unset = ml_collections.ConfigDict({"distributed": {"coordinator_address": None, "num_processes": None,
                                                       "process_id": None}})
    env = {"JAXWRITE_COORDINATOR": "h:1", "JAXWRITE_NUM_PROCESSES": "2", "JAXWRITE_PROCESS_ID": "1"}
    assert resolve_settings(unset, environ=env, tpu_vm=False).process_id == 1
