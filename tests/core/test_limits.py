"""yolo3.core.limits: one table of the largest sizes taken from a file, one check."""
from __future__ import annotations

import pytest

from yolo3.core.limits import LIMITS, beyond_limit


@pytest.mark.parametrize("kind", sorted(LIMITS))
def test_each_limit_holds_up_to_itself_and_refuses_one_more(kind):
    limit, meaning = LIMITS[kind]
    assert beyond_limit(kind, limit) is None and beyond_limit(kind, 1) is None
    reason = beyond_limit(kind, limit + 1, "the thing")
    assert reason == (f"the thing {limit + 1} is beyond {limit:,}, the most {meaning} yolo3 "
                      "takes: the file is damaged, or not what it should be")


def test_the_frame_limit_keeps_an_hour_of_video_and_refuses_a_damaged_line():
    assert beyond_limit("frame", 30 * 3600) is None           # an hour at 30 frames/s
    assert "beyond 200,000" in beyond_limit("frame", 10**10)  # one line of a damaged file
    with pytest.raises(KeyError):
        beyond_limit("no such size", 1)
