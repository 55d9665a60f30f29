"""Reference for the snapshot case, run in its own process: dlt's ``sql_table`` source reading one MySQL table and
writing Parquet to a local directory (dlt's filesystem destination), with the ``pyarrow`` or ``connectorx`` backend
and dlt's defaults otherwise. Prints one JSON line: the seconds of ``pipeline.run`` (extract, normalize, load; imports
and set-up excluded) and the rows found in the Parquet files written (the suite also times the whole process).

Usage: .venv/bin/python -m bench.dlt_reference --port PORT --table orders --backend pyarrow|connectorx --dir DIR
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--database", default="bench")
    parser.add_argument("--table", required=True)
    parser.add_argument("--backend", choices=("pyarrow", "connectorx"), required=True)
    parser.add_argument("--dir", required=True, help="scratch directory (dlt's state and the Parquet output)")
    args = parser.parse_args()
    work = Path(args.dir)
    # dlt's state, config and telemetry stay out of the user's home and network
    os.environ["RUNTIME__DLTHUB_TELEMETRY"] = "false"
    os.environ["DLT_DATA_DIR"] = str(work / "dlt-data")
    os.environ["DLT_PROJECT_DIR"] = str(work)

    import dlt
    import pyarrow.parquet as pq
    from dlt.sources.sql_database import sql_table

    source = sql_table(credentials=f"mysql+pymysql://root:@127.0.0.1:{args.port}/{args.database}",
                       table=args.table, backend=args.backend)
    out = work / "parquet"
    pipeline = dlt.pipeline(pipeline_name=f"bench_{args.backend}",
                            destination=dlt.destinations.filesystem(bucket_url=out.as_uri()),
                            dataset_name="bench", pipelines_dir=str(work / "pipelines"))
    started = time.perf_counter()
    pipeline.run(source, loader_file_format="parquet")
    seconds = time.perf_counter() - started
    rows = sum(pq.ParquetFile(p).metadata.num_rows for p in out.rglob(f"{args.table}/*.parquet"))
    print(json.dumps({"seconds": seconds, "rows": rows}))


if __name__ == "__main__":
    main()
