"""Error types shared by every layer: each one says what is wrong and what to do about it."""


class LakeCdcError(Exception):
    """Base class of every error lakecdc raises on purpose."""


class PipelineConfigError(LakeCdcError):
    """The pipeline YAML is invalid. The message names the file and the key path."""

    def __init__(self, message: str, *, file: str | None = None, path: str | None = None,
                 offset: int | None = None):
        self.file = file
        self.path = path
        self.offset = offset  # where in the value at ``path`` (an expression error's position), 0-based
        self.message = message  # without the file and key path
        where = ""
        if file:
            where += f"{file}: "
        if path:
            where += f"{path}: "
        super().__init__(f"{where}{message}")


class ExpressionError(LakeCdcError):
    """A transform expression cannot be parsed or type-checked."""

    # where in the expression text (set once the error names a position: it is not located again further up)
    located: bool = False
    line: int | None = None
    column: int | None = None
    offset: int | None = None  # 0-based, in the expression text


class SourceError(LakeCdcError):
    """The MySQL source is misconfigured or unreachable."""


class SourceConnectionLost(SourceError):
    """The connection to MySQL broke mid-read (server restart, network, killed session): the read may be retried."""


class BinlogPurgedError(SourceError):
    """The checkpoint's binlog file is gone from the server: the table needs a new snapshot."""


class SinkError(LakeCdcError):
    """The Paimon sink cannot create, write or commit a table."""


class TableLockedError(SinkError):
    """Another writer holds the lock of a Paimon table."""


class CommitConflictError(SinkError):
    """Another writer committed to a Paimon table after this run loaded its checkpoint: nothing of this commit was
    published; the next run resumes from the checkpoint in the newest snapshot."""
