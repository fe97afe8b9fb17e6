"""Rank lists for people: ``ranges([0, 1, 2, 5])`` is ``'0-2, 5'``. A leaf module (imports nothing from
``correlator``), so that the diagnosis and the report both use it without importing each other."""

from __future__ import annotations


def ranges(nums: list[int]) -> str:
    """[0, 1, 2, 5, 7, 8] -> '0-2, 5, 7-8'."""
    out: list[str] = []
    nums = sorted(nums)
    i = 0
    while i < len(nums):
        j = i
        while j + 1 < len(nums) and nums[j + 1] == nums[j] + 1:
            j += 1
        out.append(str(nums[i]) if i == j else f"{nums[i]}-{nums[j]}")
        i = j + 1
    return ", ".join(out) if out else "none"


__all__ = ["ranges"]
