"""A credential changed elsewhere reaches a process that cached it: the first request sent
once that process's generation check is due (auth_cache.GENERATION_CHECK_S after the change)
must be refused. The tests wait for that moment instead of timing the answers, so a loaded
machine (a slow request) cannot fail them and a broken check still does."""

from __future__ import annotations

import time
from collections.abc import Callable

from app.services.accounts.auth_cache import GENERATION_CHECK_S


def status_once_the_check_is_due(send: Callable[[], int], changed_at: float) -> int:
    """The status of ``send()`` sent GENERATION_CHECK_S after ``changed_at`` (a
    ``time.monotonic()`` taken once the change committed, shared by every process of the
    machine). Each process last read the generation before the change, so this request
    reads it again and sees the change."""
    time.sleep(max(0.0, changed_at + GENERATION_CHECK_S - time.monotonic()))
    return send()
