"""tpu/launch.py --dry-run prints exactly the gcloud commands a v5p-64 and a v6e-8 run need."""
import importlib.util
import pathlib

import pytest

_SPEC = importlib.util.spec_from_file_location(
    "tpu_launch", pathlib.Path(__file__).resolve().parents[1] / "tpu" / "launch.py")
launch = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(launch)

V5P = ["--name", "jw-v5p", "--zone", "us-east5-a", "--project", "my-proj", "--dry-run"]
V6E = ["--name", "jw-v6e", "--zone", "us-east1-d", "--project", "my-proj", "--dry-run"]
WHERE5 = "--zone=us-east5-a --project=my-proj"
INSTALL = ('python3 -m pip install -U "jax[tpu]==0.10.2" && python3 -m pip install -e ~/jaxwrite && '
           'python3 -c "import jax; print(jax.process_index(), jax.process_count(), jax.device_count())"')


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
