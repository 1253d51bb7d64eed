"""Cloud TPU pod-slice runs: create, install, run a config on every worker, stream logs, delete.

    python tpu/launch.py --name NAME --zone ZONE --project PROJECT [--dry-run] ACTION [options]

Actions (each a short list of gcloud commands; `--dry-run` prints them exactly instead of running them):
  create   a TPU VM slice (`tpu-vm create`), or a queued resource (`--queued`) that waits for capacity;
           `--spot` for spot capacity (preemptible; the trainer checkpoints on SIGTERM and resumes)
  install  the repo on every worker: `git archive` of HEAD copied over (or `--git URL --ref REF`), then
           `pip install -e`, keeping the VM image's JAX when it is a TPU JAX inside jaxwrite's declared
           range (tpu/keep_jax.py pins it for pip), else `pip install -e ".[tpu]"`
  run      `jaxwrite train --config ... --workdir ...` on all workers at once (one process per host;
           jax.distributed auto-detects the slice), detached, output to a log file on each worker
  logs     follow that log on one worker (default 0, the one that writes metrics)
  delete   the slice (or the queued resource and its slice)
"""
from __future__ import annotations

import argparse
import pathlib
import shlex
import subprocess
import sys

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
REMOTE_DIR = "~/jaxwrite"
DEFAULT_LOG = "~/jaxwrite-run.log"
KEEP_JAX = "/tmp/jaxwrite-keep-jax.txt"   # pip constraints a worker writes: its own jax and jaxlib, as they are

# Runtime (software) version per TPU generation, from Cloud TPU's "TPU software versions" page.
RUNTIME_VERSIONS = {"v6e": "v2-alpha-tpuv6e", "v5p": "v2-alpha-tpuv5", "v5litepod": "v2-alpha-tpuv5-lite",
                    "v5e": "v2-alpha-tpuv5-lite", "v4": "tpu-ubuntu2204-base", "v3": "tpu-ubuntu2204-base",
                    "v2": "tpu-ubuntu2204-base"}

Command = list[str]


def runtime_version(accelerator_type: str) -> str:
    """Default runtime for an accelerator type such as v5p-64 or v6e-8."""
    family = accelerator_type.rsplit("-", 1)[0]
    if family not in RUNTIME_VERSIONS:
        raise SystemExit(f"launch.py: unknown accelerator type '{accelerator_type}'; expected one of "
                         f"{', '.join(f'{f}-N' for f in RUNTIME_VERSIONS)} or pass --version")
    return RUNTIME_VERSIONS[family]


def _where(args) -> Command:
    return [f"--zone={args.zone}", f"--project={args.project}"]


def _ssh(args, remote: str, worker: str = "all") -> Command:
    return ["gcloud", "compute", "tpus", "tpu-vm", "ssh", args.name, *_where(args), f"--worker={worker}",
            f"--command={remote}"]


def create_commands(args) -> list[Command]:
    version = args.version or runtime_version(args.accelerator_type)
    capacity = ["--spot"] if args.spot else ["--preemptible"] if args.preemptible else []
    if args.queued:
        return [["gcloud", "compute", "tpus", "queued-resources", "create", args.name, f"--node-id={args.name}",
                 *_where(args), f"--accelerator-type={args.accelerator_type}", f"--runtime-version={version}",
                 *capacity]]
    return [["gcloud", "compute", "tpus", "tpu-vm", "create", args.name, *_where(args),
             f"--accelerator-type={args.accelerator_type}", f"--version={version}", *capacity]]


def install_commands(args) -> list[Command]:
    # python3 -m ...: a non-login ssh shell may not have ~/.local/bin (pip's script dir) on PATH.
    # The image's TPU JAX stays when the shipped setup.py's range takes it (keep_jax.py, run on the worker,
    # pins it so no other requirement can make pip replace it); else the tpu extra brings jax[tpu] in range.
    pip = (f"if python3 {REMOTE_DIR}/tpu/keep_jax.py {KEEP_JAX}; "
           f"then python3 -m pip install -e {REMOTE_DIR} -c {KEEP_JAX}; "
           f'else python3 -m pip install -e {REMOTE_DIR}"[tpu]"; fi && '
           f'python3 -c "import jax; print(jax.__version__, jax.process_index(), jax.process_count(), '
           f'jax.device_count())"')
    if args.git:
        remote = f"rm -rf {REMOTE_DIR} && git clone {shlex.quote(args.git)} {REMOTE_DIR} && " \
                 f"git -C {REMOTE_DIR} checkout {shlex.quote(args.ref)} && {pip}"
        return [_ssh(args, remote)]
    archive = f"/tmp/jaxwrite-{args.name}.tar.gz"
    return [["git", "-C", str(args.source), "archive", "--format=tar.gz", f"--output={archive}", args.ref],
            ["gcloud", "compute", "tpus", "tpu-vm", "scp", archive, f"{args.name}:jaxwrite-src.tar.gz", *_where(args),
             "--worker=all"],
            _ssh(args, f"rm -rf {REMOTE_DIR} && mkdir -p {REMOTE_DIR} && "
                       f"tar -xzf ~/jaxwrite-src.tar.gz -C {REMOTE_DIR} && {pip}")]


def run_commands(args) -> list[Command]:
    env = " ".join(shlex.quote(e) for e in args.env)
    train = " ".join(["python3", "-m", "jaxwrite", "train", "--config", shlex.quote(args.config),
                      "--workdir", shlex.quote(args.workdir), *(shlex.quote(o) for o in args.overrides)])
    # Detached (setsid, stdin closed) so the ssh session can end while training runs on every host.
    remote = f"cd {REMOTE_DIR} && {env + ' ' if env else ''}setsid nohup {train} > {args.log} 2>&1 < /dev/null &"
    return [_ssh(args, remote)]


def logs_commands(args) -> list[Command]:
    return [_ssh(args, f"tail -n +1 -F {args.log}", worker=str(args.worker))]


def delete_commands(args) -> list[Command]:
    if args.queued:
        return [["gcloud", "compute", "tpus", "queued-resources", "delete", args.name, *_where(args), "--force",
                 "--quiet"]]
    return [["gcloud", "compute", "tpus", "tpu-vm", "delete", args.name, *_where(args), "--quiet"]]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tpu/launch.py", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--name", required=True, help="TPU (and queued resource) name")
    parser.add_argument("--zone", required=True, help="e.g. us-east5-a (v5p), us-east1-d (v6e)")
    parser.add_argument("--project", required=True, help="Google Cloud project id")
    parser.add_argument("--dry-run", action="store_true", help="print the exact commands; run nothing")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")

    p = actions.add_parser("create", help="create a pod slice")
    p.add_argument("--accelerator-type", required=True, help="e.g. v5p-64, v6e-8, v5litepod-16, v4-32")
    p.add_argument("--version", default=None, help="TPU runtime version (default: by TPU generation)")
    capacity = p.add_mutually_exclusive_group()
    capacity.add_argument("--spot", action="store_true", help="spot capacity (can be preempted at any time)")
    capacity.add_argument("--preemptible", action="store_true", help="legacy preemptible capacity")
    p.add_argument("--queued", action="store_true", help="queued resource: wait for capacity instead of failing")
    p.set_defaults(commands=create_commands)

    p = actions.add_parser("install", help="install jaxwrite on every worker, keeping the image's TPU JAX when "
                                           "jaxwrite's range takes it (else the tpu extra)")
    p.add_argument("--source", default=str(REPO_ROOT), help="local git checkout to ship (git archive of --ref)")
    p.add_argument("--git", default=None, help="clone this URL on the workers instead of shipping --source")
    p.add_argument("--ref", default="HEAD", help="commit / branch / tag to install")
    p.set_defaults(commands=install_commands)

    p = actions.add_parser("run", help="jaxwrite train on all workers (detached)")
    p.add_argument("--config", required=True, help="recipe config file, relative to the repo on the workers")
    p.add_argument("--workdir", required=True, help="checkpoints + metrics; must outlive the VM for spot runs")
    p.add_argument("--env", action="append", default=[], help="KEY=VALUE exported for the run (repeatable)")
    p.add_argument("--log", default=DEFAULT_LOG, help="log file on each worker")
    p.add_argument("overrides", nargs="*", help="--config.KEY=VALUE overrides (after --)")
    p.set_defaults(commands=run_commands)

    p = actions.add_parser("logs", help="follow the run's log on one worker")
    p.add_argument("--worker", type=int, default=0)
    p.add_argument("--log", default=DEFAULT_LOG)
    p.set_defaults(commands=logs_commands)

    p = actions.add_parser("delete", help="delete the slice (no prompt)")
    p.add_argument("--queued", action="store_true", help="it was created as a queued resource")
    p.set_defaults(commands=delete_commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    commands = args.commands(args)
    for command in commands:
        print(("" if args.dry_run else "+ ") + shlex.join(command), flush=True)
        if args.dry_run:
            continue
        code = subprocess.run(command).returncode
        if code:
            print(f"launch.py: command failed with exit status {code}", file=sys.stderr)
            return code
    return 0


if __name__ == "__main__":
    sys.exit(main())
