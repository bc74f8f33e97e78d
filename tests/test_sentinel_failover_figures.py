"""How ``python -m bench sentinel-failover`` reads its holders' records: told and untold overlap."""

from bench.sentinel_failover import overlaps, summarise


def _record(key, start, end, told=None, by=1):
    return dict(key=key, start=start, end=end, told=told, by=by)


def test_an_overlap_after_the_earlier_holder_was_told_is_told():
    figures = overlaps([_record("k", 0.0, 5.0, told=2.0), _record("k", 3.0, 4.0)])
    assert figures == {"untold_s": 0.0, "told_s": 1.0, "pairs": 1}


def test_an_overlap_before_the_earlier_holder_was_told_is_untold():
    figures = overlaps([_record("k", 0.0, 5.0, told=3.5), _record("k", 3.0, 6.0), _record("j", 3.0, 6.0)])
    assert figures["untold_s"] == 0.5 and figures["told_s"] == 1.5


def test_a_run_says_who_was_kept_told_and_when_the_new_master_granted():
    records = [_record("k", 0.0, 5.0, by=1), _record("j", 10.2, 11.0, told=11.0, by=1),
               _record("j", 13.5, 14.0, by=2)]
    run = summarise(records, promoted=10.0, old_port=1, new_port=2)
    assert (run["spanning"], run["kept"], run["told"]) == (1, 0, 1)  # the old master's grant, told
    assert run["resumed_s"] == 3.5 and run["old_grants"] == 1 and run["told_after_s"] == 1.0
