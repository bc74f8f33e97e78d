"""The failover benchmark's figures from a history of blocks (``bench/failover.py``)."""

from __future__ import annotations

import pytest

from bench.failover import Block, Run, figures


def _run(*blocks: Block, fault_at: float = 10.0, heal_at: float = 11.0) -> Run:
    return Run("t", "t", fault_at, heal_at, sorted(blocks, key=lambda b: b.start), [])


def test_a_newer_block_overlapping_an_older_one_not_yet_told_is_untold_overlap_until_it_is_told():
    older = Block(1, "a", 9.0, 13.0, told=12.0)
    newer = Block(2, "b", 11.5, 12.5, told=None)
    f = figures(_run(older, newer))
    assert f["untold"] == pytest.approx(0.5) and f["told"] == pytest.approx(0.5)
    assert f["lost"] == 1 and f["told_after"] == pytest.approx(2.0)


def test_successive_blocks_overlap_nowhere_and_grants_resume_from_the_heal():
    blocks = [Block(1, "a", 9.0, 9.3, None), Block(2, "b", 9.3, 9.6, None), Block(1, "c", 11.2, 11.5, None)]
    f = figures(_run(*blocks))
    assert f["untold"] == 0 and f["told"] == 0 and f["lost"] == 0 and f["told_after"] is None
    assert f["resume"] == pytest.approx(0.2) and f["pause"] == pytest.approx(1.9) and f["heal"] == pytest.approx(1.0)
