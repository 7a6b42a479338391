"""One view of a job for every client: the record's fields, the live counters while it runs."""

from __future__ import annotations

from pipeline.jobs.view import FIELDS, status_lines, view
from pipeline.store.jobstate import JobCounters, JobState, Judging, counters

JOB = "strgame-" + "a" * 24


def _live(state: JobState, done: int = 3, failures: dict[int, str] | None = None) -> JobCounters:
    return JobCounters(JOB, "strgame", state, 10, done, 2, 1, failures or {}, 1.0, 2.0, 4.0)


def test_a_job_of_the_command_line_is_its_counters() -> None:
    body = view(None, _live(JobState.FAILED, failures={1: "case 4: boom"}))
    assert body["id"] == JOB and body["problem"] == "strgame"
    assert (body["state"], body["done"], body["total"]) == ("failed", 3, 10)
    assert body["errors"] == ["chunk 1: case 4: boom"] and "failures" not in body
    assert body["cases_per_second"] == 1.5
    assert status_lines(body) == [
        f"{JOB}  failed    3/10 cases  2.0 s, 2 cases/s",
        "    chunk 1: case 4: boom",
    ]


def test_an_uploaded_job_is_its_record_with_live_counters_while_it_runs() -> None:
    record = {"id": JOB, "problem": "strgame", "name": "a.in", "state": "producing", "size": "9"}
    producing = view(record, _live(JobState.PRODUCING))
    assert (producing["state"], producing["done"], producing["size"]) == ("producing", 3, 9)
    running = view({**record, "state": "running"}, _live(JobState.COMPLETE, done=10))
    assert (running["state"], running["done"]) == ("complete", 10)
    assert status_lines(running)[0].endswith("10/10 cases  2.0 s, 5 cases/s  a.in")


def test_an_ended_record_wins_over_counters() -> None:
    record = {"id": JOB, "problem": "strgame", "state": "cancelled", "error": "stopped"}
    body = view(record, None)
    assert body["state"] == "cancelled" and body["errors"] == ["stopped"] and "error" not in body
    done = view({"id": JOB, "state": "done", "total": "10"}, None)
    assert (done["state"], done["done"], done["total"]) == ("done", 10, 10)


def test_a_judging_job_shows_its_programs_and_runs() -> None:
    manifest = {
        "problem": "strgame",
        "state": "running",
        "chunks": "4",
        "done_chunks": "2",
        "total": "40",
        "done_cases": "20",
        "programs": "3",
        "programs_ready": "2",
        "programs_failed": "1",
        "cases_run": "1200",
        "cases_kept": "8",
    }
    live = counters(JOB, manifest, {})
    assert live is not None and live.judging == Judging(3, 2, 1, 1200, 8)
    body = view(None, live)
    assert body["judging"]["ready"] == 2
    assert status_lines(body)[1] == (
        "    programs 1/3 compiled, 1 did not compile; 1,200 cases run, 8 verdicts kept from before"
    )
    solving = counters(JOB, {k: v for k, v in manifest.items() if "program" not in k}, {})
    assert solving is not None and solving.judging is None
    assert "judging" not in view(None, solving) and len(status_lines(view(None, solving))) == 1


TYPES = {
    "id": str, "name": str, "problem": str, "state": str, "size": int, "total": int, "done": int,
    "invalid": int, "errors": list, "created": float, "started": float, "answered": float,
    "finished": float, "cases_per_second": float, "chunks": int, "done_chunks": int,
    "lane": str, "keep_going": bool, "exit_code": int, "result_sha256": str,
    "result_bytes": int, "links": dict,
}  # fmt: skip


def test_every_view_has_the_same_keys_and_types_whoever_asks() -> None:
    assert set(TYPES) == set(FIELDS)
    manifest = {
        "problem": "strgame", "state": "done", "chunks": "2", "done_chunks": "2",
        "total": "10", "done_cases": "10", "created": "1.5", "started": "2.0",
        "answered": "4.0", "finished": "4.5", "input": "a.in", "size": "99", "lane": "bulk",
    }  # fmt: skip
    live = counters(JOB, manifest, {})
    record = {
        "id": JOB, "problem": "strgame", "name": "a.in", "state": "done", "total": "10",
        "size": "99", "created": "1.25", "finished": "4.75", "lane": "bulk", "exit_code": "0",
        "result_sha256": "f" * 64, "result_bytes": "20", "invalid": "0",
    }  # fmt: skip
    links = {"self": f"/v1/jobs/{JOB}"}
    views = [view(None, live), view(record, live, links), view(record, None, links)]
    for body in views:
        assert list(body) == list(FIELDS)
        for key, value in body.items():
            assert value is None or isinstance(value, TYPES[key]), (key, value)
    local, served, expired = views
    assert (local["name"], local["size"], local["lane"]) == ("a.in", 99, "bulk")
    assert local["finished"] == 4.5
    assert (local["done"], local["total"], local["cases_per_second"]) == (10, 10, 5.0)
    assert (served["started"], served["answered"], served["cases_per_second"]) == (2.0, 4.0, 5.0)
    assert (served["created"], served["finished"], served["result_bytes"]) == (1.25, 4.75, 20)
    assert (expired["done"], expired["started"], expired["links"]) == (10, None, links)
