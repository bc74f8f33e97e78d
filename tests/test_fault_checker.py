"""The fault campaign's judge of limited and windowed rows (``bench/faults/checker.py``).

Given executions of one key as the campaign records them, more than ``lock_limit`` places
held at once counts as an over-limit moment, told only when enough older holders learnt
they lost their place; a window keeps a place after its body ended; a write is stale
only once ``lock_limit`` newer fences had held places at once; a fence is smaller than one read
before its execution started.
"""

from __future__ import annotations

from typing import List, Optional

from bench.faults.checker import Execution, check_places, check_tokens, check_writes


def _run(name: str, start: float, end: Optional[float], fence: int, lost_at: Optional[float] = None) -> Execution:
    writes = [{"exec": name, "key": "k", "t": start + 0.01, "fence": fence, "accepted": True, "lost": False}]
    if lost_at is not None:
        writes.append({"exec": name, "key": "k", "t": lost_at, "fence": fence, "accepted": False, "lost": True})
    return Execution(name, "k", name, fence, start, end, writes)


def _three_running() -> List[Execution]:
    return [_run("a", 0.0, 10.0, 1), _run("b", 1.0, 10.0, 2), _run("c", 2.0, 10.0, 3)]


def test_three_bodies_at_once_are_within_a_limit_of_three() -> None:
    assert check_places(_three_running(), [], 3, 0.0, {})["overlaps"] == 0


def test_a_fourth_body_is_over_the_limit_and_untold_unless_an_older_holder_learnt_it_lost() -> None:
    runs = _three_running() + [_run("d", 3.0, 4.0, 4)]
    untold = check_places(runs, [], 3, 0.0, {})
    assert (untold["overlaps"], untold["told"]) == (1, 0)
    runs[0] = _run("a", 0.0, 10.0, 1, lost_at=3.5)
    told = check_places(runs, [], 3, 0.0, {})
    assert (told["overlaps"], told["told"]) == (1, 1)


def test_a_window_keeps_an_ended_holders_place_until_it_ends() -> None:
    runs = [_run("a", 0.0, 0.1, 1), _run("b", 0.5, 0.6, 2)]
    assert check_places(runs, [], 1, 2.0, {})["overlaps"] == 1
    assert check_places(runs, [], 1, 0.4, {})["overlaps"] == 0
    assert check_places(runs, [], 2, 2.0, {})["overlaps"] == 0


def test_a_window_counts_from_the_time_given_as_taken() -> None:
    runs = [_run("a", 1.9, 2.0, 1), _run("b", 2.2, 2.3, 2)]  # started 0.3 s apart, taken 2.1 s apart
    assert check_places(runs, [], 1, 2.0, {"a": 0.0, "b": 2.1})["overlaps"] == 0
    assert check_places(runs, [], 1, 2.0, {})["overlaps"] == 1


def test_a_write_is_stale_only_once_limit_newer_fences_had_started() -> None:
    runs = _three_running() + [_run("d", 3.0, 4.0, 4)]
    runs[0].writes.append({"exec": "a", "key": "k", "t": 5.0, "fence": 1, "accepted": True, "lost": False})
    assert check_writes(runs, 3)["stale_accepted"] == 1
    assert check_writes(runs, 4)["stale_accepted"] == 0


def test_a_newer_holder_that_let_go_before_the_next_came_leaves_an_older_writer_its_place() -> None:
    # Given a limit of two: a holds a place throughout, b comes and goes, then c comes
    runs = [_run("a", 0.0, 10.0, 1), _run("b", 1.0, 2.0, 2), _run("c", 3.0, 10.0, 3)]
    runs[0].writes.append({"exec": "a", "key": "k", "t": 5.0, "fence": 1, "accepted": True, "lost": False})
    # then a's write is not stale: two newer fences started, but never held places at once
    assert check_writes(runs, 2)["stale_accepted"] == 0
    # and with a window that kept b's place until after c came, a had surely lost its place
    assert check_writes(runs, 2, window=5.0)["stale_accepted"] == 1
    # and a downstream store that refused a's write, having seen two larger fences, was cautious, not wrong
    runs[0].writes[-1]["accepted"] = False
    assert check_writes(runs, 2)["wrongly_refused"] == 0
    runs[2] = _run("c", 6.0, 10.0, 3)  # c came after the write: one larger fence had started
    assert check_writes(runs, 2)["wrongly_refused"] == 1


def test_only_a_fence_read_before_an_execution_started_must_be_the_smaller() -> None:
    a = Execution("a", "k", "a", 5, 0.0, 1.0, [], fenced=0.5)
    b = Execution("b", "k", "b", 4, 0.2, 1.0, [], fenced=0.3)  # started before a read its fence
    assert check_tokens([a, b])["token_regression"] == 0
    c = Execution("c", "k", "c", 3, 0.6, 1.0, [], fenced=0.7)  # started after a and b had read theirs
    assert check_tokens([a, b, c])["token_regression"] == 2


def test_a_redelivered_copy_of_a_call_runs_in_that_calls_place() -> None:
    killed = _run("a", 0.0, None, 1)
    again = Execution("a2", "k", "a", 2, 0.5, 0.6, [])  # the same task id, delivered again
    assert check_places([killed, again, _run("b", 0.7, 0.8, 3)], [], 2, 2.0, {})["overlaps"] == 0
    assert check_places([killed, again, _run("b", 0.7, 0.8, 3)], [], 1, 2.0, {})["overlaps"] == 1


def test_a_message_is_lost_only_when_nothing_accounts_for_it() -> None:
    from bench.faults.checker import account
    from bench.faults.history import History

    # Given four published calls: one ran, one skipped at run time, one that kept its own id and
    # was skipped at enqueue, and one that nothing accounts for
    history = History(published=[{"task": "t", "task_id": i, "published": True, "t": 0.0} for i in "abcd"],
                      conflicts=[{"task_id": "b", "action": "skip", "at": "run"},
                                 {"task_id": "c", "action": "skip", "at": "enqueue"}])
    runs = [Execution("x", "k", "a", 1, 0.0, 1.0)]
    states = {"a": "SUCCESS", "b": "SUCCESS", "c": "SUCCESS"}
    # then only the last is lost, and the report tells what is known of it
    found = account(history, runs, states, set(), 0)
    assert found["fates"] == {"ran": 1, "skipped": 2, "failed": 0, "queued": 0, "lost": 1}
    assert found["lost_ids"] == ["t d"]
    assert found["lost_details"] == [{"task_id": "d", "state": None, "actions": {}, "starts": 0, "published": 0.0}]


# The latest-wins rules (bench/faults/latest_checker.py): calls of one key "k", a after b after c.

def _latest(sent: str = "abc", recorded: str = "abc", runs: str = "c", none: str = "ab", starts: float = 5.0,
            sent_at: float = 1.0) -> dict:
    from bench.faults.history import History
    from bench.faults.latest_checker import check_latest

    intents = [{"task_id": t, "key": "k", "args": [0, n, t], "t": float(n)} for n, t in enumerate("abc")]
    history = History(intents=intents,
                      sent=[{"task_id": t, "t": sent_at + n / 10} for n, t in enumerate("abc") if t in sent],
                      published=[{"task_id": t, "published": True, "t": sent_at + n / 10 + 0.01}
                                 for n, t in enumerate("abc") if t in recorded])
    ran = [Execution(t, "k", t, None, starts, starts + 0.1) for t in runs]
    args = {i["task_id"]: i["args"] for i in intents}
    answers = {t: [{"status": "SUCCESS", "result": None}] for t in none}
    for t in runs:
        answers.setdefault(t, []).append({"status": "SUCCESS", "result": args[t]})
    states = {t: "SUCCESS" for t in set(answers)}
    results = {t: (args[t] if t in runs else None) for t in states}
    return check_latest(history, ran, answers, states, results)


def test_the_newest_call_run_once_and_the_others_answered_none_break_no_latest_wins_rule() -> None:
    found = _latest()
    assert (found["superseded_ran"], found["wrong_answers"], found["calls_lost"], found["unanswered"],
            found["stale_runs"]) == (0, 0, 0, 0, 0)
    assert (found["calls"], found["reached_broker"], found["bodies"], found["answered_none"]) == (3, 3, 1, 2)


def test_a_call_answered_none_whose_body_then_ran_is_a_superseded_call_run_with_a_wrong_answer() -> None:
    found = _latest(runs="bc", none="ab", starts=0.5)
    assert (found["superseded_ran"], found["wrong_answers"]) == (1, 1)


def test_the_newest_call_known_to_reach_the_broker_must_run_even_if_its_publisher_was_killed_before_recording_it() -> None:
    # c was sent, its publisher killed before recording it: it reached the broker, and only b ran
    found = _latest(recorded="ab", runs="b", none="a", starts=0.5)
    assert (found["calls_lost"], found["unanswered"], found["killed_mid_call"], found["killed_after_send"]) \
        == (1, 1, 1, 1)
    # c never reached the broker (killed before its message went out, no trace anywhere): b is the newest
    found = _latest(sent="ab", recorded="ab", runs="b", none="a", starts=0.5)
    assert (found["calls_lost"], found["unanswered"], found["reached_broker"]) == (0, 0, 2)
    assert found["killed_before_send"] == 1


def test_calls_are_lost_when_neither_they_nor_a_newer_call_of_their_key_ran() -> None:
    # a ran, then b and c were answered as superseded and nothing ran after them
    found = _latest(runs="a", none="bc", starts=0.5)
    assert found["calls_lost"] == 2 and found["lost_keys"] == ["k"]
    assert [e["task_id"] for e in found["latest_examples"] if e["kind"] == "lost"] == ["b", "c"]


def test_a_call_killed_before_its_sent_record_is_known_published_by_its_traces() -> None:
    found = _latest(sent="ab", recorded="ab", runs="c", none="ab")
    assert (found["reached_broker"], found["killed_unsent_arrived"], found["calls_lost"]) == (3, 1, 0)


def test_a_run_started_after_a_newer_call_reached_the_broker_is_stale_unless_within_the_records_slack() -> None:
    # b ran at 5.0 although c was sent at 1.2 and never recorded (its publisher was killed); c ran too
    stale = _latest(recorded="ab", runs="bc", none="a")
    assert (stale["stale_runs"], stale["stale_unrecorded"], stale["superseded_ran"]) == (1, 1, 0)
    assert stale["latest_examples"][0]["kind"] == "stale run"
    # the same with c recorded as the newest before b started
    assert _latest(runs="bc", none="a")["stale_runs"] == 1
    # c reached the broker a moment (under CLOCK_SLACK) before b's body started
    assert _latest(runs="bc", none="a", starts=1.3)["stale_runs"] == 0
