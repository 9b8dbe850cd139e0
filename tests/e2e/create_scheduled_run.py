"""Create the scheduled DAG runs of data intervals, as the scheduler does when an interval closes.

Usage: ``python create_scheduled_run.py DAG_ID INTERVAL_START [INTERVAL_START ...]`` (ISO 8601,
time zone included). Prints ``RUN_ID=<run id>`` per interval, in order.

The scheduler itself only creates a scheduled run for the newest closed interval (the example
DAG has ``catchup=False``) and at wall-clock time; a test cannot wait real minutes for it. This
script takes the interval from the DAG's timetable (the serialized DAG the scheduler reads) and
makes the same ``create_dagrun`` call as the scheduler's ``_create_dag_runs``: a QUEUED run of
type ``scheduled`` whose logical date is the interval's start. The running scheduler then starts
and executes it like any scheduled run.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("dag_id")
    parser.add_argument("interval_start", nargs="+")
    args = parser.parse_args()

    from airflow.models.serialized_dag import SerializedDagModel
    from airflow.utils.session import create_session
    from airflow.utils.state import DagRunState
    from airflow.utils.types import DagRunTriggeredByType, DagRunType

    with create_session() as session:
        serialized = session.scalar(SerializedDagModel.latest_item_select_object(args.dag_id))
        if serialized is None:
            print(f"DAG {args.dag_id} is not serialized yet (is the dag-processor running?)", file=sys.stderr)
            return 2
        dag = serialized.dag
        run_ids = []
        for start in map(dt.datetime.fromisoformat, args.interval_start):
            infos = list(dag.iter_dagrun_infos_between(start, start))
            if len(infos) != 1 or infos[0].logical_date != start:
                print(
                    f"{start} does not start an interval of {args.dag_id}'s timetable: {infos}",
                    file=sys.stderr,
                )
                return 2
            info = infos[0]
            # The run and its id carry the interval as the timetable gave it.
            interval = {
                "run_after": info.run_after,
                "data_interval": info.data_interval,
                "partition_key": info.partition_key,
            }
            run = dag.create_dagrun(
                run_id=dag.timetable.generate_run_id(run_type=DagRunType.SCHEDULED, **interval),
                logical_date=info.logical_date,
                partition_date=info.partition_date,
                run_type=DagRunType.SCHEDULED,
                triggered_by=DagRunTriggeredByType.TIMETABLE,
                state=DagRunState.QUEUED,
                session=session,
                **interval,
            )
            run_ids.append(run.run_id)
    for run_id in run_ids:
        print(f"RUN_ID={run_id}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
