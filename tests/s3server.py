"""moto's S3 API server on loopback, for the tests and benchmarks of inputs and results in
object storage, and a host that shares nothing with the producer but Redis and the store."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import boto3

from pipeline.children import terminate

BUCKET = "gamebatch-test"


def can_hide() -> bool:
    """Whether `hidden` works here (root, and util-linux's unshare)."""
    return shutil.which("unshare") is not None and os.geteuid() == 0


def hidden(folders: list[Path]) -> list[str]:
    """A command prefix: a mount namespace of its own where each folder is an empty tmpfs
    (what a host that shares nothing with the producer sees there)."""
    mounts = " && ".join(f"mount -t tmpfs none {str(f)!r}" for f in folders)
    return [
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        f'{mounts} && exec "$@"',
        "-",
    ]


class S3:
    """moto's S3 API server on a free loopback port, and the environment that points the
    AWS libraries at it (dummy keys: it checks none)."""

    def __init__(self, log: Path) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        server = Path(sys.executable).with_name("moto_server")
        with log.open("ab") as out:
            self.process = subprocess.Popen(
                [str(server), "-H", "127.0.0.1", "-p", str(self.port)],
                stdout=out,
                stderr=out,
                start_new_session=True,
            )
        self.env = {
            "AWS_ENDPOINT_URL": f"http://127.0.0.1:{self.port}",
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing-secret",
            "AWS_DEFAULT_REGION": "us-east-1",
        }
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"moto_server did not start: {log.read_text()}") from None
                time.sleep(0.1)
        self.client = boto3.client(
            "s3",
            endpoint_url=self.env["AWS_ENDPOINT_URL"],
            aws_access_key_id="testing",
            aws_secret_access_key="testing-secret",
            region_name="us-east-1",
        )
        self.client.create_bucket(Bucket=BUCKET)

    def put(self, key: str, data: bytes) -> str:
        self.client.put_object(Bucket=BUCKET, Key=key, Body=data)
        return f"s3://{BUCKET}/{key}"

    def get(self, key: str) -> bytes | None:
        try:
            body: bytes = self.client.get_object(Bucket=BUCKET, Key=key)["Body"].read()
        except self.client.exceptions.NoSuchKey:
            return None
        return body

    def unfinished_uploads(self) -> list[object]:
        return list(self.client.list_multipart_uploads(Bucket=BUCKET).get("Uploads", []))

    def stop(self) -> None:
        terminate(self.process, 5)
