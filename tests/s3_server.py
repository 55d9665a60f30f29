"""A private S3 server for tests: moto's S3 backend behind werkzeug's single-threaded server, on a free 127.0.0.1
port, in its own process.

Single-threaded on purpose: moto's threaded server checks ``If-None-Match`` and stores the object in two steps that
other requests can interleave, so two racing conditional puts could both succeed there. Serving one request at a
time makes each conditional put atomic, as on S3 itself."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import uuid

ACCESS_KEY = "lakecdc-test-access"
SECRET_KEY = "lakecdc-test-secret"
REGION = "us-east-1"
# The keys reach pipeline files only as ${VAR}: the session fixture exports these variables.
KEY_ENV, SECRET_ENV = "LAKECDC_TEST_S3_ACCESS_KEY", "LAKECDC_TEST_S3_SECRET_KEY"

_SERVE = """
import os
import sys

os.environ["MOTO_PORT"] = sys.argv[1]
from moto.moto_server.werkzeug_app import MotoRequestHandler, create_backend_app
from werkzeug.serving import run_simple

# S3's app itself, not moto's dispatcher over every service: the dispatcher looks the service up in moto's module
# folders (about 180 stat calls) on every request, half of the server's time per request, and only S3 is asked here
app = create_backend_app("s3")
if sys.argv[2] == "ignore-if-none-match":  # a store without conditional writes (the probe must refuse it)
    backend = app

    def app(environ, start_response):
        environ.pop("HTTP_IF_NONE_MATCH", None)
        return backend(environ, start_response)
run_simple("127.0.0.1", int(sys.argv[1]), app, threaded=False, processes=1, use_reloader=False,
           request_handler=MotoRequestHandler)
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class S3Server:
    """``with S3Server() as s3: s3.new_bucket()``; ``s3.endpoint`` is http://127.0.0.1:<port>."""

    def __init__(self, ignore_if_none_match: bool = False):
        self.ignore_if_none_match = ignore_if_none_match
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._process: subprocess.Popen | None = None

    def __enter__(self) -> "S3Server":
        self._process = subprocess.Popen([sys.executable, "-c", _SERVE, str(self.port),
                                          "ignore-if-none-match" if self.ignore_if_none_match else "s3"],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while True:
            if self._process.poll() is not None:
                raise RuntimeError(f"the moto S3 server exited with {self._process.returncode}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("the moto S3 server did not start within 60 s") from None
                time.sleep(0.1)
        return self

    def __exit__(self, *exc) -> None:
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()

    def client(self):
        import boto3
        from botocore.config import Config

        return boto3.session.Session().client(
            "s3", endpoint_url=self.endpoint, region_name=REGION, aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY, config=Config(s3={"addressing_style": "path"}))

    def new_bucket(self) -> str:
        name = f"lakecdc-{uuid.uuid4().hex[:16]}"
        self.client().create_bucket(Bucket=name)
        return name

    def catalog_options(self, warehouse: str) -> dict[str, str]:
        """Catalog options of an s3:// warehouse on this server, with Paimon's option names."""
        return {"metastore": "filesystem", "warehouse": warehouse, "s3.endpoint": self.endpoint,
                "s3.access-key": ACCESS_KEY, "s3.secret-key": SECRET_KEY, "s3.region": REGION,
                "s3.path.style.access": "true"}

    def warehouse_yaml(self, warehouse: str) -> str:
        """The value of ``catalog.properties.warehouse:`` in a pipeline template, followed by the sink's S3 options
        on their own lines (two-space indent, keys as ${VAR})."""
        return "\n  ".join([warehouse, f"catalog.properties.s3.endpoint: {self.endpoint}",
                             f"catalog.properties.s3.access-key: ${{{KEY_ENV}}}",
                             f"catalog.properties.s3.secret-key: ${{{SECRET_ENV}}}",
                             f"catalog.properties.s3.region: {REGION}",
                             "catalog.properties.s3.path.style.access: true"])

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        client, keys, token = self.client(), [], None
        while True:
            kwargs = {"Bucket": bucket, "Prefix": prefix, **({"ContinuationToken": token} if token else {})}
            page = client.list_objects_v2(**kwargs)
            keys += [o["Key"] for o in page.get("Contents", [])]
            if not page.get("IsTruncated"):
                return keys
            token = page["NextContinuationToken"]
