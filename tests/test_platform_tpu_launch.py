"""tpu/launch.py --dry-run prints exactly the gcloud commands a v5p-64 and a v6e-8 run need; install keeps
the VM image's TPU JAX when jaxwrite's declared range takes it (tpu/keep_jax.py decides, on the worker)."""
import importlib.util
import pathlib
import subprocess
import sys

import pytest

TPU = pathlib.Path(__file__).resolve().parents[1] / "tpu"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"tpu_{name}", TPU / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


launch, keep_jax = _load("launch"), _load("keep_jax")

V5P = ["--name", "jw-v5p", "--zone", "us-east5-a", "--project", "my-proj", "--dry-run"]
V6E = ["--name", "jw-v6e", "--zone", "us-east1-d", "--project", "my-proj", "--dry-run"]
WHERE5 = "--zone=us-east5-a --project=my-proj"
# No `pip install -U jax[tpu]`: the image's JAX is kept (pinned) when in range, else the tpu extra installs one.
INSTALL = ('if python3 ~/jaxwrite/tpu/keep_jax.py /tmp/jaxwrite-keep-jax.txt; '
           'then python3 -m pip install -e ~/jaxwrite -c /tmp/jaxwrite-keep-jax.txt; '
           'else python3 -m pip install -e ~/jaxwrite"[tpu]"; fi && '
           'python3 -c "import jax; print(jax.__version__, jax.process_index(), jax.process_count(), '
           'jax.device_count())"')


def dry_run(argv, capsys) -> list[str]:
    assert launch.main(argv) == 0
    return capsys.readouterr().out.splitlines()


def test_v5p_64_spot_queued_lifecycle(capsys):
    assert dry_run(V5P + ["create", "--accelerator-type", "v5p-64", "--spot", "--queued"], capsys) == [
        f"gcloud compute tpus queued-resources create jw-v5p --node-id=jw-v5p {WHERE5} "
        "--accelerator-type=v5p-64 --runtime-version=v2-alpha-tpuv5 --spot"]
    assert dry_run(V5P + ["install", "--source", "/src/jaxwrite"], capsys) == [
        "git -C /src/jaxwrite archive --format=tar.gz --output=/tmp/jaxwrite-jw-v5p.tar.gz HEAD",
        f"gcloud compute tpus tpu-vm scp /tmp/jaxwrite-jw-v5p.tar.gz jw-v5p:jaxwrite-src.tar.gz {WHERE5} --worker=all",
        f"gcloud compute tpus tpu-vm ssh jw-v5p {WHERE5} --worker=all '--command=rm -rf ~/jaxwrite && "
        f"mkdir -p ~/jaxwrite && tar -xzf ~/jaxwrite-src.tar.gz -C ~/jaxwrite && {INSTALL}'"]
    assert dry_run(V5P + ["run", "--config", "configs/writer_sft_qwen2.5_7b.py", "--workdir", "/mnt/gcs/run1",
                          "--env", "TF_CPP_MIN_LOG_LEVEL=2", "--", "--config.num_steps=1000"], capsys) == [
        f"gcloud compute tpus tpu-vm ssh jw-v5p {WHERE5} --worker=all '--command=cd ~/jaxwrite && "
        "TF_CPP_MIN_LOG_LEVEL=2 setsid nohup python3 -m jaxwrite train --config configs/writer_sft_qwen2.5_7b.py "
        "--workdir /mnt/gcs/run1 --config.num_steps=1000 > ~/jaxwrite-run.log 2>&1 < /dev/null &'"]
    assert dry_run(V5P + ["logs", "--worker", "3"], capsys) == [
        f"gcloud compute tpus tpu-vm ssh jw-v5p {WHERE5} --worker=3 '--command=tail -n +1 -F ~/jaxwrite-run.log'"]
    assert dry_run(V5P + ["delete", "--queued"], capsys) == [
        f"gcloud compute tpus queued-resources delete jw-v5p {WHERE5} --force --quiet"]


def test_v6e_8_on_demand_from_git(capsys):
    where = "--zone=us-east1-d --project=my-proj"
    assert dry_run(V6E + ["create", "--accelerator-type", "v6e-8"], capsys) == [
        f"gcloud compute tpus tpu-vm create jw-v6e {where} --accelerator-type=v6e-8 --version=v2-alpha-tpuv6e"]
    assert dry_run(V6E + ["install", "--git", "https://github.com/me/jaxwrite.git", "--ref", "v0.1.0"], capsys) == [
        f"gcloud compute tpus tpu-vm ssh jw-v6e {where} --worker=all '--command=rm -rf ~/jaxwrite && git clone "
        f"https://github.com/me/jaxwrite.git ~/jaxwrite && git -C ~/jaxwrite checkout v0.1.0 && {INSTALL}'"]
    assert dry_run(V6E + ["run", "--config", "configs/cpt_tiny.py", "--workdir", "/tmp/run"], capsys) == [
        f"gcloud compute tpus tpu-vm ssh jw-v6e {where} --worker=all '--command=cd ~/jaxwrite && setsid nohup "
        "python3 -m jaxwrite train --config configs/cpt_tiny.py --workdir /tmp/run > ~/jaxwrite-run.log 2>&1 "
        "< /dev/null &'"]
    assert dry_run(V6E + ["delete"], capsys) == [f"gcloud compute tpus tpu-vm delete jw-v6e {where} --quiet"]


def test_runtime_version_by_generation_and_unknown_type():
    assert launch.runtime_version("v5litepod-16") == "v2-alpha-tpuv5-lite"
    assert launch.runtime_version("v4-32") == "tpu-ubuntu2204-base"
    with pytest.raises(SystemExit, match="unknown accelerator type 'x9-8'"):
        launch.runtime_version("x9-8")


def test_keep_jax_reads_the_range_setup_py_declares():
    setup = (TPU.parent / "setup.py").read_text(encoding="utf-8")
    low, high = keep_jax.declared_range(TPU.parent / "setup.py")
    assert f'"jax>={".".join(map(str, low))},<{".".join(map(str, high))}"' in setup
    assert f'"jax[tpu]>={".".join(map(str, low))},<{".".join(map(str, high))}"' in setup   # the tpu extra agrees
    assert keep_jax.release("0.11.0rc1") == (0, 11, 0) and keep_jax.release("0.10.2.dev20250101") == (0, 10, 2)
    assert keep_jax.release("0.13.0") >= high > keep_jax.release("0.12.9") >= low


def test_keep_jax_keeps_a_tpu_jax_in_range_and_pins_it(tmp_path, monkeypatch, capsys):
    setup, constraints = tmp_path / "setup.py", tmp_path / "keep.txt"
    setup.write_text('CORE = ["jax>=0.10.2,<0.13", "jaxlib>=0.10.2,<0.13"]\n', encoding="utf-8")

    def worker(libtpu: bool, **versions) -> int:
        monkeypatch.setattr(keep_jax, "has_libtpu", lambda: libtpu)
        monkeypatch.setattr(keep_jax, "installed", versions.get)
        constraints.unlink(missing_ok=True)
        return keep_jax.main([str(constraints), "--setup-py", str(setup)])

    assert worker(True, jax="0.12.1", jaxlib="0.12.1") == 0      # an image's TPU JAX in range: kept, pinned
    assert constraints.read_text() == "jax==0.12.1\njaxlib==0.12.1\n"
    assert "keeping this image's TPU JAX (jax 0.12.1, jaxlib 0.12.1; jaxwrite takes jax>=0.10.2,<0.13)" in \
        capsys.readouterr().out
    for libtpu, versions, said in ((True, {"jax": "0.13.0", "jaxlib": "0.13.0"}, "outside jaxwrite's jax>=0.10.2"),
                                   (True, {"jax": "0.12.1"}, "jaxlib absent is outside"),
                                   (True, {}, "jax absent, jaxlib absent is outside"),
                                   (False, {"jax": "0.12.1", "jaxlib": "0.12.1"}, "no libtpu here")):
        assert worker(libtpu, **versions) == 1 and not constraints.exists()
        out = capsys.readouterr().out
        assert said in out and "installing jaxwrite[tpu]" in out


def test_keep_jax_runs_as_a_worker_runs_it(tmp_path):
    """A fresh interpreter on this machine's own packages: it decides (0 or 1) and says what it did."""
    done = subprocess.run([sys.executable, str(TPU / "keep_jax.py"), str(tmp_path / "keep.txt")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode in (0, 1) and done.stdout.startswith("keep_jax: "), done.stderr
    assert (tmp_path / "keep.txt").exists() == (done.returncode == 0)
