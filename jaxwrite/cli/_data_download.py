"""`jaxwrite data download`: the official sources at pinned commits, checked, in the data-root layout.

Wired into `jaxwrite data` by jaxwrite/cli/data.py through `register_download(actions)`.
"""
from __future__ import annotations

import os


def register_download(actions) -> None:
    p = actions.add_parser("download", help="fetch WritingBench, LongBench-Write, corpora, RefineBench samples and "
                                            "preference data at pinned commits (SHA-256 checked, resumable)")
    p.add_argument("--output", default=None,
                   help="data root to fill (default: $JAXWRITE_DATA_DIR, else ~/.cache/jaxwrite/data, or "
                        "$XDG_CACHE_HOME/jaxwrite/data: where every command looks when given no --data-dir)")
    p.add_argument("--only", default="", help="comma-separated datasets, e.g. writingbench,longbench_write "
                                              "(default: all)")
    p.add_argument("--base-url", default=None, help="mirror of raw.githubusercontent.com "
                                                    "(default: $JAXWRITE_DOWNLOAD_BASE or GitHub)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds per connection attempt")
    p.add_argument("--dry-run", action="store_true", help="list the URLs, destinations and checksums only")
    p.set_defaults(func=run_download)


def run_download(args) -> int:
    from data_pipelines.download import download, download_plan, load_manifest, resolve_base, select
    from jaxwrite.common import DATA_DIR_ENV, download_dir
    output = args.output or os.environ.get(DATA_DIR_ENV) or str(download_dir())
    only = [n for n in args.only.split(",") if n.strip()] or None
    if args.dry_run:
        base = resolve_base(args.base_url)
        for url, dest, sha in download_plan(select(load_manifest(), only), base):
            print(f"{url}\t{os.path.join(output, dest)}\t{sha or 'unchecked'}")
        return 0
    report = download(output, only, args.base_url, args.timeout)
    print(f"{output}: {len(report.fetched)} fetched, {len(report.skipped)} already present, "
          f"{len(report.built)} built, {len(report.unchecked)} without a pinned checksum (unchecked)")
    if os.path.abspath(output) != str(download_dir()):
        print(f"use it with: --data-dir {output}  (or export {DATA_DIR_ENV}={output})")
    else:
        print("every command finds it there when given no --data-dir")
    return 0
