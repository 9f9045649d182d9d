"""NoticeThrottle: a refused post retried every minute is told to the admins once per period."""

from bot.adapters.notices import NoticeThrottle


def test_the_same_notice_is_told_once_per_period_and_others_at_once() -> None:
    now = [0.0]
    throttle = NoticeThrottle(every_s=600, clock=lambda: now[0])
    assert throttle.first("C1:2026-11-25:not_in_channel")
    now[0] = 60
    assert not throttle.first("C1:2026-11-25:not_in_channel")  # the retry a minute later
    assert throttle.first("C2:2026-11-25:not_in_channel")  # another channel is news
    now[0] = 661
    assert throttle.first("C1:2026-11-25:not_in_channel")  # a new period: told again
    assert len(throttle._told) == 1  # the other, older key is forgotten
