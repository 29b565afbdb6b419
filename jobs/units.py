"""Figures as people read them: bytes in binary units, rates, durations, counts with separators."""

from __future__ import annotations

import math

_BYTE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def human_bytes(n: float) -> str:
    """Bytes in binary units (KiB = 1024 B), one decimal.

    >>> human_bytes(0), human_bytes(1536), human_bytes(3.707403e7), human_bytes(5 * 2**40)
    ('0 B', '1.5 KiB', '35.4 MiB', '5.0 TiB')
    """
    if n < 1024:
        return f"{n:,.0f} B"
    exponent = min(int(math.log(n, 1024)), len(_BYTE_UNITS) - 1)
    return f"{n / 1024**exponent:,.1f} {_BYTE_UNITS[exponent]}"


def human_rate(bytes_per_sec: float) -> str:
    """Bytes per second.

    >>> human_rate(50_000_000)
    '47.7 MiB/s'
    """
    return f"{human_bytes(bytes_per_sec)}/s"


def human_duration(seconds: float) -> str:
    """Seconds as s, min, h or days, rounded to the minute.

    >>> human_duration(0), human_duration(75), human_duration(3 * 3600 + 600), human_duration(50 * 3600)
    ('0 s', '1 min', '3 h 10 min', '2 d 2 h')
    """
    if 0 < seconds < 1:
        return "< 1 s"
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


def human_ratio(value: float | None) -> str:
    """A ratio to a bound; '-' when unknown.

    >>> human_ratio(1.0512), human_ratio(None)
    ('1.05x', '-')
    """
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.2f}x"
