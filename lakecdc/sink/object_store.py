"""Object-store warehouses (``s3://``): the storage options, lock-free commits by conditional put, and the start-up
probe that refuses a store which ignores ``If-None-Match``.

Why: pypaimon publishes ``snapshot-N`` and ``schema-N`` on S3 by writing a temporary
object and "renaming" it, which on S3 is copy + delete and silently replaces an object another writer has just
published: racing writers lose commits and every one of them reports success. A local flock cannot protect an
object store either. lakecdc therefore publishes every new metadata file (snapshots, schemas) with one
``PutObject`` carrying ``If-None-Match: *``: the store creates the object only if the key does not exist yet, so of
two writers publishing ``snapshot-N`` exactly one wins, atomically, and the other gets ``412 Precondition Failed``.
Together with the base-snapshot check (lakecdc.sink.native.guard_snapshot_commit: a commit must become exactly
the snapshot after the one its run loaded the checkpoint from) and ``commit.max-retries = 0`` (no re-planning on
top of someone else's snapshot), a conflicting commit aborts the run; the next run resumes from the checkpoint.
Snapshot expiry (table upkeep) deletes old snapshot files and so frees their keys: a snapshot publication also
checks that its id had not been expired (publish_snapshot), or a writer stalled for longer than
``snapshot.time-retained`` could publish an id the table has left behind.

The ``LATEST`` and ``EARLIEST`` hints are only hints (readers verify them): they are written with one plain
``PutObject``, which replaces the object atomically, instead of pyarrow's copy + delete.

Options: Paimon's catalog option names (``s3.endpoint``, ``s3.access-key``, ``s3.secret-key``, ``s3.region``,
``s3.path.style.access``; also ``s3.session-token``), with the aliases in ``_S3_OPTIONS`` under the prefixes
``s3.``, ``s3a.``, ``fs.s3a.`` and ``fs.s3.``. Without keys every client (pyarrow, pypaimon-rust's opendal, boto3)
uses the AWS default credential chain (environment, profile, web identity, instance metadata).
"""

from __future__ import annotations

import logging
import os
import re
import signal
import threading
import uuid
from dataclasses import dataclass, field
from urllib.parse import urlparse

from lakecdc.errors import SinkError
from lakecdc.model import LAKECDC_DIR

S3_SCHEMES = frozenset({"s3"})
# Why other stores are refused (docs/operations.md, "Object-store warehouses").
_REFUSED_SCHEMES = {
    "s3a": "write the warehouse as s3://bucket/path (the s3a:// and s3n:// spellings are not tested with lakecdc)",
    "s3n": "write the warehouse as s3://bucket/path (the s3a:// and s3n:// spellings are not tested with lakecdc)",
    "oss": "OSS warehouses are not supported yet: pypaimon's OSS put-if-absent (x-oss-forbid-overwrite) has not been "
           "verified with lakecdc's conflict tests",
    "hdfs": "HDFS warehouses are not supported: lakecdc's lock-free commit has not been verified on HDFS",
    "viewfs": "HDFS warehouses are not supported: lakecdc's lock-free commit has not been verified on HDFS",
    "gs": "GCS warehouses are not supported: lakecdc's conditional commit is implemented for S3 only",
}

# Canonical Paimon option name -> accepted spellings of its suffix (after one of _PREFIXES).
_S3_OPTIONS = {
    "s3.endpoint": ("endpoint",),
    "s3.access-key": ("access-key", "access.key", "access-key-id", "accesskeyid"),
    "s3.secret-key": ("secret-key", "secret.key", "secret-access-key", "accesskeysecret"),
    "s3.session-token": ("session-token", "session.token", "security-token", "securitytoken"),
    "s3.region": ("region", "endpoint.region"),
    "s3.path.style.access": ("path.style.access", "path-style-access"),
}
_PREFIXES = ("fs.s3a.", "fs.s3.", "s3a.", "s3.")
SECRET_S3_OPTIONS = frozenset({"s3.access-key", "s3.secret-key", "s3.session-token"})
_HINT_FILES = frozenset({"LATEST", "EARLIEST"})

# Tests stop a writer right before it publishes a snapshot: LAKECDC_PAUSEPOINT=before-publish makes the process
# write the snapshot's path to LAKECDC_PAUSEPOINT_FILE and SIGSTOP itself there (see tests/test_s3.py);
# LAKECDC_PAUSEPOINT=before-schema-publish does the same right before it publishes a schema file (schema-N).
PAUSEPOINT_ENV = "LAKECDC_PAUSEPOINT"
PAUSEPOINT_FILE_ENV = "LAKECDC_PAUSEPOINT_FILE"
PAUSE_BEFORE_PUBLISH = "before-publish"
PAUSE_BEFORE_SCHEMA_PUBLISH = "before-schema-publish"


def warehouse_scheme(warehouse: str) -> str:
    """``''`` for a local path or ``file://`` URI, else the URI scheme (lower case)."""
    if "://" not in warehouse:
        return ""
    scheme = urlparse(warehouse).scheme.lower()
    return "" if scheme == "file" else scheme


def is_object_store(warehouse: str) -> bool:
    return warehouse_scheme(warehouse) in S3_SCHEMES


def warehouse_problem(warehouse: str) -> str | None:
    """Why lakecdc cannot use this warehouse (None when it can): local paths, ``file://`` and ``s3://`` only."""
    scheme = warehouse_scheme(warehouse)
    if scheme == "" or scheme in S3_SCHEMES:
        if scheme and not urlparse(warehouse).netloc:
            return f"{warehouse!r} names no bucket: write s3://bucket/path"
        return None
    why = _REFUSED_SCHEMES.get(scheme, f"the scheme {scheme}:// is not supported")
    return f"{warehouse!r}: {why}. Supported: a local path, file:// or s3:// (see docs/operations.md)"


def canonical_s3_option(key: str) -> str | None:
    """The canonical Paimon name of an S3 catalog option (``fs.s3a.access.key`` -> ``s3.access-key``); None when
    ``key`` is no S3 option at all; SinkError for an S3-prefixed key lakecdc does not know."""
    lowered = key.lower()
    prefix = next((p for p in _PREFIXES if lowered.startswith(p)), None)
    if prefix is None:
        return None
    suffix = lowered[len(prefix):]
    for canonical, spellings in _S3_OPTIONS.items():
        if suffix in spellings:
            return canonical
    raise SinkError(f"catalog.properties.{key}: unknown S3 option; lakecdc supports "
                    f"{', '.join(_S3_OPTIONS)} (and their s3a./fs.s3a. spellings)")


@dataclass(frozen=True)
class S3Settings:
    """How to reach the store of an s3:// warehouse. Keys never appear in repr (logs, errors)."""

    endpoint: str | None = None
    region: str | None = None
    path_style: bool = False
    access_key: str | None = field(default=None, repr=False)
    secret_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)

    @classmethod
    def from_options(cls, options: dict[str, str]) -> "S3Settings":
        found: dict[str, tuple[str, str]] = {}
        for key, value in options.items():
            canonical = canonical_s3_option(key)
            if canonical is None:
                continue
            if canonical in found and found[canonical][1] != value:
                raise SinkError(f"catalog.properties.{key} and catalog.properties.{found[canonical][0]} both set "
                                f"{canonical} to different values: keep one")
            found[canonical] = (key, value)
        values = {canonical: value.strip() or None for canonical, (_, value) in found.items()}
        path_style = (values.get("s3.path.style.access") or "false").lower()
        if path_style not in ("true", "false"):
            raise SinkError(f"catalog.properties.{found['s3.path.style.access'][0]}: expected true or false, got "
                            f"{path_style!r}")
        settings = cls(endpoint=values.get("s3.endpoint"), region=values.get("s3.region"),
                       path_style=path_style == "true", access_key=values.get("s3.access-key"),
                       secret_key=values.get("s3.secret-key"), session_token=values.get("s3.session-token"))
        if bool(settings.access_key) != bool(settings.secret_key):
            raise SinkError("catalog.properties.s3.access-key and s3.secret-key go together: give both, or neither "
                            "(the AWS default credential chain is used then)")
        return settings

    def paimon_options(self) -> dict[str, str]:
        """The options pypaimon (pyarrow's S3FileSystem) and pypaimon-rust (opendal) both understand."""
        options = {"s3.path-style-access": "true" if self.path_style else "false"}
        for key, value in (("s3.endpoint", self.endpoint), ("s3.region", self.region),
                           ("s3.access-key", self.access_key), ("s3.secret-key", self.secret_key),
                           ("s3.session.token", self.session_token)):
            if value:
                options[key] = value
        return options

    def client(self):
        """A boto3 S3 client (explicit keys, or the AWS default credential chain)."""
        import boto3
        from botocore.config import Config

        _install_log_redaction()
        addressing = "path" if self.path_style else "auto"
        return boto3.session.Session().client(
            "s3", endpoint_url=self.endpoint, region_name=self.region or "us-east-1",
            aws_access_key_id=self.access_key, aws_secret_access_key=self.secret_key,
            aws_session_token=self.session_token,
            config=Config(s3={"addressing_style": addressing}, retries={"max_attempts": 5, "mode": "standard"}))


class _RedactCredentials(logging.Filter):
    """botocore logs, at DEBUG, every request's headers (``Authorization: ... Credential=<access key>/...``) and the
    canonical request (``x-amz-security-token:<session token>``): keys never reach a log line (the secret key itself
    is never logged by botocore)."""

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        lowered = text.lower()
        if "credential=" in lowered or "security-token" in lowered:
            record.msg = re.sub(r"(Credential=)[^/\s,'\"]+", r"\1<redacted>", text)
            record.msg = re.sub(r"(?i)(x-amz-security-token['\":\s]+b?'?)[^\s'\",}]+", r"\1<redacted>", record.msg)
            record.args = ()
        return True


_redaction_installed = False


def _install_log_redaction() -> None:
    global _redaction_installed
    if not _redaction_installed:
        for name in ("botocore.endpoint", "botocore.auth", "botocore.hooks", "botocore.httpsession"):
            logging.getLogger(name).addFilter(_RedactCredentials())
        _redaction_installed = True


def normalize_s3_options(options: dict[str, str]) -> dict[str, str]:
    """Catalog options of an s3:// warehouse with every S3 alias replaced by the names the libraries read."""
    settings = S3Settings.from_options(options)
    plain = {k: v for k, v in options.items() if canonical_s3_option(k) is None}
    return {**plain, **settings.paimon_options()}


def split_location(path: str) -> tuple[str, str]:
    """``s3://bucket/a/b`` (or pyarrow's ``bucket/a/b``) -> (bucket, ``a/b``)."""
    if "://" in path:
        parsed = urlparse(path)
        return parsed.netloc, parsed.path.lstrip("/")
    bucket, _, key = path.partition("/")
    return bucket, key


def _error_code(error) -> str:
    return str(getattr(error, "response", {}).get("Error", {}).get("Code", ""))


def _status(error) -> int:
    return int(getattr(error, "response", {}).get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)


def _is_precondition_failed(error) -> bool:
    return _status(error) == 412 or _error_code(error) == "PreconditionFailed"


def _is_concurrent_conditional_write(error) -> bool:
    # S3 answers 409 ConditionalRequestConflict while another conditional write of the key is in flight.
    return _status(error) == 409 or _error_code(error) == "ConditionalRequestConflict"


def put_if_absent(client, bucket: str, key: str, data: bytes) -> bool:
    """Create ``key`` with ``data`` unless it exists (``If-None-Match: *``). True when the object now holds
    ``data`` because of this call (or of an earlier attempt of it whose answer was lost: same bytes), False when
    another writer created it first."""
    from botocore.exceptions import ClientError

    for _ in range(5):
        try:
            client.put_object(Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
            return True
        except ClientError as error:
            if _is_concurrent_conditional_write(error):
                continue  # the in-flight write decides; ask again
            if not _is_precondition_failed(error):
                raise
        try:
            stored = client.get_object(Bucket=bucket, Key=key)["Body"].read()
        except ClientError as error:
            if _error_code(error) in ("NoSuchKey", "404"):
                continue  # created and deleted again meanwhile: try once more
            raise
        return stored == data
    return False


_SNAPSHOT_KEY = re.compile(r"^(?P<directory>(?:.*/)?)snapshot-(?P<id>\d+)$")


def publish_snapshot(client, bucket: str, key: str, data: bytes) -> bool:
    """Publish ``snapshot-N`` by conditional put; False when the id is taken, now or before.

    Snapshot expiry deletes old snapshot files, which frees their ids for ``If-None-Match: *``: a writer that loaded
    snapshot N-1 and then stalled (longer than ``snapshot.time-retained``) while others committed and upkeep expired
    N-1 and N would otherwise publish its N successfully, below the table's earliest snapshot, on top of a state the
    table left long ago (and a reader finding no N+1 would take it for the latest). So after the put: when N-1 is
    gone (or N is 1) and the ``EARLIEST`` hint (written by expiry before it deletes any snapshot file) is past N, N
    had been expired; the object just written is ours and no hint names it yet, so it is deleted and the id counts
    as taken. Expiry deletes snapshot files oldest first and never the latest, so a present N-1 proves that N was
    free because it never existed; a missing N-1 with ``EARLIEST`` at N or before is an expiry that started after
    this put."""
    if not put_if_absent(client, bucket, key, data):
        return False
    match = _SNAPSHOT_KEY.match(key)
    if match is None:
        return True
    directory, snapshot_id = match.group("directory"), int(match.group("id"))
    if snapshot_id > 1 and _exists(client, bucket, f"{directory}snapshot-{snapshot_id - 1}"):
        return True
    earliest = _read(client, bucket, f"{directory}EARLIEST")
    if earliest is None or not earliest.strip().isdigit() or int(earliest) <= snapshot_id:
        return True
    client.delete_object(Bucket=bucket, Key=key)
    return False


def _exists(client, bucket: str, key: str) -> bool:
    from botocore.exceptions import ClientError

    try:
        client.head_object(Bucket=bucket, Key=key)
        return True
    except ClientError as error:
        if _status(error) == 404 or _error_code(error) in ("NoSuchKey", "404", "NotFound"):
            return False
        raise


def _read(client, bucket: str, key: str) -> str | None:
    from botocore.exceptions import ClientError

    try:
        return client.get_object(Bucket=bucket, Key=key)["Body"].read().decode("utf-8", "replace")
    except ClientError as error:
        if _status(error) == 404 or _error_code(error) in ("NoSuchKey", "404"):
            return None
        raise


_probed: dict[tuple, None] = {}
_probe_lock = threading.Lock()


def probe_conditional_put(settings: S3Settings, warehouse: str) -> None:
    """Refuse a store that ignores ``If-None-Match: *`` (it would let two writers publish one snapshot): create a
    probe object twice under the warehouse, the second put must be refused. Once per process and warehouse."""
    from botocore.exceptions import BotoCoreError, ClientError

    bucket, prefix = split_location(warehouse)
    cache_key = (settings.endpoint, bucket, prefix)
    with _probe_lock:
        if cache_key in _probed:
            return
        key = f"{prefix.rstrip('/')}/{LAKECDC_DIR}/probe/{uuid.uuid4().hex}".lstrip("/")
        client = settings.client()
        try:
            first = _put_conditional_raw(client, bucket, key, b"1")
            second = _put_conditional_raw(client, bucket, key, b"2")
            try:
                client.delete_object(Bucket=bucket, Key=key)
            except (BotoCoreError, ClientError):
                pass  # a leftover probe object is harmless
        except (BotoCoreError, ClientError) as error:
            raise SinkError(f"warehouse {warehouse}: cannot write to the object store ({_describe(error)}); check "
                            f"the bucket, catalog.properties.s3.endpoint and the credentials") from None
        if not first:
            raise SinkError(f"warehouse {warehouse}: the object store refused to create a new object with "
                            f"If-None-Match: *; lakecdc needs conditional writes to commit safely")
        if second:
            raise SinkError(
                f"warehouse {warehouse}: the object store ignores If-None-Match (a conditional put replaced an "
                f"existing object). Without it two writers can publish the same Paimon snapshot and one commit is "
                f"silently lost, so lakecdc refuses to write here. Use a store with S3 conditional writes (AWS S3 "
                f"since 2024, recent MinIO, ...)")
        _probed[cache_key] = None


def _put_conditional_raw(client, bucket: str, key: str, data: bytes) -> bool:
    from botocore.exceptions import ClientError

    try:
        client.put_object(Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
        return True
    except ClientError as error:
        if _is_precondition_failed(error):
            return False
        raise


def _describe(error) -> str:
    """An S3 error without anything secret in it (botocore messages never carry keys; keep code and status)."""
    code, status = _error_code(error), _status(error)
    return f"{type(error).__name__} {code} {status}".strip() if code or status else type(error).__name__


def _pause_before_publish(path: str, pausepoint: str) -> None:
    if os.environ.get(PAUSEPOINT_ENV) != pausepoint:
        return
    marker = os.environ.get(PAUSEPOINT_FILE_ENV)
    if marker:
        with open(marker, "w", encoding="utf-8") as f:
            f.write(f"{os.getpid()} {path}\n")
    os.kill(os.getpid(), signal.SIGSTOP)


def conditional_file_io(warehouse: str, catalog_options, settings: S3Settings):
    """pypaimon's PyArrowFileIO for ``warehouse`` whose ``try_to_write_atomic`` (snapshots, schemas, hints) is one
    PutObject, conditional for new metadata files (see the module docstring).

    The method is replaced on the instance rather than in a subclass: pypaimon hands the Rust writer only file IOs
    of exactly its own types (``create_native_write_table``) and would fall back to its Python writer otherwise."""
    from pypaimon.filesystem.pyarrow_file_io import PyArrowFileIO

    file_io = PyArrowFileIO(warehouse, catalog_options)
    clients = threading.local()  # boto3 clients are not thread-safe to share

    def client():
        if getattr(clients, "s3", None) is None:
            clients.s3 = settings.client()
        return clients.s3

    def try_to_write_atomic(path: str, content: str) -> bool:
        bucket, key = split_location(file_io.to_filesystem_path(path))
        data = content.encode("utf-8")
        if key.rsplit("/", 1)[-1] in _HINT_FILES:
            client().put_object(Bucket=bucket, Key=key, Body=data)  # replaces atomically; only a hint
            return True
        if "/snapshot/snapshot-" in f"/{key}":
            _pause_before_publish(path, PAUSE_BEFORE_PUBLISH)
            return publish_snapshot(client(), bucket, key, data)
        if "/schema/schema-" in f"/{key}":
            _pause_before_publish(path, PAUSE_BEFORE_SCHEMA_PUBLISH)
        return put_if_absent(client(), bucket, key, data)

    file_io.try_to_write_atomic = try_to_write_atomic
    return file_io
